// Summary statistics of repeated timings, as every benchmark reports them (median, min, max),
// and the guard every app's main() runs in.
#pragma once
#include <chrono>
#include <cstddef>
#include <vector>

namespace pdnn {

struct TimingStats {
  double median, min, max;
  size_t n;
};
// Median (mean of the middle two for an even count), min and max; throws on no samples.
TimingStats timing_stats(std::vector<double> samples);

// Seconds since this process started (Linux: /proc/self/stat's start time against
// /proc/uptime, 10 ms ticks; a re-execution for the OpenBLAS core keeps the first start);
// negative where they cannot be read. Benchmarks say with it how long a run took to set up.
double process_seconds();

// Seconds of the steady clock since t0 (the apps' set-up and load timings).
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Runs an app's body: any exception becomes one line "<name>: error: <what>" on stderr and
// exit status 1, so bad input never ends in a crash or a core dump. Before the body, the
// process may execute itself again for the right OpenBLAS kernels (ensure_blas_core).
int run_app(const char* name, int (*body)(int, char**), int argc, char** argv);

}  // namespace pdnn
