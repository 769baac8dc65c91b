// Dataset: what a loader needs from a labelled image set, whatever holds it: the number of
// samples, each sample's shape and label, and the sample itself written into a caller's buffer
// (so a loader can pack a batch straight into pinned memory). The IDX sets (in memory, as
// LabeledImages, through TensorDataset), the image folders (lib/data/image_folder.h) and the
// image/mask pair folders (lib/data/image_mask_pairs.h) implement it, DatasetRange views part
// of one; DatasetLoader and PrefetchLoader (lib/data/dataset_loader.h, prefetch_loader.h) batch
// any of them.
//
// Targets. A classification set has one label per sample (label()). A set that labels every
// pixel (segmentation) says so through target_shape(), (H,W), and writes each sample's map of
// class ids beside its image (read_with_target): the loaders then pack an int32 (N,H,W) target
// batch too. Its label() is 0 for every sample (there is no per-sample class).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/shape.h"
#include "core/tensor.h"

namespace pdnn {

// One split held in memory: images (N,C,H,W) float, labels int32 in [0, classes).
// For the IDX sets (idx.h) C = 1 and the values are pixel/255 in [0,1].
struct LabeledImages {
  Tensor images;
  std::vector<int32_t> labels;
  int64_t size() const { return static_cast<int64_t>(labels.size()); }
};

class Dataset {
 public:
  virtual ~Dataset() = default;

  virtual int64_t size() const = 0;
  // Shape of one sample, (C,H,W); every sample has it.
  virtual Shape sample_shape() const = 0;
  virtual int num_classes() const = 0;
  // Class k's name as printed and written to results ("airplanes"; "3" for a digit).
  virtual std::string class_name(int k) const = 0;
  virtual int32_t label(int64_t i) const = 0;

  // Writes sample i (0 <= i < size()) as sample_shape().numel() floats, CHW, to dst.
  // augment_key: nullopt for the sample as it is (evaluation); otherwise the seed of this
  // sample's random draws (augment_key() in augment.h), which a set with augmentation uses and
  // one without ignores. The same (i, key) always gives the same floats. Safe to call from
  // several threads at once (it only reads the set).
  virtual void read(int64_t i, float* dst, std::optional<uint64_t> augment_key) const = 0;

  // Per-pixel targets: the shape (H,W) of one sample's map of class ids; an empty Shape (rank
  // 0, the default) for a set with one label per sample.
  virtual Shape target_shape() const { return Shape{}; }
  // Writes sample i as read() does to dst and its target map, target_shape().numel() class ids
  // in [0, num_classes()), to target; both from the same augmentation draws, so the map stays
  // aligned with the image. Only for sets with a target_shape() (the default throws).
  virtual void read_with_target(int64_t i, float* dst, int32_t* target,
                                std::optional<uint64_t> augment_key) const;
};

// A LabeledImages seen as a Dataset (the IDX sets, generated test data). Holds a reference:
// `data` must outlive it. No augmentation: read() copies sample i whatever the key.
class TensorDataset : public Dataset {
 public:
  // Checks that data has rank 4, one label per image, and labels in [0, num_classes).
  TensorDataset(const LabeledImages& data, int num_classes);

  int64_t size() const override { return data_.size(); }
  Shape sample_shape() const override;
  int num_classes() const override { return num_classes_; }
  std::string class_name(int k) const override { return std::to_string(k); }
  int32_t label(int64_t i) const override { return data_.labels[static_cast<size_t>(i)]; }
  void read(int64_t i, float* dst, std::optional<uint64_t> augment_key) const override;

 private:
  const LabeledImages& data_;
  int num_classes_;
};

// Samples [begin, end) of another Dataset, numbered from 0: a data-parallel rank's share of a
// test set. Holds a reference: `data` must outlive it. Sample i is the other set's sample
// begin + i, as it reads it (augmentation included).
class DatasetRange : public Dataset {
 public:
  // Checks 0 <= begin <= end <= data.size().
  DatasetRange(const Dataset& data, int64_t begin, int64_t end);

  int64_t size() const override { return end_ - begin_; }
  Shape sample_shape() const override { return data_.sample_shape(); }
  int num_classes() const override { return data_.num_classes(); }
  std::string class_name(int k) const override { return data_.class_name(k); }
  int32_t label(int64_t i) const override;
  void read(int64_t i, float* dst, std::optional<uint64_t> augment_key) const override;
  Shape target_shape() const override { return data_.target_shape(); }
  void read_with_target(int64_t i, float* dst, int32_t* target,
                        std::optional<uint64_t> augment_key) const override;

 private:
  const Dataset& data_;
  int64_t begin_, end_;
};

// A set of (C,H,W) samples seen as the grid of their side x side tiles: tile i is tile
// (i % per_sample) of sample i / per_sample, row by row, its target the same window of the
// sample's (H,W) map (or the sample's label). A whole image against its tiles (issue 35: the
// large-model study's "train the whole image, not tiles"): the tiles partition each image, so
// counts summed over every pixel (IoU, Dice) are the stitched images'. Each tile reads its whole
// sample (with its own augmentation draws, keyed by the tile) and keeps its window. Holds a
// reference: `data` must outlive it.
class DatasetTiles : public Dataset {
 public:
  // Checks that H and W are multiples of side (>= 1) and a per-pixel target, where the set has
  // one, is (H,W).
  DatasetTiles(const Dataset& data, int64_t side);

  int64_t size() const override { return data_.size() * per_sample_; }
  Shape sample_shape() const override { return Shape{channels_, side_, side_}; }
  int num_classes() const override { return data_.num_classes(); }
  std::string class_name(int k) const override { return data_.class_name(k); }
  int32_t label(int64_t i) const override;
  void read(int64_t i, float* dst, std::optional<uint64_t> augment_key) const override;
  Shape target_shape() const override;
  void read_with_target(int64_t i, float* dst, int32_t* target,
                        std::optional<uint64_t> augment_key) const override;
  int64_t per_sample() const { return per_sample_; }

 private:
  const Dataset& data_;
  int64_t side_, channels_, h_, w_, per_sample_;
};

}  // namespace pdnn
