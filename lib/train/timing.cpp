// Timing statistics and the app guard (timing.h).
#include "train/timing.h"

#include <algorithm>
#include <cstdio>
#include <exception>

#include "core/error.h"

namespace pdnn {

TimingStats timing_stats(std::vector<double> v) {
  PDNN_CHECK(!v.empty(), "timing_stats: no samples");
  std::sort(v.begin(), v.end());
  const size_t m = v.size();
  const double med = m % 2 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
  return {med, v.front(), v.back(), m};
}

int run_app(const char* name, int (*body)(int, char**), int argc, char** argv) {
  try {
    return body(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", name, e.what());
    return 1;
  }
}

}  // namespace pdnn
