// plan_step_memory (step_memory.h).
#include "train/step_memory.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/cuda_state.h"
#include "core/error.h"
#include "layers/conv2d.h"
#include "ops/conv/conv2d_algo.h"
#include "ops/optim.h"

namespace pdnn {

namespace {

// Nominal rates the layer times are estimated at, until they are measured: fp32 convolutions
// on an H100-class GPU reach about this (half its FMA peak); a CPU core a few tens of GFLOP/s.
constexpr double kGpuGflops = 25000.0, kCpuGflopsPerThread = 40.0;
// Bytes per second the optimizer's update streams (parameters, gradients, state) at.
constexpr double kGpuUpdateGbS = 1500.0, kCpuUpdateGbS = 10.0;
// Bandwidths assumed where none can be measured (the CPU: a plan of what a GPU would do).
constexpr double kAssumedCopyGbS = 20.0, kAssumedDeviceGbS = 2000.0;

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

// A count of bytes (a whole number, >= 0).
bool parse_bytes(const std::string& s, int64_t* v) {
  char* end = nullptr;
  *v = std::strtoll(s.c_str(), &end, 10);
  return !s.empty() && *end == '\0' && *v >= 0;
}

// "(1,64,1024,1024)" -> {1, 64, 1024, 1024}; empty where it is not such a shape.
std::vector<int64_t> shape_dims(const std::string& s) {
  std::vector<int64_t> d;
  if (s.size() < 2 || s.front() != '(' || s.back() != ')') return d;
  std::stringstream in(s.substr(1, s.size() - 2));
  for (std::string x; std::getline(in, x, ',');) {
    char* end = nullptr;
    const long long v = std::strtoll(x.c_str(), &end, 10);
    if (x.empty() || *end != '\0' || v < 0) return {};
    d.push_back(v);
  }
  return d;
}

int64_t product(const std::vector<int64_t>& d) {
  int64_t p = 1;
  for (int64_t v : d) p *= v;
  return d.empty() ? 0 : p;
}

}  // namespace

bool read_layer_times(StepMem& m, const std::string& path, const char* flag,
                      int64_t* workspace_limit) {
  std::ifstream in(path);
  PDNN_CHECK(in.good(), "%s %s: cannot be read", flag, path.c_str());
  std::string line;
  std::getline(in, line);
  PDNN_CHECK(line.rfind("layer,kind,output_shape,fwd_ms,bwd_ms,update_ms", 0) == 0,
             "%s %s: not a --profile CSV (its header is '%s')", flag, path.c_str(),
             line.c_str());
  const bool has_limit = line.find(",workspace_limit_bytes") != std::string::npos;
  double update = 0, elems_was = 0, elems_now = 0;
  int64_t limit = 0;
  int rows = 0;
  bool scaled = false;
  for (int n = 2; std::getline(in, line); ++n) {
    const std::vector<std::string> f = csv_fields(line);
    double fwd = 0, bwd = 0, upd = 0;
    PDNN_CHECK(f.size() >= 6 && parse_ms(f[3], &fwd) && parse_ms(f[4], &bwd) && parse_ms(f[5], &upd),
               "%s %s line %d: not a profile row: '%s'", flag, path.c_str(), n, line.c_str());
    PDNN_CHECK(!has_limit || (f.size() >= 9 && parse_bytes(f[8], &limit)),
               "%s %s line %d: no workspace limit in the row's last column: '%s'", flag,
               path.c_str(), n, line.c_str());
    update += upd;
    // A layer's row is named by its label (a Sequential's: its index); "other" and the updates'
    // rows are outside the layers.
    size_t i = 0;
    while (i < m.layers.size() &&
           (m.layers[i].label.empty() ? std::to_string(m.layers[i].index) : m.layers[i].label) != f[0])
      ++i;
    const bool number = !f[0].empty() && f[0].find_first_not_of("0123456789") == std::string::npos;
    if (i == m.layers.size() && !number) continue;
    // Another batch or size of the same model: the times scale with the layer's output
    // elements (its channels, and so its work per element, the same).
    const std::vector<int64_t> was = shape_dims(f[2]),
                               now = i < m.layers.size() ? shape_dims(m.layers[i].out_shape) : std::vector<int64_t>{};
    PDNN_CHECK(i < m.layers.size() && was.size() == now.size() && was.size() >= 2 && was[1] == now[1] &&
                   product(was) > 0,
               "%s %s line %d: layer %s with output %s, but this run's layer %s has "
               "%s (profile the same model; another batch or size is scaled, other channels "
               "are another model)",
               flag, path.c_str(), n, f[0].c_str(), f[2].c_str(), f[0].c_str(),
               i < m.layers.size() ? m.layers[i].out_shape.c_str() : "none");
    const double scale = static_cast<double>(product(now)) / static_cast<double>(product(was));
    scaled = scaled || f[2] != m.layers[i].out_shape;
    elems_was += static_cast<double>(product(was));
    elems_now += static_cast<double>(product(now));
    fwd *= scale;
    bwd *= scale;
    size_t k = i;
    // Fused into its input: its time is its host's.
    while (m.layers[k].absorbed)
      k = m.layers[k].inputs.empty() ? k - 1 : static_cast<size_t>(m.layers[k].inputs[0]);
    if (k == i) m.layers[k].fwd_ms = m.layers[k].bwd_ms = 0;
    m.layers[k].fwd_ms += fwd;
    m.layers[k].bwd_ms += bwd;
    ++rows;
  }
  PDNN_CHECK(rows > 0, "%s %s: no layer rows", flag, path.c_str());
  m.update_ms = update;
  if (workspace_limit)
    *workspace_limit =
        static_cast<int64_t>(static_cast<double>(limit) * elems_now / std::max(elems_was, 1.0));
  return scaled;
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

double measure_host_update_gb_s(Context& ctx, int64_t floats) {
  Tensor g(Shape{floats}), w(Shape{floats}), sum(Shape{floats});
  g.fill(1e-3f);
  w.fill(0.5f);
  sum.fill(0.f);
  Tensor step(Shape{1}, DType::I64);
  step.data<int64_t>()[0] = 1;
  const AdagradArgs a{0.01, 0.0, 0.f, 1e-10f};
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {  // the first warms the pages and the threads up
    auto t0 = std::chrono::steady_clock::now();
    ops::adagrad_update(ctx, a, step, g, w, sum);
    best = std::min(best, ms_between(t0, std::chrono::steady_clock::now()));
  }
  return 5.0 * 4.0 * static_cast<double>(floats) / (best * 1e6);  // g, w, sum in; w, sum out
}

double measure_device_gb_s(Context& ctx, size_t bytes) {
  if (!ctx.has_cuda()) return 0;
  const Shape s{static_cast<int64_t>(bytes / sizeof(float))};
  Tensor a = Tensor::empty(s, DType::F32, Device::CUDA, ctx);
  Tensor b = Tensor::empty(s, DType::F32, Device::CUDA, ctx);
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    ctx.synchronize();
    auto t0 = std::chrono::steady_clock::now();
    copy_into(b, a, ctx);
    ctx.synchronize();
    best = std::min(best, ms_between(t0, std::chrono::steady_clock::now()));
  }
  return 2.0 * static_cast<double>(bytes) / (best * 1e6);  // read and written
}

void apply_memory_plan(Context& ctx, Model& model, Optimizer& opt, const StepMem& m,
                       const MemoryPlan& p, int64_t state_chunk_bytes) {
  // The optimizer's state first: on the device (now, not at the first update), or on the host.
  StateOffload off;
  off.mode = p.state.mode == StateMode::Host ? OffloadMode::Host : OffloadMode::Stream;
  for (int j : p.state.params) off.params.push_back(m.params[static_cast<size_t>(j)].index);
  off.param_layers = model.param_layers();
  off.chunk_floats = state_chunk_bytes / static_cast<int64_t>(sizeof(float));
  opt.place_state(ctx, off.params.empty() ? nullptr : &off);
  std::vector<Placement> where(model.size(), Placement::Keep);
  std::vector<int> dropped(model.size(), -1), back(model.size(), -1);
  for (size_t k = 0; k < p.saved.size(); ++k) {
    const SavedPlan& s = p.saved[k];
    const size_t i = static_cast<size_t>(s.layer);
    where[i] = s.where;
    dropped[i] = s.dropped_after;
    back[i] = s.back_at;
    model.layer(i).set_keep_argmax(!(k < p.argmax_again.size() && p.argmax_again[k]));
  }
  model.set_placements(std::move(where), std::move(dropped), std::move(back));
  // (One micro-batch: the whole batch's rows, which bound the evaluation's forwards too, so
  // that they fit the step's buffer.)
  model.set_micro_batch(p.micro_batches > 1 ? p.micro_rows : m.batch_rows);
}

namespace {

int count_moved(const MemoryPlan& p, Placement where) {
  int n = 0;
  for (const SavedPlan& s : p.saved) n += s.where == where;
  return n;
}

// The host's available memory (/proc/meminfo's MemAvailable: free pages and what the page
// cache can give back), bytes; 0 where unknown.
int64_t host_available_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string line;
  long long kib = 0;
  while (std::getline(f, line))
    if (std::sscanf(line.c_str(), "MemAvailable: %lld kB", &kib) == 1) return static_cast<int64_t>(kib) * 1024;
  return 0;
}

// The evaluation's batch on the device and its loss's buffers, bytes (0: no evaluation).
int64_t eval_bytes_of(Model& model, const Shape& batch, int64_t eval_batch) {
  if (eval_batch <= 0) return 0;
  const int64_t e = eval_batch, f = static_cast<int64_t>(sizeof(float));
  auto block = device_block_bytes;
  // The logits of one row, and its labels: one, or one per pixel of a map (N,K,H,W).
  const Shape out = model.output_shape(batch.with_n(1));
  const int64_t classes = out.numel(), labels = out.numel() / (out.rank() >= 2 ? out[1] : 1);
  return block(e * (batch.numel() / batch.n()) * f) + block(e * labels * 4) +
         block(e * classes * f) + block(e * labels * f) + block(e * labels * 4) + 512;
}

// The step's memory as this run's plans describe it: describe_step at `rows` of the batch on
// the run's device (the convolutions' workspace depends on the GPU's multiprocessors and the
// algorithms its policy lets them run, Layer::backward_needs; a CPU context keeps no policy, so
// a plan made there takes the flag's; the step shell's staging buffers hold the batch a second
// time, train/step_shell.h), and on the GPU the CUDA context (`context` bytes) and cuBLAS's
// workspace (on the CPU where --plan-context asks for them: cfg.plan_context bytes of
// context), the evaluation's buffers, and a loss's buffers beyond the cross-entropy's
// (cfg.loss_buffers). as_run: the layers as they ran (PlanFor::as_run).
StepMem describe_run_step(Context& ctx, Model& model, Optimizer& opt, const Shape& batch,
                          int64_t rows, const RunConfig& cfg, int64_t eval_batch, double rate,
                          double device_gb_s, int64_t context, bool as_run = false) {
  const bool gpu = ctx.has_cuda(), as_gpu = gpu || cfg.plan_context >= 0;
  StepMem m = describe_step(model, batch.with_n(rows), &opt, rate, batch.n(), device_gb_s,
                            ctx.precision(), as_gpu && cfg.overlap_batch_copy ? 2 : 1,
                            gpu ? ctx.cuda().info().sm_count : kPlanGpuSms,
                            gpu ? ctx.tuning().policy() : cfg.conv_algo, as_run,
                            gpu_conv_cudnn_least(ctx));
  if (gpu) {
    m.context_bytes = context;
    m.cublas_bytes = static_cast<int64_t>(CudaState::cublas_workspace_bytes());
  } else if (cfg.plan_context >= 0) {
    m.context_bytes = cfg.plan_context;
    m.context_given = true;
    m.cublas_bytes = static_cast<int64_t>(CudaState::kCublasWorkspaceBytes);
  }
  m.eval_bytes = eval_bytes_of(model, batch, eval_batch);
  if (cfg.loss_buffers)  // a loss beyond the cross-entropy (segment's Dice loss)
    for (const int64_t b : cfg.loss_buffers(model.output_shape(batch.with_n(rows))))
      m.loss_bytes += device_block_bytes(b);
  return m;
}

}  // namespace

bool plan_step_memory(Context& ctx, Model& model, Optimizer& opt, const Shape& batch,
                      const RunConfig& cfg, int64_t eval_batch, MemoryPlan* plan) {
  const bool gpu = ctx.has_cuda();
  if (!cfg.memory_plan && cfg.gpu_memory_limit <= 0 && !gpu) return false;
  const double rate = gpu ? kGpuGflops : kCpuGflopsPerThread * ctx.threads();
  PlanOptions o;
  o.limit_bytes = cfg.gpu_memory_limit;
  o.device_gb_s = kAssumedDeviceGbS;  // (measured below where a plan is made)
  // What the process holds outside the allocator (cuDNN's handle made first when it may be
  // used); the measurements' buffers given back.
  int64_t context = 0;
  if (gpu) {
    if (ctx.tuning().policy() == "auto" || ctx.tuning().policy() == "cudnn") ctx.cuda().cudnn();
    context = static_cast<int64_t>(ctx.cuda().context_bytes());
    ctx.allocator(Device::CUDA)->trim();
  }
  const int64_t n = batch.n();
  const bool measured = !cfg.layer_times.empty();
  StepMem timed, timed_least, timed_mid, timed_wide;  // the profiles' times, at the whole batch
  int64_t mid_ws = -1;  // the workspace timed_mid's profile held, scaled to this run
  bool times_scaled = false;  // ... measured at another batch or size
  auto describe = [&](int64_t rows) {
    StepMem m = describe_run_step(ctx, model, opt, batch, rows, cfg, eval_batch, rate,
                                  o.device_gb_s, context);
    int64_t state = 0;
    for (const LayerMem& l : m.layers) state += l.param_bytes + l.grad_bytes + l.opt_state_bytes;
    m.update_ms = 2.0 * static_cast<double>(state) / ((gpu ? kGpuUpdateGbS : kCpuUpdateGbS) * 1e6);
    if (!timed.layers.empty()) {  // the profiles' times (once read, below), in proportion to the rows
      const double share = static_cast<double>(rows) / static_cast<double>(n);
      for (size_t i = 0; i < m.layers.size(); ++i) {
        LayerMem& l = m.layers[i];
        l.fwd_ms = timed.layers[i].fwd_ms * share;
        l.bwd_ms = timed.layers[i].bwd_ms * share;
        if (!timed_least.layers.empty()) {
          l.least_fwd_ms = timed_least.layers[i].fwd_ms * share;
          l.least_bwd_ms = timed_least.layers[i].bwd_ms * share;
          if (!timed_mid.layers.empty()) {
            l.mid_fwd_ms = timed_mid.layers[i].fwd_ms * share;
            l.mid_bwd_ms = timed_mid.layers[i].bwd_ms * share;
            l.mid_workspace_bytes = static_cast<int64_t>(static_cast<double>(mid_ws) * share);
          }
        }
        // Past 32-bit images the implicit GEMM runs the layer under any workspace: its times.
        if (l.past_32bit && !timed_wide.layers.empty()) {
          l.fwd_ms = l.least_fwd_ms = timed_wide.layers[i].fwd_ms * share;
          l.bwd_ms = l.least_bwd_ms = timed_wide.layers[i].bwd_ms * share;
          l.mid_fwd_ms = l.mid_bwd_ms = -1;
        }
      }
      m.update_ms = timed.update_ms;
    }
    return m;
  };
  // Without a limit, a step that may not fit the GPU as its layers run it by default (every
  // convolution keeping its columns: the U-Net at batch 1 from 3072 x 3072 on an H200) is
  // planned under the device's memory, as if the flag had said it; one that fits runs as it is.
  if (gpu && o.limit_bytes <= 0) {
    const int64_t device = static_cast<int64_t>(ctx.cuda().info().total_memory);
    int64_t most = 0;
    o.limit_bytes = device_limit_for_uncapped(describe(n), device, &most);
    if (o.limit_bytes > 0) {
      std::printf("memory: without a limit this training step may take up to %s (every "
                  "convolution keeping its columns for backward, the fastest algorithms' "
                  "workspace), past the GPU's %s: it is planned under %s instead "
                  "(--gpu-memory-limit sets the limit)\n",
                  format_bytes(most).c_str(), format_bytes(device).c_str(),
                  format_bytes(o.limit_bytes).c_str());
      std::fflush(stdout);
    }
  }
  const bool capped = o.limit_bytes > 0;
  // Under a limit, convolutions put dy through their activation in place (on the GPU: no
  // algorithm then needs a copy of it in the workspace; the CPU's backward ignores it, and a
  // plan made there counts the GPU's step), and keep no columns for backward.
  if (capped || (gpu && (cfg.least_workspace || cfg.workspace_held > 0)))
    for (size_t i = 0; i < model.size(); ++i)
      if (auto* c = dynamic_cast<Conv2d*>(&model.layer(i))) {
        c->set_mask_dy_in_place(true);
        c->set_keep_columns(false);
      }
  // --least-workspace: the workspace held to what every layer runs in, as the tightest plan
  // holds it, so that a --profile times the algorithms a capped step runs (the flag is refused
  // on the CPU: finish_run_flags). Under a plan too (below), whatever its limit leaves.
  // --workspace-held: as much, at least that least (the algorithms that fit it, as under a
  // plan whose limit leaves that workspace: for --layer-times-mid).
  const int64_t least = gpu && (cfg.least_workspace || cfg.workspace_held > 0)
                            ? least_workspace_bytes(describe(n))
                            : -1;
  if (least >= 0) {
    PDNN_CHECK(cfg.workspace_held == 0 || cfg.workspace_held >= least,
               "--workspace-held %s: below the least every layer runs in, %s", 
               format_bytes(cfg.workspace_held).c_str(), format_bytes(least).c_str());
    const int64_t held = cfg.workspace_held > 0 ? cfg.workspace_held : least;
    const size_t ws = static_cast<size_t>(held) / sizeof(float);
    ctx.workspace(Device::CUDA, ws);
    ctx.set_workspace_limit(Device::CUDA, ws);
    if (cfg.workspace_held > 0)
      std::printf("workspace held to %s (--workspace-held: the convolutions' algorithms that fit "
                  "it, as under a limit that leaves it; the least every layer runs in is %s)\n",
                  format_bytes(held).c_str(), format_bytes(least).c_str());
    else
      std::printf("workspace held to %s, the least every layer runs in (--least-workspace: the "
                  "convolutions' algorithms asking the least, as under a tight limit)\n",
                  format_bytes(least).c_str());
    std::fflush(stdout);
  }
  if (!cfg.memory_plan && !capped) return false;
  const CopyBandwidth bw = gpu ? measure_copy_bandwidth(ctx) : CopyBandwidth{};
  const double assumed = cfg.plan_copy_gb_s > 0 ? cfg.plan_copy_gb_s : kAssumedCopyGbS;
  o.h2d_gb_s = gpu ? bw.h2d_gb_s : assumed;
  o.d2h_gb_s = gpu ? bw.d2h_gb_s : assumed;
  o.device_gb_s = gpu ? measure_device_gb_s(ctx) : kAssumedDeviceGbS;
  o.host_update_gb_s = gpu && capped ? measure_host_update_gb_s(ctx) : kCpuUpdateGbS;
  if (gpu) ctx.allocator(Device::CUDA)->trim();
  if (measured) {
    const StepMem whole =  // (its layers' times are read)
        describe_run_step(ctx, model, opt, batch, n, cfg, 0, rate, o.device_gb_s, context);
    timed = whole;
    times_scaled = read_layer_times(timed, cfg.layer_times);
    if (!cfg.layer_times_least.empty()) {
      timed_least = whole;
      times_scaled = read_layer_times(timed_least, cfg.layer_times_least, "--layer-times-least") ||
                     times_scaled;
    }
    if (!cfg.layer_times_mid.empty()) {
      timed_mid = whole;
      times_scaled = read_layer_times(timed_mid, cfg.layer_times_mid, "--layer-times-mid",
                                      &mid_ws) ||
                     times_scaled;
      PDNN_CHECK(mid_ws > 0, "--layer-times-mid %s: its profile ran without a workspace limit "
                 "(make it with --workspace-held)", cfg.layer_times_mid.c_str());
    }
    if (!cfg.layer_times_wide.empty()) {
      timed_wide = whole;
      times_scaled = read_layer_times(timed_wide, cfg.layer_times_wide, "--layer-times-wide") ||
                     times_scaled;
    }
  }
  // On the GPU the host's memory bounds what the plan offloads: a workspace is not bought past
  // it, and the plan is held to it below (read once: the two must agree).
  const int64_t host_available = gpu ? host_available_bytes() : 0;
  o.host_limit_bytes = pinnable_host_bytes(host_available);
  const MemoryPlan p = plan_training_step(describe, n, o);
  if (plan) *plan = p;
  const StepMem m = describe(p.micro_batches > 1 ? p.micro_rows : n);
  if (cfg.memory_plan) {
    const std::string times =
        measured ? "layer times from " + cfg.layer_times +
                       (cfg.layer_times_least.empty()
                            ? ""
                            : " (where the workspace leaves a layer's faster algorithms out: " +
                                  cfg.layer_times_least +
                                  (cfg.layer_times_mid.empty()
                                       ? std::string()
                                       : "; where it holds " + format_bytes(mid_ws) + " or more: " +
                                             cfg.layer_times_mid) +
                                  ")") +
                       (cfg.layer_times_wide.empty()
                            ? ""
                            : strprintf(" (where a convolution's images pass 2^31 elements, %d "
                                        "layer(s) here: %s)",
                                        static_cast<int>(std::count_if(
                                            timed.layers.begin(), timed.layers.end(),
                                            [](const LayerMem& l) { return l.past_32bit; })),
                                        cfg.layer_times_wide.c_str())) +
                       (times_scaled ? ", measured at another size and scaled by each layer's output elements" : "")
                 : strprintf("layer times estimated from FLOPs at %.0f GFLOP/s", rate);
    std::printf("memory plan of a training step, input %s, %s, on %s (%s; copy bandwidth %s%s):\n%s",
                batch.str().c_str(), precision_name(ctx.precision()),
                gpu ? "the GPU"
                    : strprintf("a GPU of %d multiprocessors (planned on the CPU)", kPlanGpuSms).c_str(),
                times.c_str(), gpu ? "measured" : "assumed",
                gpu ? strprintf(", device %.0f GB/s, host update %.1f GB/s measured", o.device_gb_s,
                                o.host_update_gb_s).c_str()
                    : "",
                format_plan(m, p, o).c_str());
    std::fflush(stdout);
  }
  if (!capped) return true;
  const char* flag = cfg.gpu_memory_limit > 0 ? "--gpu-memory-limit" : nullptr;
  require_fits(p, o, flag);
  require_host_fits(p, host_available, flag);
  apply_memory_plan(ctx, model, opt, m, p, o.state_chunk_bytes);
  // On the GPU, the workspace at the plan's budget, now, and never past it (the CPU's kernels
  // have workspaces of their own sizes: a plan made there is a GPU's).
  if (gpu) {
    const size_t ws = static_cast<size_t>(least >= 0 ? least : p.fixed.workspace) / sizeof(float);
    ctx.workspace(Device::CUDA, ws);
    ctx.set_workspace_limit(Device::CUDA, ws);
  }
  int args = 0;
  for (char c : p.argmax_again) args += c != 0;
  const auto waits = std::count_if(p.saved.begin(), p.saved.end(), [](const SavedPlan& s) { return s.waits; });
  std::printf("memory plan applied: %d layer(s) offloaded%s, %d recomputed, %d pool(s) find their "
              "argmax again; %s; optimizer state of %zu parameter(s) on the host (%s); the step's "
              "peak %s with the workspace at %s and the CUDA context's %s; step %.1f ms "
              "predicted\n",
              count_moved(p, Placement::Offload),
              waits ? strprintf(" (%d of them without overlap)", static_cast<int>(waits)).c_str() : "",
              count_moved(p, Placement::Recompute), args,
              p.micro_batches > 1
                  ? strprintf("%d micro-batches of %lld rows", p.micro_batches,
                              static_cast<long long>(p.micro_rows)).c_str()
                  : "the batch in one pass",
              p.state.params.size(), state_mode_name(p.state.mode),
              format_bytes(p.peak_bytes).c_str(), format_bytes(p.fixed.workspace).c_str(),
              format_bytes(context).c_str(), p.step_ms);
  std::fflush(stdout);
  if (gpu)
    ctx.allocator(Device::CUDA)
        ->set_limit(static_cast<size_t>(std::max<int64_t>(o.limit_bytes - context, 0)));
  return true;
}

void report_plan_as_run(Context& ctx, Model& model, Optimizer& opt, const Shape& batch,
                        const RunConfig& cfg, int64_t eval_batch) {
  if (!cfg.memory_plan || !ctx.has_cuda() || ctx.workspace_limit(Device::CUDA) != 0) return;
  const int64_t n = batch.n();
  StepMem m = describe_run_step(ctx, model, opt, batch, n, cfg, eval_batch, kGpuGflops,
                                kAssumedDeviceGbS,
                                static_cast<int64_t>(ctx.cuda().context_bytes()), /*as_run=*/true);
  m.workspace_held = static_cast<int64_t>(ctx.workspace_size(Device::CUDA) * sizeof(float));
  int convs = 0, keeping = 0;
  int64_t columns = 0;
  for (size_t i = 0; i < model.size(); ++i)
    if (dynamic_cast<Conv2d*>(&model.layer(i))) {
      ++convs;
      keeping += m.layers[i].scratch_bytes > 0;
      columns += m.layers[i].scratch_bytes;
    }
  PlanOptions o;  // no limit: nothing moves
  const MemoryPlan p = plan_training_step([&](int64_t) { return m; }, n, o);
  // Without a plan the executor keeps every buffer all step (MemoryPlan::keep_all_bytes): that,
  // not the lifetime layout's peak, is what an uncapped step holds.
  const AllocStats s = ctx.device_alloc_stats();
  std::printf("memory plan as run: peak %s with the algorithms chosen, every buffer kept all step "
              "(columns kept for backward by %d of %d convolutions, %s; the workspace as held, "
              "%s; the CUDA context's %s; laid out by lifetime it would be %s); the plan before "
              "the choice counted every convolution's columns and the least workspace; the "
              "allocator holds %s now (%s asked: a cached block handed out may be larger), its "
              "peak since the fit %s (%s asked; the context not in either)\n",
              format_bytes(p.keep_all_bytes).c_str(), keeping, convs,
              format_bytes(columns).c_str(), format_bytes(m.workspace_held).c_str(),
              format_bytes(m.context_bytes).c_str(), format_bytes(p.peak_bytes).c_str(),
              format_bytes(static_cast<int64_t>(s.in_use)).c_str(),
              format_bytes(static_cast<int64_t>(s.in_use_asked)).c_str(),
              format_bytes(static_cast<int64_t>(s.peak_in_use)).c_str(),
              format_bytes(static_cast<int64_t>(s.peak_in_use_asked)).c_str());
  std::fflush(stdout);
}

}  // namespace pdnn
