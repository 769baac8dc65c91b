// DatasetLoader: batches over any Dataset, the plain (synchronous) path. Each epoch's order is
// a permutation from epoch_order_rng(seed, epoch) (which scripts/twins/torch_reference.py
// reproduces) or the stored order; with augmentation on, image i of epoch e is read with
// augment_key(seed, e, i). So a batch is a function of (seed, epoch, batch index) alone:
// PrefetchLoader (prefetch_loader.h) computes the same batches on its own thread, and either
// gives the same floats at any thread count. With N images and batch B the last batch of an
// epoch holds the N % B left over (when that is not 0, and drop_last is off), so every image
// is seen once per epoch.
//
// Data-parallel (LoaderOptions::shard/shards, lib/dist): every rank plans the same epoch (the
// same order, batches and augmentation keys) and packs only its rows of each batch, rows
// shard_rows(nb, shard, shards) of the nb in it: its shard of the global batch.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"
#include "data/dataset.h"

namespace pdnn {

// The stream that orders epoch `epoch` (0-based) of a loader seeded `seed`:
// Rng(Rng::at(seed, epoch + 1)), so any epoch's order can be rebuilt on its own (resuming
// mid-run, the PyTorch reference) without replaying the epochs before it. The order is
// permutation(N) of it (Fisher-Yates, N - 1 draws).
inline Rng epoch_order_rng(uint64_t seed, int64_t epoch) {
  return Rng(Rng::at(seed, static_cast<uint64_t>(epoch) + 1));
}

struct LoaderOptions {
  int64_t batch = 64;
  bool shuffle = true;      // a fresh permutation each epoch; false: stored order (evaluation)
  bool augment = false;     // read training samples with their augmentation keys
  uint64_t seed = 0;        // order and augmentation draws
  // Images per epoch: the first images_per_epoch of the epoch's order (0: all). W4 sets 1280.
  int64_t images_per_epoch = 0;
  bool drop_last = false;   // leave out a last batch smaller than `batch`
  // Threads reading the images of one batch (OpenMP, on the thread that packs it). Results do
  // not depend on it. The image folder costs about 0.4 ms per 224x224 image and thread.
  int threads = 1;
  // Data-parallel: pack only rank `shard`'s rows of each batch (shard_rows); 0 of 1: all.
  int shard = 0, shards = 1;
};

// Rows [first, second) of a batch of nb rows that rank `shard` of `shards` takes:
// shard*nb/shards .. (shard+1)*nb/shards (uneven batches give the later ranks the extra row).
inline std::pair<int64_t, int64_t> shard_rows(int64_t nb, int shard, int shards) {
  return {nb * shard / shards, nb * (shard + 1) / shards};
}

// The sequence of batches of one epoch: which images, in which order.
class EpochPlan {
 public:
  EpochPlan() = default;
  EpochPlan(const Dataset& data, const LoaderOptions& opt, int64_t epoch);
  int64_t epoch() const { return epoch_; }
  int64_t num_batches() const { return num_batches_; }
  int64_t images() const { return images_; }  // in this epoch, over all its batches
  // The dataset indices of batch b.
  const int64_t* batch_indices(int64_t b, int64_t* count) const;
  // The number of images in batch b (all ranks' rows together).
  int64_t batch_rows(int64_t b) const;

 private:
  int64_t epoch_ = 0, batch_ = 1, images_ = 0, num_batches_ = 0;
  std::vector<int64_t> order_;
};

// Packs batch b of `plan` (with opt.shards > 1: this rank's rows of it): x is resized to
// (nb,C,H,W) (its storage, and so its memory kind, is kept when large enough) and y to nb
// labels. A set with per-pixel targets (Dataset::target_shape()) also fills `target`, which
// must then be given: resized to int32 (nb,H,W) (its storage kept when it is int32 and large
// enough). Returns nb, the rows packed. Used by both loaders.
int64_t load_batch(const Dataset& data, const LoaderOptions& opt, const EpochPlan& plan,
                   int64_t b, Tensor& x, std::vector<int32_t>& y, Tensor* target = nullptr);

class DatasetLoader {
 public:
  // data must outlive the loader. Starts at epoch 0.
  DatasetLoader(const Dataset& data, const LoaderOptions& opt);

  void start_epoch(int64_t epoch) { plan_ = EpochPlan(data_, opt_, epoch); }
  int64_t epoch() const { return plan_.epoch(); }
  int64_t num_batches() const { return plan_.num_batches(); }
  int64_t images_per_epoch() const { return plan_.images(); }
  const LoaderOptions& options() const { return opt_; }
  const Dataset& dataset() const { return data_; }

  // Batch b (0 <= b < num_batches()) of the current epoch into x and y; returns its size
  // (data-parallel: this rank's rows of it).
  // target: the per-pixel targets of a set that has them (load_batch).
  int64_t load(int64_t b, Tensor& x, std::vector<int32_t>& y, Tensor* target = nullptr) const {
    return load_batch(data_, opt_, plan_, b, x, y, target);
  }
  // The images in batch b, all ranks' rows together.
  int64_t batch_rows(int64_t b) const { return plan_.batch_rows(b); }

 private:
  const Dataset& data_;
  LoaderOptions opt_;
  EpochPlan plan_;
};

}  // namespace pdnn
