// W1 pi kernels: the trapezoid sum's known values and error, agreement of the three variants,
// and the same result at 1 and 2 threads.
#include <cfloat>
#include <cmath>

#include "workloads/pi/pi.h"
#include "core/error.h"
#include "testing.h"

namespace pdnn {
namespace {

double trapezoid_reference(int64_t n) {  // the textbook form, in long double
  const long double h = 1.0L / n;
  long double s = 0.0L;
  for (int64_t i = 0; i <= n; ++i) {
    const long double x = i * h;
    const long double w = (i == 0 || i == n) ? 0.5L : 1.0L;
    s += w * 4.0L / (1.0L + x * x);
  }
  return static_cast<double>(s * h);
}

TEST(Pi, SmallNExactValues) {
  // n = 1: (f(0) + f(1)) / 2 = (4 + 2) / 2; n = 2: (2 + 1 + 3.2) / 2.
  for (int t : {1, 2}) {
    EXPECT_DOUBLE_EQ(cpu::pi_omp(1, t), 3.0);
    EXPECT_DOUBLE_EQ(cpu::pi_omp_simd(1, t), 3.0);
    EXPECT_DOUBLE_EQ(cpu::pi_omp(2, t), 3.1);
    EXPECT_DOUBLE_EQ(cpu::pi_omp_simd(2, t), 3.1);
  }
  EXPECT_DOUBLE_EQ(cpu::pi_serial(1), 3.0);
  EXPECT_DOUBLE_EQ(cpu::pi_serial(2), 3.1);
}

TEST(Pi, MatchesReferenceAtOddSizes) {
  // Sizes around the SIMD variant's block of 2^16 points and an odd one.
  for (int64_t n : {int64_t{3}, int64_t{1001}, int64_t{65536}, int64_t{65537}, int64_t{3 * 65536 + 7}}) {
    const double ref = trapezoid_reference(n);
    // Bound on the rounding of n double additions of terms <= 4; a lost or doubled point
    // would be off by ~3/n, far above it.
    const double tol = 4.0 * n * DBL_EPSILON;
    EXPECT_NEAR(cpu::pi_serial(n), ref, tol) << "n=" << n;
    for (int t : {1, 2, 3}) {
      EXPECT_NEAR(cpu::pi_omp(n, t), ref, tol) << "n=" << n << " threads=" << t;
      EXPECT_NEAR(cpu::pi_omp_simd(n, t), ref, tol) << "n=" << n << " threads=" << t;
    }
  }
}

TEST(Pi, TrapezoidErrorIsHSquaredOverSix) {
  // pi - T(n) = h^2/6 + O(h^4) (f'(1) - f'(0) = -2): catches a lost endpoint or an off-by-one,
  // which would give an error of order h.
  const int64_t n = 1000;
  const double expected = 1.0 / (6.0 * n * n);
  for (double p : {cpu::pi_serial(n), cpu::pi_omp(n, 2), cpu::pi_omp_simd(n, 2)})
    EXPECT_NEAR(M_PI - p, expected, 1e-3 * expected);
}

TEST(Pi, EveryVariantWithin1e9AtN1e5) {
  const int64_t n = 100000;  // trapezoid error 1/(6 n^2) = 1.7e-11
  EXPECT_LT(std::fabs(cpu::pi_serial(n) - M_PI), 1e-9);
  for (int t : {1, 2}) {
    EXPECT_LT(std::fabs(cpu::pi_omp(n, t) - M_PI), 1e-9) << "threads=" << t;
    EXPECT_LT(std::fabs(cpu::pi_omp_simd(n, t) - M_PI), 1e-9) << "threads=" << t;
  }
}

TEST(Pi, OneAndTwoThreadsAgreeAndRepeatBitForBit) {
  const int64_t n = 1000003;
  const double tol = 4.0 * n * DBL_EPSILON;  // only the order of the additions differs
  EXPECT_NEAR(cpu::pi_omp(n, 1), cpu::pi_omp(n, 2), tol);
  EXPECT_NEAR(cpu::pi_omp_simd(n, 1), cpu::pi_omp_simd(n, 2), tol);
  // A static schedule splits the same way every time: same thread count, same bits.
  EXPECT_EQ(cpu::pi_omp(n, 2), cpu::pi_omp(n, 2));
  EXPECT_EQ(cpu::pi_omp_simd(n, 2), cpu::pi_omp_simd(n, 2));
}

TEST(Pi, RejectsBadArguments) {
  EXPECT_THROW(cpu::pi_serial(0), Error);
  EXPECT_THROW(cpu::pi_omp(-5, 1), Error);
  EXPECT_THROW(cpu::pi_omp_simd(10, 0), Error);
}

}  // namespace
}  // namespace pdnn
