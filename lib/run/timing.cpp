// Timing statistics and the app guard (timing.h).
#include "run/timing.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

#include "core/error.h"
#include "dist/communicator.h"
#include "run/blas_core.h"

namespace pdnn {

TimingStats timing_stats(std::vector<double> v) {
  PDNN_CHECK(!v.empty(), "timing_stats: no samples");
  std::sort(v.begin(), v.end());
  const size_t m = v.size();
  const double med = m % 2 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
  return {med, v.front(), v.back(), m};
}

double process_seconds() {
  std::ifstream stat("/proc/self/stat"), uptime("/proc/uptime");
  std::string line;
  double up = -1;
  if (!std::getline(stat, line) || !(uptime >> up)) return -1;
  // Field 2, the command, is in parentheses and may hold spaces: count from the last ')'.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(line.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i)
    if (i == 22) {
      const long ticks = sysconf(_SC_CLK_TCK);
      return ticks > 0 ? up - std::stod(field) / static_cast<double>(ticks) : -1;
    }
  return -1;
}

int run_app(const char* name, int (*body)(int, char**), int argc, char** argv) {
  // First of all, before OpenMP starts a thread or anything is printed: an OpenBLAS that
  // misdetected the CPU gets the right kernels by running this process again (blas_core.h).
  ensure_blas_core();
  try {
    return body(argc, argv);
  } catch (const std::exception& e) {
    // A data-parallel rank: an error every rank threw together is printed once (by rank 0);
    // one this rank alone saw names the rank and then ends the whole job (fail_locally).
    const int rank = Communicator::process_rank();
    if (rank < 0)
      std::fprintf(stderr, "%s: error: %s\n", name, e.what());
    else if (!Communicator::collective_error_in_flight())
      std::fprintf(stderr, "%s: error (rank %d): %s\n", name, rank, e.what());
    else if (rank == 0)
      std::fprintf(stderr, "%s: error: %s\n", name, e.what());
    std::fflush(stderr);
    Communicator::fail_locally(1);
    return 1;
  }
}

}  // namespace pdnn
