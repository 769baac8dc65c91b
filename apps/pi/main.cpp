// W1 pi benchmark: times the serial, OpenMP and OpenMP+SIMD trapezoid sums at each thread count,
// prints a table and appends median/min/max rows to a CSV (results/pi/pi.csv by default).
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

#include "bench/pi.h"
#include "core/context.h"
#include "core/error.h"
#include "train/csv.h"
#include "train/timing.h"
#include "train/run_info.h"

namespace {

using Kernel = std::function<double(int64_t n, int threads)>;

const std::map<std::string, Kernel>& kernels() {
  static const std::map<std::string, Kernel> k = {
      {"serial", [](int64_t n, int) { return pdnn::cpu::pi_serial(n); }},
      {"omp", pdnn::cpu::pi_omp},
      {"omp-simd", pdnn::cpu::pi_omp_simd},
  };
  return k;
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
  std::string out = "results/pi/pi.csv";
  app.add_option("--n", n, "intervals")->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1} << 52));
  app.add_option("--variants", variants, "comma list of serial, omp, omp-simd")
      ->delimiter(',')->capture_default_str()
      ->check(CLI::IsMember({"serial", "omp", "omp-simd"}));
  app.add_option("--threads", threads, "comma list of thread counts (default 1..nproc)")
      ->delimiter(',')->check(CLI::Range(1, 4096));
  app.add_option("--repeat", repeat, "timed runs per point")->capture_default_str()->check(CLI::Range(1, 100000));
  app.add_option("--warmup", warmup, "untimed runs before them")->capture_default_str()->check(CLI::Range(0, 100000));
  app.add_option("--out", out, "CSV to append rows to (created with its folder; '' = none)")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "pi: %s (see --help)\n", e.what());
    return 2;
  }
  if (threads.empty())
    for (int t = 1; t <= omp_get_num_procs(); ++t) threads.push_back(t);

  pdnn::Context ctx(1);
  const pdnn::RunInfo info = pdnn::run_info(ctx);
  std::printf("pi W1: n=%lld, repeat=%d, warmup=%d | %s, %s, %d cores | rev %s | %s | "
              "OpenBLAS %s | OMP_PROC_BIND=%s OMP_PLACES=%s\n",
              static_cast<long long>(n), repeat, warmup, info.host.c_str(), info.cpu_model.c_str(),
              omp_get_num_procs(), info.git_rev.c_str(), info.compiler.c_str(),
              info.blas_core.c_str(), env_or("OMP_PROC_BIND", "(unset)"),
              env_or("OMP_PLACES", "(unset)"));

  std::unique_ptr<pdnn::CsvWriter> csv;
  if (!out.empty())
    csv = std::make_unique<pdnn::CsvWriter>(
        out, std::vector<std::string>{"app", "variant", "n", "threads", "median_ms", "min_ms",
                                      "max_ms", "abs_error", "speedup", "host", "cpu_model",
                                      "git_rev", "timestamp"});

  std::printf("%-9s %7s %10s %10s %10s %10s %8s\n", "variant", "threads", "median_ms", "min_ms",
              "max_ms", "abs_error", "speedup");
  for (const std::string& v : variants) {
    const Kernel& k = kernels().at(v);
    // The serial loop ignores the thread count: one point, at 1 thread.
    const std::vector<int> ts = v == "serial" ? std::vector<int>{1} : threads;
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
                  info.git_rev, pdnn::iso8601_utc_now()});
      }
    }
  }
  if (csv) std::printf("wrote %s\n", out.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return pdnn::run_app("pi", run, argc, argv); }
