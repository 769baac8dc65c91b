// The GPU convolutions' workspace (ops/conv/conv2d_gpu_ws.h, conv2d_algo.h): what each pass's
// cheapest algorithm asks, computed on the host and checked here by hand on the U-Net's layers
// at batch 1 (no device needed), and, on a GPU, the chooser holding every way of choosing (auto,
// own, forced by --conv-algo, per pass, by the layer, a tuned choice) to the workspace a memory
// plan left.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/cuda_state.h"
#include "layers/conv2d.h"
#include "layers/conv_transpose2d.h"
#include "model/sequential.h"
#include "ops/conv/conv2d.h"
#include "ops/conv/conv2d_algo.h"
#include "ops/conv/conv2d_gpu_ws.h"
#include "bf16_testing.h"
#include "testing.h"

namespace pdnn {
namespace {

constexpr int64_t kMi = int64_t{1} << 20;

ConvGeom conv3x3(int64_t c, int64_t side) {
  return conv_geom("test", c, side, side, 3, 3, 1, 1, 1, 1);
}

// im2col's workspace at batch 1 (one chunk: one image): the columns c*9 x p, padded to 16
// floats, the product k x p, the bias's partial sums (2 + 64 k floats), in bytes.
int64_t im2col_bytes(int64_t c, int64_t k, int64_t p) {
  return ((c * 9 * p + 15) / 16 * 16 + k * p + 2 + 64 * k) * 4;
}

// The paper U-Net's dec1.conv1 (128 -> 64, 3x3, 1024 x 1024, batch 1): the minimum plan's
// workspace was this layer's im2col columns, 4.75 GiB. Its three passes have column-free
// algorithms, and the least is the largest of their cheapest, by hand on an H100's 132
// multiprocessors:
//   forward        implicit GEMM: none (1 float);
//   backward-data  implicit GEMM's flipped weights, 64 x 128 x 9 = 73728 floats (direct's
//                  re-laid-out weights, 64 x 9 x 128 rounded to 128, as many);
//   backward-weights  implicit GEMM, tile 64x128 (64 rows): 1 x 9 tiles, 4 x 132 / 9 = 58
//                  splits wanted, 65536 steps of 16 allow them, 1130 steps a split, 58 splits:
//                  58 x 64 x (1152 + 1) floats = 16.3 MiB; direct's split is 131 (M64: 4
//                  blocks, 132 wanted, 8192 patches of 63).
TEST(ConvWorkspace, UNetLayerAtBatch1NeedsNoColumns) {
  const ConvGeom g = conv3x3(128, 1024);
  const int64_t p = 1024 * 1024;
  const ConvWorkspaceBounds b = gpu_conv_workspace_bounds(g, 1, 64, Act{}, DType::F32, 132);
  EXPECT_EQ(b.columns, im2col_bytes(128, 64, p));
  EXPECT_NEAR(static_cast<double>(b.columns) / double(kMi << 10), 4.75, 0.005);
  EXPECT_EQ(b.least, 58 * 64 * 1153 * 4);
  EXPECT_EQ(b.most, b.columns);  // im2col's columns are more than the plan's 1 GiB for cuDNN
  EXPECT_EQ(gpu_conv_own_ws_floats(ConvPass::Forward, ConvAlgo::Implicit, g, 1, 64, Act{},
                                   DType::F32, 132), 1u);
  EXPECT_EQ(gpu_conv_own_ws_floats(ConvPass::BackwardData, ConvAlgo::Implicit, g, 1, 64, Act{},
                                   DType::F32, 132), 73728u);
  EXPECT_EQ(gpu_conv_own_ws_floats(ConvPass::BackwardData, ConvAlgo::Direct, g, 1, 64, Act{},
                                   DType::F32, 132), 73728u);
  EXPECT_EQ(gpu_conv_own_ws_floats(ConvPass::BackwardWeights, ConvAlgo::Direct, g, 1, 64, Act{},
                                   DType::F32, 132), 131u * 64 * 1153);
  // The split follows the multiprocessors: on 114 (an H100 PCIe) 456 / 9 = 50 splits.
  EXPECT_EQ(gpu_conv_workspace_bounds(g, 1, 64, Act{}, DType::F32, 114).least, 50 * 64 * 1153 * 4);
  // dy through the ReLU in the workspace (not done in place): every column-free backward pass
  // keeps it first, 64 x 2^20 floats.
  const Act relu{FusedAct::ReLU, 0.f};
  EXPECT_EQ(gpu_conv_workspace_bounds(g, 1, 64, relu, DType::F32, 132).least,
            (64 * p + 58 * 64 * 1153) * 4);
  // bf16: the register-staged implicit backward-data needs no flipped weights; its weight
  // gradient splits as fp32's (64-row tile, 9 tiles); direct's weights are bf16, half.
  EXPECT_EQ(gpu_conv_own_ws_floats(ConvPass::BackwardData, ConvAlgo::Implicit, g, 1, 64, Act{},
                                   DType::BF16, 132), 1u);
  EXPECT_EQ(gpu_conv_own_ws_floats(ConvPass::BackwardData, ConvAlgo::Direct, g, 1, 64, Act{},
                                   DType::BF16, 132), 73728u / 2);
  EXPECT_EQ(gpu_conv_workspace_bounds(g, 1, 64, Act{}, DType::BF16, 132).least,
            58 * 64 * 1153 * 4);
  // Forced (--conv-algo im2col, or by the layer), im2col's columns are the least; cuDNN forced
  // keeps one float beside its own algorithm, which it picks within what the workspace leaves
  // (at most the plan's 1 GiB), and for the weight gradient the scratch its algorithm is found
  // with under a plan: 64 x 1152 floats; its algorithm's own least is cuDNN's to say (none
  // counted without a device).
  EXPECT_EQ(gpu_conv_workspace_bounds(g, 1, 64, Act{}, DType::F32, 132, "im2col").least,
            b.columns);
  EXPECT_EQ(gpu_conv_workspace_bounds(g, 1, 64, Act{}, DType::F32, 132, "auto", ConvAlgo::Im2col)
                .least,
            b.columns);
  EXPECT_EQ(gpu_conv_workspace_bounds(g, 1, 64, Act{}, DType::F32, 132, "own,bwd-weights=im2col")
                .least,
            b.columns);
  const ConvWorkspaceBounds cudnn = gpu_conv_workspace_bounds(g, 1, 64, Act{}, DType::F32, 132, "cudnn");
  EXPECT_EQ(cudnn.least, 4 + 64 * 1152 * 4);
  EXPECT_EQ(cudnn.most, 4 + 64 * 1152 * 4 + (int64_t{1} << 30));
  // With the device's cuDNN: what its algorithm asks at the least for each pass is added to that
  // pass's (rounded up to floats), forced; under auto cuDNN's least is not the plan's (the own
  // algorithms hold it), and cuDNN is not asked.
  int asked = 0;
  const CudnnLeastFn says = [&](ConvPass p, const ConvGeom&, int64_t n, int64_t k, DType) {
    ++asked;
    EXPECT_EQ(n, 1);
    EXPECT_EQ(k, 64);
    return p == ConvPass::Forward ? int64_t{5} << 20 : p == ConvPass::BackwardWeights ? 1001 : 0;
  };
  const ConvWorkspaceBounds told =
      gpu_conv_workspace_bounds(g, 1, 64, Act{}, DType::F32, 132, "cudnn", ConvAlgo::Auto, says);
  EXPECT_EQ(asked, 3);
  EXPECT_EQ(told.least, std::max<int64_t>(4 + (int64_t{5} << 20), 4 + 64 * 1152 * 4 + 1004));
  EXPECT_EQ(told.most, cudnn.most);
  EXPECT_EQ(gpu_conv_workspace_bounds(g, 1, 64, Act{}, DType::F32, 132, "cudnn", ConvAlgo::Auto,
                                      [](ConvPass, const ConvGeom&, int64_t, int64_t, DType) {
                                        return int64_t{2} << 30;
                                      }).most,
            4 + 64 * 1152 * 4 + (int64_t{2} << 30));  // past the plan's allowance: its least
  asked = 0;
  EXPECT_EQ(gpu_conv_workspace_bounds(g, 1, 64, Act{}, DType::F32, 132, "auto", ConvAlgo::Auto,
                                      says).least,
            b.least);
  EXPECT_EQ(asked, 0);
  // The layer says so to the plan (the ReLU's derivative in place, as under a plan).
  Conv2d conv(128, 64, 3, 1, 1);
  conv.set_mask_dy_in_place(true);
  const BackwardNeeds n = conv.backward_needs(Shape{1, 128, 1024, 1024}, PlanFor{});
  EXPECT_EQ(n.workspace_bytes, b.least);
  EXPECT_EQ(n.fast_workspace_bytes, b.most);
  EXPECT_EQ(n.columns_bytes, b.columns);
}

// An image of 2^31 elements or more (dec1.conv1's 128 channels of 4096 x 4096; its 64-channel
// layers from a side of ~5,800): the implicit GEMM runs it in its 64-bit instantiation
// (conv_implicit_wide), the direct kernels and im2col (32-bit within an image) are no
// candidates, so the least is the implicit GEMM's, as at 1024 (its weight gradient's split sums:
// 64x128 tile, 9 tiles, 58 splits on 132 multiprocessors; 2^20 steps of 16 allow them), no
// columns are counted, and the plan no longer needs im2col's 76 GiB at 4096.
TEST(ConvWorkspace, ImagesPast2e31RunTheImplicitGemmIn64Bit) {
  using cuda::conv_implicit_fits;
  using cuda::conv_implicit_wide;
  const ConvGeom g = conv3x3(128, 4096);
  EXPECT_TRUE(conv_implicit_wide(g));
  EXPECT_TRUE(conv_implicit_fits(g, 1, 64));
  for (DType dt : {DType::F32, DType::BF16})
    for (ConvPass pass : {ConvPass::Forward, ConvPass::BackwardData, ConvPass::BackwardWeights}) {
      for (const char* policy : {"auto", "own"})
        EXPECT_EQ(gpu_conv_candidates(pass, g, 1, 64, policy, false, dt),
                  std::vector<ConvAlgo>{ConvAlgo::Implicit});
      // forced to an algorithm that cannot run the shape: pdnn's own that can
      EXPECT_EQ(gpu_conv_candidates(pass, g, 1, 64, "direct", false, dt),
                std::vector<ConvAlgo>{ConvAlgo::Implicit});
    }
  const ConvWorkspaceBounds b = gpu_conv_workspace_bounds(g, 1, 64, Act{}, DType::F32, 132);
  EXPECT_EQ(b.least, 58 * 64 * 1153 * 4);
  EXPECT_EQ(b.most, b.least);  // backward-data's flipped weights (73728 floats) are less
  EXPECT_EQ(b.columns, 0);
  EXPECT_EQ(gpu_conv_workspace_bounds(g, 1, 64, Act{}, DType::BF16, 132).least,
            58 * 64 * 1153 * 4);
  Conv2d conv(128, 64, 3, 1, 1);
  conv.set_mask_dy_in_place(true);
  const BackwardNeeds n = conv.backward_needs(Shape{1, 128, 4096, 4096}, PlanFor{});
  EXPECT_EQ(n.workspace_bytes, b.least);
  EXPECT_EQ(n.columns_bytes, 0);
  // One multiple of 16 less on each side: the 32-bit instantiation, every algorithm.
  const ConvGeom h = conv3x3(128, 4080);
  EXPECT_FALSE(conv_implicit_wide(h));
  EXPECT_EQ(gpu_conv_candidates(ConvPass::Forward, h, 1, 64, "own", false, DType::F32),
            (std::vector<ConvAlgo>{ConvAlgo::Im2col, ConvAlgo::Implicit, ConvAlgo::Direct}));
  EXPECT_LT(gpu_conv_workspace_bounds(h, 1, 64, Act{}, DType::F32, 132).least, 64 * kMi);
  // The 64-channel layers: 64 x 5792^2 < 2^31 - 1 <= 64 x 5800^2; at 7680 (the swap bound's
  // side) 3.8 G elements, still the implicit GEMM's alone.
  EXPECT_FALSE(conv_implicit_wide(conv3x3(64, 5792)));
  EXPECT_TRUE(conv_implicit_wide(conv3x3(64, 5800)));
  const ConvGeom u = conv3x3(64, 7680);
  EXPECT_EQ(gpu_conv_candidates(ConvPass::BackwardWeights, u, 1, 64, "auto", false, DType::F32),
            std::vector<ConvAlgo>{ConvAlgo::Implicit});
  EXPECT_LT(gpu_conv_workspace_bounds(u, 1, 64, Act{}, DType::F32, 132).least, 64 * kMi);
  // The bound counts a tap's row and column past the last plane: 128 x 4095^2 + 3 x 4095 + 3
  // < 2^31 - 1 is 32-bit, 46340^2 + 3 x 46340 + 3 (one plane under 2^31) is not.
  EXPECT_FALSE(conv_implicit_wide(conv3x3(128, 4095)));
  EXPECT_TRUE(conv_implicit_wide(conv3x3(1, 46340)));
  // What stays 32-bit: a plane (46341^2 > 2^31 - 1), the batch's pixels, the weights. Past
  // them nothing column-free is left: im2col alone (which fails there with its own error).
  const ConvGeom plane = conv3x3(1, 46341);
  EXPECT_FALSE(conv_implicit_fits(plane, 1, 1));
  EXPECT_EQ(gpu_conv_candidates(ConvPass::Forward, plane, 1, 1, "auto", false, DType::F32),
            std::vector<ConvAlgo>{ConvAlgo::Im2col});
  EXPECT_EQ(gpu_conv_workspace_bounds(plane, 1, 1, Act{}, DType::F32, 132).least,
            gpu_conv_workspace_bounds(plane, 1, 1, Act{}, DType::F32, 132).columns);
  EXPECT_FALSE(conv_implicit_fits(conv3x3(64, 2048), 512, 64));  // n*oh*ow = 2^31
  EXPECT_TRUE(conv_implicit_fits(conv3x3(64, 2048), 511, 64));
}

// The U-Net's 2x2 stride-2 up-convolution (ConvTranspose2d 128 -> 64 to 1024 x 1024): forward
// is the convolution's backward-data, strided (the implicit GEMM's phase kernel: no flipped
// weights, 1 float), dx its forward (1 float), the weight gradient its backward-weights: 64 x 4
// = 256 taps by 128 rows, tile 128x128, 2 tiles, 264 splits wanted, 16384 steps of 16 allow
// 1024: 63 steps a split, 261 splits of 128 x 257 floats. im2col's columns are the output's
// size (256 x 512^2 floats) and its product.
TEST(ConvWorkspace, UNetUpConvolutionNeedsNoColumns) {
  ConvTranspose2d up(128, 64, 2, 2, 0);
  const BackwardNeeds n = up.backward_needs(Shape{1, 128, 512, 512}, PlanFor{});
  EXPECT_EQ(n.workspace_bytes, 261 * 128 * 257 * 4);
  const int64_t p = 512 * 512;
  EXPECT_EQ(n.columns_bytes, ((256 * p + 15) / 16 * 16 + 128 * p + 2 + 64 * 128) * 4);
  EXPECT_LT(n.workspace_bytes, n.columns_bytes);
  EXPECT_TRUE(n.input);
}

// bf16's 4x4 stride-2 padding-1 layers (W5's) have the direct kernels too: their forward keeps
// the weights and the input's space-to-depth phases, no columns.
TEST(ConvWorkspace, K4s2Bf16HasTheDirectKernels) {
  const ConvGeom g = conv_geom("test", 64, 32, 32, 4, 4, 2, 2, 1, 1);
  const std::vector<ConvAlgo> c =
      gpu_conv_candidates(ConvPass::Forward, g, 64, 128, "own", false, DType::BF16);
  EXPECT_NE(std::find(c.begin(), c.end(), ConvAlgo::Direct), c.end());
  const size_t direct = gpu_conv_own_ws_floats(ConvPass::Forward, ConvAlgo::Direct, g, 64, 128,
                                               Act{}, DType::BF16, 132);
  // weights: 256 phase channels x 4 taps x 128 rows / 2 (bf16); phases: 64 x 256 x 17 x 18 / 2;
  // the split sums of several images a block (16 x 16 outputs: one image fits the 256-pixel
  // patch, which --direct-images many may ask for): 16 steps in at most 4 splits of 64 x 128 x
  // 256 floats
  EXPECT_EQ(direct, 256u * 4 * 128 / 2 + (64u * 256 * 17 * 18 + 1) / 2 + 4u * 64 * 128 * 256);
  EXPECT_EQ(gpu_conv_own_ws_floats(ConvPass::Forward, ConvAlgo::Direct, g, 64, 128, Act{},
                                   DType::F32, 132),
            cuda_conv_workspace_floats(g, 64, 128));  // not in fp32: runs as im2col
}

// A window covering the whole image (DCGAN's 4x4 <-> 1x1 layers): the GPU's im2col path runs
// its GEMMs on the images themselves (conv2d.cu), so its workspace holds no columns (the
// product, then the bias gradient's partial sums) and its forward keeps none for backward,
// where another 4x4 layer of the same batch does.
TEST(ConvWorkspace, WholeImageWindowHoldsNoColumns) {
  const ConvGeom whole = conv_geom("test", 512, 4, 4, 4, 4, 1, 1, 0, 0);
  ASSERT_TRUE(whole_image_window(whole));
  EXPECT_EQ(cuda_conv_product_offset(whole, 64), 0);
  EXPECT_EQ(cuda_conv_workspace_floats(whole, 64, 1), size_t{64 * 1 + 2 + 2 * 32 * 1});
  EXPECT_FALSE(cuda_conv_kept_columns(whole, 64, 1));
  const ConvGeom padded = conv_geom("test", 512, 4, 4, 4, 4, 1, 1, 1, 1);  // 3x3 outputs
  ASSERT_FALSE(whole_image_window(padded));
  EXPECT_EQ(cuda_conv_product_offset(padded, 64), 512 * 16 * 64 * 9);
  EXPECT_TRUE(cuda_conv_kept_columns(padded, 64, 1));
}

}  // namespace
}  // namespace pdnn

namespace pdnn {
namespace {

// ---- the chooser on the GPU (skipped without one) -------------------------------------------

// A 3x3 layer of 32 -> 32 channels at 64 x 64, batch 2: im2col's columns (10 MiB) far above
// what its column-free algorithms ask.
struct Case {
  ConvGeom g = conv3x3(32, 64);
  int64_t n = 2, k = 32;
  Tensor x, w, b, dy;
  Case() {
    Rng r(3);
    x = testing::random_tensor(Shape{n, 32, 64, 64}, r);
    w = testing::random_tensor(Shape{k, 32, 3, 3}, r);
    b = testing::random_tensor(Shape{k}, r);
    dy = testing::random_tensor(Shape{n, k, 64, 64}, r);
  }
  // The least workspace on this device, in floats.
  size_t least(Context& ctx, DType dt = DType::F32) const {
    return static_cast<size_t>(
        gpu_conv_workspace_bounds(g, n, k, Act{}, dt, ctx.cuda().info().sm_count).least / 4);
  }
};

// The context's policy, and its workspace held to the case's least (as a plan at its smallest
// limit holds it); the limit in floats.
size_t hold_to_least(Context& ctx, const Case& c, const std::string& policy,
                     DType dt = DType::F32) {
  ctx.tuning().set_policy(policy);
  const size_t limit = c.least(ctx, dt);
  ctx.set_workspace_limit(Device::CUDA, limit);
  return limit;
}

// The case's forward and backward (dw, db, dx) on the GPU in dt; y and dx back on the host
// (float32).
struct Outs {
  Tensor y, dx, dw;
};
Outs run_case(Context& ctx, const Case& c, DType dt = DType::F32) {
  const Device G = Device::CUDA;
  auto dev = [&](const Tensor& t) {
    return dt == DType::BF16 ? testing::to_bf16(t, G, ctx) : t.to(G, ctx);
  };
  const Tensor x = dev(c.x), w = dev(c.w), dy = dev(c.dy), b = c.b.to(G, ctx);
  Tensor y = Tensor::empty(Shape{c.n, c.k, 64, 64}, dt, G, ctx);
  Tensor dx = Tensor::empty(c.x.shape(), dt, G, ctx);
  Tensor dw = Tensor::zeros(c.w.shape()).to(G, ctx), db = Tensor::zeros(Shape{c.k}).to(G, ctx);
  const ConvShape s{c.g, c.n, c.k};
  ops::conv2d_forward(ctx, ConvFwdTensors::of(s, &x, &w, &b, &y));
  ops::conv2d_backward(
      ctx, ConvBwdTensors::of(ConvFwdTensors::of(s, &x, &w, &b, &y), &dy, &dw, &db, &dx));
  ctx.synchronize();
  auto host = [&](const Tensor& t) {
    return dt == DType::BF16 ? testing::widened(t, ctx) : t.to(Device::CPU, ctx);
  };
  return Outs{host(y), host(dx), dw.to(Device::CPU, ctx)};
}

// The pass a tuning key names ("conv2d fwd ...", "conv2d bwd-data ...", "conv2d bwd-weights ...").
ConvPass pass_of_key(const std::string& key) {
  return key.rfind("conv2d fwd", 0) == 0        ? ConvPass::Forward
         : key.rfind("conv2d bwd-data", 0) == 0 ? ConvPass::BackwardData
                                                : ConvPass::BackwardWeights;
}

// Every choice the context made fits `limit` (floats), none is im2col, and the workspace never
// grew past it (cuDNN's, found within what the limit leaves, by that alone).
void expect_all_fit(Context& ctx, const Case& c, size_t limit, DType dt) {
  ASSERT_FALSE(ctx.tuning().made().empty());
  for (const auto& [key, choice] : ctx.tuning().made()) {
    ConvAlgo a;
    ASSERT_TRUE(parse_conv_algo(choice.choice, &a)) << key;
    const ConvPass pass = pass_of_key(key);
    EXPECT_NE(a, ConvAlgo::Im2col) << key;
    if (a == ConvAlgo::Cudnn) continue;
    EXPECT_LE(gpu_conv_own_ws_floats(pass, a, c.g, c.n, c.k, Act{}, dt, ctx.cuda().info().sm_count),
              limit) << key << " -> " << choice.choice;
  }
  EXPECT_LE(ctx.workspace_size(Device::CUDA), limit);
}

// Without a limit the chooser times every candidate that the free memory holds, im2col's 10 MiB
// of columns among them, and the workspace grows to the largest. What the chosen algorithms ask
// is what counts as needed: fit_workspace gives the rest back, and the same passes run again in
// the fitted workspace without growing it, with the same results bit for bit.
TEST(ConvWorkspaceGpu, FitKeepsWhatTheChosenAlgorithmsAsk) {
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  const Case c;
  Context ctx(1, 1, Device::CUDA);
  ctx.tuning().set_policy("own");  // pdnn's algorithms: their workspaces are known here
  const Outs first = run_case(ctx, c);
  const int sms = ctx.cuda().info().sm_count;
  ASSERT_EQ(ctx.tuning().made().size(), 3u);
  size_t chosen = 0;
  for (const auto& [key, choice] : ctx.tuning().made()) {
    ConvAlgo a;
    ASSERT_TRUE(parse_conv_algo(choice.choice, &a)) << key;
    const ConvPass pass = pass_of_key(key);
    chosen = std::max(chosen, gpu_conv_own_ws_floats(pass, a, c.g, c.n, c.k, Act{}, DType::F32, sms));
  }
  const size_t columns = cuda_conv_workspace_floats(c.g, c.n, c.k);
  EXPECT_GE(ctx.workspace_size(Device::CUDA), columns);  // im2col was timed
  const size_t needed = ctx.workspace_needed(Device::CUDA);
  EXPECT_GE(needed, chosen);
  EXPECT_LE(needed, ctx.workspace_size(Device::CUDA));
  const size_t held = ctx.workspace_size(Device::CUDA);
  const size_t in_use = ctx.device_alloc_stats().in_use;
  EXPECT_EQ(ctx.fit_workspace(Device::CUDA), (held - std::max<size_t>(needed, 1)) * sizeof(float));
  EXPECT_EQ(ctx.workspace_size(Device::CUDA), std::max<size_t>(needed, 1));
  // ... and the allocator holds the smaller block, not the old one served again (its blocks
  // are 512-byte multiples at the least, 2 MiB ones for large sizes)
  EXPECT_LE(ctx.device_alloc_stats().in_use,
            in_use - (held - std::max<size_t>(needed, 1)) * sizeof(float) + (size_t{2} << 20));
  const Outs again = run_case(ctx, c);
  EXPECT_EQ(ctx.workspace_size(Device::CUDA), std::max<size_t>(needed, 1));  // no regrowth
  EXPECT_EQ(testing::rel_error(again.y, first.y), 0.0);
  EXPECT_EQ(testing::rel_error(again.dx, first.dx), 0.0);
  EXPECT_EQ(testing::rel_error(again.dw, first.dw), 0.0);
}

// auto and own under a workspace of exactly the least: the choice leaves im2col out (its
// columns do not fit), runs only what fits, and computes the convolution (against the same
// passes without a limit, within fp32's and bf16's rounding of different summation orders).
void expect_policy_fits(const std::string& policy, DType dt) {
  SCOPED_TRACE(policy + (dt == DType::BF16 ? " bf16" : " fp32"));
  const Case c;
  Context free_ctx(1, 1, Device::CUDA);
  free_ctx.tuning().set_policy("im2col");
  const Outs want = run_case(free_ctx, c, dt);
  Context ctx(1, 1, Device::CUDA);
  const size_t limit = hold_to_least(ctx, c, policy, dt);
  ASSERT_LT(limit, cuda_conv_workspace_floats(c.g, c.n, c.k));
  const Outs got = run_case(ctx, c, dt);
  expect_all_fit(ctx, c, limit, dt);
  const double tol = dt == DType::BF16 ? 2e-2 : 1e-5;
  EXPECT_LT(testing::rel_error(got.y, want.y), tol);
  EXPECT_LT(testing::rel_error(got.dx, want.dx), tol);
  EXPECT_LT(testing::rel_error(got.dw, want.dw), tol);
}

// cuDNN forced (--conv-algo cudnn) under a workspace of exactly its least, as a plan at its
// smallest limit holds it: what it keeps beside its algorithm, for the weight gradient the
// scratch its algorithm is found with, and what cuDNN's algorithm asks at the least (a least
// without either failed the pass on an H200); every pass runs on cuDNN within it and computes
// the convolution, fp32 and bf16. A float less fails naming the workspace, where cuDNN's own
// least is above none.
TEST(ConvWorkspaceGpu, CudnnRunsInItsLeastWorkspace) {
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  for (DType dt : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dt == DType::BF16 ? "bf16" : "fp32");
    const Case c;
    Context free_ctx(1, 1, Device::CUDA);
    free_ctx.tuning().set_policy("im2col");
    const Outs want = run_case(free_ctx, c, dt);
    Context ctx(1, 1, Device::CUDA);
    if (ctx.cuda().cudnn() == nullptr) GTEST_SKIP() << cudnn_status();
    ctx.tuning().set_policy("cudnn");
    const CudnnLeastFn cudnn_least = gpu_conv_cudnn_least(ctx);
    const size_t limit = static_cast<size_t>(
        gpu_conv_workspace_bounds(c.g, c.n, c.k, Act{}, dt, ctx.cuda().info().sm_count, "cudnn",
                                  ConvAlgo::Auto, cudnn_least)
            .least / 4);
    ctx.set_workspace_limit(Device::CUDA, limit);
    const Outs got = run_case(ctx, c, dt);
    ASSERT_EQ(ctx.tuning().made().size(), 3u);
    for (const auto& [key, choice] : ctx.tuning().made()) EXPECT_EQ(choice.choice, "cudnn") << key;
    EXPECT_LE(ctx.workspace_size(Device::CUDA), limit);
    const double tol = dt == DType::BF16 ? 2e-2 : 1e-5;
    EXPECT_LT(testing::rel_error(got.y, want.y), tol);
    EXPECT_LT(testing::rel_error(got.dx, want.dx), tol);
    EXPECT_LT(testing::rel_error(got.dw, want.dw), tol);
    // the pass that sets the least: a float less leaves its algorithm 4 bytes short
    int64_t most_lo = 0, own = 0;
    for (ConvPass p : {ConvPass::Forward, ConvPass::BackwardData, ConvPass::BackwardWeights}) {
      const bool b16 = dt == DType::BF16;
      const int64_t own_p = (cudnn_least(p, c.g, c.n, c.k, dt) + 3) / 4 * 4;
      const int64_t lo = 4 * static_cast<int64_t>(
                                 cuda::conv2d_cudnn_beside_floats(p, c.g, c.n, c.k, Act{}, b16) +
                                 cuda::conv2d_cudnn_find_scratch_floats(p, c.g, c.k, b16)) +
                         own_p;
      if (lo > most_lo) most_lo = lo, own = own_p;
    }
    EXPECT_EQ(static_cast<size_t>(most_lo / 4), limit);
    if (own == 0) continue;
    Context less(1, 1, Device::CUDA);
    less.tuning().set_policy("cudnn");
    less.set_workspace_limit(Device::CUDA, limit - 1);
    testing::expect_error_mentions([&] { run_case(less, c, dt); },
                                   {"convolution algorithm cudnn", "asks at most"});
  }
}

TEST(ConvWorkspaceGpu, AutoRunsOnlyWhatFitsThePlansWorkspace) {
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  expect_policy_fits("auto", DType::F32);
  expect_policy_fits("auto", DType::BF16);
}

TEST(ConvWorkspaceGpu, OwnRunsOnlyWhatFitsThePlansWorkspace) {
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  expect_policy_fits("own", DType::F32);
  expect_policy_fits("own", DType::BF16);
}

// Forced by --conv-algo (for every pass, or one pass), an algorithm past the workspace fails in
// one line naming the pass, the algorithm, its bytes and the workspace's, before it runs.
TEST(ConvWorkspaceGpu, ForcedPastTheWorkspaceFailsNamingIt) {
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  const Case c;
  {
    Context ctx(1, 1, Device::CUDA);
    hold_to_least(ctx, c, "im2col");
    testing::expect_error_mentions([&] { run_case(ctx, c); },
                                   {"conv2d fwd", "algorithm im2col", "--conv-algo", "needs",
                                    "MiB of workspace", "shared workspace is"});
    EXPECT_EQ(ctx.workspace_size(Device::CUDA), 0u);  // nothing asked of it
  }
  {
    Context ctx(1, 1, Device::CUDA);
    hold_to_least(ctx, c, "own,bwd-weights=im2col");
    testing::expect_error_mentions([&] { run_case(ctx, c); },
                                   {"conv2d bwd-weights", "algorithm im2col", "needs"});
    ASSERT_FALSE(ctx.tuning().made().empty());
    EXPECT_EQ(ctx.tuning().made()[0].first.rfind("conv2d fwd", 0), 0u);  // forward ran
  }
}

// Forced by the layer (Conv2d::set_algo), inside a model: the error names the layer.
TEST(ConvWorkspaceGpu, LayerForcedPastTheWorkspaceNamesTheLayer) {
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  const Case c;
  Context ctx(1, 1, Device::CUDA);
  Sequential m;
  m.emplace<Conv2d>(32, 32, 3, 1, 1).set_algo(ConvAlgo::Im2col);
  m.reset_parameters(ctx.rng());
  m.to(Device::CUDA, ctx);
  hold_to_least(ctx, c, "auto");
  const Tensor x = c.x.to(Device::CUDA, ctx);
  testing::expect_error_mentions([&] { m.forward(ctx, x); },
                                 {"layer 0 (Conv2d(32->32, k3 s1 p1))", "algorithm im2col",
                                  "the layer's", "needs"});
}

// A choice made before under a larger workspace (a cache file, another cap) that does not fit
// this one is made again among those that do.
TEST(ConvWorkspaceGpu, TunedChoicePastTheWorkspaceIsMadeAgain) {
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  const Case c;
  Context ctx(1, 1, Device::CUDA);
  for (ConvPass p : {ConvPass::Forward, ConvPass::BackwardData, ConvPass::BackwardWeights})
    ctx.tuning().put(gpu_conv_key(p, c.g, c.n, c.k, Act{}, "fp32") + " own", "im2col", 0.0);
  const size_t limit = hold_to_least(ctx, c, "own");
  run_case(ctx, c);
  EXPECT_EQ(ctx.tuning().made().size(), 3u);
  expect_all_fit(ctx, c, limit, DType::F32);
}

// No algorithm fits: one line naming the pass and the workspace, and what each would ask.
TEST(ConvWorkspaceGpu, NothingFitsFailsNamingTheWorkspace) {
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  const Case c;
  Context ctx(1, 1, Device::CUDA);
  ctx.tuning().set_policy("own");
  // the implicit forward's 1 float fits; no weight gradient does
  ctx.set_workspace_limit(Device::CUDA, 16);
  testing::expect_error_mentions(
      [&] { run_case(ctx, c); },
      {"conv2d bwd-weights", "no convolution algorithm can run this pass",
       "in the memory plan's workspace of", "im2col", "implicit", "direct",
       "raise --gpu-memory-limit"});
}

// cuDNN forced under a workspace limit picks among its own algorithms those that fit what the
// limit leaves (the same rule), or fails saying so; it never asks more. (At its least:
// CudnnRunsInItsLeastWorkspace.)
TEST(ConvWorkspaceGpu, CudnnForcedPicksWithinTheWorkspace) {
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  Context probe(1, 1, Device::CUDA);
  if (!probe.cuda().cudnn()) GTEST_SKIP() << "needs cuDNN: " << cudnn_status();
  const Case c;
  for (size_t limit : {c.least(probe), size_t{16} << 20}) {
    SCOPED_TRACE(limit);
    Context ctx(1, 1, Device::CUDA);
    ctx.tuning().set_policy("cudnn");
    ctx.set_workspace_limit(Device::CUDA, limit);
    try {
      run_case(ctx, c);
      EXPECT_LE(ctx.workspace_size(Device::CUDA), limit);
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_TRUE(m.find("cuDNN asks at most") != std::string::npos ||
                  m.find("needs") != std::string::npos) << m;
    }
  }
}

// The U-Net's up-convolution under its least workspace: its three passes run on the implicit
// GEMM, or cuDNN within what it leaves (im2col's columns do not fit).
TEST(ConvWorkspaceGpu, UpConvolutionRunsInItsLeastWorkspace) {
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  Context ctx(1, 1, Device::CUDA);
  Sequential m;  // (moves the layer's parameters to the device)
  ConvTranspose2d& up = m.emplace<ConvTranspose2d>(64, 32, 2, 2, 0);
  m.reset_parameters(ctx.rng());
  m.to(Device::CUDA, ctx);
  const Shape in{1, 64, 64, 64};
  const BackwardNeeds need = up.backward_needs(in, PlanFor{DType::F32, ctx.cuda().info().sm_count});
  ctx.set_workspace_limit(Device::CUDA, static_cast<size_t>(need.workspace_bytes / 4));
  Rng r(4);
  const Tensor x = testing::random_tensor(in, r).to(Device::CUDA, ctx);
  Tensor y = Tensor::empty(up.output_shape(in), DType::F32, Device::CUDA, ctx);
  up.forward(ctx, x, y);
  const Tensor dy = testing::random_tensor(y.shape(), r).to(Device::CUDA, ctx);
  Tensor dx = Tensor::empty(in, DType::F32, Device::CUDA, ctx);
  up.backward(ctx, x, y, dy, &dx);
  ctx.synchronize();
  ASSERT_EQ(ctx.tuning().made().size(), 3u);
  for (const auto& [key, choice] : ctx.tuning().made())
    EXPECT_TRUE(choice.choice == "implicit" || choice.choice == "cudnn") << key << " -> " << choice.choice;
  EXPECT_LE(ctx.workspace_size(Device::CUDA), static_cast<size_t>(need.workspace_bytes / 4));
}

}  // namespace
}  // namespace pdnn
