// Weight initialisation: fans as PyTorch computes them, He/Glorot bounds and moments on a big
// tensor, PyTorch's default (weight then bias from one stream), reproducibility by seed.
#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/init.h"
#include "testing.h"

using namespace pdnn;
using pdnn::testing::expect_close;

namespace {

struct Moments {
  double mean, stddev, min, max;
};

Moments moments(const Tensor& t) {
  double s = 0, s2 = 0, lo = t[0], hi = t[0];
  for (int64_t i = 0; i < t.numel(); ++i) {
    s += t[i];
    s2 += static_cast<double>(t[i]) * t[i];
    lo = std::min(lo, static_cast<double>(t[i]));
    hi = std::max(hi, static_cast<double>(t[i]));
  }
  const double n = static_cast<double>(t.numel());
  return {s / n, std::sqrt(s2 / n - (s / n) * (s / n)), lo, hi};
}

// A conv weight (K=256, C=64, 3x3): 147,456 values, fan_in 576, fan_out 2304.
const Shape kBig{256, 64, 3, 3};
constexpr double kFanIn = 576, kFanOut = 2304;

// U(-b,b): every value within the bound, both ends nearly reached, mean 0, std b/sqrt(3).
void expect_uniform(const Tensor& w, double b, const std::string& what) {
  const Moments m = moments(w);
  EXPECT_GE(m.min, -b) << what;
  EXPECT_LE(m.max, b) << what;
  EXPECT_LT(m.min, -0.999 * b) << what;
  EXPECT_GT(m.max, 0.999 * b) << what;
  // Standard error of the mean: b/sqrt(3n) = b * 1.5e-3; 4 of them.
  EXPECT_NEAR(m.mean, 0.0, 6e-3 * b) << what;
  EXPECT_NEAR(m.stddev, b / std::sqrt(3.0), 0.01 * b / std::sqrt(3.0)) << what;
}

// N(0,s): mean 0, std s, and about 4.55% of values beyond 2s (a uniform would have none).
void expect_normal(const Tensor& w, double s, const std::string& what) {
  const Moments m = moments(w);
  EXPECT_NEAR(m.mean, 0.0, 4.0 * s / std::sqrt(static_cast<double>(w.numel()))) << what;
  EXPECT_NEAR(m.stddev, s, 0.01 * s) << what;
  int64_t tails = 0;
  for (int64_t i = 0; i < w.numel(); ++i) tails += std::fabs(w[i]) > 2.0 * s;
  EXPECT_NEAR(static_cast<double>(tails) / static_cast<double>(w.numel()), 0.0455, 0.003) << what;
}

}  // namespace

TEST(Init, FansLikePyTorch) {
  // Dense weight (out, in).
  EXPECT_EQ(init::fans(Shape{10, 100}).in, 100);
  EXPECT_EQ(init::fans(Shape{10, 100}).out, 10);
  // Conv2d weight (K, C, kh, kw): fan_in = C kh kw, fan_out = K kh kw.
  EXPECT_EQ(init::fans(Shape{16, 3, 5, 5}).in, 3 * 25);
  EXPECT_EQ(init::fans(Shape{16, 3, 5, 5}).out, 16 * 25);
  // ConvTranspose2d weight (Cin, Cout, kh, kw): PyTorch reads dim 1 as "in", so fan_in is
  // Cout kh kw (this is what its default init uses for transposed convolutions).
  EXPECT_EQ(init::fans(Shape{512, 256, 4, 4}).in, 256 * 16);
  EXPECT_EQ(init::fans(Shape{512, 256, 4, 4}).out, 512 * 16);
  EXPECT_EQ(init::fans(Shape{kBig}).in, kFanIn);
  EXPECT_THROW(init::fans(Shape{10}), Error);
}

TEST(Init, HeAndGlorotBoundsAndMoments) {
  Rng rng(101);
  Tensor w(kBig);
  init::he_uniform(w, rng);
  expect_uniform(w, std::sqrt(6.0 / kFanIn), "he_uniform");
  init::glorot_uniform(w, rng);
  expect_uniform(w, std::sqrt(6.0 / (kFanIn + kFanOut)), "glorot_uniform");
  init::he_normal(w, rng);
  expect_normal(w, std::sqrt(2.0 / kFanIn), "he_normal");
  init::glorot_normal(w, rng);
  expect_normal(w, std::sqrt(2.0 / (kFanIn + kFanOut)), "glorot_normal");
}

TEST(Init, TorchDefaultDrawsWeightThenBias) {
  const Shape ws{20, 30}, bs{20};
  const double b = 1.0 / std::sqrt(30.0);
  Rng r(7);
  Tensor w(ws), bias(bs);
  init::torch_default(w, &bias, r);
  EXPECT_EQ(r.counter(), static_cast<uint64_t>(ws.numel() + bs.numel()));  // one draw per value
  // The same stream drawn by hand: the weight's 600 values in row-major order, then the bias.
  Rng h(7);
  for (int64_t i = 0; i < w.numel(); ++i)
    ASSERT_EQ(w[i], h.uniform(static_cast<float>(-b), static_cast<float>(b))) << "weight " << i;
  for (int64_t i = 0; i < bias.numel(); ++i)
    ASSERT_EQ(bias[i], h.uniform(static_cast<float>(-b), static_cast<float>(b))) << "bias " << i;
  // The bias bound is the weight's 1/sqrt(fan_in), not the bias's own size.
  for (int64_t i = 0; i < bias.numel(); ++i) EXPECT_LE(std::fabs(bias[i]), b);
  // Without a bias the stream advances by the weight alone.
  Rng r2(7);
  Tensor w2(ws);
  init::torch_default(w2, nullptr, r2);
  EXPECT_EQ(r2.counter(), static_cast<uint64_t>(ws.numel()));
  expect_close(w2, w, 0, 0, "weight with and without bias");
  // Large tensor: the bound and moments of U(+-1/sqrt(fan_in)).
  Rng r3(8);
  Tensor big(kBig);
  init::torch_default(big, nullptr, r3);
  expect_uniform(big, 1.0 / std::sqrt(kFanIn), "torch_default weight");
}

TEST(Init, SameSeedSameValuesOtherSeedOthers) {
  using Fn = std::function<void(Tensor&, Rng&)>;
  const std::pair<const char*, Fn> fns[] = {
      {"he_uniform", init::he_uniform},
      {"he_normal", init::he_normal},
      {"glorot_uniform", init::glorot_uniform},
      {"glorot_normal", init::glorot_normal},
      {"torch_default", [](Tensor& w, Rng& r) { init::torch_default(w, nullptr, r); }}};
  for (const auto& f : fns) {
    Tensor a(Shape{8, 3, 3, 3}), b(Shape{8, 3, 3, 3}), c(Shape{8, 3, 3, 3});
    Rng ra(1), rb(1), rc(2);
    f.second(a, ra);
    f.second(b, rb);
    f.second(c, rc);
    expect_close(b, a, 0, 0, std::string(f.first) + " same seed");
    int64_t same = 0;
    for (int64_t i = 0; i < a.numel(); ++i) same += a[i] == c[i];
    EXPECT_EQ(same, 0) << f.first << ": seeds 1 and 2 share values";
    EXPECT_EQ(ra.counter(), rb.counter());
  }
  // Normals take two draws each (Box-Muller, no cached spare), so the stream position is known.
  Rng r(3);
  Tensor w(Shape{5, 7});
  init::he_normal(w, r);
  EXPECT_EQ(r.counter(), 2u * 35u);
}

// Initial weights are promised bit-exact across builds (scripts/twins/torch_reference.py rebuilds
// them): each uniform value is lo + (hi - lo) * u and each normal one mean + stddev * z,
// rounded once (a fused multiply-add), whatever the optimisation level. The reference here is
// the exact expression in long double (the product of two floats is exact there) rounded to
// float, independent of what the compiler contracts. A Debug build used to round twice.
TEST(Init, UniformAndNormalRoundOnceInEveryBuild) {
  const std::vector<std::pair<float, float>> ranges = {
      {-0.3f, 0.3f}, {-0.0589f, 0.0589f}, {0.1f, 1.f}, {-1e-3f, 7.f}};
  for (const auto& [lo, hi] : ranges) {
    Rng a(42), b(42);
    int differ_from_twice_rounded = 0;
    for (int i = 0; i < 20000; ++i) {
      const float got = a.uniform(lo, hi);
      const float u = static_cast<float>(b.uniform());
      const long double exact =
          static_cast<long double>(lo) + static_cast<long double>(hi - lo) * u;
      ASSERT_EQ(got, static_cast<float>(exact)) << "draw " << i << " of U(" << lo << "," << hi
                                                << ")";
      volatile float prod = (hi - lo) * u;  // volatile: rounded as a separate step
      differ_from_twice_rounded += got != lo + prod;
    }
    // The test can tell the two roundings apart: some draws differ between them.
    EXPECT_GT(differ_from_twice_rounded, 0) << lo << "," << hi;
  }
  Tensor w(Shape{64, 64});
  Rng a(9), b(9);
  init::normal(w, 0.25f, 0.02f, a);
  for (int64_t i = 0; i < w.numel(); ++i) {
    const float z = static_cast<float>(b.normal());
    ASSERT_EQ(w[i], static_cast<float>(0.25L + static_cast<long double>(0.02f) * z)) << i;
  }
}

// The bulk draws (Rng::fill_uniform / fill_normal, behind init::uniform / normal) on several
// threads give, bit for bit, the values and the stream position of one-at-a-time draws on one
// thread: the initial weights do not depend on the thread count. 3 x 2^15 + 5 values, so that
// the draws do run in parallel (core/parallel.h: PDNN_PAR) and the threads' shares are uneven.
TEST(Init, BulkDrawsOnThreadsEqualOneAtATime) {
  const int64_t n = 3 * (int64_t{1} << 15) + 5;
  for (int threads : {1, 2, 3, 4}) {
    Rng one(11), bulk(11);
    bulk.set_threads(threads);
    std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) a[static_cast<size_t>(i)] = one.uniform(-0.2f, 0.3f);
    bulk.fill_uniform(b.data(), n, -0.2f, 0.3f);
    ASSERT_EQ(bulk.counter(), one.counter()) << threads << " threads, uniform";
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(b[static_cast<size_t>(i)], a[static_cast<size_t>(i)]) << threads << " threads, uniform " << i;
    // Then normals from where the uniforms left the stream.
    for (int64_t i = 0; i < n; ++i)
      a[static_cast<size_t>(i)] = std::fmaf(0.05f, static_cast<float>(one.normal()), -1.f);
    bulk.fill_normal(b.data(), n, -1.f, 0.05f);
    ASSERT_EQ(bulk.counter(), one.counter()) << threads << " threads, normal";
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(b[static_cast<size_t>(i)], a[static_cast<size_t>(i)]) << threads << " threads, normal " << i;
  }
}
