// Image/mask pair folders: photos with a map of class ids per pixel (segmentation), decoded once
// through OpenCV into memory, split by the folder's own lists, and served as Datasets of
// 3 x size x size floats with size x size int32 targets (Dataset::read_with_target), so that
// DatasetLoader and PrefetchLoader pack (N,3,H,W) image and (N,H,W) class-id batches.
// Built only with OpenCV (CMakeLists drops lib/data/image_* without it).
//
// Layout of DIR (datasets/README.md describes the shipped one, datasets/ccp-200):
//   images/<id>.jpg|.jpeg|.png|.bmp   the photos, each at its own size (greyscale, alpha and
//                                     16-bit PNGs as the image folders read them)
//   <masks>/<id>.png                  the photo's map: a single-channel 8-bit PNG of class ids
//                                     0..K-1, the photo's width and height. With K = 2 a mask
//                                     of only 0 and 255 (black and white, e.g. a 1-bit PNG) is
//                                     read as 0 and 1.
//   <masks>/classes.txt               K >= 2 lines: class k's name on line k + 1
//   <masks>/NAME                      optional; first line: the set's name, as printed and
//                                     written to results (default: DIR's name, and -<masks>
//                                     unless <masks> is "masks")
//   train.txt, test.txt               the split: ids, one a line (test.txt may be empty)
//   RESIZED                           optional; first line: how the photos were reduced from
//                                     their originals (the shipped subset's are)
// <masks> is ImageMaskOptions::masks, so one folder can hold several label sets for the same
// photos (datasets/ccp-200: masks/, person vs background; masks59/, 59 clothing classes).
//
// Errors. Unlike the image folders, which skip a bad photo, a pair folder is read whole or not
// at all: a missing or unreadable photo or mask, a mask that is not an 8-bit single-channel
// PNG, a mask whose size differs from its photo's, a mask value outside the classes, an id
// listed twice or in both lists, a bad classes.txt: each throws pdnn::Error, one line naming
// the folder and the file.
//
// Pixels. Each photo is resized (aspect ratio not kept) to a square cache of cache_size x
// cache_size RGB bytes (INTER_AREA when the area shrinks, bilinear otherwise; the image folders'
// decode, image_decode.h); each mask is kept at the photo's own size. read() resamples the
// cached photo to size x size with the split's augmentation (train, when the loader passes a
// key) or without it, bilinear (augment.h), normalised by the training split's per-channel mean
// and std as the image folders are; read_with_target() also samples the mask by the same draw,
// nearest-neighbour, at full resolution (augment_mask): a target pixel is the class of the mask
// pixel under the point its image pixel samples, so the maps hold only classes of the masks.
// Memory: pairs x (3 x cache_size^2 + the photo's pixels) bytes (datasets/ccp-200 at 256:
// 200 x (3 x 293^2 + 256 x 390) = 72 MB).
//
// Up-sampling. A size above a photo's stored width or height samples it above its own
// resolution; the folder counts those photos (ImageMaskFolder::upsampled) and describe() says
// so, as every output that uses such a run must.
//
// Threads. Decoding runs on `threads` OpenMP threads, one pair each; reading a sample is a
// function of (sample, augmentation key) alone, so batches are the same at any thread count.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/augment.h"
#include "data/dataset.h"

namespace pdnn {

struct ImageMaskOptions {
  std::string masks = "masks";  // the label set: DIR/<masks>/
  int size = 256;               // samples 3 x size x size, targets size x size
  int cache_size = 0;           // side of the cached photos; 0: ceil(size * 8 / 7)
  int threads = 1;              // decoding threads; <= 0: all cores
  // The train split's augmentation (the test split has none): flip and random resized crop.
  AugmentOptions augment = AugmentOptions::flip_and_crop();
  // Per-channel normalisation of both splits; nullopt: the train split's mean and std.
  std::optional<Normalization> norm;
  std::FILE* log = stdout;      // two summary lines; nullptr: silent
};

struct PairStore;  // the decoded photos and masks, shared by the splits (image_mask_pairs.cpp)

// One split of a pair folder. Copies share the store.
class ImageMaskDataset : public Dataset {
 public:
  ImageMaskDataset(std::shared_ptr<const PairStore> store, std::vector<int64_t> pairs, int size,
                   const AugmentOptions& augment, const Normalization& norm);

  int64_t size() const override { return static_cast<int64_t>(pairs_.size()); }
  Shape sample_shape() const override { return Shape{3, size_, size_}; }
  Shape target_shape() const override { return Shape{size_, size_}; }
  int num_classes() const override;
  std::string class_name(int k) const override;
  int32_t label(int64_t /*i*/) const override { return 0; }  // per pixel instead
  void read(int64_t i, float* dst, std::optional<uint64_t> augment_key) const override;
  // target may be null: the image alone (what read() does).
  void read_with_target(int64_t i, float* dst, int32_t* target,
                        std::optional<uint64_t> augment_key) const override;

  // Pair i's id ("0001") and photo file relative to the folder ("images/0001.jpg").
  const std::string& id(int64_t i) const;
  const std::string& image_path(int64_t i) const;
  // Pair i's photo as cached (cache_size() x cache_size() x 3 bytes, RGB) and its mask as
  // stored (mask_height(i) x mask_width(i) class ids).
  const uint8_t* cached(int64_t i) const;
  int cache_size() const;
  const uint8_t* mask(int64_t i) const;
  int mask_width(int64_t i) const;
  int mask_height(int64_t i) const;
  const AugmentOptions& augment() const { return augment_; }
  const Normalization& normalization() const { return norm_; }

 private:
  std::shared_ptr<const PairStore> store_;
  std::vector<int64_t> pairs_;  // indices into the store
  int size_;
  AugmentOptions augment_;
  Normalization norm_;
};

struct ImageMaskFolder {
  ImageMaskFolder(ImageMaskDataset train_split, ImageMaskDataset test_split)
      : train(std::move(train_split)), test(std::move(test_split)) {}

  std::string dir, masks;
  std::string name;     // <masks>/NAME's first line ("ccp-person-200")
  std::string resized;  // RESIZED's first line; "" when the folder has none (original photos)
  std::vector<std::string> classes;
  ImageMaskDataset train, test;  // test has no augmentation
  Normalization norm;            // what both splits use
  int size = 0;                  // the samples' side
  int min_width = 0, max_width = 0, min_height = 0, max_height = 0;  // the photos as stored
  int64_t upsampled = 0;         // photos narrower or lower than size
  int64_t two_tone_masks = 0;    // masks read as 0/255 and mapped to classes 0/1
  std::vector<int64_t> train_class_pixels;  // per class, over the train masks as stored
  int cache_size = 0;
  size_t cache_bytes = 0;        // photos and masks
  double decode_seconds = 0;

  // One line for logs and results: "ccp-person-200: 200 pairs (151 train, 49 test), 2 classes;
  // photos resized from 550 x 803-872 to 256 x 374-406 (...); sampled at 512 x 512: up-sampled
  // (200 photos below 512 px)" (without RESIZED: "photos 550 x 801-873 as stored").
  std::string describe() const;
};

// Reads, checks, decodes and splits dir as the header describes; logs two summary lines to
// opt.log. Throws pdnn::Error naming the folder and the file that is wrong.
ImageMaskFolder load_image_mask_folder(const std::string& dir, const ImageMaskOptions& opt = {});

}  // namespace pdnn
