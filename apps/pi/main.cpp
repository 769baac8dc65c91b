// W1 pi benchmark: times the serial, OpenMP and OpenMP+SIMD trapezoid sums at each thread count,
// prints a table and appends median/min/max rows to a CSV (runs/pi/pi.csv by default).
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "workloads/pi/pi.h"
#include "core/context.h"
#include "core/error.h"
#include "run/csv.h"
#include "run/timing.h"
#include "run/run_flags.h"
#include "run/run_info.h"

namespace {

using Kernel = std::function<double(int64_t n, int threads)>;

bool is_gpu_variant(const std::string& v) { return v.rfind("cuda", 0) == 0; }

// The GPU variants need a context with a GPU and a device buffer for the partial sums; the
// result comes back through a device-to-host copy (the only time pdnn reads a raw device
// pointer outside Tensor::to: the copy is the benchmark's own last step).
Kernel gpu_kernel(pdnn::Context& gpu, bool fp32) {
  double* partials = reinterpret_cast<double*>(
      gpu.workspace(pdnn::Device::CUDA, 2 * pdnn::cuda::kPiBlocks));
  return [&gpu, fp32, partials](int64_t n, int) -> double {
#if PDNN_HAVE_CUDA
    return pdnn::cuda::pi_trapezoid(n, fp32, partials, gpu.cuda_exec());
#else
    (void)n;
    (void)partials;
    PDNN_FAIL("pi: the cuda variants need a CUDA build");
#endif
  };
}

Kernel kernel(const std::string& v, pdnn::Context* gpu) {
  if (v == "serial") return [](int64_t n, int) { return pdnn::cpu::pi_serial(n); };
  if (v == "omp") return pdnn::cpu::pi_omp;
  if (v == "omp-simd") return pdnn::cpu::pi_omp_simd;
  return gpu_kernel(*gpu, v == "cuda-fp32");
}

struct Timing {
  double median_ms, min_ms, max_ms, abs_error;
};

Timing measure(const Kernel& k, int64_t n, int threads, int warmup, int repeat) {
  double result = 0.0;
  for (int i = 0; i < warmup; ++i) result = k(n, threads);
  std::vector<double> ms;
  for (int i = 0; i < repeat; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    result = k(n, threads);
    auto t1 = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  const pdnn::TimingStats st = pdnn::timing_stats(ms);
  return {st.median, st.min, st.max, std::fabs(result - M_PI)};
}

const char* env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

int run(int argc, char** argv) {
  CLI::App app{"W1: pi as the integral of 4/(1+x^2) on [0,1], trapezoidal rule, in double"};
  // A flag given twice takes its last value, so Makefile targets can be overridden by
  // appending flags (make mnist MNIST_ARGS="--epochs 1").
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  int64_t n = 200000000;
  std::vector<std::string> variants = {"serial", "omp", "omp-simd"};
  std::vector<int> threads;
  int repeat = 5, warmup = 1;
  std::string out = "runs/pi/pi.csv";
  app.add_option("--n", n, "intervals")->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1} << 52));
  app.add_option("--variants", variants,
                 "comma list of serial, omp, omp-simd, cuda-fp64, cuda-fp32 (the GPU sum in "
                 "double or float)")
      ->delimiter(',')->capture_default_str()
      ->check(CLI::IsMember({"serial", "omp", "omp-simd", "cuda-fp64", "cuda-fp32"}));
  app.add_option("--threads", threads,
                 pdnn::strprintf("comma list of thread counts (default 1..nproc: 1..%d here)",
                           omp_get_num_procs()))
      ->delimiter(',')->check(CLI::Range(1, 4096));
  app.add_option("--repeat", repeat, "timed runs per point")->capture_default_str()->check(CLI::Range(1, 100000));
  app.add_option("--warmup", warmup, "untimed runs before them")->capture_default_str()->check(CLI::Range(0, 100000));
  app.add_option("--out", out, "CSV to append rows to (created with its folder; '' = none)")
      ->capture_default_str();
  if (const int status = pdnn::parse_flags(app, "pi", argc, argv); status >= 0) return status;
  if (threads.empty())
    for (int t = 1; t <= omp_get_num_procs(); ++t) threads.push_back(t);

  const bool want_gpu =
      std::any_of(variants.begin(), variants.end(), [](const std::string& v) { return is_gpu_variant(v); });
  // --variants cuda-* without a GPU (or a CUDA build) fails here, in one line.
  pdnn::Context ctx(1, 0, want_gpu ? pdnn::Device::CUDA : pdnn::Device::CPU);
  const pdnn::RunInfo info = pdnn::run_info(ctx);
  std::printf("pi W1: n=%lld, repeat=%d, warmup=%d | %s, %s, %d cores | rev %s | %s | "
              "OpenBLAS %s | OMP_PROC_BIND=%s OMP_PLACES=%s\n",
              static_cast<long long>(n), repeat, warmup, info.host.c_str(), info.cpu_model.c_str(),
              omp_get_num_procs(), info.git_rev.c_str(), info.compiler.c_str(),
              info.blas_text.c_str(), env_or("OMP_PROC_BIND", "(unset)"),
              env_or("OMP_PLACES", "(unset)"));
  if (want_gpu) std::printf("GPU: %s\n", info.gpu.c_str());

  std::unique_ptr<pdnn::CsvWriter> csv;
  if (!out.empty())
    csv = std::make_unique<pdnn::CsvWriter>(
        out, std::vector<std::string>{"app", "variant", "n", "threads", "median_ms", "min_ms",
                                      "max_ms", "abs_error", "speedup", "host", "cpu_model",
                                      "device", "git_rev", "timestamp"});


  std::printf("%-9s %7s %10s %10s %10s %10s %8s\n", "variant", "threads", "median_ms", "min_ms",
              "max_ms", "abs_error", "speedup");
  for (const std::string& v : variants) {
    const Kernel k = kernel(v, &ctx);
    // The serial loop and the GPU ignore the thread count: one point, at 1 thread.
    const std::vector<int> ts = v == "serial" || is_gpu_variant(v) ? std::vector<int>{1} : threads;
    double base_ms = 0.0;  // median at 1 thread, when 1 is in the list
    for (int t : ts) {
      const Timing r = measure(k, n, t, warmup, repeat);
      if (t == 1) base_ms = r.median_ms;
      const double speedup = base_ms > 0.0 ? base_ms / r.median_ms : NAN;
      std::printf("%-9s %7d %10.2f %10.2f %10.2f %10.2e %8s\n", v.c_str(), t, r.median_ms,
                  r.min_ms, r.max_ms, r.abs_error,
                  std::isnan(speedup) ? "-" : pdnn::fmt(speedup, 2).c_str());
      std::fflush(stdout);
      if (csv) {
        char err[32];
        std::snprintf(err, sizeof(err), "%.3e", r.abs_error);
        csv->row({"pi", v, std::to_string(n), std::to_string(t), pdnn::fmt(r.median_ms, 3),
                  pdnn::fmt(r.min_ms, 3), pdnn::fmt(r.max_ms, 3), err,
                  std::isnan(speedup) ? "" : pdnn::fmt(speedup, 3), info.host, info.cpu_model,
                  is_gpu_variant(v) ? "cuda: " + info.gpu : "cpu", info.git_rev,
                  pdnn::iso8601_utc_now()});
      }
    }
  }
  if (csv) std::printf("wrote %s\n", out.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return pdnn::run_app("pi", run, argc, argv); }
