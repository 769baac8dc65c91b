// Timing statistics and the app guard (timing.h).
#include "run/timing.h"

#include <algorithm>
#include <cstdio>
#include <exception>

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
