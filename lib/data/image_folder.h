// Image folders: DIR/<class>/<image files> (the layout of Caltech101's 101_ObjectCategories
// and of torchvision's ImageFolder), decoded once through OpenCV into an in-memory cache,
// split per class into train and test, and served as Datasets of 3 x size x size floats.
// Built only with OpenCV (CMakeLists drops lib/data/image_* without it).
//
// Files. Every regular file under a class folder, at any depth, sorted by path, is tried;
// JPEG, PNG and BMP are recognised by their first bytes, whatever the name. Unreadable, empty,
// truncated (a JPEG without its end marker) or undecodable files and files of any other kind
// are skipped and counted, as are images of more than 8192 x 8192 pixels (kMaxImagePixels in
// image_decode.h; JPEGs counted at the reduced size they decode at): the log shows the count
// and the first few names with the reason.
// A missing folder, a named class without a folder, or a class left with no readable image
// is an error naming it. EXIF orientation is ignored (as torchvision's PIL loader does).
//
// Pixels. Greyscale becomes 3 equal channels; alpha is dropped (the stored colour is kept, as
// PIL's convert("RGB") does); 16-bit PNGs are scaled to 8 bits by v/257 rounded (65535 ->
// 255); channels are stored R, G, B. Each photo is resized, aspect ratio not kept (the
// whole object stays in the frame; Caltech's objects are centred and fill it), or with
// center_crop its largest centred square first (aspect ratio kept, as torchvision's
// Resize + CenterCrop do for the DCGAN's photos), to a square
// cache of cache_size x cache_size bytes per channel (INTER_AREA when the area shrinks,
// bilinear otherwise). The default cache_size is size * 8/7 (256 for 224, the classic
// resize-256 / crop-224 margin): Caltech's photos are about 300 x 200, so the cache keeps
// about the detail they have and random crops resample it, not an image already at 224.
// Memory: images x 3 x cache_size^2 bytes, e.g. 2,600 x 3 x 256^2 = 511 MB for Caltech-6 at
// 224 (as floats at 224 it would be 1.56 GB; decoding the JPEGs again every epoch would cost
// about 1.3 ms per photo and core, against about 0.4 ms to augment from the cache).
//
// Samples. read() resamples the cached image to size x size with the split's augmentation
// (train, when the loader passes a key) or without (test, or no key), in one bilinear pass
// (augment.h), and normalises each channel by the training split's own mean and std (of the
// cached bytes / 255, summed exactly in integers, so the same at any thread count), applied to
// both splits: the network sees inputs of mean 0 and std 1 whatever the photos. ImageNet's
// constants, the usual choice for pretrained networks, fit these photos badly (Caltech-6's
// RGB mean is 0.565 0.563 0.544 and std 0.308 0.299 0.320 against ImageNet's 0.485 0.456
// 0.406 and 0.229 0.224 0.225: white backgrounds), and W4 trains from scratch. The values
// used are logged, and a caller may fix them instead (ImageFolderOptions::norm).
//
// Split. Per class, the readable images (in path order) are shuffled by
// Rng(Rng::at(split_seed, FNV-1a hash of the class name)).permutation(n), so a class splits
// the same way whichever classes are loaded with it; the first round(n * train_fraction)
// (at least 1, and at most n - 1 when train_fraction < 1) are training images, the rest test
// images; each split is then kept in (class, path) order. With the default 0.5 the six W4
// classes (800, 798, 435, 239, 200, 128 photos) give 400/400, 399/399, 218/217, 120/119,
// 100/100, 64/64 = 1,301 train / 1,299 test, against the paper's 1,305 / 1,300 "after
// augmentation" (SPEC.md): the paper's counts are half of each class give or take a few
// (augmented copies in the small classes, we presume); ours are half of each class's real
// photos (the odd one to training), every photo used once. "1,280 training images per epoch" (W4: 20 steps of 64) is
// then each epoch's first 1,280 images of a fresh permutation of the 1,301
// (LoaderOptions::images_per_epoch = 1280, or drop_last with batch 64): every epoch leaves
// out a different 21. The split seed is separate from the run's seed so that runs with
// different seeds (and PyTorch's reference) test on the same images.
//
// Threads. Decoding runs on `threads` OpenMP threads, one photo each, results independent of
// the count. OpenCV's own pool (TBB in Debian's build) is set to 1 thread, process-wide, by
// load_image_folder: pdnn parallelises over images itself, and two pools on two cores fight.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/augment.h"
#include "data/dataset.h"

namespace pdnn {

struct ImageFolderOptions {
  std::vector<std::string> classes;  // label k = classes[k]; empty: every subfolder, sorted
  int size = 224;                    // samples are 3 x size x size
  int cache_size = 0;                // side of the cached images; 0: ceil(size * 8 / 7)
  bool center_crop = false;          // keep the largest centred square of each photo
  double train_fraction = 0.5;       // in (0, 1]; 1: every image trains, test is empty
  uint64_t split_seed = 0;
  int threads = 1;                   // decoding threads; <= 0: all cores
  AugmentOptions augment;            // the train split's augmentation
  // Per-channel normalisation of both splits; nullopt: the train split's mean and std.
  std::optional<Normalization> norm;
  std::FILE* log = stdout;           // the summary and skipped files; nullptr: silent
};

struct ImageStore;  // the decoded cache, shared by the splits (image_folder.cpp)

// One split of a folder. Copies share the cache.
class ImageFolderDataset : public Dataset {
 public:
  ImageFolderDataset(std::shared_ptr<const ImageStore> store, std::vector<int64_t> images,
                     int size, const AugmentOptions& augment, const Normalization& norm);

  int64_t size() const override { return static_cast<int64_t>(images_.size()); }
  Shape sample_shape() const override { return Shape{3, size_, size_}; }
  int num_classes() const override;
  std::string class_name(int k) const override;
  int32_t label(int64_t i) const override;
  void read(int64_t i, float* dst, std::optional<uint64_t> augment_key) const override;

  // The file sample i came from, relative to the folder ("airplanes/image_0001.jpg").
  const std::string& path(int64_t i) const;
  // Sample i as cached: cache_size() x cache_size() x 3 bytes, RGB.
  const uint8_t* cached(int64_t i) const;
  int cache_size() const;
  const AugmentOptions& augment() const { return augment_; }
  const Normalization& normalization() const { return norm_; }

 private:
  std::shared_ptr<const ImageStore> store_;
  std::vector<int64_t> images_;  // indices into the store
  int size_;
  AugmentOptions augment_;
  Normalization norm_;
};

struct SkippedFile {
  std::string path;    // relative to the folder
  std::string reason;  // "empty file", "truncated JPEG (no end-of-image marker)", ...
};

struct ImageFolder {
  std::string dir;
  std::vector<std::string> classes;
  ImageFolderDataset train, test;  // test has no augmentation
  std::vector<int64_t> train_per_class, test_per_class;
  Normalization norm;                // what both splits use
  int64_t files = 0;                 // files tried (readable images + skipped)
  std::vector<SkippedFile> skipped;  // in path order
  int cache_size = 0;
  size_t cache_bytes = 0;
  double decode_seconds = 0;
};

// "skipped 2 of 38 files: a/x.jpg (empty file), b/y.png (truncated PNG)": the files the loader
// skipped and why, up to max_listed of them named (", ..." after), in one line; "skipped 0 of
// 38 files" when none was.
std::string skipped_summary(const ImageFolder& f, size_t max_listed = 5);

// The class folders of dir, as load_image_folder takes them when no class list is given: its
// subfolders whose names do not start with '.', sorted (byte order). Throws pdnn::Error when
// dir cannot be listed.
std::vector<std::string> list_image_folder_classes(const std::string& dir);

// Scans, decodes and splits dir as the header describes; logs two summary lines (and one for
// skipped files) to opt.log. Throws pdnn::Error naming the folder or class that is wrong.
ImageFolder load_image_folder(const std::string& dir, const ImageFolderOptions& opt = {});

}  // namespace pdnn
