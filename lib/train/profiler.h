// Per-layer profiler: forward and backward time of every layer and the optimizer's update
// (one fused kernel over all parameters: its own row), averaged over training steps, with each layer's share of the measured step time and its achieved GFLOP/s.
// Attach with ctx.set_profile_hook(&p); the model (model/model.h) and Optimizer::step report to it through
// the ProfileHook interface (core/profile_hook.h). Only work
// between begin_step() and end_step() is recorded, so evaluation passes do not pollute it.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/context.h"
#include "core/profile_hook.h"
#include "core/shape.h"

struct CUevent_st;

namespace pdnn {

// The two timing calls everything goes through. On the CPU: steady_clock. On the GPU:
// time_mark() records an event on the context's stream and ms_since() records another and
// waits for it, so a layer's time is its kernels' time (profiling therefore runs eagerly).
struct TimeMark {
  std::chrono::steady_clock::time_point t;
  CUevent_st* event = nullptr;
};
TimeMark time_mark(Context& ctx);
double ms_since(Context& ctx, const TimeMark& start);  // milliseconds from start to now

class Profiler : public ProfileHook {
 public:
  // One output row. Times are means per step in ms; share is (fwd+bwd+update) / step time;
  // gflops is 3 x forward FLOPs / (fwd + bwd time) (the usual "a training step costs three
  // forwards" convention, so a layer's rate is comparable with sgemm's), 0 without a backward.
  struct Row {
    std::string layer;  // index in its model ("3", or "D.3" for a named model)
    std::string kind, describe, output_shape;
    double fwd_ms = 0, bwd_ms = 0, update_ms = 0, share = 0, gflops = 0;
  };

  void begin_step(Context& ctx);
  void end_step(Context& ctx);
  bool in_step() const { return in_step_; }
  int64_t steps() const { return steps_; }
  double step_ms() const;  // mean measured step time
  void reset();

  // ProfileHook: a pass is timed from begin_pass() to its end_*() call.
  void begin_pass(Context& ctx) override;
  void end_forward(Context& ctx, const ProfiledForward& f) override;
  void end_backward(Context& ctx, const void* key) override;
  void end_update(Context& ctx, const std::string& label, const std::string& optimizer) override;

  // Rows in the order layers were first seen, then an "other" row: step time not spent inside
  // any layer (loss, zero_grad, data handling, timing overhead), its time in the fwd_ms column.
  std::vector<Row> rows() const;
  // Human-readable table with a header line (steps, mean step ms) and a total line.
  std::string table() const;
  // CSV: layer,kind,output_shape,fwd_ms,bwd_ms,update_ms,share,gflops,workspace_limit_bytes
  // (written atomically). workspace_limit_bytes: the GPU's shared workspace limit the layers
  // ran under (a plan's, --least-workspace's, --workspace-held's; 0: none), the same on every
  // row, so that a plan reading the times knows which algorithms they are of.
  void write_csv(const std::string& path, int64_t workspace_limit_bytes = 0) const;

 private:
  struct Entry {
    std::string label, kind, describe;
    Shape out;
    double fwd_ms = 0, bwd_ms = 0, update_ms = 0, fwd_flops = 0;
  };
  Entry* find(const void* key);

  std::vector<Entry> entries_;
  std::unordered_map<const void*, size_t> index_;  // layer, or the update label's interned copy
  std::unordered_map<std::string, std::string> update_keys_;
  TimeMark step_start_{}, pass_start_{};
  double step_total_ms_ = 0;
  int64_t steps_ = 0;
  bool in_step_ = false;
};

}  // namespace pdnn
