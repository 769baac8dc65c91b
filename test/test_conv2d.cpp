// Conv2d: forward against a naive 7-loop convolution, gradients by finite differences at
// several shapes, both im2col algorithms (per image, batched), shape errors, determinism and
// 1-vs-2-thread agreement (also for the 3x3 kernels, tested in depth in test_conv3x3.cpp), and
// the per-shape algorithm rule.
#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "layers/conv2d.h"
#include "ops/conv/conv2d_k4s2.h"
#include "ops/conv/conv2d_winograd.h"
#include "testing.h"

using namespace pdnn;
namespace pt = pdnn::testing;

namespace {

struct Cfg {
  int64_t n, c, h, w, k, kernel, stride, pad;
  bool bias;
};

// y[n][k][oy][ox] = b[k] + sum_{c,ki,kj} w[k][c][ki][kj] x[n][c][oy*s-p+ki][ox*s-p+kj], in double.
Tensor naive_conv2d(const Tensor& x, const Tensor& w, const Tensor* b, int64_t s, int64_t p) {
  const int64_t N = x.shape(0), C = x.shape(1), H = x.shape(2), W = x.shape(3);
  const int64_t K = w.shape(0), R = w.shape(2), S = w.shape(3);
  const int64_t OH = (H + 2 * p - R) / s + 1, OW = (W + 2 * p - S) / s + 1;
  Tensor y(Shape{N, K, OH, OW});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t oy = 0; oy < OH; ++oy)
        for (int64_t ox = 0; ox < OW; ++ox) {
          double acc = b ? (*b)[k] : 0.0;
          for (int64_t c = 0; c < C; ++c)
            for (int64_t ki = 0; ki < R; ++ki)
              for (int64_t kj = 0; kj < S; ++kj) {
                const int64_t iy = oy * s - p + ki, ix = ox * s - p + kj;
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                acc += static_cast<double>(w[((k * C + c) * R + ki) * S + kj]) *
                       x[((n * C + c) * H + iy) * W + ix];
              }
          y[((n * K + k) * OH + oy) * OW + ox] = static_cast<float>(acc);
        }
  return y;
}

const Cfg kCfgs[] = {
    {1, 1, 5, 5, 2, 3, 1, 0, true},   // batch 1
    {2, 3, 7, 5, 4, 3, 1, 1, true},   // odd sizes, padding 1
    {3, 2, 7, 5, 3, 3, 2, 1, true},   // stride 2
    {2, 2, 6, 7, 3, 3, 2, 2, false},  // padding 2, no bias
    {2, 3, 6, 6, 2, 1, 1, 0, true},   // kernel 1
    {2, 2, 5, 4, 5, 1, 1, 0, true},   // kernel 1, fewer column rows (2) than outputs (5)
    {2, 2, 5, 5, 3, 5, 1, 0, true},   // kernel = input size
    {2, 2, 9, 8, 3, 4, 3, 2, true},   // even kernel, stride 3
};

const ConvAlgo kAlgos[] = {ConvAlgo::PerImage, ConvAlgo::Batched, ConvAlgo::Auto};

}  // namespace

TEST(Conv2d, ForwardMatchesNaiveLoops) {
  for (int threads : {1, 2}) {
    Context ctx(threads, 7);
    for (const Cfg& f : kCfgs)
      for (ConvAlgo a : kAlgos) {
        Conv2d conv(f.c, f.k, f.kernel, f.stride, f.pad, f.bias);
        conv.set_algo(a);
        conv.reset_parameters(ctx.rng());
        Tensor x = pt::random_tensor(Shape{f.n, f.c, f.h, f.w}, ctx.rng());
        Tensor y(conv.output_shape(x.shape()));
        conv.forward(ctx, x, y);
        Tensor ref = naive_conv2d(x, conv.weight(), f.bias ? &conv.bias() : nullptr, f.stride, f.pad);
        pt::expect_close(y, ref, 1e-5, 1e-5,
                         conv.describe() + " " + conv_algo_name(a) + " at " + x.shape().str());
      }
  }
}

TEST(Conv2d, GradientsMatchFiniteDifferences) {
  Context ctx(1, 11);
  for (const Cfg& f : kCfgs)
    for (ConvAlgo a : {ConvAlgo::PerImage, ConvAlgo::Batched}) {
      Conv2d conv(f.c, f.k, f.kernel, f.stride, f.pad, f.bias);
      conv.set_algo(a);
      conv.reset_parameters(ctx.rng());
      Tensor x = pt::random_tensor(Shape{f.n, f.c, f.h, f.w}, ctx.rng());
      SCOPED_TRACE(conv.describe() + " " + conv_algo_name(a));
      pt::check_layer_gradients(ctx, conv, x);
    }
}

// With ReLU or LeakyReLU fused into the output write (what Sequential does for Conv2d + ReLU):
// the gradients of act(conv(x)) by finite differences. The biases (+3 on even channels, -3 on
// odd ones, against |conv| below about 1.5 here) keep every pre-activation away from the kink
// at 0, where a finite difference would straddle it, while both sides of it are exercised.
TEST(Conv2d, FusedActivationGradientsMatchFiniteDifferences) {
  Context ctx(1, 12);
  for (const Act act : {Act{FusedAct::ReLU, 0.f}, Act{FusedAct::LeakyReLU, 0.2f}})
    for (ConvAlgo a : {ConvAlgo::PerImage, ConvAlgo::Batched}) {
      Conv2d conv(3, 4, 3, 1, 1);
      conv.set_algo(a);
      ASSERT_TRUE(conv.fuse_activation(act));
      conv.reset_parameters(ctx.rng());
      for (int64_t c = 0; c < 4; ++c) conv.bias()[c] = c % 2 == 0 ? 3.f : -3.f;
      Tensor x = pt::random_tensor(Shape{2, 3, 6, 5}, ctx.rng());
      SCOPED_TRACE(conv.describe() + " " + conv_algo_name(a));
      pt::check_layer_gradients(ctx, conv, x);
    }
}

TEST(Conv2d, ParameterGradientsAccumulateAndDxMayBeSkipped) {
  Context ctx(1, 3);
  Conv2d conv(2, 3, 3, 1, 1);
  conv.reset_parameters(ctx.rng());
  Tensor x = pt::random_tensor(Shape{2, 2, 5, 6}, ctx.rng());
  Tensor y(conv.output_shape(x.shape()));
  conv.forward(ctx, x, y);
  Tensor dy = pt::random_tensor(y.shape(), ctx.rng());
  conv.zero_grad();
  conv.backward(ctx, x, y, dy, nullptr);
  Tensor once = conv.weight_grad().clone(), once_b = conv.bias_grad().clone();
  conv.backward(ctx, x, y, dy, nullptr);
  for (int64_t i = 0; i < once.numel(); ++i) once[i] *= 2.f;
  for (int64_t i = 0; i < once_b.numel(); ++i) once_b[i] *= 2.f;
  pt::expect_close(conv.weight_grad(), once, 1e-6, 1e-5, "dW after two backward calls");
  pt::expect_close(conv.bias_grad(), once_b, 1e-6, 1e-5, "db after two backward calls");
}

TEST(Conv2d, ShapeErrorsNameBothShapes) {
  Conv2d conv(3, 4, 3);
  try {
    conv.output_shape(Shape{2, 5, 8, 8});
    FAIL() << "wrong channel count must throw";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("conv2d"), std::string::npos) << m;
    EXPECT_NE(m.find("5 channels"), std::string::npos) << m;
    EXPECT_NE(m.find("expects 3"), std::string::npos) << m;
  }
  EXPECT_THROW(conv.output_shape(Shape{2, 3, 2, 2}), Error);  // kernel larger than input
  EXPECT_THROW(conv.output_shape(Shape{2, 3}), Error);
  EXPECT_THROW(Conv2d(3, 4, 3, 0), Error);
}

TEST(Conv2d, DescribeFlopsAndDefaultInit) {
  Conv2d conv(1, 10, 3, 1, 1);
  EXPECT_EQ(conv.describe(), "Conv2d(1->10, k3 s1 p1)");
  EXPECT_EQ(conv.params().size(), 2u);
  EXPECT_EQ(conv.params()[0].name, "weight");
  EXPECT_EQ(conv.params()[1].name, "bias");
  EXPECT_DOUBLE_EQ(conv.flops(Shape{8, 1, 28, 28}), 2.0 * 8 * 10 * 9 * 784 + 8 * 10 * 784);
  Conv2d nb(32, 64, 3, 1, 0, false);
  EXPECT_EQ(nb.params().size(), 1u);
  EXPECT_DOUBLE_EQ(nb.flops(Shape{1, 32, 26, 26}), 2.0 * 64 * 288 * 576);
  Rng rng(5);
  nb.reset_parameters(rng);
  const float bound = 1.f / std::sqrt(288.f);
  float mx = 0.f;
  for (int64_t i = 0; i < nb.weight().numel(); ++i) mx = std::max(mx, std::fabs(nb.weight()[i]));
  EXPECT_LE(mx, bound);
  EXPECT_GT(mx, 0.9f * bound);
}

// Same thread count: bit-identical; 1 vs 2 threads: within 1e-5 relative, and bit-identical
// for the 3x3 kernels (their sums do not depend on the thread count).
TEST(Conv2d, DeterministicAndThreadCountIndependent) {
  for (ConvAlgo a : {ConvAlgo::PerImage, ConvAlgo::Batched, ConvAlgo::Winograd, ConvAlgo::Direct}) {
    Rng rng(21);
    Tensor x = pt::random_tensor(Shape{6, 4, 12, 11}, rng);
    Conv2d conv(4, 8, 3, 1, 1);
    conv.set_algo(a);
    conv.reset_parameters(rng);
    const Tensor dy = pt::random_tensor(conv.output_shape(x.shape()), rng);
    auto run = [&](int threads, Tensor& y, Tensor& dx, Tensor& dw, Tensor& db) {
      Context ctx(threads);
      y = Tensor(conv.output_shape(x.shape()));
      dx = Tensor(x.shape());
      conv.forward(ctx, x, y);
      conv.zero_grad();
      conv.backward(ctx, x, y, dy, &dx);
      dw = conv.weight_grad().clone();
      db = conv.bias_grad().clone();
    };
    Tensor y1, dx1, dw1, db1, y2, dx2, dw2, db2, y2b, dx2b, dw2b, db2b;
    run(1, y1, dx1, dw1, db1);
    run(2, y2, dx2, dw2, db2);
    run(2, y2b, dx2b, dw2b, db2b);
    const std::string what = std::string(conv_algo_name(a));
    pt::expect_close(y2b, y2, 0, 0, what + " y, two runs at 2 threads");
    pt::expect_close(dx2b, dx2, 0, 0, what + " dx, two runs at 2 threads");
    pt::expect_close(dw2b, dw2, 0, 0, what + " dW, two runs at 2 threads");
    pt::expect_close(db2b, db2, 0, 0, what + " db, two runs at 2 threads");
    const bool k3 = a == ConvAlgo::Winograd || a == ConvAlgo::Direct;
    pt::expect_close(y2, y1, k3 ? 0 : 1e-6, k3 ? 0 : 1e-5, what + " y, 2 vs 1 threads");
    pt::expect_close(dx2, dx1, k3 ? 0 : 1e-6, k3 ? 0 : 1e-5, what + " dx, 2 vs 1 threads");
    pt::expect_close(dw2, dw1, k3 ? 0 : 1e-6, k3 ? 0 : 1e-5, what + " dW, 2 vs 1 threads");
    pt::expect_close(db2, db1, 1e-6, 1e-5, what + " db, 2 vs 1 threads");
  }
}

// The measured rule (conv2d.cpp): 3x3 stride-1 layers by Winograd, or directly when they
// have few input channels; 4x4 stride-2 padding-1 layers with 16 or more channels by Winograd
// over the stride phases; otherwise im2col, one batched GEMM for narrow per-image outputs only.
TEST(Conv2d, AlgorithmRuleFollowsTheMeasurements) {
  const ConvGeom w3 = conv_geom("t", 32, 26, 26, 3, 3, 1, 1, 0, 0);  // W3 conv2
  EXPECT_EQ(conv_algo_for(w3, 128, 64, 1), ConvAlgo::Winograd);
  EXPECT_EQ(conv_algo_for(w3, 128, 64, 2), ConvAlgo::Winograd);
  const ConvGeom w3c1 = conv_geom("t", 1, 28, 28, 3, 3, 1, 1, 0, 0);  // W3 conv1
  EXPECT_EQ(conv_algo_for(w3c1, 128, 32, 1), ConvAlgo::Direct);
  EXPECT_EQ(conv_algo_for(w3c1, 128, 32, 2), ConvAlgo::Direct);
  const ConvGeom w2 = conv_geom("t", 1, 28, 28, 3, 3, 1, 1, 1, 1);  // W2, batch 8 or 128
  EXPECT_EQ(conv_algo_for(w2, 8, 10, 2), ConvAlgo::Direct);
  const ConvGeom w4c1 = conv_geom("t", 3, 224, 224, 3, 3, 1, 1, 1, 1);
  EXPECT_EQ(conv_algo_for(w4c1, 64, 32, 1), ConvAlgo::Direct);
  for (int64_t c : {32, 64, 128}) {  // W4 conv2..conv6: 224, 112, 56 pixels, pad 1
    const int64_t side = c == 32 ? 224 : c == 64 ? 112 : 56;
    EXPECT_EQ(conv_algo_for(conv_geom("t", c, side, side, 3, 3, 1, 1, 1, 1), 64, c, 1),
              ConvAlgo::Winograd);
  }
  EXPECT_EQ(conv_algo_for(conv_geom("t", 5, 28, 28, 3, 3, 1, 1, 1, 1), 8, 8, 1),
            ConvAlgo::Winograd);  // just past the direct kernels' channel limit
  const ConvGeom small = conv_geom("t", 16, 5, 5, 3, 3, 1, 1, 0, 0);  // 3x3 output: no tile
  EXPECT_EQ(conv_algo_for(small, 64, 16, 1), ConvAlgo::Batched);
  const ConvGeom s2 = conv_geom("t", 32, 26, 26, 3, 3, 2, 2, 1, 1);  // stride 2
  EXPECT_EQ(conv_algo_for(s2, 64, 32, 1), ConvAlgo::PerImage);
  EXPECT_GE(conv_workspace_floats(w3, 128, 64, ConvAlgo::Auto, 2),
            cpu::conv3x3_winograd_workspace_floats(w3, 128, 64, 2));
  // W5's 4x4 stride-2 layers: Winograd over the stride phases from 16 channels on each side.
  for (int64_t c : {64, 128, 256}) {  // D.2, D.5, D.8 (and G.9, G.6, G.3 transposed)
    const ConvGeom d = conv_geom("t", c, 2048 / c, 2048 / c, 4, 4, 2, 2, 1, 1);
    EXPECT_EQ(conv_algo_for(d, 64, 2 * c, 1), ConvAlgo::Winograd);
    EXPECT_EQ(conv_algo_for(d, 64, 2 * c, 2), ConvAlgo::Winograd);
    EXPECT_GE(conv_workspace_floats(d, 64, 2 * c, ConvAlgo::Auto, 2),
              cpu::conv4x4s2_workspace_floats(d, 64, 2 * c, 2));
  }
  const ConvGeom d1 = conv_geom("t", 3, 64, 64, 4, 4, 2, 2, 1, 1);  // D.0, G.12: 3 channels
  EXPECT_EQ(conv_algo_for(d1, 64, 64, 1), ConvAlgo::PerImage);
  const ConvGeom d4 = conv_geom("t", 256, 8, 8, 4, 4, 2, 2, 0, 0);  // no padding, 3x3 outputs
  EXPECT_EQ(conv_algo_for(d4, 64, 512, 2), ConvAlgo::Batched);
  const ConvGeom d5 = conv_geom("t", 512, 4, 4, 4, 4, 1, 1, 0, 0);  // 1x1 outputs
  EXPECT_EQ(conv_algo_for(d5, 64, 1, 1), ConvAlgo::Batched);
  EXPECT_GE(conv_workspace_floats(d5, 64, 1, ConvAlgo::Batched, 1),
            static_cast<size_t>(d5.col_size() * 64));
}

// With a fused activation the backward masks dy a chunk of images at a time (conv_act_chunk:
// ~64 MB of masked dy), so the workspace does not grow with the batch. W4's first layer with 12
// images takes two chunks (10 + 2): dx is per image (exact), dW and db sum over the chunks in
// their order (float rounding of one more addition).
TEST(Conv2d, FusedActivationBackwardInChunksEqualsTheWholeBatch) {
  const ConvGeom g = conv_geom("t", 3, 224, 224, 3, 3, 1, 1, 1, 1);
  const int64_t n = 12, k = 32;
  ASSERT_EQ(conv_act_chunk(g, n, k), 10);
  EXPECT_LE(conv_backward_workspace_floats(g, 64, k, ConvAlgo::Direct, Act{FusedAct::ReLU, 0.f}, 2),
            conv_workspace_floats(g, 10, k, ConvAlgo::Direct, 2) + (size_t{16} << 20));
  Rng rng(4);
  const Tensor x = pt::random_tensor(Shape{n, 3, 224, 224}, rng);
  const Tensor w = pt::random_tensor(Shape{k, 27}, rng, -0.2f, 0.2f);
  const Tensor y = pt::random_tensor(Shape{n, k, 224, 224}, rng, -1.f, 1.f);  // its sign masks
  const Tensor dy = pt::random_tensor(y.shape(), rng);
  Tensor masked(dy.shape());
  for (int64_t i = 0; i < dy.numel(); ++i) masked[i] = y[i] > 0 ? dy[i] : 0.f;
  for (const Act act : {Act{FusedAct::ReLU, 0.f}, Act{FusedAct::LeakyReLU, 0.1f}}) {
    if (act.kind == FusedAct::LeakyReLU)
      for (int64_t i = 0; i < dy.numel(); ++i) masked[i] = y[i] > 0 ? dy[i] : 0.1f * dy[i];
    Tensor dw_a = Tensor::zeros(w.shape()), db_a = Tensor::zeros(Shape{k}), dx_a(x.shape());
    Tensor dw_b = Tensor::zeros(w.shape()), db_b = Tensor::zeros(Shape{k}), dx_b(x.shape());
    std::vector<float> ws(conv_backward_workspace_floats(g, n, k, ConvAlgo::Direct, act, 1));
    ConvBwd a = ConvBwd::of(ConvFwd::of(ConvShape{g, n, k}, x.data(), w.data(), nullptr, nullptr,
                                        act, ConvAlgo::Direct),
                            dy.data(), dw_a.data(), db_a.data(), dx_a.data());
    a.y = y.data();
    cpu::conv2d_backward(a, ws.data(), CpuExec{1});
    std::vector<float> ws_plain(conv_workspace_floats(g, n, k, ConvAlgo::Direct, 1));
    ConvBwd b = a;  // dy already through the activation
    b.dy = masked.data();
    b.y = nullptr;
    b.act = Act{};
    b.dw = dw_b.data();
    b.db = db_b.data();
    b.dx = dx_b.data();
    cpu::conv2d_backward(b, ws_plain.data(), CpuExec{1});
    pt::expect_close(dx_a, dx_b, 0, 0, "dx");
    pt::expect_close(dw_a, dw_b, 1e-4, 1e-5, "dW");
    pt::expect_close(db_a, db_b, 1e-4, 1e-5, "db");
  }
}
