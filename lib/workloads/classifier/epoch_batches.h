// EpochBatches: a task's training batches, epoch by epoch (the classifier task's and the
// segmentation task's): the training split in a fresh seeded order each epoch (LoaderOptions:
// augmentation, images per epoch, a data-parallel rank's rows), packed into host memory the GPU
// copies from (pinned: ctx.staging_allocator()) either between steps on the training thread
// (prefetch 0) or ahead on a background thread (PrefetchLoader, prefetch >= 1: the next
// epoch's first batches are packed from the moment the last batch of this one has been
// trained on, while the test split is evaluated). The batches are the same either way.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/context.h"
#include "core/tensor.h"
#include "data/dataset.h"
#include "data/dataset_loader.h"
#include "data/prefetch_loader.h"

namespace pdnn {

class EpochBatches {
 public:
  // One batch: images x (n,C,H,W) float32, their labels y, and for a split with per-pixel
  // targets (Dataset::target_shape()) the maps (n,H,W) int32 (nullptr otherwise); rows: the
  // whole batch's images (data-parallel: x and y hold this rank's shard of them). Valid until
  // the next take().
  struct Taken {
    const Tensor* x = nullptr;
    const std::vector<int32_t>* y = nullptr;
    const Tensor* target = nullptr;
    int64_t rows = 0;
  };

  // data must outlive this; what: the task's name in messages ("classifier task"). The
  // options' shuffle is set; their seed is the run's data seed, given at each begin_epoch().
  EpochBatches(const Dataset& data, const LoaderOptions& o, int prefetch, const char* what);
  ~EpochBatches();

  // Data-parallel: this rank's rows of every batch (before the first epoch).
  void set_shard(int shard, int shards);
  // Starts epoch `epoch` (the loaders are made at the first one, and again when the data seed
  // changes); returns its number of batches.
  int64_t begin_epoch(Context& ctx, int epoch, uint64_t data_seed);
  // Batch b of the epoch (in order: 0, 1, ...).
  Taken take(int64_t b);
  // After batch b's step: after the epoch's last, the next epoch's packing starts.
  void trained(int64_t b);
  // Time spent packing, over the run so far.
  LoaderStats stats() const;
  int64_t batches() const { return batches_; }  // of the current epoch
  bool started() const { return prefetch_ || sync_; }

 private:
  const Dataset& data_;
  LoaderOptions o_;
  int prefetch_depth_;
  const char* what_;
  // One of the two is used: prefetch_ when prefetch_depth_ > 0, else sync_.
  std::unique_ptr<PrefetchLoader> prefetch_;
  std::unique_ptr<DatasetLoader> sync_;
  LoaderStats sync_stats_;      // what the synchronous path spent packing
  Tensor x_, target_;           // the synchronous path's batch (pinned for a GPU)
  std::vector<int32_t> y_;
  int epoch_ = -1;
  int prefetched_epoch_ = -1;   // the epoch prefetch_ was started on and not yet taken from
  int64_t batches_ = 0;
};

}  // namespace pdnn
