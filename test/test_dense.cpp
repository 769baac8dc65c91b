// Dense: forward against a naive loop (2-D and 4-D input, with and without bias), gradients
// by finite differences, accumulation of parameter gradients (written by the first backward
// after zero_grad), PyTorch-default init, errors.
#include <cmath>
#include <limits>

#include "core/error.h"
#include "layers/dense.h"
#include "model/sequential.h"
#include "testing.h"

using namespace pdnn;
namespace pt = pdnn::testing;

namespace {

void randomise(Dense& d, Rng& rng) {
  for (auto& p : d.params()) *p.value = pt::random_tensor(p.value->shape(), rng);
}

// y in double, and the float32 rounding bound of each element: a sum of K products computed in
// float (any order, any blocking: OpenBLAS's kernel set decides) is off by about sqrt(K)*u*sum|x*w|
// (u = 2^-24; Higham & Mary's probabilistic bound); 8 of those is certain in practice, yet a
// missing or wrong term (|x*w| ~ 0.25 here) exceeds it many times over. A fixed atol cannot work:
// with K = 1960 the output is a small difference of terms whose magnitudes add up to ~500.
struct Reference {
  Tensor y, tol;
};
Reference reference(const Tensor& x, Dense& d) {
  const int64_t N = x.shape(0), in = d.in_features(), out = d.out_features();
  Reference r{Tensor(Shape{N, out}), Tensor(Shape{N, out})};
  const double u = std::ldexp(1.0, -24);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < out; ++o) {
      double s = d.bias().empty() ? 0.0 : d.bias()[o];
      double mag = std::fabs(s);
      for (int64_t i = 0; i < in; ++i) {
        const double p = static_cast<double>(x[n * in + i]) * d.weight()[o * in + i];
        s += p;
        mag += std::fabs(p);
      }
      r.y[n * out + o] = static_cast<float>(s);
      r.tol[n * out + o] =
          static_cast<float>(1e-6 * (1.0 + std::fabs(s)) + 8.0 * std::sqrt(in + 1.0) * u * mag);
    }
  return r;
}

struct Case {
  Shape in;
  int64_t out;
  bool bias;
};

}  // namespace

TEST(Dense, ForwardMatchesReference) {
  Context ctx(1);
  Rng rng(1);
  for (const Case& c : {Case{{1, 5}, 3, true}, Case{{7, 13}, 11, true}, Case{{4, 2, 3, 3}, 5, true},
                        Case{{3, 9}, 4, false}, Case{{8, 1960}, 100, true}}) {
    Dense d(c.in.per_sample(), c.out, c.bias);
    randomise(d, rng);
    Tensor x = pt::random_tensor(c.in, rng);
    Tensor y(d.output_shape(c.in));
    EXPECT_EQ(y.shape(), (Shape{c.in.n(), c.out}));
    d.forward(ctx, x, y);
    const Reference ref = reference(x, d);
    int64_t bad = 0;
    for (int64_t i = 0; i < y.numel(); ++i)
      if (!(std::fabs(static_cast<double>(y[i]) - ref.y[i]) <= ref.tol[i])) ++bad;
    EXPECT_EQ(bad, 0) << d.describe() << " at " << c.in.str() << ": " << bad << " of "
                      << y.numel() << " elements beyond the float32 rounding bound";
    EXPECT_EQ(d.flops(c.in), 2.0 * c.in.n() * c.in.per_sample() * c.out);
  }
}

TEST(Dense, GradientsMatchFiniteDifferences) {
  Context ctx(1);
  Rng rng(2);
  for (const Case& c : {Case{{1, 5}, 3, true}, Case{{4, 7}, 6, true}, Case{{3, 2, 3, 3}, 5, true},
                        Case{{2, 9}, 4, false}}) {
    Dense d(c.in.per_sample(), c.out, c.bias);
    randomise(d, rng);
    pt::check_layer_gradients(ctx, d, pt::random_tensor(c.in, rng));
  }
}

TEST(Dense, FusedActivationGradientsMatchFiniteDifferences) {
  Context ctx(1);
  Rng rng(5);
  for (const Act act : {Act{FusedAct::ReLU, 0.f}, Act{FusedAct::LeakyReLU, 0.3f}}) {
    Dense d(9, 6);
    ASSERT_TRUE(d.fuse_activation(act));
    randomise(d, rng);
    SCOPED_TRACE(d.describe());
    pt::check_layer_gradients(ctx, d, pt::random_tensor(Shape{4, 9}, rng));
  }
}

TEST(Dense, ParameterGradientsAccumulateInputGradientIsWritten) {
  Context ctx(1);
  Rng rng(3);
  Dense d(6, 4);
  randomise(d, rng);
  Tensor x = pt::random_tensor(Shape{3, 6}, rng);
  Tensor y(Shape{3, 4}), dx(x.shape());
  Tensor dy = pt::random_tensor(y.shape(), rng);
  d.forward(ctx, x, y);
  d.zero_grad();
  d.backward(ctx, x, y, dy, &dx);
  std::vector<Tensor> once;
  for (auto& p : d.params()) once.push_back(p.grad->clone());
  Tensor dx_once = dx.clone();
  d.backward(ctx, x, y, dy, &dx);
  auto ps = d.params();
  for (size_t k = 0; k < ps.size(); ++k) {
    Tensor twice = once[k].clone();
    for (int64_t i = 0; i < twice.numel(); ++i) twice[i] *= 2.f;
    pt::expect_close(*ps[k].grad, twice, 1e-6, 1e-6, "d" + ps[k].name + " after two backwards");
  }
  pt::expect_close(dx, dx_once, 0, 0, "dx is written, not accumulated");
  d.backward(ctx, x, y, dy, nullptr);  // first layer: no input gradient wanted
}

// After zero_grad (the layer's own, or the model's over its flat buffer) the first backward
// writes the weight gradient (dense_backward's dw_zero: the GEMM's beta 0, dw not read) and
// the ones after add to it. Each path is forced and told apart by NaN in dw before the
// backward: written over on the first, kept on the second. The written gradient is the one
// added onto zeros (a layer whose gradients were zeroed by hand takes that path). The GPU's
// twins: Bf16Gpu.DenseBackwardIntoZerosWritesWithoutReadingDw.
TEST(Dense, TheFirstBackwardAfterZeroGradWritesTheWeightGradient) {
  Context ctx(1);
  Rng rng(5);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Sequential m;
  Dense& d = m.emplace<Dense>(7, 5);
  randomise(d, rng);
  Dense hand(7, 5);  // the same parameters, its gradients zeroed by hand (added onto)
  for (size_t k = 0; k < d.params().size(); ++k) *hand.params()[k].value = d.params()[k].value->clone();
  Tensor x = pt::random_tensor(Shape{4, 7}, rng);
  Tensor dy = pt::random_tensor(Shape{4, 5}, rng);
  Tensor y = m.forward(ctx, x).clone();
  Tensor yh(y.shape());
  hand.forward(ctx, x, yh);
  for (auto& p : hand.params()) p.grad->zero();
  hand.backward(ctx, x, yh, dy, nullptr);
  for (const bool model_zeroes : {true, false}) {
    SCOPED_TRACE(model_zeroes ? "Model::zero_grad" : "Layer::zero_grad");
    if (model_zeroes)
      m.zero_grad(ctx);
    else
      d.zero_grad();
    Tensor& dw = *d.params()[0].grad;
    dw.fill(nan);  // not zeros: the written path must not read them
    d.backward(ctx, x, y, dy, nullptr);
    // (beta 0 may take another BLAS kernel than beta 1: the sums of 4 products to an ulp or two)
    pt::expect_close(dw, *hand.params()[0].grad, 1e-6, 1e-6, "dW written after zero_grad");
    dw.fill(nan);  // the next backward adds: NaN stays
    d.backward(ctx, x, y, dy, nullptr);
    for (int64_t i = 0; i < dw.numel(); ++i)
      ASSERT_TRUE(std::isnan(dw[i])) << "dW[" << i << "]: the second backward wrote it";
  }
}

TEST(Dense, ResetParametersIsPyTorchDefaultAndSeeded) {
  Dense a(50, 20), b(50, 20);
  Rng r1(7), r2(7);
  a.reset_parameters(r1);
  b.reset_parameters(r2);
  const float bound = static_cast<float>(1.0 / std::sqrt(50.0));  // as init.cpp rounds it
  float wmax = 0.f, bmax = 0.f;
  for (int64_t i = 0; i < a.weight().numel(); ++i) wmax = std::max(wmax, std::fabs(a.weight()[i]));
  for (int64_t i = 0; i < a.bias().numel(); ++i) bmax = std::max(bmax, std::fabs(a.bias()[i]));
  EXPECT_LE(wmax, bound);
  EXPECT_GT(wmax, 0.9f * bound);  // 1000 uniform draws reach close to the bound
  EXPECT_LE(bmax, bound);
  EXPECT_GT(bmax, 0.5f * bound);
  pt::expect_close(a.weight(), b.weight(), 0, 0, "same seed, same weights");
  // Weight first, then bias, each in row-major order (init.h's documented draw order).
  Rng r3(7);
  EXPECT_FLOAT_EQ(a.weight()[0], r3.uniform(-bound, bound));  // FMA contraction may differ
  EXPECT_EQ(r1.counter(), 50u * 20u + 20u);
}

TEST(Dense, SameResultAtOneAndTwoThreads) {
  Rng rng(4);
  Dense d(300, 200);
  randomise(d, rng);
  // OpenBLAS may split the GEMMs differently by thread count: within 1e-5, not bit-equal.
  pt::expect_same_at_one_and_two_threads(d, pt::random_tensor(Shape{64, 300}, rng), 1e-5, 1e-5);
}

TEST(Dense, WrongFeatureCountThrowsNamingBothShapes) {
  Context ctx(1);
  Dense d(1960, 100);
  pt::expect_error_mentions(
      [&] {
        d.output_shape(Shape{8, 10, 14, 15});
      },
      {"Dense", "(8,10,14,15)", "(100,1960)"});
  Tensor x(Shape{2, 1961}), y(Shape{2, 100});
  EXPECT_THROW(d.forward(ctx, x, y), Error);
  EXPECT_THROW(d.output_shape(Shape{1960}), Error);
  EXPECT_THROW(Dense(0, 3), Error);
}
