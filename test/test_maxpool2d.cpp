// MaxPool2d: output size, forward and argmax routing against a naive reference, gradients by
// finite differences (stride = kernel, stride < kernel, odd sizes), ties, threads, errors.
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "layers/dropout.h"
#include "layers/maxpool2d.h"
#include "testing.h"

using namespace pdnn;
namespace pt = pdnn::testing;

namespace {

// Distinct values 0.01 apart (a shuffled arange), so a finite-difference step of 1e-3 never
// changes which element is the maximum.
Tensor distinct_values(const Shape& s, Rng& rng) {
  Tensor x(s);
  std::vector<int64_t> perm = rng.permutation(s.numel());
  for (int64_t i = 0; i < s.numel(); ++i)
    x[i] = 0.01f * static_cast<float>(perm[static_cast<size_t>(i)] - s.numel() / 2);
  return x;
}

// Naive reference: y, and dx for a given dy (first maximum in row-major window order wins).
void reference(const Tensor& x, int k, int s, const Tensor& dy, Tensor& y, Tensor& dx) {
  const int64_t N = x.shape(0), C = x.shape(1), H = x.shape(2), W = x.shape(3);
  const int64_t OH = (H - k) / s + 1, OW = (W - k) / s + 1;
  y = Tensor(Shape{N, C, OH, OW});
  dx = Tensor::zeros(x.shape());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t oy = 0; oy < OH; ++oy)
        for (int64_t ox = 0; ox < OW; ++ox) {
          int64_t bi = -1;
          for (int64_t ky = 0; ky < k; ++ky)
            for (int64_t kx = 0; kx < k; ++kx) {
              const int64_t i = ((n * C + c) * H + oy * s + ky) * W + ox * s + kx;
              if (bi < 0 || x[i] > x[bi]) bi = i;
            }
          const int64_t o = ((n * C + c) * OH + oy) * OW + ox;
          y[o] = x[bi];
          dx[bi] += dy[o];
        }
}

struct Geo {
  Shape in;
  int k, s;
};

}  // namespace

TEST(MaxPool2d, OutputShapeAndDescribe) {
  EXPECT_EQ(MaxPool2d(2).output_shape(Shape{8, 10, 28, 28}), (Shape{8, 10, 14, 14}));
  EXPECT_EQ(MaxPool2d(2, 2).output_shape(Shape{1, 1, 5, 5}), (Shape{1, 1, 2, 2}));
  EXPECT_EQ(MaxPool2d(3, 2).output_shape(Shape{1, 1, 7, 7}), (Shape{1, 1, 3, 3}));
  EXPECT_EQ(MaxPool2d(3, 1).output_shape(Shape{2, 3, 6, 4}), (Shape{2, 3, 4, 2}));
  EXPECT_EQ(MaxPool2d(2).describe(), "MaxPool2d(k2 s2)");
  EXPECT_EQ(MaxPool2d(2).flops(Shape{8, 10, 28, 28}), 8.0 * 10 * 28 * 28);
}

TEST(MaxPool2d, ForwardAndBackwardMatchReference) {
  Context ctx(2);
  Rng rng(1);
  // The last shapes are above the parallel threshold; the 2x2 ones cover the vector kernel's
  // row tails (OW = 3, 5, 12, 18, 35: one or several 16-wide steps) and its writes past a
  // row's end, which must stay inside the plane (planes run on two threads).
  for (const Geo& g :
       {Geo{{2, 3, 8, 8}, 2, 2}, Geo{{1, 2, 7, 7}, 3, 2}, Geo{{2, 1, 5, 5}, 2, 2},
        Geo{{1, 2, 6, 5}, 3, 1}, Geo{{3, 2, 9, 11}, 2, 3}, Geo{{4, 16, 24, 24}, 2, 2},
        Geo{{3, 5, 40, 37}, 2, 2}, Geo{{2, 3, 34, 70}, 2, 2}, Geo{{64, 8, 10, 11}, 2, 2}}) {
    MaxPool2d pool(g.k, g.s);
    Tensor x = pt::random_tensor(g.in, rng);
    Tensor y(pool.output_shape(g.in)), dx(g.in);
    pool.forward(ctx, x, y);
    Tensor dy = pt::random_tensor(y.shape(), rng);
    pool.backward(ctx, x, y, dy, &dx);
    Tensor y_ref, dx_ref;
    reference(x, g.k, g.s, dy, y_ref, dx_ref);
    const std::string at = pool.describe() + " at " + g.in.str();
    pt::expect_close(y, y_ref, 0, 0, at + " y");
    // Overlapping windows add in another order than the reference: allow float rounding.
    pt::expect_close(dx, dx_ref, 1e-6, 1e-6, at + " dx");
  }
}

TEST(MaxPool2d, GradientsMatchFiniteDifferences) {
  Context ctx(1);
  Rng rng(2);
  for (const Geo& g : {Geo{{1, 1, 4, 4}, 2, 2}, Geo{{1, 2, 7, 7}, 3, 2}, Geo{{2, 1, 5, 5}, 2, 2},
                       Geo{{2, 3, 6, 6}, 2, 1}, Geo{{1, 1, 6, 6}, 3, 3}}) {
    MaxPool2d pool(g.k, g.s);
    pt::check_layer_gradients(ctx, pool, distinct_values(g.in, rng));
  }
}

TEST(MaxPool2d, TiesGoToTheFirstMaximum) {
  Context ctx(1);
  MaxPool2d pool(2);
  Tensor x(Shape{1, 1, 2, 4});
  x.fill(1.f);
  x[3] = 5.f;  // window 2: values 1, 5, 1, 1 -> the 5 (index 3) wins
  x[7] = 5.f;  // ... and a tie with the later 5 (index 7) keeps index 3
  Tensor y(pool.output_shape(x.shape())), dx(x.shape()), dy(y.shape());
  pool.forward(ctx, x, y);
  dy[0] = 1.f;
  dy[1] = 2.f;
  pool.backward(ctx, x, y, dy, &dx);
  EXPECT_EQ(y[0], 1.f);
  EXPECT_EQ(y[1], 5.f);
  const float want[8] = {1, 0, 0, 2, 0, 0, 0, 0};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(dx[i], want[i]) << "at " << i;
}

TEST(MaxPool2d, TiesGoToTheFirstMaximumGeneralPath) {
  Context ctx(1);
  MaxPool2d pool(2, 1);  // not 2x2/2: the general kernel
  Tensor x(Shape{1, 1, 2, 3});
  x.fill(4.f);  // every window all ties -> its top-left element
  Tensor y(pool.output_shape(x.shape())), dx(x.shape()), dy(y.shape());
  pool.forward(ctx, x, y);
  dy[0] = 1.f;
  dy[1] = 2.f;
  pool.backward(ctx, x, y, dy, &dx);
  const float want[6] = {1, 2, 0, 0, 0, 0};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(dx[i], want[i]) << "at " << i;
}

TEST(MaxPool2d, NaNPropagates) {
  Context ctx(1);
  for (int stride : {2, 1}) {  // the 2x2/2 kernel and the general one
    MaxPool2d pool(2, stride);
    Tensor x(Shape{1, 1, 2, 2});
    x[0] = 1.f;
    x[1] = std::nanf("");
    x[2] = 3.f;
    x[3] = 2.f;
    Tensor y(Shape{1, 1, 1, 1});
    pool.forward(ctx, x, y);
    EXPECT_TRUE(std::isnan(y[0])) << pool.describe();
  }
}

TEST(MaxPool2d, SameResultAtOneAndTwoThreads) {
  Rng rng(3);
  const Shape s{16, 32, 24, 24};
  Tensor x = pt::random_tensor(s, rng);
  MaxPool2d pool2(2), pool3(3, 2);  // the 2x2/2 kernel and the general one
  pt::expect_same_at_one_and_two_threads(pool2, x);
  pt::expect_same_at_one_and_two_threads(pool3, x);
}

TEST(MaxPool2d, Errors) {
  Context ctx(1);
  EXPECT_THROW(MaxPool2d(0), Error);
  MaxPool2d pool(3);
  EXPECT_THROW(pool.output_shape(Shape{1, 1, 2, 5}), Error);  // smaller than the kernel
  EXPECT_THROW(pool.output_shape(Shape{4, 9}), Error);        // not NCHW
  Tensor x(Shape{1, 1, 6, 6}), y(Shape{1, 1, 3, 3});
  pt::expect_error_mentions([&] { pool.forward(ctx, x, y); },
                            {"MaxPool2d", "(1,1,3,3)", "(1,1,2,2)"});
  // Backward with an input other than the one the argmax was recorded for.
  Tensor y2(Shape{1, 1, 2, 2});
  pool.forward(ctx, x, y2);
  Tensor x7(Shape{1, 1, 7, 7}), dx7(x7.shape());
  EXPECT_THROW(pool.backward(ctx, x7, y2, y2, &dx7), Error);
}

// A Dropout fused into the pool (the mask applied in the pool's write) gives exactly the pool
// followed by the Dropout layer: y, the mask, dx and the RNG position after, in training over
// two steps (fresh masks), at 1 and 2 threads, for the 2x2 kernel and the general one (3x3
// stride 3), sizes below and above the parallel threshold; in evaluation plain pooling, no
// draw. Overlapping windows are not fused.
TEST(MaxPool2d, FusedDropoutEqualsPoolThenDropout) {
  Rng rng(5);
  EXPECT_FALSE(MaxPool2d(3, 2).fuse_dropout(0.3f));
  for (const Geo& g : {Geo{{2, 3, 8, 8}, 2, 2}, Geo{{1, 2, 7, 7}, 3, 3},
                       Geo{{16, 16, 24, 24}, 2, 2}, Geo{{8, 8, 19, 23}, 3, 3}})
    for (int threads : {1, 2}) {
      const std::string at = "k" + std::to_string(g.k) + " s" + std::to_string(g.s) + " " +
                             g.in.str() + " at " + std::to_string(threads) + " threads";
      Context ca(threads, 11), cb(threads, 11);
      MaxPool2d pool_a(g.k, g.s), pool_b(g.k, g.s);
      Dropout drop(0.3f);
      ASSERT_TRUE(pool_b.fuse_dropout(drop.fusable_dropout()));
      EXPECT_FALSE(pool_b.fuse_dropout(0.5f)) << "one dropout per pool";
      EXPECT_EQ(pool_b.describe(), pool_a.describe() + " + Dropout(0.3)");
      for (int step = 0; step < 3; ++step) {
        const bool training = step < 2;
        pool_a.train(training);
        drop.train(training);
        pool_b.train(training);
        const Tensor x = pt::random_tensor(g.in, rng);
        const Shape ys = pool_a.output_shape(g.in);
        Tensor pooled(ys), ya(ys), yb(ys), dxa(g.in), dxb(g.in), dpooled(ys);
        pool_a.forward(ca, x, pooled);
        drop.forward(ca, pooled, ya);
        pool_b.forward(cb, x, yb);
        const std::string s = at + (training ? " training step " : " eval step ") +
                              std::to_string(step);
        pt::expect_close(yb, ya, 0, 0, s + " y");
        EXPECT_EQ(cb.rng().counter(), ca.rng().counter()) << s;
        if (training) pt::expect_close(pool_b.dropout_mask(), drop.mask(), 0, 0, s + " mask");
        const Tensor dy = pt::random_tensor(ys, rng);
        drop.backward(ca, pooled, ya, dy, &dpooled);
        pool_a.backward(ca, x, pooled, dpooled, &dxa);
        pool_b.backward(cb, x, yb, dy, &dxb);
        pt::expect_close(dxb, dxa, 0, 0, s + " dx");
      }
    }
}

// The fused layer's gradient by finite differences, the mask held fixed by drawing every
// forward from the same RNG position.
TEST(MaxPool2d, FusedDropoutGradientsMatchFiniteDifferences) {
  Context ctx(1, 3);
  Rng rng(9);
  for (const Geo& g : {Geo{{2, 3, 6, 6}, 2, 2}, Geo{{1, 2, 7, 7}, 3, 3}}) {
    MaxPool2d pool(g.k, g.s);
    ASSERT_TRUE(pool.fuse_dropout(0.4f));
    const Tensor x = distinct_values(g.in, rng);
    const Shape ys = pool.output_shape(g.in);
    const Tensor gy = pt::random_tensor(ys, rng);
    const uint64_t at = ctx.rng().counter();
    auto loss = [&](const Tensor& xv) {
      ctx.rng().set_counter(at);
      Tensor y(ys);
      pool.forward(ctx, xv, y);
      double l = 0;
      for (int64_t i = 0; i < y.numel(); ++i) l += static_cast<double>(y[i]) * gy[i];
      return l;
    };
    loss(x);
    Tensor y(ys), dx(g.in);
    ctx.rng().set_counter(at);
    pool.forward(ctx, x, y);
    int dropped = 0;
    for (int64_t i = 0; i < ys.numel(); ++i) dropped += pool.dropout_mask()[i] == 0.f;
    ASSERT_GT(dropped, 0) << "the mask should drop some outputs";
    pool.backward(ctx, x, y, gy, &dx);
    pt::check_function_gradient(loss, x, dx, {}, pool.describe() + " " + g.in.str());
  }
}

// The argmax is one byte per output (the offset in the window), and a pool that keeps none
// (the memory plan's choice) finds the same maxima again in backward: dx bit for bit the same,
// for the 2x2 kernel, the general one, overlapping windows, ties, NaNs and a fused dropout, at
// 1 and 2 threads; its backward then reads x, and it keeps only the fused dropout's mask.
TEST(MaxPool2d, ArgmaxFoundAgainInBackwardGivesTheSameGradient) {
  Rng rng(13);
  struct Case {
    Geo g;
    float drop;  // < 0: none
    bool ties;
  };
  for (const Case& c : {Case{{{2, 3, 8, 8}, 2, 2}, -1.f, false}, Case{{{2, 3, 8, 8}, 2, 2}, -1.f, true},
                        Case{{{1, 2, 9, 7}, 3, 2}, -1.f, true}, Case{{{2, 2, 7, 7}, 3, 1}, -1.f, false},
                        Case{{{3, 2, 9, 11}, 2, 3}, -1.f, false}, Case{{{4, 16, 24, 24}, 2, 2}, 0.3f, false},
                        Case{{{2, 3, 12, 12}, 3, 3}, 0.4f, true}})
    for (int threads : {1, 2}) {
      const std::string at = "k" + std::to_string(c.g.k) + " s" + std::to_string(c.g.s) + " " +
                             c.g.in.str() + (c.drop >= 0 ? " + dropout" : "") +
                             (c.ties ? " ties" : "") + " at " + std::to_string(threads) + " threads";
      Tensor x = pt::random_tensor(c.g.in, rng);
      if (c.ties)
        for (int64_t i = 0; i < x.numel(); ++i) x[i] = static_cast<float>(rng.next() % 3);
      x[5] = std::nanf("");  // a NaN window
      Context ca(threads, 21), cb(threads, 21);
      MaxPool2d kept(c.g.k, c.g.s), again(c.g.k, c.g.s);
      again.set_keep_argmax(false);
      if (c.drop >= 0) {
        ASSERT_TRUE(kept.fuse_dropout(c.drop));
        ASSERT_TRUE(again.fuse_dropout(c.drop));
      }
      const Shape ys = kept.output_shape(c.g.in);
      const BackwardNeeds nk = kept.backward_needs(c.g.in, PlanFor{}),
                          na = again.backward_needs(c.g.in, PlanFor{});
      const int64_t mask = c.drop >= 0 ? ys.numel() * 4 : 0;
      EXPECT_EQ(nk.scratch_bytes, ys.numel() + mask) << at;  // one byte per output
      EXPECT_EQ(na.scratch_bytes, mask) << at;
      EXPECT_FALSE(nk.input) << at;
      EXPECT_TRUE(na.input) << at;
      EXPECT_EQ(nk.argmax_bytes, ys.numel()) << at;
      Tensor ya(ys), yb(ys), dxa(c.g.in), dxb(c.g.in);
      kept.forward(ca, x, ya);
      again.forward(cb, x, yb);
      ASSERT_EQ(0, std::memcmp(ya.data(), yb.data(), ya.nbytes())) << at;
      const Tensor dy = pt::random_tensor(ys, rng);
      kept.backward(ca, x, ya, dy, &dxa);
      again.backward(cb, x, yb, dy, &dxb);
      EXPECT_EQ(0, std::memcmp(dxa.data(), dxb.data(), dxa.nbytes())) << at;
    }
  // Kernels past 16x16 do not fit the one-byte offset: refused by name.
  pt::expect_error_mentions([] { MaxPool2d(17); }, {"MaxPool2d", "17", "one-byte"});
}
