// EpochBatches (epoch_batches.h).
#include "workloads/classifier/epoch_batches.h"

#include <chrono>

#include "core/error.h"

namespace pdnn {

EpochBatches::EpochBatches(const Dataset& data, const LoaderOptions& o, int prefetch,
                           const char* what)
    : data_(data), o_(o), prefetch_depth_(prefetch), what_(what) {
  o_.shuffle = true;
}

EpochBatches::~EpochBatches() = default;

void EpochBatches::set_shard(int shard, int shards) {
  PDNN_CHECK(!prefetch_ && !sync_, "%s: the shard set after training began", what_);
  o_.shard = shard;
  o_.shards = shards;
}

LoaderStats EpochBatches::stats() const { return prefetch_ ? prefetch_->stats() : sync_stats_; }

int64_t EpochBatches::begin_epoch(Context& ctx, int epoch, uint64_t data_seed) {
  if ((!prefetch_ && !sync_) || o_.seed != data_seed) {
    o_.seed = data_seed;
    prefetch_.reset();
    sync_.reset();
    if (prefetch_depth_ > 0) {
      prefetch_ = std::make_unique<PrefetchLoader>(
          data_, o_, prefetch_depth_,
          [&ctx](const Shape& s, DType t) { return Tensor(s, t, ctx.staging_allocator()); });
      prefetched_epoch_ = 0;  // it starts packing epoch 0 at once
    } else {
      sync_ = std::make_unique<DatasetLoader>(data_, o_);
      const Shape s = data_.sample_shape(), t = data_.target_shape();
      x_ = Tensor(Shape{o_.batch, s[0], s[1], s[2]}, DType::F32, ctx.staging_allocator());
      if (t.rank() > 0)
        target_ = Tensor(Shape{o_.batch, t[0], t[1]}, DType::I32, ctx.staging_allocator());
    }
  }
  if (prefetch_) {
    // Packing of this epoch may have started already (at the end of the last one); an epoch
    // left half way (a benchmark's last) is started afresh.
    if (prefetched_epoch_ != epoch) prefetch_->start_epoch(epoch);
    prefetched_epoch_ = -1;
    batches_ = prefetch_->num_batches();
  } else {
    sync_->start_epoch(epoch);
    batches_ = sync_->num_batches();
  }
  epoch_ = epoch;
  return batches_;
}

EpochBatches::Taken EpochBatches::take(int64_t b) {
  const bool map = data_.target_shape().rank() > 0;
  if (prefetch_) {
    const Batch& batch = prefetch_->next();
    PDNN_CHECK(batch.index == b && batch.epoch == epoch_,
               "%s: batch %lld of epoch %d asked, the loader has batch %lld of epoch %lld "
               "(batches must be taken in order)",
               what_, static_cast<long long>(b), epoch_ + 1, static_cast<long long>(batch.index),
               static_cast<long long>(batch.epoch + 1));
    return {&batch.x, &batch.y, map ? &batch.target : nullptr, batch.batch_rows};
  }
  const auto t0 = std::chrono::steady_clock::now();
  sync_->load(b, x_, y_, map ? &target_ : nullptr);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  sync_stats_.prepare_s += s;
  sync_stats_.wait_s += s;  // the trainer waited for all of it
  ++sync_stats_.batches;
  return {&x_, &y_, map ? &target_ : nullptr, sync_->batch_rows(b)};
}

void EpochBatches::trained(int64_t b) {
  if (b + 1 == batches_ && prefetch_) {
    // The next epoch's first batches are packed while the test split is evaluated.
    prefetch_->start_epoch(epoch_ + 1);
    prefetched_epoch_ = epoch_ + 1;
  }
}

}  // namespace pdnn
