// Training-time augmentation of one RGB image: horizontal flip, random resized crop, small
// rotation, brightness and contrast jitter, then per-channel normalisation, in one bilinear
// pass from a uint8 source (HWC) to the float sample (CHW) a network reads; and of its map of
// class ids (segmentation) by the same draw, nearest-neighbour, so that map and image stay
// aligned and the map holds only classes of its source.
//
// Seeded and the same at any thread count: every draw of image i in epoch e comes from its own
// counter-based stream Rng(augment_key(seed, e, i)), so the result depends on (seed, epoch,
// image), never on which thread or in which batch position the image is processed.
// Shape-preserving: the output is always 3 x out_h x out_w, whatever the draws.
// Plain C++ (no OpenCV), so the arithmetic is ours to test and to reproduce elsewhere.
#pragma once
#include <cstdint>

namespace pdnn {

struct AugmentOptions {
  bool flip = true;          // mirror left-right with probability 1/2
  // Random resized crop (as torchvision's RandomResizedCrop): a rectangle of scale x the
  // source's area, its aspect ratio that of the source times a factor log-uniform in
  // [ratio_min, ratio_max] (torchvision: times 1; the same for the square cache), clipped to
  // the source, at a uniform position; then resampled to the output size.
  float scale_min = 0.5f, scale_max = 1.f;
  float ratio_min = 3.f / 4.f, ratio_max = 4.f / 3.f;
  float rotate_deg = 10.f;   // rotation about the crop's centre, uniform in [-deg, deg]
  float brightness = 0.2f;   // pixel values x factor, factor uniform in [1-b, 1+b]
  float contrast = 0.2f;     // (v - mean grey) x factor + mean grey, factor in [1-c, 1+c]

  // Everything off: the whole source resized, values unchanged (evaluation).
  static AugmentOptions none();
  // Flip and random resized crop only (no rotation, no jitter): the image/mask pairs' default.
  static AugmentOptions flip_and_crop();
};

// One image's draws (public so that tests and tools can build a draw by hand).
struct AugmentDraw {
  bool flip = false;
  float crop_x = 0, crop_y = 0, crop_w = 0, crop_h = 0;  // in source pixels
  float angle_deg = 0;
  float brightness = 1, contrast = 1;
};

// Per-channel normalisation (v - mean) / std of values v in [0,1], channels R, G, B.
struct Normalization {
  float mean[3] = {0, 0, 0};
  float std[3] = {1, 1, 1};
  // ImageNet's statistics (torchvision's convention): what pdnn uses for photos.
  static Normalization imagenet();
};

// The seed of image `index`'s draws in epoch `epoch` (0-based) of a loader seeded `seed`.
// Independent of the stream that shuffles the epoch (epoch_order_rng in dataset_loader.h).
uint64_t augment_key(uint64_t seed, int64_t epoch, int64_t index);

// The whole src_h x src_w source, nothing changed.
AugmentDraw identity_draw(int src_h, int src_w);
// Eight uniform values from Rng(key), always all eight and in this order: flip, scale,
// log-ratio, x, y, angle, brightness, contrast (so turning one option off leaves the others'
// draws where they were). Options that are off give the identity for their part.
AugmentDraw draw_augment(const AugmentOptions& o, uint64_t key, int src_h, int src_w);

// src: src_h x src_w x 3 bytes (HWC, RGB). dst: 3 x out_h x out_w floats (CHW).
// The output pixel (u,v) samples, bilinearly with edges clamped, the point of the crop
// rectangle (mirrored when flip, rotated about its centre by angle_deg) that it maps to; the
// value /255 is multiplied by brightness and clamped to [0,1], then contrast is applied
// around the image's mean grey (0.299 R + 0.587 G + 0.114 B) and clamped again, then
// normalised. The identity draw with out = src copies the pixels (x 1/255) exactly.
// Reads only the source's bytes and writes only dst's 3 x out_h x out_w floats.
//
// kernel: how the resampling runs. Every kernel gives the same floats bit for bit, so that a
// run's batches do not depend on the machine's vector width; the choice is for tests, which
// force each. Auto: Vector where the build has it, else PerPixel. PerPixel: one output pixel
// at a time. Vector: augment_vector_lanes() output pixels of a row at a time where the build
// targets AVX2 (8) or AVX-512 (16) (-march, PDNN_ARCH), else PerPixel; a row's two taps in one
// 8-byte gather where they are neighbours. VectorWords: Vector with a 4-byte gather per tap
// everywhere (what Vector does at clamped columns and the image's last bytes).
enum class AugmentKernel { Auto, PerPixel, Vector, VectorWords };
void augment_image(const AugmentDraw& d, const Normalization& norm, int src_h, int src_w,
                   const uint8_t* src, int out_h, int out_w, float* dst,
                   AugmentKernel kernel = AugmentKernel::Auto);
// The Vector kernels' lanes in this build: 16, 8, or 0 where they are PerPixel.
int augment_vector_lanes();

// The map of class ids that goes with an image augmented by augment_image(d, ..., src_h,
// src_w, ..., out_h, out_w, ...): d is drawn for the image's src_h x src_w frame, and the map
// (map_h x map_w bytes, row-major) covers the same picture at any resolution (a photo cached
// at a reduced size, its mask at the photo's own). Output pixel (u,v) takes the map pixel that
// contains the point augment_image samples for it (the same coordinates, scaled to the map),
// edges clamped as there: dst[v * out_w + u], int32.
void augment_mask(const AugmentDraw& d, int src_h, int src_w, const uint8_t* map, int map_h,
                  int map_w, int out_h, int out_w, int32_t* dst);

}  // namespace pdnn
