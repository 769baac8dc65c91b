// StepGraph: runs a training step on the GPU as one replayed CUDA graph, for any step made of
// kernels on the context's stream and any number of optimizers (the DCGAN's two); the step
// shell (step_shell.h) runs every task's step through it.
//
// A step runs eagerly first whenever the graph's key (the batch shape) is new or device memory
// changed hands since the graph was made (an eager forward with a larger batch regrew buffers):
// that sizes every buffer and warms the caching allocator, so the capture that follows
// allocates and frees nothing. The capture records the step without running it; its host-side
// bookkeeping (each optimizer's step count, the context's RNG position) is undone and, at each
// replay, moved on by what one step moves it (their device copies move inside the graph). A
// capture that sees device memory change hands is dropped and the step run eagerly; after 3 such
// captures in a row the step runs eagerly for good, with one line saying so. A change of an
// optimizer's learning rate (captured as a kernel argument) makes a new capture.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/context.h"
#include "core/shape.h"
#include "optim/optimizer.h"

namespace pdnn {

class CudaGraph;

class StepGraph {
 public:
  // What a captured step is specific to: the batch shape and, data-parallel, the rows of the
  // global batch this rank holds (row0 of total: a dropout draw's offsets are baked into the
  // graph). A Shape converts to a key with no shard.
  struct Key {
    Shape shape;
    int64_t row0 = 0, total = 0;
    Key() = default;
    Key(const Shape& s) : shape(s) {}  // NOLINT(google-explicit-constructor): on purpose
    Key(const Shape& s, int64_t r0, int64_t t) : shape(s), row0(r0), total(t) {}
    bool operator==(const Key& o) const {
      return shape == o.shape && row0 == o.row0 && total == o.total;
    }
    bool operator!=(const Key& o) const { return !(*this == o); }
  };

  // The optimizers the step updates (their host step counts are kept right); they must outlive
  // this object. `what` names the step in the message printed when graphs are given up.
  StepGraph(std::vector<Optimizer*> opts, const char* what);
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  // Runs step() once, on ctx's GPU stream: eagerly or as a replay of its graph (captured first
  // when needed). key: what the captured step depends on besides the memory (the batch shape,
  // and a data-parallel rank's rows). Every buffer the step reads or writes must keep its
  // address between calls: copy the batch into the step's own device buffers before run()
  // (that copy is not part of the graph).
  void run(Context& ctx, const Key& key, const std::function<void()>& step);
  // Drops the graph (the step changed in a way the key does not show: data-parallel training
  // adds the gradient all-reduce); the next run() starts with an eager step.
  void reset();

  int64_t replays() const { return replays_; }
  int64_t captures() const { return captures_; }

 private:
  void fit_workspace(Context& ctx);

  std::vector<Optimizer*> opts_;
  const char* what_;
  std::unique_ptr<CudaGraph> graph_;
  Key graph_key_, warm_key_;
  uint64_t graph_frees_ = 0, warm_frees_ = 0;
  int failures_ = 0;
  static constexpr int kMaxFailures = 3;
  std::vector<float> graph_lrs_;
  std::vector<int64_t> step_delta_;  // per replay: each optimizer's steps on the host side
  uint64_t rng_delta_ = 0;           // ... and the RNG draws
  int64_t replays_ = 0, captures_ = 0;
};

}  // namespace pdnn
