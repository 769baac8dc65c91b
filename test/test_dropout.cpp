// Dropout: identity in evaluation; in training the kept fraction, the 1/(1-p) scale, backward
// through the same mask, and a mask that depends only on the seed and stream position (not on
// the thread count).
#include <cmath>

#include "core/error.h"
#include "layers/dropout.h"
#include "testing.h"

using namespace pdnn;
namespace pt = pdnn::testing;

TEST(Dropout, EvalIsIdentity) {
  Context ctx(1, 5);
  Rng rng(1);
  Dropout d(0.5f);
  d.train(false);
  Tensor x = pt::random_tensor(Shape{2, 3, 4, 5}, rng);
  Tensor y(x.shape()), dx(x.shape());
  d.forward(ctx, x, y);
  pt::expect_close(y, x, 0, 0, "dropout eval forward");
  Tensor dy = pt::random_tensor(x.shape(), rng);
  d.backward(ctx, x, y, dy, &dx);
  pt::expect_close(dx, dy, 0, 0, "dropout eval backward");
  EXPECT_EQ(ctx.rng().counter(), 0u);  // evaluation draws nothing
}

TEST(Dropout, TrainKeepsAboutOneMinusPScaledAndBackwardUsesTheMask) {
  for (float p : {0.25f, 0.5f, 0.9f}) {
    Context ctx(1, 11);
    Dropout d(p);
    const Shape s{16, 4, 32, 32};  // 65536 elements
    Tensor x(s);
    for (int64_t i = 0; i < x.numel(); ++i) x[i] = 1.f + static_cast<float>(i % 7);  // nonzero
    Tensor y(s);
    d.forward(ctx, x, y);
    EXPECT_EQ(ctx.rng().counter(), static_cast<uint64_t>(x.numel()));
    int64_t kept = 0;
    const float scale = 1.f / (1.f - p);
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (y[i] != 0.f) {
        ++kept;
        EXPECT_FLOAT_EQ(y[i], x[i] * scale) << "at " << i;
      }
    }
    const double frac = static_cast<double>(kept) / static_cast<double>(x.numel());
    // Binomial standard deviation sqrt(p(1-p)/n) <= 0.002 here; allow 5 sigma.
    EXPECT_NEAR(frac, 1.0 - p, 0.01) << "p = " << p;

    Rng rng(3);
    Tensor dy = pt::random_tensor(s, rng);
    Tensor dx(s);
    d.backward(ctx, x, y, dy, &dx);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const float want = y[i] != 0.f ? dy[i] * scale : 0.f;
      ASSERT_EQ(dx[i], want) << "at " << i << ", p = " << p;
    }
  }
}

TEST(Dropout, MaskDependsOnSeedAndPositionNotThreads) {
  const Shape s{8, 8, 32, 32};  // 65536: parallel at 2 threads
  Tensor x(s);
  x.fill(1.f);
  auto run = [&](int threads, uint64_t seed, int forwards) {
    Context ctx(threads, seed);
    Dropout d(0.3f);
    Tensor y(s);
    for (int k = 0; k < forwards; ++k) d.forward(ctx, x, y);
    return y;
  };
  Tensor a = run(1, 42, 1);
  pt::expect_close(run(1, 42, 1), a, 0, 0, "same seed, same mask");
  pt::expect_close(run(2, 42, 1), a, 0, 0, "2 threads vs 1, same mask");
  pt::expect_close(run(2, 42, 2), run(1, 42, 2), 0, 0, "second draw, 2 threads vs 1");
  // A different seed, or the next forward of the same stream, gives a different mask.
  for (const Tensor& other : {run(1, 43, 1), run(1, 42, 2)}) {
    int64_t differ = 0;
    for (int64_t i = 0; i < x.numel(); ++i) differ += (other[i] != a[i]);
    EXPECT_GT(differ, x.numel() / 4);
  }
}

TEST(Dropout, MaskFollowsTheDocumentedRule) {
  Context ctx(1, 99);
  ctx.rng().next();  // start mid-stream: base must come from reserve(), not 0
  Dropout d(0.4f);
  Tensor x(Shape{3, 50});
  x.fill(2.f);
  Tensor y(x.shape());
  d.forward(ctx, x, y);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const bool keep = Rng::to_unit(Rng::at(99, 1 + static_cast<uint64_t>(i) + 1)) >= 0.4;
    EXPECT_EQ(y[i], keep ? 2.f * (1.f / (1.f - 0.4f)) : 0.f) << "at " << i;
  }
}

TEST(Dropout, ValidatesP) {
  EXPECT_THROW(Dropout(1.f), Error);
  EXPECT_THROW(Dropout(-0.1f), Error);
  EXPECT_THROW(Dropout(std::nanf("")), Error);
  EXPECT_NO_THROW(Dropout(0.f));
}
