// plan_step_memory (step_memory.h).
#include "train/step_memory.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "core/cuda_state.h"
#include "core/error.h"

namespace pdnn {

namespace {

// Nominal rates the layer times are estimated at, until they are measured: fp32 convolutions
// on an H100-class GPU reach about this (half its FMA peak); a CPU core a few tens of GFLOP/s.
constexpr double kGpuGflops = 25000.0, kCpuGflopsPerThread = 40.0;
// Bytes per second the optimizer's update streams (parameters, gradients, state) at.
constexpr double kGpuUpdateGbS = 1500.0, kCpuUpdateGbS = 10.0;
// Bandwidth assumed where none can be measured (the CPU: a plan of what a GPU would do).
constexpr double kAssumedCopyGbS = 20.0;

double ms_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// One CSV line's fields (double quotes group commas, as the profiler writes shapes).
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> f(1);
  bool quoted = false;
  for (char c : line) {
    if (c == '"') quoted = !quoted;
    else if (c == ',' && !quoted) f.emplace_back();
    else if (c != '\r') f.back() += c;
  }
  return f;
}

bool parse_ms(const std::string& s, double* v) {
  char* end = nullptr;
  *v = std::strtod(s.c_str(), &end);
  return !s.empty() && *end == '\0' && *v >= 0 && *v < 1e9;
}

}  // namespace

void read_layer_times(StepMem& m, const std::string& path) {
  std::ifstream in(path);
  PDNN_CHECK(in.good(), "--layer-times %s: cannot be read", path.c_str());
  std::string line;
  std::getline(in, line);
  PDNN_CHECK(line.rfind("layer,kind,output_shape,fwd_ms,bwd_ms,update_ms", 0) == 0,
             "--layer-times %s: not a --profile CSV (its header is '%s')", path.c_str(),
             line.c_str());
  double update = 0;
  int rows = 0;
  for (int n = 2; std::getline(in, line); ++n) {
    const std::vector<std::string> f = csv_fields(line);
    double fwd = 0, bwd = 0, upd = 0;
    PDNN_CHECK(f.size() >= 6 && parse_ms(f[3], &fwd) && parse_ms(f[4], &bwd) && parse_ms(f[5], &upd),
               "--layer-times %s line %d: not a profile row: '%s'", path.c_str(), n, line.c_str());
    update += upd;
    char* end = nullptr;
    const long i = std::strtol(f[0].c_str(), &end, 10);
    if (f[0].empty() || *end != '\0') continue;  // "other": outside the layers
    PDNN_CHECK(i >= 0 && i < static_cast<long>(m.layers.size()) &&
                   f[2] == m.layers[static_cast<size_t>(i)].out_shape,
               "--layer-times %s line %d: layer %s with output %s, but this run's layer %s has "
               "%s (profile the same model, batch and size)",
               path.c_str(), n, f[0].c_str(), f[2].c_str(), f[0].c_str(),
               i >= 0 && i < static_cast<long>(m.layers.size())
                   ? m.layers[static_cast<size_t>(i)].out_shape.c_str()
                   : "none");
    size_t k = static_cast<size_t>(i);
    while (k > 0 && m.layers[k].absorbed) --k;  // fused here: its time is its host's
    if (k == static_cast<size_t>(i)) m.layers[k].fwd_ms = m.layers[k].bwd_ms = 0;
    m.layers[k].fwd_ms += fwd;
    m.layers[k].bwd_ms += bwd;
    ++rows;
  }
  PDNN_CHECK(rows > 0, "--layer-times %s: no layer rows", path.c_str());
  m.update_ms = update;
}

CopyBandwidth measure_copy_bandwidth(Context& ctx, size_t bytes) {
  CopyBandwidth bw;
  if (!ctx.has_cuda()) return bw;
  const Shape s{static_cast<int64_t>(bytes / sizeof(float))};
  Tensor host(s, DType::F32, ctx.staging_allocator());
  Tensor dev = Tensor::empty(s, DType::F32, Device::CUDA, ctx);
  std::fill(host.data(), host.data() + host.numel(), 0.f);
  double best_h2d = 1e30, best_d2h = 1e30;
  for (int rep = 0; rep < 3; ++rep) {  // the first pair warms the path up; the best counts
    ctx.synchronize();
    auto t0 = std::chrono::steady_clock::now();
    copy_into(dev, host, ctx);
    ctx.synchronize();
    auto t1 = std::chrono::steady_clock::now();
    copy_into(host, dev, ctx);  // waits: it lands on the host
    auto t2 = std::chrono::steady_clock::now();
    best_h2d = std::min(best_h2d, ms_between(t0, t1));
    best_d2h = std::min(best_d2h, ms_between(t1, t2));
  }
  bw.h2d_gb_s = static_cast<double>(bytes) / (best_h2d * 1e6);
  bw.d2h_gb_s = static_cast<double>(bytes) / (best_d2h * 1e6);
  return bw;
}

namespace {

// The buffer a model carrying plan p out lays its outputs and gradients out in (bytes): the
// plan's live bytes as the model's own lifetimes pack them (model/memory_plan.h).
int64_t arena_bytes(const StepMem& m, const MemoryPlan& p) {
  std::vector<Placement> where;
  std::vector<int64_t> floats;
  std::vector<int> dropped, back;
  for (const SavedPlan& s : p.saved) {
    where.push_back(s.where);
    floats.push_back(m.layers[static_cast<size_t>(s.layer)].out_bytes / static_cast<int64_t>(sizeof(float)));
    dropped.push_back(s.dropped_after);
    back.push_back(s.back_at);
  }
  return layout_arena(floats, where, dropped, back).floats * static_cast<int64_t>(sizeof(float));
}

// A plan whose step, as the model runs it (with the plan's copy positions), fits o.limit_bytes: the planner's model of the
// lifetimes differs a little from the model's (an output kept to its own backward rather than
// its last reader's), so the planner's limit is lowered by the difference until it does.
MemoryPlan plan_for_model(const StepMem& m, const PlanOptions& o) {
  MemoryPlan p = plan_memory(m, o);
  PlanOptions tight = o;
  for (int tries = 0; tries < 8 && p.fits; ++tries) {
    const int64_t over = p.fixed_bytes + arena_bytes(m, p) - o.limit_bytes;
    if (over <= 0) return p;
    tight.limit_bytes -= over;
    if (tight.limit_bytes <= p.fixed_bytes) break;
    p = plan_memory(m, tight);
  }
  // Else the plan with the lowest peak (everything that can leave does) or the one that only
  // frees buffers after their last use, whichever is smaller as run, if it fits; if not, its
  // size as run is the smallest limit known to work.
  PlanOptions lowest = o, none = o;
  lowest.limit_bytes = 1;
  none.limit_bytes = 0;
  MemoryPlan best = plan_memory(m, lowest);
  int64_t best_run = best.fixed_bytes + arena_bytes(m, best);
  const MemoryPlan keep = plan_memory(m, none);
  if (const int64_t r = keep.fixed_bytes + arena_bytes(m, keep); r < best_run) best = keep, best_run = r;
  if (best_run <= o.limit_bytes) {
    best.fits = true;
    return best;
  }
  p.fits = false;
  p.min_limit_bytes = best_run;
  return p;
}

void apply_plan(Sequential& model, const StepMem& m, const MemoryPlan& p) {
  std::vector<Placement> where(model.size(), Placement::Keep);
  std::vector<int> dropped(model.size(), -1), back(model.size(), -1);
  int offloaded = 0, recomputed = 0;
  for (const SavedPlan& s : p.saved) {
    where[static_cast<size_t>(s.layer)] = s.where;
    dropped[static_cast<size_t>(s.layer)] = s.dropped_after;
    back[static_cast<size_t>(s.layer)] = s.back_at;
    offloaded += s.where == Placement::Offload;
    recomputed += s.where == Placement::Recompute;
  }
  model.set_placements(std::move(where), std::move(dropped), std::move(back));
  const int64_t arena = arena_bytes(m, p);
  std::printf("memory plan applied: %d layer(s) offloaded, %d recomputed; outputs and "
              "gradients in one buffer of %s laid out by lifetime (the step's peak about %s; "
              "the planner's own count %s), step %.1f ms predicted (GPU: copies on their own "
              "stream beside compute)\n",
              offloaded, recomputed, format_bytes(arena).c_str(),
              format_bytes(p.fixed_bytes + arena).c_str(), format_bytes(p.peak_bytes).c_str(),
              p.step_ms);
  std::fflush(stdout);
}

}  // namespace

bool plan_step_memory(Context& ctx, Sequential& model, Optimizer& opt, const Shape& batch,
                      const RunConfig& cfg) {
  if (!cfg.memory_plan && cfg.gpu_memory_limit <= 0) return false;
  const bool gpu = ctx.has_cuda();
  const double rate = gpu ? kGpuGflops : kCpuGflopsPerThread * ctx.threads();
  StepMem m = describe_step(model, batch, &opt, rate);
  int64_t state = 0;
  for (const LayerMem& l : m.layers) state += l.param_bytes + l.grad_bytes + l.opt_state_bytes;
  m.update_ms = 2.0 * static_cast<double>(state) / ((gpu ? kGpuUpdateGbS : kCpuUpdateGbS) * 1e6);
  const bool measured = !cfg.layer_times.empty();
  if (measured) read_layer_times(m, cfg.layer_times);
  PlanOptions o;
  o.limit_bytes = cfg.gpu_memory_limit;
  const CopyBandwidth bw = gpu ? measure_copy_bandwidth(ctx) : CopyBandwidth{};
  o.h2d_gb_s = gpu ? bw.h2d_gb_s : kAssumedCopyGbS;
  o.d2h_gb_s = gpu ? bw.d2h_gb_s : kAssumedCopyGbS;
  // Where the whole step fits the limit as it runs without a plan, it runs so; otherwise the
  // model carries a plan out (Sequential::set_placements).
  const MemoryPlan plain = plan_memory(m, o);
  const bool as_run = o.limit_bytes <= 0 || plain.keep_all_bytes <= o.limit_bytes;
  const MemoryPlan p = as_run ? plain : plan_for_model(m, o);
  if (cfg.memory_plan) {
    const std::string times = measured ? "layer times from " + cfg.layer_times
                                       : strprintf("layer times estimated from FLOPs at %.0f GFLOP/s", rate);
    std::printf("memory plan of a training step, input %s, on %s (%s; copy bandwidth %s):\n%s",
                batch.str().c_str(), gpu ? "the GPU" : "a GPU (planned on the CPU)",
                times.c_str(), gpu ? "measured" : "assumed", format_plan(m, p, o).c_str());
    std::fflush(stdout);
  }
  if (cfg.gpu_memory_limit <= 0) return true;
  require_fits(p, o, "--gpu-memory-limit");
  if (!as_run) apply_plan(model, m, p);
  if (gpu) ctx.allocator(Device::CUDA)->set_limit(static_cast<size_t>(cfg.gpu_memory_limit));
  return true;
}

}  // namespace pdnn
