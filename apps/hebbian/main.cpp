// W6 benchmark (SPEC.md, issue 10): an echo-state reservoir of n units trained by Oja's Hebbian
// rule at every step, x <- x + tanh(W x + win u_t) (or the leaky variant, --leak a), then
// W += lr (x x^T - diag(x)^2 W). Times T steps per point of a grid (n x T x dtype x threads),
// next to the memory-bandwidth floor measured in the same run, and appends median/min/max rows
// to a CSV. A run whose x or W turns non-finite (W6 as written is not leaky and W overflows on
// long runs) stops there, and its row says at which step.
//
// --drift: instead of timing, shows how far a run drifts from a float64 CPU run of the same
// problem as T grows (the recurrence amplifies rounding), e.g. float32 on the CPU, or on the GPU
// against both the CPU float64 and the CPU float32 runs.
#include <omp.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "workloads/hebbian/hebbian_problem.h"
#include "workloads/hebbian/stream.h"
#include "core/context.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/cuda_state.h"
#include "workloads/hebbian/hebbian_ops.h"
#include "workloads/hebbian/reservoir.h"
#include "run/csv.h"
#include "run/run_info.h"
#include "run/run_flags.h"
#include "run/timing.h"

namespace pdnn {
namespace {

using Clock = std::chrono::steady_clock;

const char* env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

struct Options {
  std::vector<std::string> dtypes = {"float32"};
  std::vector<int64_t> ns = {200, 1000, 2000};
  std::vector<int64_t> ts = {500, 5000, 44100};
  std::vector<int> threads;
  double leak = 0.0, lr = 1e-6;
  std::string device = "cpu";
  uint64_t seed = 1;
  int repeat = 1;
  int64_t chunk = 0;
  bool w_streamed = false;
  bool drift = false;
  std::string out = "runs/hebbian/hebbian.csv";
};

DType parse_dtype(const std::string& s) { return s == "float64" ? DType::F64 : DType::F32; }

// The progress line of one long run: rewritten in place on a terminal every 0.25 s, a line
// every 10 s in a log; nothing for runs shorter than 2 s.
class StepProgress {
 public:
  StepProgress(std::string what, int64_t total)
      : what_(std::move(what)), total_(total), tty_(isatty(STDOUT_FILENO)), t0_(Clock::now()), last_(t0_) {}
  void update(int64_t done) {
    const double el = seconds_since(t0_);
    if (el < 2.0 || std::chrono::duration<double>(Clock::now() - last_).count() < (tty_ ? 0.25 : 10.0)) return;
    last_ = Clock::now();
    shown_ = true;
    const double eta = done > 0 ? el * static_cast<double>(total_ - done) / done : 0.0;
    std::printf("%s  %s: step %lld/%lld (%.0f%%), %.1f us/step, ETA %d:%02d%s", tty_ ? "\r" : "",
                what_.c_str(), static_cast<long long>(done), static_cast<long long>(total_),
                100.0 * done / total_, 1e6 * el / std::max<int64_t>(done, 1),
                static_cast<int>(eta) / 60, static_cast<int>(eta) % 60, tty_ ? "\033[K" : "\n");
    std::fflush(stdout);
  }
  void finish() {
    if (tty_ && shown_) std::printf("\r\033[K");
  }

 private:
  std::string what_;
  int64_t total_;
  bool tty_, shown_ = false;
  Clock::time_point t0_, last_;
};

struct RunResult {
  double seconds = 0;
  int64_t first_bad = -1;  // first non-finite step, or -1
  int64_t steps_run = 0;   // steps timed: T, or the step where a non-finite value appeared
};

// T steps from the initial state, in calls of `chunk` steps (a progress line between them).
template <typename T>
RunResult run_steps(Reservoir<T>& r, int64_t steps, int64_t chunk, const std::string& what) {
  r.reset();
  StepProgress progress(what, steps);
  RunResult res;
  const auto t0 = Clock::now();
  for (int64_t first = 0; first < steps; first += chunk) {
    const int64_t len = std::min(chunk, steps - first);
    const int64_t bad = r.advance(first, len);
    if (bad >= 0) {
      res.first_bad = first + bad;
      break;
    }
    progress.update(first + len);
  }
  res.seconds = seconds_since(t0);
  progress.finish();
  res.steps_run = res.first_bad >= 0 ? res.first_bad : steps;
  return res;
}

// The floor: GB/s of an in-place scale (and of a copy) over an array the size of W, split over
// the threads like W's rows, a barrier per pass: the fastest of 5 batches of passes (~0.1 s of
// traffic each at 2 GB/s or more), since a floor is what the machine can do, and other work on
// a shared machine only ever slows a batch down.
struct Floor {
  double scale_gbps, copy_gbps;
};

template <typename T>
Floor measure_floor(int64_t n, int threads) {
  const int64_t elems = n * n;
  const double bytes = 2.0 * elems * sizeof(T);
  const int64_t passes = std::clamp<int64_t>(static_cast<int64_t>(2e8 / bytes), 10, 2000);
  std::vector<T> a(static_cast<size_t>(elems), T(1)), b(static_cast<size_t>(elems), T(2));
  volatile T one = T(1);  // a factor the compiler cannot fold away
  cpu::stream_scale(a.data(), T(one), elems, 2, CpuExec{threads});  // warm: pages, caches
  cpu::stream_copy(b.data(), a.data(), elems, 2, CpuExec{threads});
  double scale_s = INFINITY, copy_s = INFINITY;
  for (int batch = 0; batch < 5; ++batch) {
    auto t0 = Clock::now();
    cpu::stream_scale(a.data(), T(one), elems, passes, CpuExec{threads});
    scale_s = std::min(scale_s, seconds_since(t0));
    t0 = Clock::now();
    cpu::stream_copy(b.data(), a.data(), elems, passes, CpuExec{threads});
    copy_s = std::min(copy_s, seconds_since(t0));
  }
  return {bytes * passes / scale_s / 1e9, bytes * passes / copy_s / 1e9};
}

struct Point {
  int64_t steps;
  int threads;
  std::vector<RunResult> runs;
  std::vector<Floor> floors;
};

std::string fmt_or_empty(double v, int digits) {
  return std::isfinite(v) ? fmt(v, digits) : std::string();
}

// Rates with 4 significant digits, not a fixed count of decimals: a run slowed by a loaded
// machine (or a large n) can move less than 0.005 GB/s, which "%.2f" would print as 0.00.
std::string rate_or_empty(double gbps) {
  return std::isfinite(gbps) ? strprintf("%.4g", gbps) : std::string();
}

// All points of one (n, dtype): repeats interleaved (rep 1 of every point, then rep 2, ...), the
// floor measured just before each run at its thread count, so both see the same machine state.
// gpu_ctx: the GPU's context with --device cuda, else null.
template <typename T>
void bench_n_dtype(const Options& o, const HebbianProblem& pb, const RunInfo& info,
                   const std::string& device_name, Context* gpu_ctx, CsvWriter* csv) {
  const int64_t n = pb.n;
  const char* dtype = dtype_name(std::is_same<T, float>::value ? DType::F32 : DType::F64);
  HebbianParams<T> p = hebbian_params<T>(n, o.lr, o.leak);
  p.w_on_chip = !o.w_streamed;
  const bool gpu = o.device == "cuda";
  std::string variant = "fused";
  if (gpu) variant = ops::hebbian_w_on_chip(*gpu_ctx, p) ? "w-on-chip" : "w-streamed";
  std::vector<Point> points;
  for (int64_t t : o.ts)
    for (int th : (gpu ? std::vector<int>{1} : o.threads)) points.push_back({t, th, {}, {}});
  const int64_t chunk = o.chunk > 0 ? o.chunk : (gpu ? 4096 : 256);

  std::unique_ptr<Reservoir<T>> gpu_res;
  if (gpu) {
    gpu_res = std::make_unique<Reservoir<T>>(*gpu_ctx, pb, p);
    gpu_res->advance(0, 2);  // untimed: loads the kernel (CUDA loads modules lazily)
  }
  for (int rep = 0; rep < o.repeat; ++rep)
    for (Point& pt : points) {
      const std::string what = strprintf("n=%lld T=%lld %s %s%s", static_cast<long long>(n),
                                         static_cast<long long>(pt.steps), dtype, o.device.c_str(),
                                         gpu ? "" : strprintf(" %d thr", pt.threads).c_str());
      if (gpu) {
        pt.runs.push_back(run_steps(*gpu_res, pt.steps, chunk, what));
      } else {
        pt.floors.push_back(measure_floor<T>(n, pt.threads));
        Context cpu_ctx(pt.threads);
        Reservoir<T> r(cpu_ctx, pb, p);
        pt.runs.push_back(run_steps(r, pt.steps, chunk, what));
      }
    }

  const double w_bytes = 2.0 * n * n * sizeof(T);  // W read and written once per step
  for (const Point& pt : points) {
    std::vector<double> us, secs, scale, copy;
    for (const RunResult& r : pt.runs) {
      secs.push_back(r.seconds);
      if (r.steps_run > 0) us.push_back(1e6 * r.seconds / r.steps_run);
    }
    for (const Floor& f : pt.floors) {
      scale.push_back(f.scale_gbps);
      copy.push_back(f.copy_gbps);
    }
    const RunResult& last = pt.runs.back();  // the same problem every repeat: same steps
    const TimingStats t = us.empty() ? TimingStats{NAN, NAN, NAN, 0} : timing_stats(us);
    const double w_gbps = w_bytes / (t.median * 1e-6) / 1e9;
    const double floor_gbps = scale.empty() ? NAN : timing_stats(scale).median;
    const double copy_gbps = copy.empty() ? NAN : timing_stats(copy).median;
    const double floor_us = w_bytes / (floor_gbps * 1e9) * 1e6;
    const double floor_us_min = scale.empty() ? NAN : w_bytes / (timing_stats(scale).max * 1e9) * 1e6;

    std::printf("%6lld %6lld %-8s %-5s %4s %10.1f %9.1f %9.1f %7.1f %7s %9s %9s  %s\n",
                static_cast<long long>(n), static_cast<long long>(pt.steps), dtype, o.device.c_str(),
                gpu ? "-" : std::to_string(pt.threads).c_str(), t.median, t.min, t.max, w_gbps,
                std::isfinite(floor_gbps) ? fmt(floor_gbps, 1).c_str() : "-",
                std::isfinite(floor_us) ? fmt(floor_us, 1).c_str() : "-",
                std::isfinite(floor_us_min) ? fmt(floor_us_min, 1).c_str() : "-",
                last.first_bad >= 0
                    ? strprintf("non-finite x or W at step %lld: timed the %lld steps before",
                                static_cast<long long>(last.first_bad),
                                static_cast<long long>(last.steps_run)).c_str()
                    : "");
    std::fflush(stdout);
    if (csv)
      csv->row({"pdnn", variant, o.device, dtype, std::to_string(n), std::to_string(pt.steps),
                std::to_string(pt.threads), fmt(o.leak, 3), strprintf("%g", o.lr),
                std::to_string(o.seed), std::to_string(pt.runs.size()),
                std::to_string(last.steps_run), std::to_string(last.first_bad),
                fmt(timing_stats(secs).median, 4), fmt_or_empty(t.median, 2),
                fmt_or_empty(t.min, 2), fmt_or_empty(t.max, 2), rate_or_empty(w_gbps),
                rate_or_empty(floor_gbps), fmt_or_empty(floor_us, 2), fmt_or_empty(floor_us_min, 2),
                rate_or_empty(copy_gbps),
                device_name, info.cpu_model, info.blas_core, info.git_rev, info.host,
                iso8601_utc_now()});
  }
}

// ---- --drift ------------------------------------------------------------------------------

// Steps the run under test and the CPU references side by side to each T of --t, and prints
// how far apart their states are. A non-finite value in any of them ends the comparison.
// gpu_ctx: the GPU's context with --device cuda, else null.
template <typename T>
void drift_n_dtype(const Options& o, const HebbianProblem& pb, const RunInfo& info,
                   const std::string& device_name, Context* gpu_ctx, CsvWriter* csv) {
  const bool gpu = o.device == "cuda";
  const char* dtype = dtype_name(std::is_same<T, float>::value ? DType::F32 : DType::F64);
  if (!gpu && std::is_same<T, double>::value) {
    std::printf("drift: float64 on the CPU is the reference itself: skipped\n");
    return;
  }
  const int threads = o.threads.back();
  HebbianParams<T> p = hebbian_params<T>(pb.n, o.lr, o.leak);
  p.w_on_chip = !o.w_streamed;
  Context cpu_ctx(threads);
  Reservoir<double> ref(cpu_ctx, pb, hebbian_params<double>(pb.n, o.lr, o.leak));
  Reservoir<T> test(gpu ? *gpu_ctx : cpu_ctx, pb, p);  // starts reset
  std::unique_ptr<Reservoir<T>> cpu_same;  // the CPU in the same dtype, for a GPU run
  if (gpu) cpu_same = std::make_unique<Reservoir<T>>(cpu_ctx, pb, p);
  std::printf("drift of %s %s from the CPU float64 run%s, n=%lld, leak %g:\n", o.device.c_str(), dtype,
              gpu ? " (and from the CPU run in the same dtype)" : "", static_cast<long long>(pb.n), o.leak);
  std::printf("%8s %12s %12s %10s %12s %10s%s\n", "T", "max|dx|", "max|x_ref|", "rel", "max|dW|", "rel",
              gpu ? "   max|dx| vs CPU same dtype   max|dW|" : "");
  std::vector<int64_t> ts = o.ts;
  std::sort(ts.begin(), ts.end());
  int64_t done = 0;
  for (int64_t t : ts) {
    const int64_t len = t - done;
    int64_t bad_ref = -1, bad = -1, bad_same = -1;
    if (len > 0) {
      bad_ref = ref.advance(done, len);
      bad = test.advance(done, len);
      if (gpu) bad_same = cpu_same->advance(done, len);
    }
    if (bad_ref >= 0 || bad >= 0 || bad_same >= 0) {
      std::printf("%8lld  a non-finite value appeared (at step %lld): the comparison ends here\n",
                  static_cast<long long>(t),
                  static_cast<long long>(done + std::max({bad_ref, bad, bad_same})));
      break;
    }
    done = t;
    const std::vector<double> xr = ref.x(), Wr = ref.W();
    const std::vector<T> x = test.x();
    const std::vector<T> W = test.W();
    const double dx = max_abs_diff(x, xr), sx = max_abs(xr), dW = max_abs_diff(W, Wr), sW = max_abs(Wr);
    double dx_same = NAN, dW_same = NAN;
    if (gpu) {
      dx_same = max_abs_diff(x, cpu_same->x());
      dW_same = max_abs_diff(W, cpu_same->W());
    }
    std::printf("%8lld %12.3e %12.3e %10.2e %12.3e %10.2e", static_cast<long long>(t), dx, sx, dx / sx, dW, dW / sW);
    if (gpu) std::printf("   %12.3e %12.3e", dx_same, dW_same);
    std::printf("\n");
    if (csv)
      csv->row({o.device, dtype, std::to_string(pb.n), std::to_string(t), fmt(o.leak, 3),
                strprintf("%g", o.lr), std::to_string(o.seed), strprintf("%.4e", dx),
                strprintf("%.4e", sx), strprintf("%.4e", dW), strprintf("%.4e", sW),
                gpu ? strprintf("%.4e", dx_same) : "", gpu ? strprintf("%.4e", dW_same) : "",
                device_name, info.git_rev, info.host, iso8601_utc_now()});
  }
}

// ---- main -----------------------------------------------------------------------------------

int run(int argc, char** argv) {
  CLI::App app{
      "W6: a reservoir of n units, x <- x + tanh(W x + win u_t) (--leak a: x <- (1-a) x + a tanh(...)),\n"
      "then Oja's rule W += lr (x x^T - diag(x)^2 W) every step. W, win ~ U(-1,1), u ~ N(0,1), x_0 = 0."};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  Options o;
  app.add_option("--dtype", o.dtypes, "comma list of float32, float64")
      ->delimiter(',')->capture_default_str()->check(CLI::IsMember({"float32", "float64"}));
  app.add_option("--n", o.ns, "comma list of reservoir sizes")
      ->delimiter(',')->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{46340}));
  app.add_option("--t", o.ts, "comma list of step counts (--drift: the T to compare at; default 10,100,1000)")
      ->delimiter(',')->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_option("--threads", o.threads,
                 strprintf("comma list of CPU thread counts (default 1..nproc: 1..%d here)",
                           omp_get_num_procs()))
      ->delimiter(',')->check(CLI::Range(1, 4096));
  app.add_option("--leak", o.leak, "0: W6 as written (not leaky); a in (0,1]: x <- (1-a) x + a tanh(...)")
      ->capture_default_str()->check(CLI::Range(0.0, 1.0));
  app.add_option("--lr", o.lr, "Oja's learning rate")->capture_default_str()->check(CLI::Range(0.0, 1.0));
  app.add_option("--device", o.device, "cpu or cuda")->capture_default_str()->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--seed", o.seed, "seed of W, win and u")->capture_default_str();
  app.add_option("--repeat", o.repeat, "timed runs per point, interleaved across points")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  app.add_option("--chunk", o.chunk, "steps per kernel call (0: 256 on the CPU, 4096 on the GPU)")
      ->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  app.add_flag("--w-streamed", o.w_streamed, "cuda: stream W from global memory every step instead of keeping it on chip");
  app.add_flag("--drift", o.drift, "show how a run drifts from a float64 CPU run as T grows, instead of timing");
  app.add_option("--out", o.out, "CSV to append rows to (--drift: runs/hebbian/drift.csv; '' = none)")
      ->capture_default_str();
  if (const int status = parse_flags(app, "hebbian", argc, argv); status >= 0) return status;
  if (o.drift && app.count("--t") == 0) o.ts = {10, 100, 1000};
  if (o.drift && app.count("--out") == 0) o.out = "runs/hebbian/drift.csv";
  if (o.threads.empty())
    for (int t = 1; t <= omp_get_num_procs(); ++t) o.threads.push_back(t);

  std::string device_name;
  std::unique_ptr<Context> gpu_ctx;  // with --device cuda: the GPU's stream, allocator, ...
  if (o.device == "cuda") {
    std::string why;
    if (!cuda_usable(&why)) {
      std::fprintf(stderr, "hebbian: --device cuda: %s\n", why.c_str());
      return 1;
    }
    gpu_ctx = std::make_unique<Context>(1, o.seed, Device::CUDA);
    const CudaDeviceInfo& gpu = gpu_ctx->cuda().info();
    device_name = strprintf("%s, %d SMs", gpu.name.c_str(), gpu.sm_count);
  }

  Context ctx(1);
  const RunInfo info = run_info(ctx);
  std::printf("hebbian W6: %s, lr %g, seed %llu, repeat %d | %s, %s, %d cores%s%s | rev %s | %s | "
              "BLAS %s | OMP_PROC_BIND=%s OMP_PLACES=%s\n",
              o.leak == 0 ? "not leaky (as written)" : strprintf("leaky, a = %g", o.leak).c_str(), o.lr,
              static_cast<unsigned long long>(o.seed), o.repeat, info.host.c_str(), info.cpu_model.c_str(),
              omp_get_num_procs(), device_name.empty() ? "" : " | GPU ", device_name.c_str(),
              info.git_rev.c_str(), info.compiler.c_str(), info.blas_text.c_str(),
              env_or("OMP_PROC_BIND", "(unset)"),
              env_or("OMP_PLACES", "(unset)"));

  std::unique_ptr<CsvWriter> csv;
  if (!o.out.empty()) {
    if (o.drift)
      csv = std::make_unique<CsvWriter>(
          o.out, std::vector<std::string>{"device", "dtype", "n", "steps", "leak", "lr", "seed",
                                          "max_abs_dx", "max_abs_x_ref", "max_abs_dW", "max_abs_W_ref",
                                          "max_abs_dx_vs_cpu_same_dtype", "max_abs_dW_vs_cpu_same_dtype",
                                          "device_name", "git_rev", "host", "timestamp"});
    else
      csv = std::make_unique<CsvWriter>(
          o.out, std::vector<std::string>{
                     "app", "variant", "device", "dtype", "n", "steps", "threads", "leak", "lr", "seed",
                     "repeat", "steps_run", "first_nonfinite_step", "seconds", "us_per_step", "us_min",
                     "us_max", "w_gbps", "floor_gbps", "floor_us_per_step", "floor_us_min", "copy_gbps",
                     "device_name",
                     "cpu_model", "blas_core", "git_rev", "host", "timestamp"});
  }

  if (!o.drift)
    std::printf("%6s %6s %-8s %-5s %4s %10s %9s %9s %7s %7s %9s %9s\n", "n", "T", "dtype", "dev", "thr",
                "us/step", "min", "max", "W GB/s", "floor", "floor us", "floor min");
  const int64_t max_t = *std::max_element(o.ts.begin(), o.ts.end());
  for (int64_t n : o.ns) {
    const HebbianProblem pb = make_hebbian_problem(n, max_t, o.seed);
    for (const std::string& d : o.dtypes) {
      if (o.drift) {
        if (parse_dtype(d) == DType::F64) drift_n_dtype<double>(o, pb, info, device_name, gpu_ctx.get(), csv.get());
        else drift_n_dtype<float>(o, pb, info, device_name, gpu_ctx.get(), csv.get());
      } else {
        if (parse_dtype(d) == DType::F64) bench_n_dtype<double>(o, pb, info, device_name, gpu_ctx.get(), csv.get());
        else bench_n_dtype<float>(o, pb, info, device_name, gpu_ctx.get(), csv.get());
      }
    }
  }
  if (!o.drift)
    std::printf("us/step: median over %d run(s) (a non-finite stop times the steps before it); W GB/s: "
                "2 n^2 elements per step; floor: in-place scale over n^2 elements at the same threads, "
                "the fastest of 5 batches, measured before each run (GB/s and us per step: median over runs; "
                "floor min: the fastest)\n", o.repeat);
  if (csv) std::printf("wrote %s\n", o.out.c_str());
  return 0;
}

}  // namespace
}  // namespace pdnn

int main(int argc, char** argv) { return pdnn::run_app("hebbian", pdnn::run, argc, argv); }
