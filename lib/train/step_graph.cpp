// StepGraph (step_graph.h).
#include "train/step_graph.h"

#include <cstdio>

#include "core/error.h"
#include "core/cuda_state.h"
#include "core/cuda_graph.h"

namespace pdnn {

StepGraph::StepGraph(std::vector<Optimizer*> opts, const char* what)
    : opts_(std::move(opts)), what_(what), graph_(std::make_unique<CudaGraph>()) {
  for (Optimizer* o : opts_) PDNN_CHECK(o != nullptr, "StepGraph (%s): null optimizer", what);
}

StepGraph::~StepGraph() = default;

void StepGraph::reset() {
  graph_->reset();
  graph_key_ = Key{};
  warm_key_ = Key{};
}

// After an eager step, before the capture: without a memory plan's limit the convolutions'
// chooser grew the workspace to the largest candidate it timed, chosen or not (the U-Net at
// 1024, batch 1, on an H200: the step's peak 3.2 GiB over its plan, which counts the least);
// the graph keeps only what the chosen algorithms and the other ops asked for.
void StepGraph::fit_workspace(Context& ctx) {
  if (ctx.workspace_limit(Device::CUDA) != 0) return;  // a plan sized it: kept as planned
  const size_t held = ctx.workspace_size(Device::CUDA);
  // The peak so far is the timing's; the fit gives the cached blocks, the old workspace's among
  // them, back to the driver and restarts the peak, which from here counts the steps, as the
  // plan describes them (a captured step allocates nothing, so every buffer it uses is held
  // now).
  const size_t timing_peak = ctx.device_alloc_stats().peak_in_use;
  if (ctx.fit_workspace(Device::CUDA) == 0) return;
  std::printf("%s: workspace %.1f -> %.1f MiB: what the timing of the algorithms left beyond "
              "what the chosen ones ask is given back; the device's peak so far, the timing's, "
              "%.2f GiB; the peak counts the steps from here\n",
              what_, static_cast<double>(held) * 4.0 / 1048576.0,
              static_cast<double>(ctx.workspace_size(Device::CUDA)) * 4.0 / 1048576.0,
              static_cast<double>(timing_peak) / 1073741824.0);
}

void StepGraph::run(Context& ctx, const Key& key, const std::function<void()>& step) {
  PDNN_CHECK(ctx.has_cuda(), "StepGraph (%s): CUDA graphs need a GPU context", what_);
  if (failures_ >= kMaxFailures) {
    step();
    return;
  }
  const AllocStats a0 = ctx.device_alloc_stats();
  const uint64_t frees = a0.frees;
  std::vector<float> lrs;
  for (Optimizer* o : opts_) lrs.push_back(o->lr());
  const bool valid =
      graph_->ready() && graph_key_ == key && graph_frees_ == frees && graph_lrs_ == lrs;
  if (!valid) {
    if (warm_key_ != key || warm_frees_ != frees || (graph_->ready() && graph_key_ != key)) {
      warm_key_ = key;
      step();
      fit_workspace(ctx);
      warm_frees_ = ctx.device_alloc_stats().frees;
      return;
    }
    std::vector<int64_t> steps0;
    for (Optimizer* o : opts_) steps0.push_back(o->steps());
    const uint64_t rng0 = ctx.rng().counter();
    CUstream_st* s = ctx.cuda().stream();
    graph_->begin_capture(s);
    try {
      step();
      graph_->end_capture(s);
    } catch (...) {
      graph_->abort_capture(s);
      graph_->reset();
      throw;
    }
    step_delta_.clear();
    for (size_t i = 0; i < opts_.size(); ++i) {
      step_delta_.push_back(opts_[i]->steps() - steps0[i]);
      opts_[i]->set_host_steps(steps0[i]);
    }
    rng_delta_ = ctx.rng().counter() - rng0;
    ctx.rewind_rng(rng0);
    const AllocStats a1 = ctx.device_alloc_stats();
    if (a1.frees != frees || a1.allocs != a0.allocs) {
      graph_->reset();
      warm_key_ = Key{};
      if (++failures_ == kMaxFailures)
        std::fprintf(stderr,
                     "%s: device memory was allocated or freed inside the training step (%llu "
                     "allocations, %llu frees during capture): running without a CUDA graph "
                     "from here on\n",
                     what_, static_cast<unsigned long long>(a1.allocs - a0.allocs),
                     static_cast<unsigned long long>(a1.frees - a0.frees));
      step();
      return;
    }
    failures_ = 0;
    graph_key_ = key;
    graph_frees_ = frees;
    graph_lrs_ = lrs;
    ++captures_;
  }
  graph_->launch(ctx.cuda().stream());
  for (size_t i = 0; i < opts_.size(); ++i)
    opts_[i]->set_host_steps(opts_[i]->steps() + step_delta_[i]);
  ctx.mirror_rng_advance(rng_delta_);
  ++replays_;
}

}  // namespace pdnn
