// BatchNorm2d: forward (train: batch statistics; eval: running ones) against a naive loop,
// gradients by finite differences through the batch statistics and in eval mode, the running
// statistics update by hand, and one small case against PyTorch 1.13 numbers.
#include <cmath>
#include <memory>

#include "core/error.h"
#include "layers/activation.h"
#include "layers/batchnorm2d.h"
#include "ops/batchnorm2d.h"
#include "testing.h"

using namespace pdnn;
namespace pt = pdnn::testing;

namespace {

// Naive reference with the given statistics (double).
Tensor reference(const Tensor& x, const std::vector<double>& mean, const std::vector<double>& var,
                 BatchNorm2d& bn, double eps) {
  const int64_t N = x.shape(0), C = x.shape(1), HW = x.shape(2) * x.shape(3);
  Tensor y(x.shape());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t j = 0; j < HW; ++j) {
        const int64_t i = (n * C + c) * HW + j;
        y[i] = static_cast<float>((x[i] - mean[c]) / std::sqrt(var[c] + eps) * bn.weight()[c] +
                                  bn.bias()[c]);
      }
  return y;
}

// Per-channel mean and biased variance of x (double).
void batch_stats(const Tensor& x, std::vector<double>& mean, std::vector<double>& var) {
  const int64_t N = x.shape(0), C = x.shape(1), HW = x.shape(2) * x.shape(3);
  mean.assign(C, 0.0);
  var.assign(C, 0.0);
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < HW; ++j) mean[c] += x[(n * C + c) * HW + j];
    mean[c] /= N * HW;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < HW; ++j) var[c] += std::pow(x[(n * C + c) * HW + j] - mean[c], 2);
    var[c] /= N * HW;
  }
}

void randomise_affine(BatchNorm2d& bn, Rng& rng) {
  bn.weight() = pt::random_tensor(bn.weight().shape(), rng, 0.5f, 2.f);
  bn.bias() = pt::random_tensor(bn.bias().shape(), rng);
}

}  // namespace

TEST(BatchNorm2d, TrainForwardUsesBatchStatistics) {
  Context ctx(1);
  Rng rng(1);
  // The last shape is above the parallel threshold.
  for (const Shape& s :
       {Shape{2, 3, 4, 5}, Shape{1, 2, 3, 3}, Shape{5, 1, 1, 1}, Shape{8, 16, 16, 16}}) {
    BatchNorm2d bn(s.c());
    randomise_affine(bn, rng);
    Tensor x = pt::random_tensor(s, rng, -2.f, 3.f);
    Tensor y(s);
    bn.forward(ctx, x, y);
    std::vector<double> mean, var;
    batch_stats(x, mean, var);
    pt::expect_close(y, reference(x, mean, var, bn, 1e-5), 1e-5, 1e-5, "train forward " + s.str());
  }
}

TEST(BatchNorm2d, EvalForwardUsesRunningStatistics) {
  Context ctx(1);
  Rng rng(2);
  const Shape s{3, 4, 5, 3};
  BatchNorm2d bn(4, 1e-3f);
  randomise_affine(bn, rng);
  bn.running_mean() = pt::random_tensor(Shape{4}, rng);
  bn.running_var() = pt::random_tensor(Shape{4}, rng, 0.5f, 2.f);
  std::vector<double> mean(4), var(4);
  for (int c = 0; c < 4; ++c) {
    mean[c] = bn.running_mean()[c];
    var[c] = bn.running_var()[c];
  }
  bn.train(false);
  Tensor x = pt::random_tensor(s, rng);
  Tensor y(s);
  bn.forward(ctx, x, y);
  pt::expect_close(y, reference(x, mean, var, bn, 1e-3), 1e-5, 1e-5, "eval forward");
  EXPECT_EQ(bn.running_mean()[0], static_cast<float>(mean[0]));  // eval leaves them alone
}

TEST(BatchNorm2d, RunningStatisticsUpdateByHand) {
  Context ctx(1);
  // One channel, values 1, 2, 3, 6: mean 3, biased var 3.5, unbiased var 14/3.
  BatchNorm2d bn(1, 1e-5f, 0.1f);
  Tensor x(Shape{2, 1, 1, 2});
  x[0] = 1.f;
  x[1] = 2.f;
  x[2] = 3.f;
  x[3] = 6.f;
  Tensor y(x.shape());
  bn.forward(ctx, x, y);
  EXPECT_FLOAT_EQ(bn.running_mean()[0], 0.9f * 0.f + 0.1f * 3.f);
  EXPECT_FLOAT_EQ(bn.running_var()[0], 0.9f * 1.f + 0.1f * (14.f / 3.f));
  EXPECT_NEAR(y[3], (6.0 - 3.0) / std::sqrt(3.5 + 1e-5), 1e-6);  // normalised by the biased var
  bn.forward(ctx, x, y);  // second step compounds from the first
  EXPECT_FLOAT_EQ(bn.running_mean()[0], 0.9f * 0.3f + 0.1f * 3.f);
  EXPECT_FLOAT_EQ(bn.running_var()[0], 0.9f * (0.9f + 0.1f * (14.f / 3.f)) + 0.1f * (14.f / 3.f));
  auto bufs = bn.buffers();
  ASSERT_EQ(bufs.size(), 2u);
  EXPECT_EQ(bufs[0].name, "running_mean");
  EXPECT_EQ(bufs[1].name, "running_var");
}

TEST(BatchNorm2d, MatchesPyTorch) {
  // Produced with /usr/bin/python3 (torch 1.13.1): nn.BatchNorm2d(2, eps=1e-5, momentum=0.1),
  // weight [1.5, -0.5], bias [0.1, 0.2], x = [0.5, -1, 2, 0.25, 1.5, 3, -0.75, 0] as (2,2,1,2),
  // train-mode forward, y.backward(dy) with dy = [0.3, -0.2, 0.1, 0.4, -0.5, 0.25, 0.6, -0.1];
  // then eval-mode forward and backward with the updated running statistics.
  const float xs[8] = {0.5f, -1.f, 2.f, 0.25f, 1.5f, 3.f, -0.75f, 0.f};
  const float dys[8] = {0.3f, -0.2f, 0.1f, 0.4f, -0.5f, 0.25f, 0.6f, -0.1f};
  const float y_t[8] = {-0.41449451f, -1.9579781f, -0.6062218f, 0.26201707f,
                        0.61449456f,  2.1579781f,  0.75815356f, 0.38605118f};
  const float dx_t[8] = {0.37754804f, -0.046153769f, -0.029767152f, -0.066406041f,
                         -0.5061717f, 0.17477739f,   -0.10151789f,  0.19769107f};
  const float dgamma_t[2] = {0.34299636f, -0.52094328f}, dbeta_t[2] = {-0.14999999f, 1.f};
  const float rmean_t[2] = {0.1f, 0.037500001f}, rvar_t[2] = {1.1833333f, 1.0354166f};
  const float y_e[8] = {0.65156394f, -1.4168009f, -0.76431739f, 0.095583469f,
                        2.0304737f,  4.0988383f,  0.58695543f,  0.21842645f};
  const float dx_e[8] = {0.41367298f,  -0.27578199f, -0.049137194f, -0.19654877f,
                         -0.68945491f, 0.34472746f,  -0.29482317f,  0.049137194f};
  auto from = [](const float* v, Shape s) {
    Tensor t(s);
    for (int64_t i = 0; i < s.numel(); ++i) t[i] = v[i];
    return t;
  };
  const Shape s{2, 2, 1, 2};
  Context ctx(1);
  BatchNorm2d bn(2);
  bn.weight()[0] = 1.5f;
  bn.weight()[1] = -0.5f;
  bn.bias()[0] = 0.1f;
  bn.bias()[1] = 0.2f;
  Tensor x = from(xs, s), dy = from(dys, s), y(s), dx(s);
  bn.forward(ctx, x, y);
  bn.zero_grad();
  bn.backward(ctx, x, y, dy, &dx);
  pt::expect_close(y, from(y_t, s), 1e-6, 1e-5, "train y vs PyTorch");
  pt::expect_close(dx, from(dx_t, s), 1e-6, 1e-5, "train dx vs PyTorch");
  pt::expect_close(bn.params()[0].grad->clone(), from(dgamma_t, {2}), 1e-6, 1e-5, "dgamma");
  pt::expect_close(bn.params()[1].grad->clone(), from(dbeta_t, {2}), 1e-6, 1e-5, "dbeta");
  pt::expect_close(bn.running_mean(), from(rmean_t, {2}), 1e-7, 1e-6, "running_mean");
  pt::expect_close(bn.running_var(), from(rvar_t, {2}), 1e-7, 1e-6, "running_var");
  bn.train(false);
  bn.forward(ctx, x, y);
  bn.backward(ctx, x, y, dy, &dx);
  pt::expect_close(y, from(y_e, s), 1e-6, 1e-5, "eval y vs PyTorch");
  pt::expect_close(dx, from(dx_e, s), 1e-6, 1e-5, "eval dx vs PyTorch");
}

TEST(BatchNorm2d, TrainGradientsThroughBatchStatistics) {
  Context ctx(1);
  Rng rng(3);
  for (const Shape& s :
       {Shape{2, 3, 3, 3}, Shape{1, 2, 5, 3}, Shape{4, 1, 1, 1}, Shape{3, 2, 2, 5}}) {
    BatchNorm2d bn(s.c());
    randomise_affine(bn, rng);
    pt::check_layer_gradients(ctx, bn, pt::random_tensor(s, rng, -2.f, 2.f));
  }
  BatchNorm2d plain(3, 1e-5f, 0.1f, false);
  EXPECT_TRUE(plain.params().empty());
  pt::check_layer_gradients(ctx, plain, pt::random_tensor(Shape{2, 3, 2, 3}, rng));
}

// BatchNorm with ReLU / LeakyReLU fused (as the DCGAN's generator and discriminator use it), in
// training and evaluation mode.
TEST(BatchNorm2d, FusedActivationGradients) {
  Context ctx(1);
  Rng rng(6);
  for (bool train : {true, false})
    for (const Act act : {Act{FusedAct::ReLU, 0.f}, Act{FusedAct::LeakyReLU, 0.2f}}) {
      BatchNorm2d bn(3, 1e-5f, 0.1f, true, act.kind, act.slope);
      randomise_affine(bn, rng);
      bn.train(train);
      SCOPED_TRACE(bn.describe() + (train ? " train" : " eval"));
      pt::check_layer_gradients(ctx, bn, pt::random_tensor(Shape{2, 3, 3, 4}, rng, -2.f, 2.f));
    }
}

// A fused activation gives the numbers of BatchNorm2d followed by the activation's own layer,
// bit for bit: y, dx, dgamma and dbeta, in training (dx through the batch statistics) and
// evaluation, with planes of 1, 15, 49 and 256 values (whole vectors and tails of 4, 8 and 16
// lanes). Issue 24: built for AVX2 (-march=x86-64-v3), GCC kept the fused backward loop scalar
// and contracted its `slope * dy - mean` into one FMA, which the unfused path rounds twice: dx
// differed in the last bits for LeakyReLU (the build now never contracts: CMakeLists.txt).
TEST(BatchNorm2d, FusedActivationEqualsTheLayerAfterIt) {
  Context ctx(1);
  Rng rng(21);
  for (const Shape& s :
       {Shape{5, 3, 1, 1}, Shape{3, 2, 3, 5}, Shape{2, 3, 7, 7}, Shape{2, 2, 16, 16}})
    for (bool train : {true, false})
      for (const Act act : {Act{FusedAct::ReLU, 0.f}, Act{FusedAct::LeakyReLU, 0.2f},
                            Act{FusedAct::LeakyReLU, 1.f}}) {
        BatchNorm2d fused(s.c(), 1e-5f, 0.1f, true, act.kind, act.slope), plain(s.c());
        randomise_affine(fused, rng);
        plain.weight() = fused.weight().clone();
        plain.bias() = fused.bias().clone();
        std::unique_ptr<Layer> after;
        if (act.kind == FusedAct::ReLU)
          after = std::make_unique<ReLU>();
        else
          after = std::make_unique<LeakyReLU>(act.slope);
        fused.train(train);
        plain.train(train);
        SCOPED_TRACE(fused.describe() + " " + s.str() + (train ? " train" : " eval"));
        const Tensor x = pt::random_tensor(s, rng, -2.f, 2.f), dy = pt::random_tensor(s, rng);
        Tensor yf(s), ym(s), yp(s), dxf(s), dm(s), dxp(s);
        fused.forward(ctx, x, yf);
        plain.forward(ctx, x, ym);
        after->forward(ctx, ym, yp);
        pt::expect_close(yf, yp, 0, 0, "y");
        fused.backward(ctx, x, yf, dy, &dxf);
        after->backward(ctx, ym, yp, dy, &dm);
        plain.backward(ctx, x, ym, dm, &dxp);
        pt::expect_close(dxf, dxp, 0, 0, "dx");
        const std::vector<Param> pf = fused.params(), pp = plain.params();
        ASSERT_EQ(pf.size(), pp.size());
        for (size_t i = 0; i < pf.size(); ++i)
          pt::expect_close(*pf[i].grad, *pp[i].grad, 0, 0, pf[i].name);
      }
}

TEST(BatchNorm2d, EvalGradients) {
  Context ctx(1);
  Rng rng(4);
  for (const Shape& s : {Shape{2, 3, 3, 3}, Shape{1, 2, 1, 1}}) {
    BatchNorm2d bn(s.c());
    randomise_affine(bn, rng);
    bn.running_mean() = pt::random_tensor(Shape{s.c()}, rng);
    bn.running_var() = pt::random_tensor(Shape{s.c()}, rng, 0.5f, 2.f);
    bn.train(false);
    pt::check_layer_gradients(ctx, bn, pt::random_tensor(s, rng));
  }
}

TEST(BatchNorm2d, SameResultAtOneAndTwoThreads) {
  Rng rng(5);
  const Shape s{8, 16, 16, 16};
  BatchNorm2d bn(16);
  randomise_affine(bn, rng);
  // One channel per thread, each summed in a fixed order: bit-identical.
  pt::expect_same_at_one_and_two_threads(bn, pt::random_tensor(s, rng));
}

TEST(BatchNorm2d, Errors) {
  Context ctx(1);
  BatchNorm2d bn(3);
  pt::expect_error_mentions(
      [&] {
        bn.output_shape(Shape{2, 4, 5, 5});
      },
      {"BatchNorm2d", "(2,4,5,5)", "(N,3,H,W)"});
  Tensor one(Shape{1, 3, 1, 1}), y(one.shape());
  EXPECT_THROW(bn.forward(ctx, one, y), Error);  // one value per channel in training
  bn.train(false);
  EXPECT_NO_THROW(bn.forward(ctx, one, y));
  EXPECT_THROW(BatchNorm2d(0), Error);
  EXPECT_THROW(BatchNorm2d(3, 0.f), Error);
  EXPECT_THROW(BatchNorm2d(3, 1e-5f, 1.5f), Error);
}

#if PDNN_HAVE_CUDA
// The GPU's blocks a channel come from the shape alone (host arithmetic: no GPU needed), so a
// model's sums are grouped alike on every GPU: W5's G.10 (64 channels of 64 x 32x32) takes a
// cluster of 2 (what bench_kernels measured fastest), D.3 and G.7 (128 of 64 x 16x16), D.6 (256
// of 64 x 8x8) and the 512-channel layers 1; a forced count is taken as it is, and one the
// kernels do not have is refused.
TEST(BatchNorm2d, GpuBlocksAChannelFollowTheShape) {
  auto splits = [](int64_t n, int64_t c, int64_t hw, int forced = 0) {
    BnGeom g{n, c, hw, 1e-5f, 0.1f, FusedAct::None, 0.f};
    g.splits = forced;
    return cuda::batchnorm2d_splits(g);
  };
  EXPECT_EQ(splits(64, 64, 32 * 32), 2);
  EXPECT_EQ(splits(64, 128, 16 * 16), 1);
  EXPECT_EQ(splits(256, 32, 64 * 64), 8);  // few channels of 1M elements
  EXPECT_EQ(splits(64, 256, 8 * 8), 1);
  EXPECT_EQ(splits(64, 512, 4 * 4), 1);
  EXPECT_EQ(splits(4, 3, 50), 1);  // a small channel stays one block
  EXPECT_EQ(splits(4, 3, 50, 2), 2);
  EXPECT_THROW(splits(4, 3, 50, 3), Error);
}
#endif
