// StepShell: what every task's training step runs inside (the classifier's and the U-Net's,
// workloads/classifier/classifier_trainer.h; the DCGAN's, workloads/dcgan/gan_trainer.h), so
// that a task writes only its forwards, losses, backwards, updates and metrics:
//   - stage(): the batch's tensors into the shell's buffers on the model's device, under the
//     memory role "the training batch". On the GPU they are always copied (the only transfer
//     of a step), so that a captured graph reads the same addresses every step: by default
//     (overlap_copy) the host's tensors go to a staging buffer on the shell's copy stream, beside
//     the step still running, then on the compute stream into the step's buffers (a device
//     copy, ~3 TB/s), the batch thus on the device twice; serially (overlap_copy off) straight
//     into them on the compute stream, after the step before. On the CPU the caller's tensors
//     are read where they are (no data moved);
//   - run(): the task's step once, as a replayed CUDA graph (StepGraph, keyed by the first
//     tensor's shape and the data-parallel row shard) or eagerly (the CPU, cuda_graph off, or a
//     profiler attached: it times layers one by one); then the copy fence: run() returns once
//     the copies out of host memory have run, not the step, which stays queued, so a loader may
//     refill its (pinned) host buffer with the next batch while the device trains on this one;
//   - micro_batches(): where the task allows them (a memory plan's Model::set_micro_batch), the
//     step's rows in slices, each a shard of the batch (Rng::RowShard) starting from the
//     step's RNG position, so every row draws its dropout mask and gets its loss gradient bit
//     for bit as in one pass.
// Nothing here computes: the shell adds no kernel to a step and moves no data but the batch.
// The memory plan counts the batch twice where the copy overlaps (describe_step's
// batch_copies).
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <vector>

#include "core/context.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "optim/optimizer.h"
#include "train/copy_fence.h"
#include "train/step_graph.h"

namespace pdnn {

// The batch in a buffer on `dev`, as dtype t: copied (counted) into buf when src is elsewhere
// or, on the GPU, always (a captured graph reads a fixed address); on the CPU, src itself.
const Tensor& stage_tensor(Context& ctx, const Tensor& src, DType t, Device dev, Tensor& buf);

class StepShell {
 public:
  // One tensor of a batch and the dtype the step reads it as.
  struct Input {
    const Tensor* src;
    DType dtype;
  };

  // opts: the optimizers the step updates (StepGraph keeps their host step counts right); they
  // must outlive the shell. what: the step's name in messages ("trainer", "dcgan trainer").
  // cuda_graph: capture and replay the step on the GPU. overlap_copy: on the GPU, copy the next
  // batch from the host beside the step before (above; off: on the compute stream, serially).
  StepShell(std::vector<Optimizer*> opts, const char* what, bool cuda_graph,
            bool overlap_copy = true);
  StepShell(const StepShell&) = delete;
  StepShell& operator=(const StepShell&) = delete;

  // Stages the batch on dev (each tensor N rows, on the host or on dev) and marks the copy
  // fence when any came from the host. Then run().
  void stage(Context& ctx, Device dev, std::initializer_list<Input> batch);
  // Tensor i of the staged batch, on the device (the CPU: the caller's): valid until run()
  // returns.
  const Tensor& batch(size_t i) const { return *use_[i]; }
  // Runs step() once, as a graph or eagerly (above), then waits for the batch's copies.
  // `eager`: this step is not the one to capture (the DCGAN's first step of a deferred G
  // update has a different body from the steps after it, gan_trainer.h).
  void run(Context& ctx, const std::function<void()>& step, bool eager = false);

  // Within a step: body(row0, rows, last) for each slice of at most `micro` rows of the staged
  // batch's n rows, in order, each as rows [row0, row0 + rows) of the batch's shard (a
  // data-parallel rank's, or the whole batch) from the step's RNG position; the context's row
  // shard is restored afterwards and the RNG is where the last slice left it (every slice
  // draws as many numbers).
  template <class Body>
  void micro_batches(Context& ctx, int64_t micro, const Body& body);
  // How many slices that is for n rows (1 where micro is 0 or n or more: the whole batch).
  static int64_t slice_count(int64_t n, int64_t micro) {
    return micro <= 0 || micro >= n ? 1 : (n + micro - 1) / micro;
  }
  // Rows [row0, row0 + rows) of tensor i of the staged batch (a view).
  Tensor batch_rows(size_t i, int64_t row0, int64_t rows) const;

  // Drops the graph (the step changed in a way its key does not show: a gradient all-reduce
  // added); the next run() starts eagerly.
  void reset_graph() { graph_.reset(); }
  int64_t graph_replays() const { return graph_.replays(); }
  int64_t graph_captures() const { return graph_.captures(); }
  // Whether a GPU step is captured and replayed (cuda_graph on).
  bool captures() const { return use_graph_; }
  // Whether a GPU batch from the host is copied beside the step before (overlap_copy on).
  bool overlaps_copy() const { return overlap_copy_; }

 private:
  // Saves the step's RNG position (host, and the device counter's copy on the GPU); rewinds to it.
  void save_rng(Context& ctx, bool gpu);
  void rewind_rng(Context& ctx, bool gpu);

  // stage() on the GPU with overlap_copy, a tensor from the host (the ordering: step_shell.cpp).
  void stage_overlapped(Context& ctx, std::initializer_list<Input> batch);

  struct CopyLane;
  bool use_graph_;
  bool overlap_copy_;
  StepGraph graph_;
  std::vector<Tensor> buf_;         // the batch on the device (GPU: the graph's fixed inputs)
  std::vector<const Tensor*> use_;  // what the step reads: buf_[i], or the caller's CPU tensor
  std::vector<Tensor> staging_;     // GPU, overlap_copy: tensor i as copied from the host
  std::shared_ptr<CopyLane> lane_;  // GPU, overlap_copy: the copy stream and its events
  CopyFence fence_;                 // (after lane_: waits on its stream's copies first)
  uint64_t rng_start_ = 0;
  Tensor rng_start_dev_;            // GPU: the step's RNG position, each slice starts from it
};

template <class Body>
void StepShell::micro_batches(Context& ctx, int64_t micro, const Body& body) {
  const Tensor& x = batch(0);
  const int64_t n = x.shape(0);
  const int64_t rows = std::min(micro, n);
  const Rng::RowShard whole = ctx.rng().row_shard();  // a data-parallel rank's, or none
  const int64_t row0 = whole.total > 0 ? whole.row0 : 0;
  const int64_t total = whole.total > 0 ? whole.total : n;
  const bool gpu = x.device() == Device::CUDA;
  save_rng(ctx, gpu);
  for (int64_t r = 0; r < n; r += rows) {
    const int64_t m = std::min(rows, n - r);
    if (r > 0) rewind_rng(ctx, gpu);
    ctx.rng().set_row_shard(Rng::RowShard{row0 + r, m, total});
    body(r, m, r + m >= n);
  }
  ctx.rng().set_row_shard(whole);
}

}  // namespace pdnn
