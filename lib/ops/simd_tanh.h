// tanh without branches, so a loop of it vectorises (glibc's tanhf is ~10 ns a call when its
// range branches are predictable and ~40 ns in the Hebbian reservoir, where they are not: a
// fifth of a step at N = 1000). Used by the Tanh activation (ops/activation.cpp) and W6's
// reservoir (workloads/hebbian/hebbian_ops.cpp). Accuracy: within 2 ulp of the exact value (test_hebbian.cpp,
// SimdTanh.* measures it); NaN in, NaN out; +-inf in, +-1 out.
//
// The method is Cephes' (S. L. Moshier, tanh.c and tanhf.c): for |x| < 0.625 a rational
// (double) or polynomial (float) fit x + x^3 R(x^2); above, 1 - 2 / (exp(2|x|) + 1), which has no
// cancellation there. exp is evaluated by Cody and Waite's range reduction exp(y) = 2^k exp(r),
// |r| <= ln2/2, and a Taylor polynomial of r (degree 13 for double, 7 for float: truncation
// below 1e-17 and 6e-9 relative). Both branches are computed and one is selected.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace pdnn {

namespace simd_tanh_detail {

// 2^k for an integral k in the normal range, from its exponent bits.
inline double pow2(double k) {
  const int64_t bits = (static_cast<int64_t>(k) + 1023) << 52;
  double r;
  std::memcpy(&r, &bits, sizeof(r));
  return r;
}
inline float pow2(float k) {
  const int32_t bits = (static_cast<int32_t>(k) + 127) << 23;
  float r;
  std::memcpy(&r, &bits, sizeof(r));
  return r;
}

// exp(y) for y in [0, 40] (double) or [0, 20] (float): the range tanh needs.
inline double exp_small_range(double y) {
  const double k = std::rint(y * 1.4426950408889634);  // y / ln 2
  const double r = (y - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10;
  double p = 1.0 / 6227020800.0;  // 1/13!
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  return p * pow2(k);
}
inline float exp_small_range(float y) {
  const float k = std::rint(y * 1.44269504f);
  const float r = (y - k * 0.693359375f) - k * -2.12194440e-4f;
  float p = 1.f / 5040.f;
  p = p * r + 1.f / 720.f;
  p = p * r + 1.f / 120.f;
  p = p * r + 1.f / 24.f;
  p = p * r + 1.f / 6.f;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  return p * pow2(k);
}

// x + x^3 R(x^2) for |x| < 0.625.
inline double tanh_small(double x) {
  const double s = x * x;
  const double p = (-9.64399179425052238628e-1 * s - 9.92877231001918586564e1) * s -
                   1.61468768441708447952e3;
  const double q = ((s + 1.12811678491632931402e2) * s + 2.23548839060100448583e3) * s +
                   4.84406305325125486048e3;
  return x + x * s * (p / q);
}
inline float tanh_small(float x) {
  const float s = x * x;
  const float p = ((((-5.70498872745e-3f * s + 2.06390887954e-2f) * s - 5.37397155531e-2f) * s +
                    1.33314422036e-1f) * s - 3.33332819422e-1f);
  return x + p * s * x;
}

// Beyond this |x|, tanh(x) rounds to 1 (1 - 2 e^-2|x| is within half an ulp of 1).
inline double saturation(double) { return 20.0; }
inline float saturation(float) { return 10.f; }

}  // namespace simd_tanh_detail

template <typename T>
inline T simd_tanh(T x) {
  namespace d = simd_tanh_detail;
  const T a = std::fabs(x);
  const T c = a < d::saturation(x) ? a : d::saturation(x);  // NaN becomes the bound here
  const T big = T(1) - T(2) / (d::exp_small_range(T(2) * c) + T(1));
  const T t = a < T(0.625) ? d::tanh_small(x) : std::copysign(big, x);
  return x == x ? t : x;
}

}  // namespace pdnn
