// GradSync: the gradient all-reduce of data-parallel training over a model's flat gradient
// buffer (model.parameters().grads()), overlapped with the backward pass as PyTorch DDP does.
//
// Buckets: the layers with parameters, walked from the last to the first (the order backward
// finishes them), are grouped into buckets of about DistOptions::bucket_mb MB, the first one
// capped at 1 MB (DDP's bucket_cap_mb and first-bucket rule, per layer instead of per tensor).
// Parameters are laid out in layer order, so a bucket is one contiguous span of the flat
// buffer: no copies. As soon as backward has finished the lowest layer of a bucket (the
// model's backward hook), that span starts its all-reduce:
// - CPU: a communication thread runs MPI_Allreduce on the spans in order while the main thread
//   goes on with the backward of earlier layers (Open MPI progresses a collective only inside
//   MPI calls, so a thread that sits in one is what makes the overlap real); finish() waits.
// - GPU: ncclAllReduce on NCCL's own stream after an event on the compute stream; finish()
//   makes the compute stream wait for it. Nothing blocks the host, and the whole step, NCCL
//   included, can still be captured as one CUDA graph.
// With overlap off, finish() sums the whole buffer in one call after backward.
//
// The sum is a plain sum: the caller makes each rank's gradient its share of the global mean
// (the loss's backward divides by the global batch, not the shard), so uneven shards average
// correctly. Float sums in another order than one process's: see test_distributed.cpp for
// the tolerance this gives.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/context.h"
#include "dist/communicator.h"
#include "model/model.h"

namespace pdnn {

class GradSync {
 public:
  struct Bucket {
    size_t first_layer = 0, last_layer = 0;  // layers first..last (their parameters)
    int64_t offset = 0, count = 0;           // the span of the flat gradient buffer
  };
  // Time spent communicating, summed over steps (CPU only: on the GPU the host does not wait).
  struct Stats {
    int64_t steps = 0;
    double comm_ms = 0;  // inside MPI_Allreduce (the communication thread, or finish())
    double wait_ms = 0;  // the main thread waiting for it in finish(): what overlap did not hide
  };

  // The buckets of model's parameters for a cap of bucket_mb MB, in the order they start
  // (last layers first); one bucket of the whole buffer when overlap is off.
  static std::vector<Bucket> plan(Model& model, double bucket_mb, bool overlap);

  // Buckets over model.parameters() (on its device; built after model.to()). Installs the
  // model's backward hook when comm.options().overlap; the model must outlive this object.
  GradSync(Communicator& comm, Model& model, Context& ctx);
  ~GradSync();
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  // Around model.backward(): begin() arms the buckets, finish() sums what backward did not
  // start and waits for all (CPU) or joins the compute stream to them (GPU).
  void begin(Context& ctx);
  void finish(Context& ctx);
  // For a gradient already complete (its backward ran without begin()): begin() and every
  // bucket started at once, the same spans in the same order as during backward (the same
  // sums, bit for bit), so that the caller's next work overlaps them; finish() joins them.
  // The DCGAN's deferred G update (gan_trainer.h) starts G's sum under the next D step.
  void start_all(Context& ctx);
  bool overlapped() const { return overlap_; }

  const std::vector<Bucket>& buckets() const { return buckets_; }
  int64_t bytes_per_step() const;
  // "2 buckets (4.72 MB, 0.08 MB), overlapped with backward" or "one all-reduce of 4.80 MB";
  // `overlapped_with` replaces "backward" (start_all()'s callers: what their sums run under).
  std::string describe(const char* overlapped_with = "backward") const;
  Stats stats() const;

  struct Worker;

 private:
  void layer_done(Context& ctx, size_t layer);
  void launch(Context& ctx, size_t b);

  Communicator& comm_;
  Model& model_;
  Tensor grads_;  // view of the flat gradient buffer
  bool overlap_;
  std::vector<Bucket> buckets_;
  size_t next_ = 0;  // buckets launched this step
  bool armed_ = false;
  std::unique_ptr<Worker> worker_;  // CPU overlap: the communication thread
  Stats stats_;
};

}  // namespace pdnn
