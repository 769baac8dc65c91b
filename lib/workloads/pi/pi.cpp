// W1 pi kernels. The loop index is int64_t so n may exceed 2^31; the sum is always in double.
#include "workloads/pi/pi.h"

#include <algorithm>

#include "core/error.h"
#include "core/parallel.h"

namespace pdnn {
namespace cpu {
namespace {

// Points per block of the SIMD variant: large enough that the per-block overhead vanishes, small
// enough that a static split over threads stays balanced (N = 2e8 gives ~3000 blocks).
constexpr int64_t kSimdBlock = 1 << 16;

inline double f(double x) { return 4.0 / (1.0 + x * x); }

void check_args(const char* what, int64_t n, int threads) {
  PDNN_CHECK(n >= 1, "%s: n = %lld intervals, need at least 1", what, static_cast<long long>(n));
  PDNN_CHECK(threads >= 1, "%s: threads = %d, need at least 1", what, threads);
}

}  // namespace

double pi_serial(int64_t n) {
  check_args("pi_serial", n, 1);
  const double h = 1.0 / static_cast<double>(n);
  double sum = 0.5 * (f(0.0) + f(1.0));
  for (int64_t i = 1; i < n; ++i) sum += f(static_cast<double>(i) * h);
  return sum * h;
}

double pi_omp(int64_t n, int threads) {
  check_args("pi_omp", n, threads);
  const double h = 1.0 / static_cast<double>(n);
  double sum = 0.0;
#pragma omp parallel num_threads(threads) reduction(+ : sum)
  {
    observe_team();
#pragma omp for schedule(static) nowait
    for (int64_t i = 1; i < n; ++i) sum += f(static_cast<double>(i) * h);
  }
  return (sum + 0.5 * (f(0.0) + f(1.0))) * h;
}

double pi_omp_simd(int64_t n, int threads) {
  check_args("pi_omp_simd", n, threads);
  const double h = 1.0 / static_cast<double>(n);
  // Blocks of kSimdBlock points with a 32-bit inner index: AVX2 has no packed int64 -> double
  // conversion (vcvtqq2pd is AVX-512), so a 64-bit index would keep the loop scalar there.
  // base + j is an exact integer in double (< 2^53), so x is the same as in the other variants.
  const int64_t points = n - 1;  // interior points 1 .. n-1
  const int64_t blocks = (points + kSimdBlock - 1) / kSimdBlock;
  double sum = 0.0;
#pragma omp parallel num_threads(threads) reduction(+ : sum)
  {
    observe_team();
#pragma omp for schedule(static) nowait
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t first = 1 + b * kSimdBlock;
      const int len = static_cast<int>(std::min<int64_t>(kSimdBlock, n - first));
      const double base = static_cast<double>(first);
      double s = 0.0;
#pragma omp simd reduction(+ : s)
      for (int j = 0; j < len; ++j) s += f((base + static_cast<double>(j)) * h);
      sum += s;
    }
  }
  return (sum + 0.5 * (f(0.0) + f(1.0))) * h;
}

}  // namespace cpu
}  // namespace pdnn
