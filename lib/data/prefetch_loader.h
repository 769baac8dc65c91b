// PrefetchLoader: DatasetLoader's batches, prepared (read, augmented, packed) on a background
// thread while the caller trains on the previous one. The batches are exactly DatasetLoader's
// for the same options (both call load_batch on the same EpochPlan), whatever the timing.
//
// Core budget. The loader owns one background thread, which packs with opt.threads threads
// (an OpenMP team of its own when > 1); OpenCV's pool is held at 1 thread (image_folder.h);
// the training step keeps the Context's threads. On a 2-core CPU run use opt.threads = 1:
// a W4 batch costs the loader about 25-30 ms (64 x ~0.4 ms) against a step of seconds,
// so the one extra thread steals ~1% of a core and is hidden entirely. On a GPU host the step
// is tens of ms and the host cores are otherwise idle: give the loader 2-4 threads there so
// a batch is ready before the step ends (the bench tool, build/bin/bench_loader, measures
// images/s at 1 and 2 threads). stats() says how much preparation was hidden and how much the
// trainer waited, for the CSV.
//
// Memory. Slots of `depth` + 1 batches: the one the caller holds and up to `depth` prepared
// ahead. Each slot's tensors (the images, and a set's per-pixel targets when it has them) come
// from the BatchAllocator, once, at the full batch shape: the hook by which the CUDA path packs
// into pinned host memory (default: ordinary Tensors).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/tensor.h"
#include "data/dataset.h"
#include "data/dataset_loader.h"

namespace pdnn {

struct Batch {
  Tensor x;                    // (n,C,H,W)
  std::vector<int32_t> y;      // n labels
  Tensor target;               // int32 (n,H,W) per-pixel class ids (Dataset::target_shape());
                               // empty for a set with one label per sample
  int64_t epoch = -1, index = -1;
  int64_t batch_rows = 0;      // images in the whole batch (data-parallel: y holds a shard)
  int64_t size() const { return static_cast<int64_t>(y.size()); }
};

struct LoaderStats {
  int64_t batches = 0;    // handed to the caller
  double prepare_s = 0;   // wall time the background thread spent packing them
  double wait_s = 0;      // time the caller spent in next() waiting: the exposed part
  // Preparation that overlapped the caller's work.
  double hidden_s() const { return prepare_s > wait_s ? prepare_s - wait_s : 0; }
};

class PrefetchLoader {
 public:
  // A tensor of the given shape and type for one slot (e.g. in pinned host memory): float32
  // images, int32 per-pixel targets.
  using BatchAllocator = std::function<Tensor(const Shape&, DType)>;

  // data must outlive the loader. depth >= 1. Starts preparing epoch 0 at once.
  PrefetchLoader(const Dataset& data, const LoaderOptions& opt, int depth = 1,
                 BatchAllocator allocate = {});
  ~PrefetchLoader();  // stops and joins the thread
  PrefetchLoader(const PrefetchLoader&) = delete;
  PrefetchLoader& operator=(const PrefetchLoader&) = delete;

  // Switches to epoch `epoch` (any epoch, any time): what was prepared for another epoch is
  // dropped and the batch returned last becomes invalid. Call it for epoch e + 1 as soon as
  // the last batch of e has been trained on, before evaluating: the first batch is then
  // prepared while the test set runs.
  void start_epoch(int64_t epoch);
  int64_t epoch() const;
  int64_t num_batches() const;
  int64_t images_per_epoch() const;
  bool has_next() const;  // batches of this epoch not yet returned

  // The next batch of the current epoch, waiting for it if needed. Valid until the next call
  // of next() or start_epoch(). An error raised while preparing it is rethrown here.
  const Batch& next();

  LoaderStats stats() const;  // since construction or reset_stats()
  void reset_stats();

 private:
  void run();  // the background thread

  const Dataset& data_;
  const LoaderOptions opt_;
  std::vector<Batch> slots_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  uint64_t generation_ = 0;             // bumped by start_epoch: work of older ones is dropped
  std::shared_ptr<const EpochPlan> plan_;
  int64_t next_fill_ = 0, next_take_ = 0;
  std::vector<int> free_;                // slots the thread may fill
  std::map<int64_t, int> ready_;         // batch index -> slot, for the current generation
  std::map<int64_t, std::exception_ptr> failed_;
  int held_ = -1;                        // the slot the caller holds
  LoaderStats stats_;
  std::thread thread_;
};

}  // namespace pdnn
