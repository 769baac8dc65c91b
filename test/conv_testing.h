// Helpers of the convolution kernel tests (test_conv3x3.cpp, test_conv_k4s2.cpp): test data,
// the float32 rounding bound gamma_m, the |T| in |T|^T sandwich the Winograd bounds are made
// of, elementwise comparisons against a reference in double (exact, or within a bound), and a
// family of CPU kernels run over one shape's data.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/exec.h"
#include "core/rng.h"
#include "ops/conv/conv_args.h"

namespace pdnn {
namespace testing {

// gamma_m = m u / (1 - m u), u = 2^-24: the bound of m float operations in sequence.
inline double gamma_m(double m) {
  const double u = std::ldexp(1.0, -24);
  return m * u / (1 - m * u);
}

// out (R x R) = |T| in |T|^T for in (S x S) and the R x S matrix T(a, l), given as a function.
template <int R, int S, class Matrix>
void abs_sandwich(Matrix T, const double* in, double* out) {
  double mid[R][S] = {};
  for (int a = 0; a < R; ++a)
    for (int j = 0; j < S; ++j)
      for (int l = 0; l < S; ++l) mid[a][j] += std::fabs(T(a, l)) * in[l * S + j];
  for (int a = 0; a < R; ++a)
    for (int b = 0; b < R; ++b) {
      double s = 0.0;
      for (int j = 0; j < S; ++j) s += mid[a][j] * std::fabs(T(b, j));
      out[a * R + b] = s;
    }
}

inline std::vector<float> abs_of(const std::vector<float>& v) {
  std::vector<float> a(v.size());
  for (size_t i = 0; i < v.size(); ++i) a[i] = std::fabs(v[i]);
  return a;
}

// Integers in {-1, 0, 1}, nonzero with probability `density`, times `scale`.
inline std::vector<float> sparse_ints(int64_t count, double density, float scale, Rng& rng) {
  std::vector<float> v(count);
  for (float& e : v) {
    const double u = rng.uniform();
    e = u < density / 2 ? -scale : u < density ? scale : 0.f;
  }
  return v;
}

inline std::vector<float> uniform(int64_t count, float bound, Rng& rng) {
  std::vector<float> v(count);
  for (float& e : v) e = rng.uniform(-bound, bound);
  return v;
}

inline double max_of(const std::vector<double>& v) {
  double m = 0.0;
  for (double e : v) m = std::max(m, e);
  return m;
}

// Expects got == ref exactly.
inline void expect_exact(const std::vector<float>& got, const std::vector<double>& ref,
                         const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < got.size(); ++i)
    if (static_cast<double>(got[i]) != ref[i]) {
      if (first < 0) first = static_cast<int64_t>(i);
      ++bad;
    }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " differ; first at "
                    << first << ": got " << (first >= 0 ? got[first] : 0.f) << ", want "
                    << (first >= 0 ? ref[first] : 0.0);
}

// Expects |got - ref| <= g * bracket elementwise; returns the largest |got - ref| / bracket
// over g (<= 1 when within the bound).
inline double expect_within_bound(const std::vector<float>& got, const std::vector<double>& ref,
                                  const std::vector<double>& bracket, double g,
                                  const std::string& what) {
  EXPECT_EQ(got.size(), ref.size()) << what;
  EXPECT_EQ(bracket.size(), ref.size()) << what;
  int64_t bad = 0, first = -1;
  double worst = 0.0;
  for (size_t i = 0; i < got.size() && i < ref.size() && i < bracket.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - ref[i]);
    const double bound = g * bracket[i];
    if (!(err <= bound)) {
      if (first < 0) first = static_cast<int64_t>(i);
      ++bad;
    }
    if (bound > 0) worst = std::max(worst, err / bound);
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " outside the bound; first at "
                    << first << ": got " << (first >= 0 ? got[first] : 0.f) << ", want "
                    << (first >= 0 ? ref[first] : 0.0) << ", bound "
                    << (first >= 0 ? g * bracket[first] : 0.0);
  return worst;
}

// One family of CPU kernels for a shape class (the 3x3 Winograd and direct ones, the 4x4
// stride-2 one): its workspace and its three passes.
struct CpuKernels {
  const char* name;
  size_t (*workspace)(const ConvGeom&, int64_t, int64_t, int);
  void (*forward)(const ConvFwd&, float*, CpuExec);
  void (*data)(const ConvBwd&, float*, CpuExec);
  void (*weights)(const ConvBwd&, float*, CpuExec);
};

struct KernelResults {
  std::vector<float> y, dx, dw;
};

// The three passes of kernels `kn` on one shape's data at `threads` threads: y (with act),
// dx and dw from dy (with respect to the convolution's own output). b may be empty.
inline KernelResults run_kernels(const CpuKernels& kn, const ConvShape& s,
                                 const std::vector<float>& x, const std::vector<float>& w,
                                 const std::vector<float>& b, const std::vector<float>& dy,
                                 int threads, Act act = {}) {
  std::vector<float> ws(kn.workspace(s.g, s.n, s.k, threads));
  KernelResults r;
  r.y.assign(s.n * s.k * s.g.oh * s.g.ow, -7.f);  // written, not accumulated
  r.dx.assign(s.n * s.g.image_size(), -7.f);
  r.dw.assign(s.k * s.g.col_rows(), 0.f);
  const ConvFwd plain = ConvFwd::of(s, x.data(), w.data(), b.empty() ? nullptr : b.data(), r.y.data());
  ConvFwd f = plain;
  f.act = act;
  kn.forward(f, ws.data(), CpuExec{threads});
  kn.data(ConvBwd::of(plain, dy.data(), nullptr, nullptr, r.dx.data()), ws.data(), CpuExec{threads});
  kn.weights(ConvBwd::of(plain, dy.data(), r.dw.data(), nullptr, nullptr), ws.data(),
             CpuExec{threads});
  return r;
}

}  // namespace testing
}  // namespace pdnn
