// Every mix of per-pass GPU convolution algorithms, through the layers' real backward path.
//
// Each pass of a convolution (forward, backward-data, backward-weights) chooses its own algorithm
// on the GPU, and a layer's backward runs both backward passes in one call when they chose the
// same one, else one call each. From 01ac16f to 848cf59 a mix (backward-weights on im2col,
// backward-data elsewhere) ran no weight gradient at all, and every test passed, because the
// tests forced one algorithm for all three passes. Here the passes are forced one by one
// (--conv-algo's per-pass policy, "fwd=A,bwd-data=B,bwd-weights=C"), never left to a timing:
//   - Conv2d (with and without a fused ReLU / LeakyReLU, with and without bias) and
//     ConvTranspose2d, every (fwd, bwd-data, bwd-weights) in {im2col, implicit, direct,
//     cudnn}^3 (direct on the 3x3 stride-1 layers, cuDNN where found), fp32 and TF32: y, dx, dW, db against the double reference within the
//     rounding bounds of conv_reference.h;
//   - a small W4 (caltech9 at 16x16) training step on the GPU, each layer's passes given
//     different algorithms (rotations, so every layer sees every algorithm in every pass), every
//     parameter gradient against the CPU's step.
//   - the same in bf16 (issue 32: bf16 activations and weights, fp32 bias and gradients) through
//     the ops a layer calls (the layers take bf16 after the graph model lands), every triple in
//     {im2col, implicit, direct, cudnn}^3 (direct on the 3x3 stride-1 layers and the 4x4
//     stride-2 padding-1 Conv2d and ConvTranspose2d), within bf16_testing.h's bounds.
// ConvTranspose2d has no fused activation (its output goes through BatchNorm in the DCGAN).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "bf16_testing.h"
#include "conv_reference.h"
#include "core/context.h"
#include "core/cuda_state.h"
#include "layers/activation.h"
#include "layers/conv2d.h"
#include "layers/conv_transpose2d.h"
#include "model/sequential.h"
#include "ops/conv/conv2d_algo.h"
#include "optim/sgd.h"
#include "testing.h"
#include "workloads/classifier/classifier_trainer.h"
#include "workloads/classifier/caltech_models.h"

namespace pdnn {
namespace {

using testing::conv_reference;
using testing::expect_conv_within;

using testing::gpu_conv_algos;

std::string policy_of(ConvAlgo f, ConvAlgo d, ConvAlgo w) {
  return std::string("fwd=") + conv_algo_name(f) + ",bwd-data=" + conv_algo_name(d) +
         ",bwd-weights=" + conv_algo_name(w);
}

// body(f, d, w) under the policy forcing fwd=f, bwd-data=d, bwd-weights=w, for every triple of
// algos; returns how many triples ran.
template <class F>
int for_every_mix(Context& ctx, const std::vector<ConvAlgo>& algos, F&& body) {
  int mixes = 0;
  for (ConvAlgo f : algos)
    for (ConvAlgo d : algos)
      for (ConvAlgo w : algos) {
        ctx.tuning().set_policy(policy_of(f, d, w));
        ++mixes;
        body(f, d, w);
      }
  return mixes;
}


// The bias gradient (cuDNN's backward and ConvTranspose2d's): db += the sums of dy over each
// channel's planes, in double, rounded once, on every path: 16-byte loads where each plane is
// aligned (p a multiple of 4 floats or 8 bf16, dy aligned: four loads in flight and the
// remainder loop), one element a thread where not (p odd; dy one element off its alignment),
// fp32 and bf16. The result is within one rounding of the double reference from db's start.
TEST(ConvGpuPasses, BiasGradientEveryPath) {
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  Context ctx(1, 1, Device::CUDA);
  Rng rng(12);
  struct Case {
    int64_t n, k, p, skew;  // skew: dy starts this many elements past an aligned block
  };
  for (const bool b16 : {false, true})
    for (const Case c : {Case{3, 5, 4096 * 3 + 8 * 1024, 0}, Case{2, 3, 8 * 5, 0},
                         Case{3, 5, 37, 0}, Case{3, 5, 4096, 1}, Case{1, 2, 1 << 20, 0}}) {
      SCOPED_TRACE(strprintf("%s n%lld k%lld p%lld skew%lld", b16 ? "bf16" : "fp32",
                                                (long long)c.n, (long long)c.k, (long long)c.p,
                                                (long long)c.skew));
      const int64_t total = c.n * c.k * c.p;
      Tensor yf = testing::random_tensor(Shape{total + c.skew}, rng, -4.f, 4.f);
      if (b16) yf = testing::bf16_rounded(yf);
      const Tensor db0 = testing::random_tensor(Shape{c.k}, rng);
      Tensor db = db0.to(Device::CUDA, ctx);
      std::vector<double> ref(static_cast<size_t>(c.k), 0.0), abs(static_cast<size_t>(c.k), 0.0);
      for (int64_t i = 0; i < total; ++i) {
        const double v = yf[c.skew + i];
        ref[static_cast<size_t>((i / c.p) % c.k)] += v;
        abs[static_cast<size_t>((i / c.p) % c.k)] += std::fabs(v);
      }
      // float(sum) and db0 + it each round once; the double sums' own error is below
      // terms * 2^-53 of the absolute sum
      for (int64_t ch = 0; ch < c.k; ++ch) {
        const size_t u = static_cast<size_t>(ch);
        abs[u] = testing::kFp32U * (std::fabs(ref[u]) + std::fabs(ref[u] + db0[ch])) +
                 0x1.0p-53 * static_cast<double>(c.n * c.p) * abs[u];
        ref[u] += db0[ch];
      }
      const Tensor y = b16 ? testing::to_bf16(yf, Device::CUDA, ctx) : yf.to(Device::CUDA, ctx);
      ops::bias_backward(ctx, c.n, c.k, c.p, y.slice(c.skew, Shape{c.n, c.k, c.p}), db);
      ctx.synchronize();
      testing::expect_within(db.to(Device::CPU, ctx), ref, 0.0, abs, "db");
    }
}

// The policy grammar itself (no GPU needed).
TEST(ConvGpuPasses, PerPassPolicyIsParsedAndChecked) {
  EXPECT_TRUE(valid_gpu_conv_policy("auto"));
  EXPECT_TRUE(valid_gpu_conv_policy("own,bwd-weights=implicit"));
  EXPECT_TRUE(valid_gpu_conv_policy("fwd=cudnn,bwd-data=im2col,bwd-weights=implicit"));
  EXPECT_FALSE(valid_gpu_conv_policy("fwd=implicit,fwd=im2col"));
  EXPECT_FALSE(valid_gpu_conv_policy("own,auto"));
  EXPECT_FALSE(valid_gpu_conv_policy("bwd=implicit"));
  EXPECT_FALSE(valid_gpu_conv_policy("fwd=winograd"));
  EXPECT_FALSE(valid_gpu_conv_policy(""));
  const std::string p = "own,bwd-weights=implicit";
  EXPECT_EQ(gpu_conv_pass_policy(p, ConvPass::Forward), "own");
  EXPECT_EQ(gpu_conv_pass_policy(p, ConvPass::BackwardData), "own");
  EXPECT_EQ(gpu_conv_pass_policy(p, ConvPass::BackwardWeights), "implicit");
  EXPECT_EQ(gpu_conv_pass_policy("bwd-data=cudnn", ConvPass::Forward), "auto");
  EXPECT_EQ(gpu_conv_pass_policy("bwd-data=cudnn", ConvPass::BackwardData), "cudnn");
}

struct LayerCase {
  const char* name;
  bool transposed;
  int64_t n, in_ch, out_ch, h, w, kernel, stride, pad;
  FusedAct act;  // Conv2d only
  bool bias;
};

const LayerCase kLayers[] = {
    {"conv_c3_relu", false, 2, 3, 8, 17, 19, 3, 1, 1, FusedAct::ReLU, true},
    {"conv_k4s2_leaky", false, 3, 16, 20, 12, 10, 4, 2, 1, FusedAct::LeakyReLU, false},
    {"conv_m24_taps288_relu", false, 2, 32, 24, 10, 9, 3, 1, 1, FusedAct::ReLU, true},
    {"conv_k3s2_plain", false, 2, 37, 40, 9, 9, 3, 2, 0, FusedAct::None, true},
    {"convT_k4s2p1", true, 2, 24, 12, 5, 6, 4, 2, 1, FusedAct::None, true},
    {"convT_k4s1p0_from_1x1", true, 3, 20, 16, 1, 1, 4, 1, 0, FusedAct::None, false},
    {"conv_k3s1p0_m72_plain", false, 2, 40, 72, 11, 12, 3, 1, 0, FusedAct::None, false},
    {"convT_k3s1p1", true, 2, 20, 12, 7, 9, 3, 1, 1, FusedAct::None, true},
    // The U-Net's up-sampling (2x2 stride 2) and its 1x1 head.
    {"convT_k2s2p0", true, 2, 24, 12, 6, 5, 2, 2, 0, FusedAct::None, true},
    {"conv_k1_head", false, 2, 16, 3, 9, 7, 1, 1, 0, FusedAct::None, true},
};

Tensor host(const Tensor& t, Context& ctx) { return t.to(Device::CPU, ctx); }

// One layer (in a Sequential, so that the activation is fused as in the models) forward and
// backward on the GPU under `policy`, checked against the double reference.
void check_layer(Context& ctx, const LayerCase& c, bool tf32) {
  Rng rng(23);
  Sequential m;
  ConvGeom g;  // the convolution's geometry: for ConvTranspose2d, the conv it transposes
  int64_t conv_k;
  Shape in_shape, out_shape;
  if (!c.transposed) {
    m.emplace<Conv2d>(c.in_ch, c.out_ch, c.kernel, c.stride, c.pad, c.bias);
    if (c.act == FusedAct::ReLU) m.emplace<ReLU>();
    if (c.act == FusedAct::LeakyReLU) m.emplace<LeakyReLU>(0.2f);
    g = conv_geom("test", c.in_ch, c.h, c.w, c.kernel, c.kernel, c.stride, c.stride, c.pad, c.pad);
    conv_k = c.out_ch;
    in_shape = Shape{c.n, c.in_ch, c.h, c.w};
    out_shape = Shape{c.n, c.out_ch, g.oh, g.ow};
  } else {
    m.emplace<ConvTranspose2d>(c.in_ch, c.out_ch, c.kernel, c.stride, c.pad, c.bias);
    const int64_t oh = (c.h - 1) * c.stride - 2 * c.pad + c.kernel;
    const int64_t ow = (c.w - 1) * c.stride - 2 * c.pad + c.kernel;
    g = conv_geom("test", c.out_ch, oh, ow, c.kernel, c.kernel, c.stride, c.stride, c.pad, c.pad);
    conv_k = c.in_ch;
    in_shape = Shape{c.n, c.in_ch, c.h, c.w};
    out_shape = Shape{c.n, c.out_ch, oh, ow};
  }
  // Random weights and bias (not the init's small ones), random input and upstream gradient.
  std::vector<Param> ps = m.params();  // views into the model's flat buffer: filled in place
  for (Param& p : ps) {
    const Tensor r = testing::random_tensor(p.value->shape(), rng);
    for (int64_t i = 0; i < r.numel(); ++i) (*p.value)[i] = r[i];
  }
  const Tensor w_h = ps[0].value->clone();
  const Tensor b_h = c.bias ? ps[1].value->clone() : Tensor();
  const Tensor x_h = testing::random_tensor(in_shape, rng);
  const Tensor dy_h = testing::random_tensor(out_shape, rng);
  m.to(Device::CUDA, ctx);
  ctx.set_precision(tf32 ? Precision::Tf32 : Precision::Fp32);
  m.zero_grad(ctx);
  const Tensor x = x_h.to(Device::CUDA, ctx), dy = dy_h.to(Device::CUDA, ctx);
  const Tensor y_h = host(m.forward(ctx, x), ctx);
  m.backward(ctx, dy, /*want_input_grad=*/true);
  const Tensor dx_h = host(m.input_grad(), ctx);
  std::vector<Param> pd = m.params();
  const Tensor dw_h = host(*pd[0].grad, ctx);
  const Tensor db_h = c.bias ? host(*pd[1].grad, ctx) : Tensor();

  const double taps = double(c.kernel * c.kernel);
  if (!c.transposed) {
    const Act act{c.act, c.act == FusedAct::LeakyReLU ? 0.2f : 0.f};
    const testing::ConvReference r =
        conv_reference(g, c.n, conv_k, x_h, w_h, c.bias ? &b_h : nullptr, y_h, dy_h, act);
    const double kf = double(g.col_rows()), kb = double(conv_k) * taps,
                 kw = double(c.n * g.oh * g.ow);
    expect_conv_within(y_h, r.y, r.y_abs, nullptr, kf, tf32, "y");
    expect_conv_within(dx_h, r.dx, r.dx_abs, nullptr, kb, tf32, "dx");
    expect_conv_within(dw_h, r.dw, r.dw_abs, nullptr, kw, tf32, "dW");
    if (c.bias) expect_conv_within(db_h, r.db, r.db_abs, nullptr, kw, false, "db");
    return;
  }
  // ConvTranspose2d = the convolution g with its passes swapped: the reference of g with x := dy
  // (the transposed layer's output gradient) and dy := x gives its forward as r.dx, its input
  // gradient as r.y and its weight gradient as r.dw.
  const testing::ConvReference r =
      conv_reference(g, c.n, conv_k, dy_h, w_h, nullptr, x_h, x_h, Act{});
  const testing::TransposedReference t =
      testing::transposed_reference(r, g, c.n, c.out_ch, c.bias ? &b_h : nullptr, dy_h);
  const double kf = double(conv_k) * taps, kb = double(g.col_rows()),
               kw = double(c.n * g.oh * g.ow);
  expect_conv_within(y_h, t.y, t.y_abs, nullptr, kf, tf32, "y");
  expect_conv_within(dx_h, r.y, r.y_abs, nullptr, kb, tf32, "dx");
  expect_conv_within(dw_h, r.dw, r.dw_abs, nullptr, kw, tf32, "dW");
  if (c.bias)
    expect_conv_within(db_h, t.db, t.db_abs, nullptr, double(c.n * g.h * g.w), false, "db");
}

TEST(ConvGpuPasses, EveryMixOfAlgorithmsThroughTheLayers) {
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  Context ctx(1, 1, Device::CUDA);
  const std::vector<ConvAlgo> algos = gpu_conv_algos(ctx);
  const int mixes = for_every_mix(ctx, algos, [&](ConvAlgo f, ConvAlgo d, ConvAlgo w) {
    for (bool tf32 : {false, true})
      for (const LayerCase& c : kLayers) {
        // direct runs 3x3 stride-1 layers only (elsewhere it is no candidate)
        const bool uses_direct =
            f == ConvAlgo::Direct || d == ConvAlgo::Direct || w == ConvAlgo::Direct;
        if (uses_direct && !(c.kernel == 3 && c.stride == 1)) continue;
        SCOPED_TRACE(std::string(c.name) + " " + policy_of(f, d, w) + (tf32 ? " tf32" : " fp32"));
        check_layer(ctx, c, tf32);
      }
  });
  EXPECT_EQ(mixes, int(algos.size() * algos.size() * algos.size()));
  // Every choice was the forced one: nothing was timed.
  for (const auto& made : ctx.tuning().made()) EXPECT_EQ(made.second.ms, 0.0) << made.first;
}

// ---- bf16 -------------------------------------------------------------------------------

// One layer's forward and backward in bf16 through the ops its layer calls (Conv2d: forward
// with the fused activation, both backward passes from y; ConvTranspose2d: forward as the
// convolution's backward-data plus its bias, backward as the bias gradient, the weight gradient
// with x and dy swapped, and dx as the convolution's forward), the algorithms by the context's
// policy (ConvAlgo::Auto everywhere), against the double reference from the bf16 values.
void check_layer_bf16(Context& ctx, const LayerCase& c, ConvAlgo fwd, ConvAlgo wgt) {
  Rng rng(29);
  const Device G = Device::CUDA;
  const int64_t taps = c.kernel * c.kernel;
  const Act act{c.act, c.act == FusedAct::LeakyReLU ? 0.2f : 0.f};
  ConvGeom g;
  int64_t conv_k;
  Shape in_shape{c.n, c.in_ch, c.h, c.w}, out_shape;
  if (!c.transposed) {
    g = conv_geom("test", c.in_ch, c.h, c.w, c.kernel, c.kernel, c.stride, c.stride, c.pad, c.pad);
    conv_k = c.out_ch;
    out_shape = Shape{c.n, c.out_ch, g.oh, g.ow};
  } else {
    const int64_t oh = (c.h - 1) * c.stride - 2 * c.pad + c.kernel;
    const int64_t ow = (c.w - 1) * c.stride - 2 * c.pad + c.kernel;
    g = conv_geom("test", c.out_ch, oh, ow, c.kernel, c.kernel, c.stride, c.stride, c.pad, c.pad);
    conv_k = c.in_ch;
    out_shape = Shape{c.n, c.out_ch, oh, ow};
  }
  const Shape w_shape = c.transposed ? Shape{c.in_ch, c.out_ch, c.kernel, c.kernel}
                                     : Shape{c.out_ch, c.in_ch, c.kernel, c.kernel};
  const Tensor w_h = testing::bf16_rounded(testing::random_tensor(w_shape, rng));
  const Tensor b_h = testing::random_tensor(Shape{c.out_ch}, rng);
  const Tensor x_h = testing::bf16_rounded(testing::random_tensor(in_shape, rng));
  const Tensor dy_h = testing::bf16_rounded(testing::random_tensor(out_shape, rng));
  const Tensor x = testing::to_bf16(x_h, G, ctx), w = testing::to_bf16(w_h, G, ctx),
               dy = testing::to_bf16(dy_h, G, ctx), b = b_h.to(G, ctx);
  Tensor y = testing::bf16_poisoned(out_shape, G, ctx);
  Tensor dx = testing::bf16_poisoned(in_shape, G, ctx);
  Tensor dw = Tensor::zeros(w_shape).to(G, ctx), db = Tensor::zeros(Shape{c.out_ch}).to(G, ctx);
  const ConvShape shape{g, c.n, conv_k};
  const Tensor* bias = c.bias ? &b : nullptr;
  if (!c.transposed) {
    const ConvFwdTensors f = ConvFwdTensors::of(shape, &x, &w, bias, &y, act);
    ops::conv2d_forward(ctx, f);
    ops::conv2d_backward(ctx, ConvBwdTensors::of(f, &dy, &dw, c.bias ? &db : nullptr, &dx));
  } else {
    ops::conv2d_backward(ctx, ConvBwdTensors::data(shape, &w, &x, &y));
    if (c.bias) ops::bias_add(ctx, c.n, c.out_ch, g.h * g.w, b, y);
    if (c.bias) ops::bias_backward(ctx, c.n, c.out_ch, g.h * g.w, dy, db);
    ops::conv2d_backward(
        ctx, ConvBwdTensors::of(ConvFwdTensors::of(shape, &dy, &w, nullptr, nullptr), &x, &dw,
                                nullptr, nullptr));
    ops::conv2d_forward(ctx, ConvFwdTensors::of(shape, &dy, &w, nullptr, &dx));
  }
  const Tensor y_h = testing::widened(y, ctx), dx_h = testing::widened(dx, ctx);
  const Tensor dw_h = dw.to(Device::CPU, ctx), db_h = db.to(Device::CPU, ctx);
  // cuDNN's weight gradient is bf16 before it is added to dw
  const double w_round = wgt == ConvAlgo::Cudnn ? testing::kBf16U : 0.0;
  if (!c.transposed) {
    const testing::ConvReference r = conv_reference(g, c.n, conv_k, x_h, w_h,
                                                    c.bias ? &b_h : nullptr, y_h, dy_h, act, true);
    const double kf = double(g.col_rows()), kb = double(conv_k * taps),
                 kw = double(c.n * g.oh * g.ow);
    if (fwd == ConvAlgo::Cudnn && (c.bias || c.act != FusedAct::None))
      testing::expect_bf16_rounded_twice(y_h, r.y, r.y_abs, kf, "y");
    else
      testing::expect_bf16_sum_within(y_h, r.y, r.y_abs, nullptr, kf, testing::kBf16U, "y");
    testing::expect_bf16_sum_within(dx_h, r.dx, r.dx_abs, nullptr, kb, testing::kBf16U, "dx");
    testing::expect_bf16_sum_within(dw_h, r.dw, r.dw_abs, nullptr, kw, w_round, "dW");
    if (c.bias) testing::expect_bf16_sum_within(db_h, r.db, r.db_abs, nullptr, kw, 0.0, "db");
    return;
  }
  // As check_layer: the reference of g with x := dy and dy := x.
  const testing::ConvReference r =
      conv_reference(g, c.n, conv_k, dy_h, w_h, nullptr, x_h, x_h, Act{}, true);
  const testing::TransposedReference t =
      testing::transposed_reference(r, g, c.n, c.out_ch, c.bias ? &b_h : nullptr, dy_h);
  const double kf = double(conv_k) * taps, kb = double(g.col_rows()),
               kw = double(c.n * g.oh * g.ow);
  if (c.bias)
    testing::expect_bf16_rounded_twice(y_h, t.y, t.y_abs, kf, "y");
  else
    testing::expect_bf16_sum_within(y_h, t.y, t.y_abs, nullptr, kf, testing::kBf16U, "y");
  testing::expect_bf16_sum_within(dx_h, r.y, r.y_abs, nullptr, kb, testing::kBf16U, "dx");
  testing::expect_bf16_sum_within(dw_h, r.dw, r.dw_abs, nullptr, kw, w_round, "dW");
  if (c.bias)
    testing::expect_bf16_sum_within(db_h, t.db, t.db_abs, nullptr, double(c.n * g.h * g.w), 0.0,
                                    "db");
}

TEST(ConvGpuPasses, Bf16EveryMixOfAlgorithmsThroughTheLayersOps) {
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  Context ctx(1, 1, Device::CUDA);
  const std::vector<ConvAlgo> algos = gpu_conv_algos(ctx);
  int direct_runs = 0;
  const int mixes = for_every_mix(ctx, algos, [&](ConvAlgo f, ConvAlgo d, ConvAlgo w) {
    for (const LayerCase& c : kLayers) {
      // direct runs 3x3 stride-1 layers and, in bf16, 4x4 stride-2 padding-1 ones (of even
      // size: kLayers' are) only (elsewhere it is no candidate)
      const bool uses_direct =
          f == ConvAlgo::Direct || d == ConvAlgo::Direct || w == ConvAlgo::Direct;
      const bool k4s2 = c.kernel == 4 && c.stride == 2 && c.pad == 1;
      if (uses_direct && !(c.kernel == 3 && c.stride == 1) && !k4s2) continue;
      direct_runs += uses_direct;
      SCOPED_TRACE(std::string(c.name) + " " + policy_of(f, d, w) + " bf16");
      // a transposed layer's forward is the convolution's backward-data
      check_layer_bf16(ctx, c, c.transposed ? d : f, w);
    }
  });
  EXPECT_EQ(mixes, int(algos.size() * algos.size() * algos.size()));
  // the 3x3 stride-1 layers (three Conv2d, one ConvTranspose2d) and the 4x4 stride-2 ones (one
  // of each) under every triple with direct
  const int n = int(algos.size());
  EXPECT_EQ(direct_runs, 6 * (n * n * n - (n - 1) * (n - 1) * (n - 1)));
  // Every choice was the forced one, under bf16's own keys: nothing was timed.
  EXPECT_FALSE(ctx.tuning().made().empty());
  for (const auto& made : ctx.tuning().made()) {
    EXPECT_EQ(made.second.ms, 0.0) << made.first;
    EXPECT_NE(made.first.find(" bf16 "), std::string::npos) << made.first;
  }
}

// ---- a whole W4 step -------------------------------------------------------------------

struct StepGrads {
  std::vector<std::string> names;
  std::vector<Tensor> grads;
};

// One training step of caltech9 at 16x16 (batch 8, 3 classes): every parameter gradient.
StepGrads w4_step_grads(Context& ctx, Device dev) {
  Sequential m = make_caltech_model(16, 3);
  ctx.rng().seed(3);
  m.reset_parameters(ctx.rng());
  m.to(dev, ctx);
  Sgd opt(m.parameters(), 0.01);
  ClassifierTrainer tr(m, opt, /*cuda_graph=*/false);
  Rng r(8);
  const Tensor x = testing::random_tensor(Shape{8, 3, 16, 16}, r);
  std::vector<int32_t> l(8);
  for (auto& v : l) v = static_cast<int32_t>(r.next() % 3);
  // The gradients stay after the step (zero_grad comes first in the next one).
  tr.step(ctx, x, testing::labels_tensor(l));
  StepGrads s;
  for (const Param& p : m.params()) {
    s.names.push_back(p.name);
    s.grads.push_back(p.grad->to(Device::CPU, ctx));
  }
  return s;
}

TEST(ConvGpuPasses, W4StepWithMixedChoicesGivesTheCpuGradients) {
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  Context cpu(1, 1);
  const StepGrads want = w4_step_grads(cpu, Device::CPU);
  // The keys of the step's passes (layer shapes), from a run with every pass forced to im2col.
  std::vector<std::string> keys;
  {
    Context ctx(1, 1, Device::CUDA);
    ctx.tuning().set_policy("im2col");
    w4_step_grads(ctx, Device::CUDA);
    const std::string suffix = " im2col";
    for (const auto& made : ctx.tuning().made()) {
      ASSERT_EQ(made.first.substr(made.first.size() - suffix.size()), suffix) << made.first;
      keys.push_back(made.first.substr(0, made.first.size() - suffix.size()));
    }
  }
  // 6 convolutions: 6 forward, 6 backward-weights and 5 backward-data (conv1 needs no dx).
  ASSERT_EQ(keys.size(), 17u);
  Context probe(1, 1, Device::CUDA);
  const std::vector<ConvAlgo> algos = gpu_conv_algos(probe);
  const int A = static_cast<int>(algos.size());
  for (int dir : {1, -1})
    for (int rot = 0; rot < A; ++rot) {
      // Key j (in first-use order: the layers' forwards, then their backwards) gets algorithm
      // (dir * j + rot) mod A: neighbouring passes differ, and over the rotations every pass of
      // every layer runs every algorithm.
      Context ctx(1, 1, Device::CUDA);
      ctx.tuning().set_policy("auto");
      std::string mix;
      for (size_t j = 0; j < keys.size(); ++j) {
        const ConvAlgo a = algos[((dir * int(j) + rot) % A + A) % A];
        ctx.tuning().put(keys[j] + " auto", conv_algo_name(a), 0.0);
        mix += std::string(j ? " " : "") + conv_algo_name(a);
      }
      SCOPED_TRACE("choices in key order: " + mix);
      const StepGrads got = w4_step_grads(ctx, Device::CUDA);
      // Every choice the step made was one put here: nothing timed, nothing left to chance.
      EXPECT_EQ(ctx.tuning().made().size(), keys.size());
      for (const auto& made : ctx.tuning().made()) EXPECT_EQ(made.second.ms, 0.0) << made.first;
      ASSERT_EQ(got.grads.size(), want.grads.size());
      for (size_t i = 0; i < want.grads.size(); ++i) {
        // A pass that did not run leaves its gradient 0 (error 1); a wrong one is off by O(1).
        // fp32 rounding differs between the two sides by far less: the reductions here are at
        // most 2048 terms (K u ~ 1.2e-4 per element in the worst case, ~sqrt(K) u ~ 3e-6
        // typically) through 9 layers, and a ReLU whose input rounds across 0 on one side only
        // changes one element of dy. 1e-3 normwise separates the two by three orders.
        const double e = testing::rel_error(got.grads[i], want.grads[i]);
        EXPECT_LT(e, 1e-3) << want.names[i] << ": ||gpu - cpu|| / ||cpu|| = " << e;
      }
    }
}

}  // namespace
}  // namespace pdnn
