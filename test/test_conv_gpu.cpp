// The GPU's convolution algorithms (ops/conv/conv2d_gpu.h, conv2d_algo.h), each pass forced to
// each algorithm in fp32 and in TF32, against a double-precision reference on odd shapes:
// kernels 1/3/4/5, strides 1 and 2, padding 0..2, batch 1, channel counts that are no multiple
// of any tile, fused ReLU/LeakyReLU, with and without bias, and the backward-data phases of
// strided layers whose tap counts differ. Outputs are poisoned with NaN first (every element
// must be written), and the weight and bias gradients start from random values (they must
// accumulate).
//
// Tolerances: test/conv_reference.h. The reference itself is checked on the CPU against the
// CPU's convolution, so it runs (and is tested) without a GPU.
#include <climits>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <utility>
#include <unistd.h>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/cuda_state.h"
#if PDNN_HAVE_CUDA
#include "cuda/cudnn.h"
#endif
#include "ops/conv/conv2d.h"
#include "ops/conv/conv2d_3x3.h"
#include "ops/conv/conv2d_algo.h"
#include "ops/conv/conv2d_gpu.h"
#include "ops/conv/conv2d_k4s2.h"
#include "ops/conv/direct_taps.h"
#include "ops/conv/im2col.h"
#include "ops/random.h"
#include "ops/basic.h"
#include "optim/sgd.h"
#include "bf16_testing.h"
#include "conv_reference.h"
#include "testing.h"
#include "workloads/classifier/classifier_trainer.h"
#include "workloads/classifier/caltech_models.h"

namespace pdnn {
namespace {

struct ConvCase {
  const char* name;
  int64_t n, c, h, w, k, kernel, stride, pad;
  FusedAct act;
  bool bias;
};

const ConvCase kCases[] = {
    {"c3_odd_relu", 2, 3, 17, 19, 8, 3, 1, 1, FusedAct::ReLU, true},
    {"k5_batch1", 1, 5, 9, 7, 33, 5, 1, 2, FusedAct::None, true},
    {"k4s2_leaky", 3, 16, 12, 10, 20, 4, 2, 1, FusedAct::LeakyReLU, false},
    {"k1_wide", 2, 7, 11, 13, 70, 1, 1, 0, FusedAct::None, true},
    {"k3s2p0_odd_m130", 2, 37, 9, 9, 130, 3, 2, 0, FusedAct::ReLU, true},
    {"to_1x1", 2, 24, 4, 4, 10, 4, 1, 0, FusedAct::None, false},
    {"long_k_split", 2, 64, 20, 20, 16, 3, 1, 1, FusedAct::ReLU, true},
    {"c1_k10", 4, 1, 28, 28, 10, 3, 1, 1, FusedAct::ReLU, true},
    {"k1_s2_empty_phases", 2, 6, 7, 8, 5, 1, 2, 0, FusedAct::None, true},
    {"m24_taps288", 2, 32, 10, 9, 24, 3, 1, 1, FusedAct::ReLU, true},
};

// The direct kernels' tensor-core 3x3 cases past kCases' (both precisions' tile tests): even
// widths past a tile with interior and edge warps in one launch (34 x 36: 16-row tiles 16 + 16
// + 2, 8-row tiles 4 x 8 + 2, columns 16 + 16 + 4; k = 32 fills the 32-row warps of M32 and M64),
// without an activation (20 x 32), with LeakyReLU (18 x 32): the pixel-pair loads and the pair
// epilogue; padding 0 and 2 (halo tiles from an even and an odd column), 72 output channels (two
// 64-row tiles, past 128 padded), 40 input channels (past one and two steps of 16 or 8).
const ConvCase kDirectEvenCases[] = {
    {"even_34x36_m32", 1, 32, 34, 36, 32, 3, 1, 1, FusedAct::ReLU, true},
    {"even_20x32_none", 2, 32, 20, 32, 32, 3, 1, 1, FusedAct::None, true},
    {"even_18x32_leaky", 1, 32, 18, 32, 32, 3, 1, 1, FusedAct::LeakyReLU, false},
    {"p0_even_m72", 2, 20, 8, 12, 72, 3, 1, 0, FusedAct::LeakyReLU, true},
    {"p2_even_c40", 2, 40, 6, 10, 16, 3, 1, 2, FusedAct::ReLU, false},
};

Act act_of(FusedAct a) { return Act{a, a == FusedAct::LeakyReLU ? 0.2f : 0.f}; }

using testing::conv_reference;
using testing::expect_conv_within;

struct Inputs {
  ConvGeom g;
  Act act;
  Tensor x, w, b, dy, dw0, db0;
};

Inputs inputs_of(const ConvCase& c) {
  Inputs in;
  in.g = conv_geom("test", c.c, c.h, c.w, c.kernel, c.kernel, c.stride, c.stride, c.pad, c.pad);
  in.act = act_of(c.act);
  Rng rng(17);
  in.x = testing::random_tensor(Shape{c.n, c.c, c.h, c.w}, rng);
  in.w = testing::random_tensor(Shape{c.k, c.c, c.kernel, c.kernel}, rng);
  in.b = testing::random_tensor(Shape{c.k}, rng);
  in.dy = testing::random_tensor(Shape{c.n, c.k, in.g.oh, in.g.ow}, rng);
  in.dw0 = testing::random_tensor(in.w.shape(), rng);
  in.db0 = testing::random_tensor(Shape{c.k}, rng);
  return in;
}

// A case's operands (conv_args.h): forward y = act(conv(x, w) + b), backward everything it
// gives (dw, db, dx; y when the case has an activation). T: Tensor for ops::, float for the
// kernels' own entry points.
template <class T>
ConvFwdOf<T> fwd_args(const Inputs& in, const ConvCase& c, const T* x, const T* w, const T* b,
                      T* y, ConvAlgo algo = ConvAlgo::Auto) {
  return ConvFwdOf<T>::of(ConvShape{in.g, c.n, c.k}, x, w, c.bias ? b : nullptr, y, in.act, algo);
}
template <class T>
ConvBwdOf<T> bwd_args(const Inputs& in, const ConvCase& c, const T* x, const T* w, const T* dy,
                      const T* y, T* dw, T* db, T* dx, ConvAlgo algo = ConvAlgo::Auto) {
  ConvBwdOf<T> a = ConvBwdOf<T>::of(fwd_args<T>(in, c, x, w, nullptr, nullptr, algo), dy, dw,
                                    c.bias ? db : nullptr, dx);
  a.y = y;
  return a;
}

Tensor poisoned(const Shape& s, Device d, Context& ctx) {
  Tensor t(s);
  t.fill(std::numeric_limits<float>::quiet_NaN());
  return d == Device::CPU ? t : t.to(d, ctx);
}

// The reference against the CPU's own convolution (no GPU needed): the harness is right.
TEST(ConvGpu, ReferenceMatchesTheCpuConvolution) {
  Context ctx(1, 1);
  for (const ConvCase& c : kCases) {
    SCOPED_TRACE(c.name);
    Inputs in = inputs_of(c);
    Tensor y(Shape{c.n, c.k, in.g.oh, in.g.ow});
    ops::conv2d_forward(ctx, fwd_args<Tensor>(in, c, &in.x, &in.w, &in.b, &y, ConvAlgo::PerImage));
    const testing::ConvReference r = conv_reference(in.g, c.n, c.k, in.x, in.w, c.bias ? &in.b : nullptr, y,
                                  in.dy, in.act);
    Tensor dx(in.x.shape()), dw = in.dw0.clone(), db = in.db0.clone();
    ops::conv2d_backward(
        ctx, bwd_args<Tensor>(in, c, &in.x, &in.w, &in.dy, &y, &dw, &db, &dx, ConvAlgo::PerImage));
    const double kf = double(in.g.col_rows()), kb = double(c.k * c.kernel * c.kernel),
                 kw = double(c.n * in.g.oh * in.g.ow);
    expect_conv_within(y, r.y, r.y_abs, nullptr, kf, false, "y");
    expect_conv_within(dx, r.dx, r.dx_abs, nullptr, kb, false, "dx");
    expect_conv_within(dw, r.dw, r.dw_abs, &in.dw0, kw, false, "dw");
    if (c.bias) expect_conv_within(db, r.db, r.db_abs, &in.db0, kw, false, "db");
  }
}

// A case's GPU results (yh on the host; dx where given) against the double reference r, each
// within the bound of its sum's length: TF32's where tf32_bound, else fp32 summation's (db's
// sums are fp32's in every precision).
void expect_within_reference(Context& ctx, const Inputs& in, const ConvCase& c,
                             const testing::ConvReference& r, const Tensor& yh, const Tensor* dx,
                             const Tensor& dw, const Tensor& db, bool tf32_bound) {
  const double kf = double(in.g.col_rows()), kb = double(c.k * c.kernel * c.kernel),
               kw = double(c.n * in.g.oh * in.g.ow);
  expect_conv_within(yh, r.y, r.y_abs, nullptr, kf, tf32_bound, "y");
  if (dx)
    expect_conv_within(dx->to(Device::CPU, ctx), r.dx, r.dx_abs, nullptr, kb, tf32_bound, "dx");
  expect_conv_within(dw.to(Device::CPU, ctx), r.dw, r.dw_abs, &in.dw0, kw, tf32_bound, "dw");
  if (c.bias)
    expect_conv_within(db.to(Device::CPU, ctx), r.db, r.db_abs, &in.db0, kw, false, "db");
}

// One case through ops:: with `algo` forced on the context's GPU, every pass, against the double
// reference: within TF32's bound where `tf32_bound` (TF32, and fp32 with FFT or Winograd, whose
// rounding is TF32's or less: conv2d_cudnn.cu), else fp32 summation's.
void expect_case_matches_reference(Context& ctx, const ConvCase& c, ConvAlgo algo, bool tf32_bound) {
  Inputs in = inputs_of(c);
  const Device G = Device::CUDA;
  const Tensor x = in.x.to(G, ctx), w = in.w.to(G, ctx), b = in.b.to(G, ctx),
               dy = in.dy.to(G, ctx);
  Tensor y = poisoned(Shape{c.n, c.k, in.g.oh, in.g.ow}, G, ctx);
  ops::conv2d_forward(ctx, fwd_args<Tensor>(in, c, &x, &w, &b, &y, algo));
  Tensor dx = poisoned(in.x.shape(), G, ctx);
  Tensor dw = in.dw0.to(G, ctx), db = in.db0.to(G, ctx);
  ops::conv2d_backward(ctx, bwd_args<Tensor>(in, c, &x, &w, &dy, &y, &dw, &db, &dx, algo));
  const Tensor yh = y.to(Device::CPU, ctx);
  // the reference's activation mask is read off the GPU's own y, as the kernels read it
  const testing::ConvReference r = conv_reference(in.g, c.n, c.k, in.x, in.w, c.bias ? &in.b : nullptr, yh,
                                in.dy, in.act);
  expect_within_reference(ctx, in, c, r, yh, &dx, dw, db, tf32_bound);
}

// Each GPU algorithm, each pass, fp32 and TF32, against the reference.
TEST(ConvGpu, EveryAlgorithmAndPassMatchesTheReference) {
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  Context ctx(1, 1, Device::CUDA);
  // Direct runs the 3x3 stride-1 cases (the others fall back to im2col).
  std::vector<ConvAlgo> algos = {ConvAlgo::Im2col, ConvAlgo::Implicit, ConvAlgo::Direct};
  // cuDNN is optional (opened at run time): checked where it is found, like pdnn's own.
  if (ctx.cuda().cudnn() != nullptr) algos.push_back(ConvAlgo::Cudnn);
  for (bool tf32 : {false, true}) {
    ctx.set_precision(tf32 ? Precision::Tf32 : Precision::Fp32);
    for (ConvAlgo algo : algos) {
      for (const ConvCase& c : kCases) {
        SCOPED_TRACE(std::string(c.name) + " " + conv_algo_name(algo) + (tf32 ? " tf32" : " fp32"));
        expect_case_matches_reference(ctx, c, algo, tf32);
      }
    }
  }
}

// fp32 with --conv-transforms: cuDNN's FFT and Winograd compete (every case, cuDNN's pick), and
// forced (transforms_only) on the stride-1 cases, where cuDNN has them for every pass; within
// TF32's bound, as TF32 with the same algorithms. Their choices are kept under their own key.
TEST(ConvGpu, CudnnWithTransformsInFp32MatchesTheReference) {
#if !PDNN_HAVE_CUDA || !PDNN_CUDNN_HEADER
  GTEST_SKIP() << "needs a CUDA build with cudnn.h";
#else
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  for (bool forced : {false, true}) {
    Context ctx(1, 1, Device::CUDA);
    if (ctx.cuda().cudnn() == nullptr) GTEST_SKIP() << cudnn_status();
    ctx.set_conv_transforms(true);
    auto* cc = static_cast<cuda::CudnnContext*>(ctx.cuda().cudnn());
    cc->transforms_only = forced;
    int ran = 0;
    for (const ConvCase& c : kCases) {
      if (forced && !(c.stride == 1 && c.kernel == 3)) continue;
      SCOPED_TRACE(std::string(c.name) + (forced ? " FFT or Winograd forced" : " cuDNN's pick"));
      expect_case_matches_reference(ctx, c, ConvAlgo::Cudnn, true);
      ++ran;
    }
    EXPECT_GE(ran, forced ? 3 : 9);
    ASSERT_FALSE(cc->picks.empty());
    for (const auto& [key, pick] : cc->picks) {
      EXPECT_NE(key.find(" fp32+transforms"), std::string::npos) << key;
      std::printf("%s%s -> cuDNN algorithm %d\n", forced ? "forced: " : "", key.c_str(), pick.algo);
    }
  }
#endif
}

// bf16 (mixed precision): x, w, y, dy, dx bfloat16, b, dw, db float32, through ops:: with each
// algorithm (im2col, implicit, direct on the 3x3 stride-1 and 4x4 stride-2 padding-1 cases,
// im2col elsewhere; cuDNN where
// found) forced for every pass, against
// the double reference from the same bf16 values within bf16_testing.h's bound: y rounded once;
// dx once, or twice where the input's LeakyReLU is folded into it (every other case: dx_act,
// applied in place to the rounded dx); dw and db fp32 sums added to their random start (cuDNN
// writes its weight gradient in bf16 first: one more rounding). The reference's activation mask
// is read off the GPU's own y, and LeakyReLU's slope * dy rounded to bf16 as the kernels round
// it (an operand). The cases' output and input channel counts reach every tile of the
// register-staged bf16 kernel (by M: up to 16, 32, 64, more).
TEST(ConvGpu, Bf16EveryAlgorithmAndPassMatchesTheReference) {
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  Context ctx(1, 1, Device::CUDA);
  const Act folded{FusedAct::LeakyReLU, 0.1f};
  for (ConvAlgo algo : testing::gpu_conv_algos(ctx)) {
    int index = 0;
    for (const ConvCase& c : kCases) {
      const bool fold = index++ % 2 == 1;
      SCOPED_TRACE(std::string(c.name) + " " + conv_algo_name(algo) + " bf16" +
                   (fold ? " dx_act" : ""));
      Inputs in = inputs_of(c);
      const Tensor xr = testing::bf16_rounded(in.x), wr = testing::bf16_rounded(in.w),
                   dyr = testing::bf16_rounded(in.dy);
      const Device G = Device::CUDA;
      const Tensor x = testing::to_bf16(in.x, G, ctx), w = testing::to_bf16(in.w, G, ctx),
                   dy = testing::to_bf16(in.dy, G, ctx), b = in.b.to(G, ctx);
      Tensor y = testing::bf16_poisoned(Shape{c.n, c.k, in.g.oh, in.g.ow}, G, ctx);
      ops::conv2d_forward(ctx, fwd_args<Tensor>(in, c, &x, &w, &b, &y, algo));
      Tensor dx = testing::bf16_poisoned(in.x.shape(), G, ctx);
      Tensor dw = in.dw0.to(G, ctx), db = in.db0.to(G, ctx);
      ConvBwdTensors bwd = bwd_args<Tensor>(in, c, &x, &w, &dy, &y, &dw, &db, &dx, algo);
      if (fold) bwd.dx_act = folded;
      ops::conv2d_backward(ctx, bwd);
      const Tensor yh = testing::widened(y, ctx);
      testing::ConvReference r = conv_reference(in.g, c.n, c.k, xr, wr, c.bias ? &in.b : nullptr,
                                                yh, dyr, in.act, /*bf16=*/true);
      const double kf = double(in.g.col_rows()), kb = double(c.k * c.kernel * c.kernel),
                   kw = double(c.n * in.g.oh * in.g.ow);
      std::vector<double> dx_round(r.dx.size(), testing::kBf16U);
      if (fold)
        for (size_t i = 0; i < r.dx.size(); ++i)
          if (!(xr[int64_t(i)] > 0.f)) {
            r.dx[i] *= folded.slope;
            r.dx_abs[i] *= folded.slope;
            // the fp32 product with the slope between two roundings: (1 + u)^2 (1 + 2^-24) - 1
            dx_round[i] = 2 * testing::kBf16U + 0x1.0p-15;
          }
      // cuDNN writes the convolution in bf16, and its bias and activation are a pass of their own
      if (algo == ConvAlgo::Cudnn && (c.bias || c.act != FusedAct::None))
        testing::expect_bf16_rounded_twice(yh, r.y, r.y_abs, kf, "y");
      else
        testing::expect_bf16_sum_within(yh, r.y, r.y_abs, nullptr, kf, testing::kBf16U, "y");
      testing::expect_bf16_sum_within(testing::widened(dx, ctx), r.dx, r.dx_abs, nullptr, kb,
                                      dx_round, "dx");
      testing::expect_bf16_sum_within(dw.to(Device::CPU, ctx), r.dw, r.dw_abs, &in.dw0, kw,
                                      algo == ConvAlgo::Cudnn ? testing::kBf16U : 0.0, "dw");
      if (c.bias)
        testing::expect_bf16_sum_within(db.to(Device::CPU, ctx), r.db, r.db_abs, &in.db0, kw,
                                        0.0, "db");
    }
  }
}

#if PDNN_HAVE_CUDA
// Byte-for-byte equality of two tensors of E (copied to the host).
template <class E>
void expect_same_bits(const Tensor& a, const Tensor& b, Context& ctx, const char* what) {
  const Tensor ha = a.to(Device::CPU, ctx), hb = b.to(Device::CPU, ctx);
  ASSERT_EQ(ha.numel(), hb.numel()) << what;
  EXPECT_EQ(0, std::memcmp(ha.data<E>(), hb.data<E>(), static_cast<size_t>(ha.numel()) * sizeof(E)))
      << what << ": the 64-bit instantiation differs from the 32-bit one";
}
#endif

// The implicit-GEMM forward and backward-weights kernels come in several block tiles, chosen by
// shape (conv_implicit_tile): each tile forced on every case, fp32 and TF32, the backward-weights
// with its fused activation (y read beside dy) and its bias gradient, against the reference.
// Each also in its 64-bit instantiation (what an image of 2^31 elements or more runs:
// conv_implicit_wide, conv2d_gpu_ws.h), forced: it does the 32-bit one's arithmetic in the same
// order from 64-bit tap offsets, so its y, dw and db must equal the 32-bit one's bit for bit.
// (Backward-data has no 64-bit instantiation: a stride-1 one runs this forward over flipped
// weights, a strided one already takes its planes in 64 bits.) GPU filter: *ImplicitTile*.
TEST(ConvGpu, EveryImplicitTileMatchesTheReference) {
#if !PDNN_HAVE_CUDA
  GTEST_SKIP() << "needs a CUDA build";
#else
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  Context ctx(1, 1, Device::CUDA);
  using cuda::ConvTile;
  const ConvTile tiles[] = {ConvTile::T128x128, ConvTile::T64x128, ConvTile::T32x256,
                            ConvTile::T32x128, ConvTile::T32x32};
  for (bool tf32 : {false, true}) {
    ctx.set_precision(tf32 ? Precision::Tf32 : Precision::Fp32);
    for (ConvTile tile : tiles)
      for (const ConvCase& c : kCases) {
        SCOPED_TRACE(std::string(c.name) + " tile " + cuda::conv_tile_name(tile) +
                     (tf32 ? " tf32" : " fp32"));
        Inputs in = inputs_of(c);
        const Device G = Device::CUDA;
        const Tensor x = in.x.to(G, ctx), w = in.w.to(G, ctx), b = in.b.to(G, ctx),
                     dy = in.dy.to(G, ctx);
        Tensor y = poisoned(Shape{c.n, c.k, in.g.oh, in.g.ow}, G, ctx);
        cuda::conv2d_implicit_forward(fwd_args<float>(in, c, x.data(), w.data(), b.data(), y.data()),
                                      ctx.cuda_exec(), tile);
        Tensor dw = in.dw0.to(G, ctx), db = in.db0.to(G, ctx);
        float* ws = ctx.workspace(
            G, cuda::conv2d_implicit_backward_weights_ws(in.g, c.n, c.k,
                                                         ctx.cuda().info().sm_count, tile));
        cuda::conv2d_implicit_backward_weights(
            bwd_args<float>(in, c, x.data(), nullptr, dy.data(), y.data(), dw.data(), db.data(),
                            nullptr),
            ws, ctx.cuda_exec(), tile);
        ASSERT_FALSE(cuda::conv_implicit_wide(in.g));  // the runs above: the 32-bit one
        Tensor y64 = poisoned(y.shape(), G, ctx), dw64 = in.dw0.to(G, ctx), db64 = in.db0.to(G, ctx);
        cuda::conv2d_implicit_forward(
            fwd_args<float>(in, c, x.data(), w.data(), b.data(), y64.data()), ctx.cuda_exec(),
            tile, cuda::ConvIndex::Wide);
        cuda::conv2d_implicit_backward_weights(
            bwd_args<float>(in, c, x.data(), nullptr, dy.data(), y.data(), dw64.data(),
                            db64.data(), nullptr),
            ws, ctx.cuda_exec(), tile, cuda::ConvIndex::Wide);
        expect_same_bits<float>(y, y64, ctx, "y");
        expect_same_bits<float>(dw, dw64, ctx, "dw");
        expect_same_bits<float>(db, db64, ctx, "db");
        const Tensor yh = y.to(Device::CPU, ctx);
        const testing::ConvReference r = conv_reference(
            in.g, c.n, c.k, in.x, in.w, c.bias ? &in.b : nullptr, yh, in.dy, in.act);
        expect_within_reference(ctx, in, c, r, yh, nullptr, dw, db, tf32);
      }
  }
#endif
}

// The direct 3x3 kernels' block tiles, each forced on every 3x3 stride-1 case, fp32 (the FMA
// tiles) and TF32 (the tensor cores, the bf16 kernels' pixel-major stages): forward (bias,
// activation), backward-data (from dy already through the activation, as conv2d_backward
// passes it, with the input's LeakyReLU or ReLU folded into the output write),
// backward-weights (the activation applied as dy arrives); the forward kind of pass on even
// widths both with the tensors aligned (8-byte pixel pairs in and out) and one float off.
TEST(ConvGpu, EveryDirectTileMatchesTheReference) {
#if !PDNN_HAVE_CUDA
  GTEST_SKIP() << "needs a CUDA build";
#else
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  Context ctx(1, 1, Device::CUDA);
  using cuda::DirectTile;
  std::vector<ConvCase> cases;
  for (const ConvCase& c : kCases)
    if (c.kernel == 3 && c.stride == 1) cases.push_back(c);
  // TF32's forward kind of pass stages pixel pairs as one 8-byte load where x's rows allow
  // (even width, x 8-byte aligned) and writes output pairs as one 8-byte store where y's do
  cases.insert(cases.end(), std::begin(kDirectEvenCases), std::end(kDirectEvenCases));
  int checked = 0, unaligned = 0;
  for (bool tf32 : {false, true}) {
    ctx.set_precision(tf32 ? Precision::Tf32 : Precision::Fp32);
    for (DirectTile tile : {DirectTile::M128, DirectTile::M64, DirectTile::M32})
      for (size_t ci = 0; ci < cases.size(); ++ci) {
        const ConvCase& c = cases[ci];
        Inputs in = inputs_of(c);
        ASSERT_TRUE(conv3x3_applies(in.g)) << c.name;
        // backward-data's folded activation (the input's): LeakyReLU and ReLU by turns
        const Act folded = ci % 2 == 0 ? Act{FusedAct::LeakyReLU, 0.1f} : Act{FusedAct::ReLU, 0.f};
        SCOPED_TRACE(std::string(c.name) + " tile " + cuda::direct_tile_name(tile) +
                     (tf32 ? " tf32" : " fp32") + " dx_act " + fused_act_name(folded.kind));
        const Device G = Device::CUDA;
        const Tensor x = in.x.to(G, ctx), w = in.w.to(G, ctx), b = in.b.to(G, ctx),
                     dy = in.dy.to(G, ctx);
        Tensor y = poisoned(Shape{c.n, c.k, in.g.oh, in.g.ow}, G, ctx);
        size_t ws_floats = 0;
        for (ConvPass p : {ConvPass::Forward, ConvPass::BackwardData, ConvPass::BackwardWeights})
          ws_floats = std::max(ws_floats, cuda::conv2d_direct_ws(p, in.g, c.n, c.k, DType::F32,
                                                                  ctx.cuda().info().sm_count));
        float* ws = ctx.workspace(G, ws_floats);
        cuda::conv2d_direct_forward(fwd_args<float>(in, c, x.data(), w.data(), b.data(), y.data()),
                                    ws, ctx.cuda_exec(), tile);
        const Tensor yh = y.to(Device::CPU, ctx);
        testing::ConvReference r = conv_reference(
            in.g, c.n, c.k, in.x, in.w, c.bias ? &in.b : nullptr, yh, in.dy, in.act);
        // dy through the activation, read off the kernel's own y, as conv2d_backward does
        Tensor g(in.dy.shape());
        for (int64_t i = 0; i < g.numel(); ++i)
          g[i] = in.act.kind == FusedAct::None || yh[i] > 0.f
                     ? in.dy[i]
                     : (in.act.kind == FusedAct::ReLU ? 0.f : in.act.slope * in.dy[i]);
        const Tensor gd = g.to(G, ctx);
        Tensor dx = poisoned(in.x.shape(), G, ctx);
        ConvBwd data = bwd_args<float>(in, c, nullptr, w.data(), gd.data(), nullptr, nullptr,
                                       nullptr, dx.data());
        data.act = Act{};  // dy already through it
        data.dx_act = folded;
        data.dx_src = x.data();
        cuda::conv2d_direct_backward_data(data, ws, ctx.cuda_exec(), tile);
        Tensor dw = in.dw0.to(G, ctx), db = in.db0.to(G, ctx);
        cuda::conv2d_direct_backward_weights(
            bwd_args<float>(in, c, x.data(), nullptr, dy.data(), y.data(), dw.data(), db.data(),
                            nullptr),
            ws, ctx.cuda_exec(), tile);
        // dx: the sum times act'(x), one product more (in the bound's two spare roundings)
        for (size_t i = 0; i < r.dx.size(); ++i)
          if (!(in.x[int64_t(i)] > 0.f)) {
            r.dx[i] *= folded.slope;
            r.dx_abs[i] *= folded.slope;
          }
        expect_within_reference(ctx, in, c, r, yh, &dx, dw, db, tf32);
        // Even widths once more with every tensor one float off its pairs' alignment: x, y,
        // dy, dx and dx_src then take TF32's 4-byte loads and the element-wise epilogue.
        if (in.g.w % 2 == 0 && in.g.ow % 2 == 0) {
          SCOPED_TRACE("off by one float");
          auto shifted = [&](const Tensor& f) {  // f's values after one zero, on the GPU
            Tensor p(Shape{f.numel() + 1});
            p[0] = 0.f;
            for (int64_t i = 0; i < f.numel(); ++i) p[i + 1] = f[i];
            return p.to(G, ctx);
          };
          auto nans = [](const Shape& sh) {
            Tensor t(sh);
            t.fill(std::numeric_limits<float>::quiet_NaN());
            return t;
          };
          const Tensor xo = shifted(in.x), go = shifted(g);
          Tensor yo = shifted(nans(yh.shape())), dxo = shifted(nans(in.x.shape()));
          cuda::conv2d_direct_forward(
              fwd_args<float>(in, c, xo.data() + 1, w.data(), b.data(), yo.data() + 1), ws,
              ctx.cuda_exec(), tile);
          ConvBwd d2 = bwd_args<float>(in, c, nullptr, w.data(), go.data() + 1, nullptr, nullptr,
                                       nullptr, dxo.data() + 1);
          d2.act = Act{};
          d2.dx_act = folded;
          d2.dx_src = xo.data() + 1;
          cuda::conv2d_direct_backward_data(d2, ws, ctx.cuda_exec(), tile);
          const Tensor yoh = yo.to(Device::CPU, ctx), dxoh = dxo.to(Device::CPU, ctx);
          Tensor y2(yh.shape()), dx2(in.x.shape());
          for (int64_t i = 0; i < y2.numel(); ++i) y2[i] = yoh[i + 1];
          for (int64_t i = 0; i < dx2.numel(); ++i) dx2[i] = dxoh[i + 1];
          const double kf = double(in.g.col_rows()), kb = double(c.k * 9);
          testing::expect_conv_within(y2, r.y, r.y_abs, nullptr, kf, tf32, "y");
          testing::expect_conv_within(dx2, r.dx, r.dx_abs, nullptr, kb, tf32, "dx");
          ++unaligned;
        }
        ++checked;
      }
  }
  EXPECT_EQ(checked, 2 * 3 * 9);  // kCases' four 3x3 stride-1 cases and the five above
  EXPECT_GT(unaligned, 0);
#endif
}

// The direct kernels' block tiles in bf16, each forced on every 3x3 stride-1 case (odd and
// even widths: the two-byte and the four-byte loads; paddings 0, 1 and 2: halo tiles from an
// odd and an even column; channel counts past one and two 16-channel steps) and every 4x4
// stride-2 padding-1 case (2x2 kernels over the space-to-depth phases; backward-data by output
// phase: odd output widths, 3 input channels = 12 phase channels, past 128 output rows, a
// batch of one), against the double
// reference from the same bf16 values within bf16_testing.h's bounds: forward (bias,
// activation; y rounded once), backward-data from dy already through the activation (as
// conv2d_backward passes it, rounded to bf16 there) with the input's LeakyReLU or ReLU folded
// into the output write (rounded once, after the slope), backward-weights with the activation applied
// as dy arrives (act'(y) dy rounded to bf16, the operand) and the bias gradient. Even output
// widths take the forward kind's pair-store epilogue (one bf16x2 store a pixel pair; warps
// inside y unmasked, warps past k, oh or ow masked): the cases below have both kinds of warp in
// one launch (sizes past one tile and no multiple of it, k of one warp's rows), no activation,
// ReLU and LeakyReLU forward, and ReLU and LeakyReLU folded into backward-data (by case);
// odd widths and the 4x4 stride-2 backward-data's phases take the element-wise one.
// The 4x4 stride-2 cases run twice, forced to one image a block and to several (the images'
// halos side by side, the steps split, the splits' sums added by a second kernel; backward-
// weights: several images a patch): outputs of 4x4 and 8x8 (W5's), 6x6, 3x5 (odd: g's pixel
// pairs cross images) and the kCases' ones, batches of 1, 3, 5, 7 and 11 (no multiple of the
// images a block), 16 steps (split) and fewer.
TEST(ConvGpu, Bf16EveryDirectTileMatchesTheReference) {
#if !PDNN_HAVE_CUDA
  GTEST_SKIP() << "needs a CUDA build";
#else
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  Context ctx(1, 1, Device::CUDA);
  using cuda::DirectTile;
  std::vector<ConvCase> cases;
  for (const ConvCase& c : kCases)
    if ((c.kernel == 3 && c.stride == 1) || (c.kernel == 4 && c.stride == 2 && c.pad == 1))
      cases.push_back(c);
  cases.insert(cases.end(), std::begin(kDirectEvenCases), std::end(kDirectEvenCases));
  // 4x4 stride 2 padding 1 (kCases' k4s2_leaky too): odd output sizes, W5's first layer's 3
  // channels, 130 output channels (past one 128-row tile), 40 channels (160 phase channels)
  cases.push_back({"k4s2_c3_relu_bias", 3, 3, 10, 14, 17, 4, 2, 1, FusedAct::ReLU, true});
  cases.push_back({"k4s2_m130_batch1", 1, 5, 6, 18, 130, 4, 2, 1, FusedAct::None, false});
  cases.push_back({"k4s2_c40_leaky", 2, 40, 8, 6, 24, 4, 2, 1, FusedAct::LeakyReLU, true});
  // an even output width (8): the 2x2 forward's pair-store epilogue
  cases.push_back({"k4s2_even_out", 2, 8, 12, 16, 32, 4, 2, 1, FusedAct::None, true});
  // several images a block: W5's 4x4 and 8x8 outputs, 6x6, odd 3x5, a batch of one past 128 rows
  cases.push_back({"k4s2_4x4_n11_split", 11, 64, 8, 8, 40, 4, 2, 1, FusedAct::LeakyReLU, true});
  cases.push_back({"k4s2_8x8_n3", 3, 24, 16, 16, 72, 4, 2, 1, FusedAct::ReLU, false});
  cases.push_back({"k4s2_6x6_n5", 5, 20, 12, 12, 24, 4, 2, 1, FusedAct::None, true});
  cases.push_back({"k4s2_3x5_n7", 7, 8, 6, 10, 16, 4, 2, 1, FusedAct::ReLU, true});
  cases.push_back({"k4s2_4x4_n1_m130", 1, 36, 8, 8, 130, 4, 2, 1, FusedAct::LeakyReLU, false});
  int checked = 0, k4s2 = 0, unaligned = 0;
  using cuda::DirectImages;
  for (DirectTile tile : {DirectTile::M128, DirectTile::M64, DirectTile::M32})
    for (size_t cj = 0; cj < 2 * cases.size(); ++cj) {
      const ConvCase& c = cases[cj % cases.size()];
      const size_t ci = cj % cases.size();
      const bool k4s2_case = c.kernel == 4;
      if (cj >= cases.size() && !k4s2_case) continue;  // 3x3: one image a block, always
      const DirectImages imgs = cj < cases.size() ? DirectImages::One : DirectImages::Many;
      // backward-data's folded activation: LeakyReLU and ReLU by turns
      const Act folded = ci % 2 == 0 ? Act{FusedAct::LeakyReLU, 0.1f} : Act{FusedAct::ReLU, 0.f};
      Inputs in = inputs_of(c);
      ASSERT_TRUE(cuda::direct_applies(in.g, DType::BF16)) << c.name;
      k4s2 += conv4x4s2_applies(in.g);
      SCOPED_TRACE(std::string(c.name) + " tile " + cuda::direct_tile_name(tile) + " images " +
                   cuda::direct_images_name(imgs) + " bf16 dx_act " + fused_act_name(folded.kind));
      const Device G = Device::CUDA;
      const Tensor xr = testing::bf16_rounded(in.x), wr = testing::bf16_rounded(in.w),
                   dyr = testing::bf16_rounded(in.dy);
      const Tensor x = testing::to_bf16(in.x, G, ctx), w = testing::to_bf16(in.w, G, ctx),
                   dy = testing::to_bf16(in.dy, G, ctx), b = in.b.to(G, ctx);
      Tensor y = testing::bf16_poisoned(Shape{c.n, c.k, in.g.oh, in.g.ow}, G, ctx);
      size_t ws_floats = 0;
      for (ConvPass p : {ConvPass::Forward, ConvPass::BackwardData, ConvPass::BackwardWeights})
        ws_floats = std::max(ws_floats, cuda::conv2d_direct_ws(p, in.g, c.n, c.k, DType::BF16,
                                                                ctx.cuda().info().sm_count));
      float* ws = ctx.workspace(G, ws_floats);
      const ConvShape shape{in.g, c.n, c.k};
      cuda::conv2d_direct_forward(
          ConvFwdBf16::of(shape, x.data<bf16>(), w.data<bf16>(), c.bias ? b.data() : nullptr,
                          y.data<bf16>(), in.act),
          ws, ctx.cuda_exec(), tile, imgs);
      const Tensor yh = testing::widened(y, ctx);
      testing::ConvReference r = conv_reference(in.g, c.n, c.k, xr, wr, c.bias ? &in.b : nullptr,
                                                yh, dyr, in.act, /*bf16=*/true);
      // dy through the activation, read off the kernel's own y and rounded to bf16, as
      // conv2d_backward passes it to backward-data
      Tensor gh(in.dy.shape());
      for (int64_t i = 0; i < gh.numel(); ++i)
        gh[i] = in.act.kind == FusedAct::None || yh[i] > 0.f
                    ? dyr[i]
                    : kit::round_bf16(in.act.kind == FusedAct::ReLU ? 0.f : in.act.slope * dyr[i]);
      const Tensor gd = testing::to_bf16(gh, G, ctx);
      Tensor dx = testing::bf16_poisoned(in.x.shape(), G, ctx);
      ConvBwdBf16 data = ConvBwdBf16::data(shape, w.data<bf16>(), gd.data<bf16>(), dx.data<bf16>());
      data.dx_act = folded;
      data.dx_src = x.data<bf16>();
      cuda::conv2d_direct_backward_data(data, ws, ctx.cuda_exec(), tile, imgs);
      Tensor dw = in.dw0.to(G, ctx), db = in.db0.to(G, ctx);
      ConvBwdBf16 wgt = ConvBwdBf16::of(
          ConvFwdBf16::of(shape, x.data<bf16>(), w.data<bf16>(), nullptr, y.data<bf16>(), in.act),
          dy.data<bf16>(), dw.data(), c.bias ? db.data() : nullptr, nullptr);
      cuda::conv2d_direct_backward_weights(wgt, ws, ctx.cuda_exec(), tile, imgs);
      // dx: the sum, the folded slope in fp32, one rounding (the slope's product bounded as a
      // second rounding of 2^-24 relative)
      std::vector<double> dx_round(r.dx.size(), testing::kBf16U);
      for (size_t i = 0; i < r.dx.size(); ++i)
        if (!(xr[int64_t(i)] > 0.f)) {
          r.dx[i] *= folded.slope;
          r.dx_abs[i] *= folded.slope;
          dx_round[i] = testing::kBf16U + 0x1.0p-23;
        }
      // dx's terms: k x 9 taps (3x3), k x 4 (each output phase of the 4x4 stride-2 kernel)
      const double kf = double(in.g.col_rows()),
                   kb = double(c.k * c.kernel * c.kernel / (c.stride * c.stride)),
                   kw = double(c.n * in.g.oh * in.g.ow);
      testing::expect_bf16_sum_within(yh, r.y, r.y_abs, nullptr, kf, testing::kBf16U, "y");
      testing::expect_bf16_sum_within(testing::widened(dx, ctx), r.dx, r.dx_abs, nullptr, kb,
                                      dx_round, "dx");
      testing::expect_bf16_sum_within(dw.to(Device::CPU, ctx), r.dw, r.dw_abs, &in.dw0, kw, 0.0,
                                      "dw");
      if (c.bias)
        testing::expect_bf16_sum_within(db.to(Device::CPU, ctx), r.db, r.db_abs, &in.db0, kw, 0.0,
                                        "db");
      // Backward-weights stages x and g = act'(y) dy each by 4-byte pixel pairs where its rows
      // are 4-byte aligned and by 2-byte loads otherwise, independently, and g by 16-byte octets
      // where dy's and y's rows are whole aligned octets (widths 32 and 8 above): with an even
      // output width (both aligned above), once more with x one element off alignment (the
      // 4x4 stride-2 kernel reads its own aligned phases of x), once with dy and y one element
      // off (2-byte loads), and where the width is a multiple of 8 once with dy and y two
      // elements off (4-byte aligned, not 16: pairs).
      if (in.g.ow % 2 == 0)
        for (int off : {0, 1, 2}) {
          if (off == 2 && in.g.ow % 8 != 0) continue;
          SCOPED_TRACE(off == 0 ? "x off by one"
                                : (off == 1 ? "dy, y off by one" : "dy, y off by two"));
          auto shifted = [&](const Tensor& f, int by) {  // f's values after `by` zeros
            Tensor p(Shape{f.numel() + by});
            for (int i = 0; i < by; ++i) p[i] = 0.f;
            for (int64_t i = 0; i < f.numel(); ++i) p[i + by] = f[i];
            return testing::to_bf16(p, G, ctx);
          };
          const int xby = off == 0 ? 1 : 0, gby = off;
          const Tensor xo = shifted(xr, xby), dyo = shifted(dyr, gby);
          Tensor yo = shifted(yh, gby);  // the forward's output type, as y
          Tensor dw2 = in.dw0.to(G, ctx);
          ConvBwdBf16 w2 = ConvBwdBf16::of(
              ConvFwdBf16::of(shape, xo.data<bf16>() + xby, w.data<bf16>(),
                              nullptr, yo.data<bf16>() + gby, in.act),
              dyo.data<bf16>() + gby, dw2.data(), nullptr, nullptr);
          cuda::conv2d_direct_backward_weights(w2, ws, ctx.cuda_exec(), tile, imgs);
          testing::expect_bf16_sum_within(dw2.to(Device::CPU, ctx), r.dw, r.dw_abs, &in.dw0, kw,
                                          0.0, "dw");
          ++unaligned;
        }
      ++checked;
    }
  // kCases' four 3x3 stride-1 cases and its 4x4 stride-2 one, and the fourteen above (the ten
  // 4x4 stride-2 ones twice)
  EXPECT_EQ(checked, 3 * (9 + 2 * 10));
  EXPECT_EQ(k4s2, 3 * 2 * 10);
  EXPECT_GT(unaligned, 0);
#endif
}


// bf16's register-staged forward and backward-weights in their 64-bit instantiation, forced on
// every case, equal to the 32-bit one's bit for bit (as the fp32/TF32 tiles above).
// GPU filter: *Index64*.
TEST(ConvGpu, Bf16ImplicitIndex64EqualsIndex32BitForBit) {
#if !PDNN_HAVE_CUDA
  GTEST_SKIP() << "needs a CUDA build";
#else
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  Context ctx(1, 1, Device::CUDA);
  using cuda::ConvIndex;
  const Device G = Device::CUDA;
  const int sms = ctx.cuda().info().sm_count;
  int checked = 0;
  for (const ConvCase& c : kCases) {
    SCOPED_TRACE(std::string(c.name) + " bf16");
    Inputs in = inputs_of(c);
    const Tensor x = testing::to_bf16(in.x, G, ctx), w = testing::to_bf16(in.w, G, ctx),
                 dy = testing::to_bf16(in.dy, G, ctx), b = in.b.to(G, ctx);
    const ConvShape shape{in.g, c.n, c.k};
    Tensor y[2], dw[2], db[2];
    for (int wide = 0; wide < 2; ++wide) {
      const ConvIndex index = wide ? ConvIndex::Wide : ConvIndex::Auto;
      y[wide] = testing::bf16_poisoned(Shape{c.n, c.k, in.g.oh, in.g.ow}, G, ctx);
      cuda::conv2d_implicit_forward(
          ConvFwdBf16::of(shape, x.data<bf16>(), w.data<bf16>(), c.bias ? b.data() : nullptr,
                          y[wide].data<bf16>(), in.act),
          ctx.cuda_exec(), index);
      dw[wide] = in.dw0.to(G, ctx);
      db[wide] = in.db0.to(G, ctx);
      float* ws =
          ctx.workspace(G, cuda::conv2d_implicit_bf16_backward_weights_ws(in.g, c.n, c.k, sms));
      cuda::conv2d_implicit_backward_weights(
          ConvBwdBf16::of(ConvFwdBf16::of(shape, x.data<bf16>(), w.data<bf16>(), nullptr,
                                          y[0].data<bf16>(), in.act),
                          dy.data<bf16>(), dw[wide].data(), c.bias ? db[wide].data() : nullptr,
                          nullptr),
          ws, ctx.cuda_exec(), index);
    }
    expect_same_bits<bf16>(y[0], y[1], ctx, "y");
    expect_same_bits<float>(dw[0], dw[1], ctx, "dw");
    expect_same_bits<float>(db[0], db[1], ctx, "db");
    ++checked;
  }
  EXPECT_EQ(checked, 10);
#endif
}

#if PDNN_HAVE_CUDA
// The host's space-to-depth phase channel p at (u, v) of image i of xh (n, c, h, w): x's channel
// p / 4 at s2d_source's pixel, zero outside x (direct_taps.h).
float s2d_phase(const Tensor& xh, int64_t i, int64_t c, int64_t h, int64_t w, int p, int u, int v) {
  int iy, ix;
  const int ci = direct::s2d_source(p, u, v, &iy, &ix);
  return iy >= 0 && iy < h && ix >= 0 && ix < w ? xh[((i * c + ci) * h + iy) * w + ix] : 0.f;
}

// got (widened to float) equals ref element for element, bit for bit: the count of elements
// that differ, and the first.
void expect_equals_reference(const Tensor& got, const std::vector<float>& ref) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(ref.size()));
  int64_t bad = 0, first = -1;
  for (int64_t e = 0; e < got.numel(); ++e)
    if (!(got[e] == ref[static_cast<size_t>(e)]) && bad++ == 0) first = e;
  EXPECT_EQ(bad, 0) << "first at " << first << ": " << (first >= 0 ? got[first] : 0.f)
                    << " against " << (first >= 0 ? ref[static_cast<size_t>(first)] : 0.f);
}
#endif

// The 4x4 stride-2 passes' space-to-depth phases (conv2d_direct_space_to_depth) equal the host's
// xs[4c + 2pr + pq][u][v] = x[c][2u + pr - 1][2v + pq - 1] (zero outside x; direct_taps.h)
// bit for bit, every element written (poisoned first): a non-square input whose half sides are
// odd (6 x 10: phases of 4 x 6), a square one, one plane of 2 x 2 (the layer takes even sides),
// in one launch and forced into several (one plane a launch; two and a partial last; a bound
// below one plane's pairs, which still takes one plane).
TEST(ConvGpu, Bf16SpaceToDepthInOneLaunchAndInChunks) {
#if !PDNN_HAVE_CUDA
  GTEST_SKIP() << "needs a CUDA build";
#else
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  Context ctx(1, 1, Device::CUDA);
  struct S2dCase { int64_t n, c, h, w; };
  int checked = 0;
  for (const S2dCase& sc : {S2dCase{3, 5, 6, 10}, S2dCase{2, 3, 8, 8}, S2dCase{1, 1, 2, 2}}) {
    const ConvGeom g = conv_geom("test", sc.c, sc.h, sc.w, 4, 4, 2, 2, 1, 1);
    const int64_t cc = 4 * sc.c, hs = direct::s2d_rows(sc.h), ws = direct::s2d_cols(sc.w);
    Rng rng(23);
    const Tensor x = testing::to_bf16(testing::random_tensor(Shape{sc.n, sc.c, sc.h, sc.w}, rng),
                                      Device::CUDA, ctx);
    const Tensor xh = testing::widened(x, ctx);
    std::vector<float> ref(static_cast<size_t>(sc.n * cc * hs * ws));
    for (int64_t i = 0; i < sc.n; ++i)
      for (int p = 0; p < cc; ++p)
        for (int u = 0; u < hs; ++u)
          for (int v = 0; v < ws; ++v)
            ref[static_cast<size_t>(((i * cc + p) * hs + u) * ws + v)] =
                s2d_phase(xh, i, sc.c, sc.h, sc.w, p, u, v);
    const int64_t per2 = 2 * hs * ws;
    for (const int64_t max_pairs : {int64_t{1} << 30, per2, 3 * per2 - 1, int64_t{1}}) {
      SCOPED_TRACE(std::to_string(sc.n) + "x" + std::to_string(sc.c) + "x" + std::to_string(sc.h) +
                   "x" + std::to_string(sc.w) + ", " + std::to_string(max_pairs) + " pairs a launch");
      Tensor xs = testing::bf16_poisoned(Shape{sc.n, cc, hs, ws}, Device::CUDA, ctx);
      cuda::conv2d_direct_space_to_depth(x.data<bf16>(), g, sc.n, xs.data<bf16>(), ctx.cuda_exec(),
                                         max_pairs);
      expect_equals_reference(testing::widened(xs, ctx), ref);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 12);
#endif
}

// The channel-minor copies a 4x4 stride-2 forward-kind pass of one image a block reads
// (conv2d_direct_channel_minor) equal the host's bit for bit, every element written (poisoned
// first), zeros past the channels: of the space-to-depth phases (the forward's input:
// xc[i][g][u][v][j] = xs[16 g + j][u][v], s2d_source's) and of x itself (backward-data's dy:
// x[i][16 g + j][u][v]); channel counts below, at and past 16 (12, 20, 32 phase channels; 3, 16,
// 20 plain).
TEST(ConvGpu, Bf16ChannelMinorCopies) {
#if !PDNN_HAVE_CUDA
  GTEST_SKIP() << "needs a CUDA build";
#else
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  Context ctx(1, 1, Device::CUDA);
  struct CmCase { int64_t n, c, h, w; };
  int checked = 0;
  for (const bool s2d : {true, false})
    for (const CmCase& cc : {CmCase{3, 5, 6, 10}, CmCase{2, 3, 8, 8}, CmCase{1, 8, 4, 4},
                             CmCase{2, 16, 4, 6}, CmCase{1, 20, 2, 2}}) {
      const ConvGeom g = conv_geom("test", cc.c, cc.h, cc.w, 4, 4, 2, 2, 1, 1);
      const int64_t C = s2d ? 4 * cc.c : cc.c, H = s2d ? direct::s2d_rows(cc.h) : cc.h;
      const int64_t W = s2d ? direct::s2d_cols(cc.w) : cc.w, G = (C + 15) / 16;
      SCOPED_TRACE(std::string(s2d ? "phases of " : "") + std::to_string(cc.n) + "x" +
                   std::to_string(cc.c) + "x" + std::to_string(cc.h) + "x" + std::to_string(cc.w));
      Rng rng(29);
      const Tensor x = testing::to_bf16(testing::random_tensor(Shape{cc.n, cc.c, cc.h, cc.w}, rng),
                                        Device::CUDA, ctx);
      const Tensor xh = testing::widened(x, ctx);
      std::vector<float> ref(static_cast<size_t>(cc.n * G * H * W * 16), 0.f);
      for (int64_t i = 0; i < cc.n; ++i)
        for (int p = 0; p < C; ++p)
          for (int u = 0; u < H; ++u)
            for (int v = 0; v < W; ++v)
              ref[static_cast<size_t>((((i * G + p / 16) * H + u) * W + v) * 16 + p % 16)] =
                  s2d ? s2d_phase(xh, i, cc.c, cc.h, cc.w, p, u, v)
                      : xh[((i * cc.c + p) * cc.h + u) * cc.w + v];
      Tensor xc = testing::bf16_poisoned(Shape{cc.n, G, H, W * 16}, Device::CUDA, ctx);
      cuda::conv2d_direct_channel_minor(x.data<bf16>(), g, cc.n, xc.data<bf16>(), ctx.cuda_exec(),
                                        s2d);
      expect_equals_reference(testing::widened(xc, ctx), ref);
      ++checked;
    }
  EXPECT_EQ(checked, 10);
#endif
}

// The GPU's im2col kernels (cuda::Im2colKernel) each equal the host's columns bit for bit,
// every element written (poisoned first), in fp32 and bf16, forced one by one on each geometry
// they fit: K4S2 on 4x4 stride-2 padding-1 inputs with w and ow multiples of 4 (row padding 1
// and 0, an odd height, several images a block), Four and One there and on the geometries that
// leave K4S2 out (ow % 4 != 0, x one element off its alignment), One alone where n*oh*ow % 4 != 0.
// Any must pick K4S2 where it fits (the DCGAN's layers take it), and forcing a kernel that does
// not fit throws.
TEST(ConvGpu, Im2colEveryKernelEqualsTheHostsColumns) {
#if !PDNN_HAVE_CUDA
  GTEST_SKIP() << "needs a CUDA build";
#else
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  Context ctx(1, 1, Device::CUDA);
  using K = cuda::Im2colKernel;
  struct ImCase { int64_t n, c, h, w, k, s, ph, pw, offset; K fits; };
  const ImCase cases[] = {
      {3, 3, 8, 8, 4, 2, 1, 1, 0, K::K4S2},     // ow 4: a group of 4 columns is a whole row
      {2, 5, 7, 16, 4, 2, 1, 1, 0, K::K4S2},    // odd h: the last kernel rows past the image
      {1, 2, 16, 16, 4, 2, 0, 1, 0, K::K4S2},   // no row padding
      {130, 2, 4, 8, 4, 2, 1, 1, 0, K::K4S2},   // 260 groups of 4 columns: more than a block
      {2, 5, 7, 12, 4, 2, 1, 1, 0, K::Four},    // ow 6
      {3, 3, 8, 8, 4, 2, 1, 1, 1, K::Four},     // x one element off its 4-element alignment
      {3, 2, 5, 5, 3, 1, 1, 1, 0, K::One},      // n*oh*ow = 75
  };
  int checked = 0;
  for (const ImCase& ic : cases) {
    const ConvGeom g = conv_geom("test", ic.c, ic.h, ic.w, ic.k, ic.k, ic.s, ic.s, ic.ph, ic.pw);
    const int64_t np = ic.n * g.col_cols(), len = ic.n * ic.c * ic.h * ic.w;
    Rng rng(31);
    Tensor xf = testing::random_tensor(Shape{ic.offset + len}, rng);
    const Tensor xb = testing::to_bf16(xf, Device::CUDA, ctx);
    const Tensor xbh = testing::widened(xb, ctx);
    const Tensor xfd = xf.to(Device::CUDA, ctx);
    for (const bool b16 : {false, true}) {
      const Tensor& xh = b16 ? xbh : xf;
      std::vector<float> ref(static_cast<size_t>(g.col_rows() * np));
      for (int64_t r = 0; r < g.col_rows(); ++r)
        for (int64_t col = 0; col < np; ++col) {
          const int64_t ci = r / (ic.k * ic.k), ki = r / ic.k % ic.k, kj = r % ic.k;
          const int64_t i = col / g.col_cols(), oy = col % g.col_cols() / g.ow, ox = col % g.ow;
          const int64_t yy = oy * ic.s - ic.ph + ki, xx = ox * ic.s - ic.pw + kj;
          ref[static_cast<size_t>(r * np + col)] =
              yy >= 0 && yy < ic.h && xx >= 0 && xx < ic.w
                  ? xh[ic.offset + ((i * ic.c + ci) * ic.h + yy) * ic.w + xx]
                  : 0.f;
        }
      Tensor poison(Shape{g.col_rows(), np});
      poison.fill(std::nanf(""));
      const void* xp = b16 ? static_cast<const void*>(xb.data<bf16>() + ic.offset)
                           : static_cast<const void*>(xfd.data() + ic.offset);
      {
        Tensor cols = b16 ? testing::bf16_poisoned(poison.shape(), Device::CUDA, ctx)
                          : poison.to(Device::CUDA, ctx);
        const void* cp = b16 ? static_cast<const void*>(cols.data<bf16>()) : cols.data();
        EXPECT_EQ(cuda::im2col_kernel_for(g, ic.n, xp, cp, b16 ? 2 : 4), ic.fits);
      }
      for (const K k : {K::Any, K::One, K::Four, K::K4S2}) {
        const bool fits = k == K::Any || k == K::One || k == ic.fits ||
                          (k == K::Four && ic.fits == K::K4S2);
        SCOPED_TRACE(std::string(b16 ? "bf16 " : "fp32 ") + std::to_string(ic.n) + "x" +
                     std::to_string(ic.c) + "x" + std::to_string(ic.h) + "x" +
                     std::to_string(ic.w) + " k" + std::to_string(ic.k) + " s" +
                     std::to_string(ic.s) + " ph" + std::to_string(ic.ph) + " offset " +
                     std::to_string(ic.offset) + ", kernel " + std::to_string(static_cast<int>(k)));
        Tensor cols = b16 ? testing::bf16_poisoned(poison.shape(), Device::CUDA, ctx)
                          : poison.to(Device::CUDA, ctx);
        auto run = [&] {
          if (b16)
            cuda::im2col_batch(g, ic.n, xb.data<bf16>() + ic.offset, cols.data<bf16>(),
                               ctx.cuda_exec(), k);
          else
            cuda::im2col_batch(g, ic.n, xfd.data() + ic.offset, cols.data(), ctx.cuda_exec(), k);
        };
        if (!fits) {
          EXPECT_THROW(run(), Error);
          continue;
        }
        run();
        expect_equals_reference(b16 ? testing::widened(cols, ctx) : cols.to(Device::CPU, ctx), ref);
        ++checked;
      }
    }
  }
  // K4S2 cases: Any, One, Four, K4S2; Four cases: Any, One, Four; One: Any, One; x2 precisions
  EXPECT_EQ(checked, 2 * (4 * 4 + 2 * 3 + 1 * 2));
#endif
}

// The bf16 passes' re-laid-out weights (conv2d_direct_weights) equal w's elements at
// w_index bit for bit, element by element at direct::prep_index, with zeros past the channels
// and every element of the layout written (poisoned first): each kind of taps (3x3 forward and
// flipped, a 4x4 stride-2 forward's S2d and its backward-data's four Phase layouts) at channel
// counts below, at and past a block's 16 input x 32 output channels and the 128 of Mp.
TEST(ConvGpu, Bf16DirectWeightsAreWsElementsAtTheirIndex) {
#if !PDNN_HAVE_CUDA
  GTEST_SKIP() << "needs a CUDA build";
#else
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  Context ctx(1, 1, Device::CUDA);
  using direct::Taps;
  struct WCase { Taps taps; bool flip; int64_t k, c; };
  int checked = 0;
  for (const WCase& wc : {WCase{Taps::Plain, false, 5, 3}, WCase{Taps::Plain, false, 40, 17},
                          WCase{Taps::Plain, true, 40, 17}, WCase{Taps::Plain, true, 130, 33},
                          WCase{Taps::S2d, false, 64, 3}, WCase{Taps::S2d, false, 33, 9},
                          WCase{Taps::S2d, false, 130, 20}, WCase{Taps::Phase, false, 3, 64},
                          WCase{Taps::Phase, false, 33, 9}, WCase{Taps::Phase, false, 20, 130}}) {
    const int64_t ks = wc.taps == Taps::Plain ? 3 : 4, kk = wc.taps == Taps::Plain ? 9 : 4;
    const int64_t cc = wc.taps == Taps::S2d ? 4 * wc.c : wc.c;
    const bool ko_in = wc.flip || wc.taps == Taps::Phase;
    const int64_t in_ch = ko_in ? wc.k : cc, out_ch = ko_in ? cc : wc.k;
    const int64_t in16 = (in_ch + 15) / 16, Mp = (out_ch + 127) / 128 * 128;
    const int64_t phases = wc.taps == Taps::Phase ? 4 : 1;
    SCOPED_TRACE(std::to_string(static_cast<int>(wc.taps)) + (wc.flip ? " flipped " : " ") +
                 std::to_string(wc.k) + "x" + std::to_string(wc.c));
    Rng rng(31);
    const Tensor w = testing::to_bf16(testing::random_tensor(Shape{wc.k, wc.c, ks, ks}, rng),
                                      Device::CUDA, ctx);
    const Tensor wh = testing::widened(w, ctx);
    std::vector<float> ref(static_cast<size_t>(phases * in16 * 16 * kk * Mp), 0.f);
    for (int ph = 0; ph < phases; ++ph)
      for (int i = 0; i < in_ch; ++i)
        for (int tap = 0; tap < kk; ++tap)
          for (int o = 0; o < out_ch; ++o)
            ref[static_cast<size_t>(direct::prep_index(ph, i, tap, o, static_cast<int>(in16),
                                                       static_cast<int>(kk),
                                                       static_cast<int>(Mp)))] =
                wh[direct::w_index(wc.taps, ko_in ? i : o, ko_in ? o : i,
                                   wc.flip ? static_cast<int>(kk) - 1 - tap : tap,
                                   static_cast<int>(wc.c), ph)];
    Tensor out = testing::bf16_poisoned(Shape{static_cast<int64_t>(ref.size())}, Device::CUDA, ctx);
    EXPECT_EQ(cuda::conv2d_direct_weights(w.data<bf16>(), wc.k, wc.c, wc.flip, wc.taps,
                                          out.data<bf16>(), ctx.cuda_exec()),
              Mp);
    expect_equals_reference(testing::widened(out, ctx), ref);
    ++checked;
  }
  EXPECT_EQ(checked, 10);
#endif
}

#if PDNN_HAVE_CUDA
// Why a test that needs `gib` GiB of free device memory cannot run on ctx's GPU ("": it can).
std::string lacks_free_memory(Context& ctx, int gib) {
  const size_t have = ctx.cuda().free_memory();
  if (have >= (size_t{1} << 30) * gib) return "";
  return "needs " + std::to_string(gib) + " GiB of free device memory, has " +
         std::to_string(have / double(size_t{1} << 30)) + " GiB";
}
#endif

// col2im over just under 2^31 values: the U-Net's 64 channels of 5792 x 5792 (2,147,024,896),
// through the 1x1 stride-1 geometry, where x is the columns themselves. Its grid-stride loop
// runs 67M threads, so each thread's last step past the bound crossed 2^31: with a 32-bit
// counter it wrapped (the H200's timing of such passes took 17 s and 6.5 s where ~0.1 was due).
// Now every value equals its column bit for bit, and 4 MB of sentinels before and after x are
// untouched. Needs 20 GiB of free device memory (an H100 or H200 has it) and as much host
// memory, else skipped; ~10 s. GPU filter: *Index64*.
TEST(ConvGpu, Index64Col2imNearTwoToThe31StaysInBounds) {
#if !PDNN_HAVE_CUDA
  GTEST_SKIP() << "needs a CUDA build";
#else
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  Context ctx(1, 1, Device::CUDA);
  if (const std::string lacks = lacks_free_memory(ctx, 20); !lacks.empty()) GTEST_SKIP() << lacks;
  const int64_t C = 64, S = 5792, guard = int64_t{1} << 20;
  const ConvGeom g = conv_geom("test", C, S, S, 1, 1, 1, 1, 0, 0);
  const int64_t total = C * S * S;
  ASSERT_LT(total, int64_t{INT_MAX});
  ASSERT_GT(total + int64_t{524280} * 128, int64_t{INT_MAX});  // the last step crosses 2^31
  Tensor cols = Tensor::empty(Shape{total}, DType::F32, Device::CUDA, ctx);
  ctx.rng().seed(11);
  ops::normal_fill(ctx, cols);
  Tensor xg = Tensor::empty(Shape{total + 2 * guard}, DType::F32, Device::CUDA, ctx);
  ops::fill(ctx, xg, -7.f);
  cuda::col2im_batch(g, 1, cols.data(), xg.data() + guard, ctx.cuda_exec());
  const Tensor ch = cols.to(Device::CPU, ctx), xh = xg.to(Device::CPU, ctx);
  int64_t bad_guard = 0, bad = 0, first = -1;
  for (int64_t i = 0; i < guard; ++i) {
    bad_guard += xh[i] != -7.f;
    bad_guard += xh[guard + total + i] != -7.f;
  }
  for (int64_t i = 0; i < total; ++i)
    if (!(xh[guard + i] == ch[i]) && bad++ == 0) first = i;
  EXPECT_EQ(bad_guard, 0) << "writes outside x";
  EXPECT_EQ(bad, 0) << "first at " << first;
#endif
}

// One image past 2^31 elements on the device: 128 channels of 4100 x 4100 (2.15 G elements,
// 8.6 GB in fp32, 4.3 GB in bf16), a 3x3 padding-1 forward to one output channel through the
// implicit GEMM as Auto runs it (the 64-bit instantiation), fp32, TF32 and bf16, checked at
// sampled output pixels against a double sum at those points only (rows and columns at both
// ends and between: the last channels' planes start past 2^31). The values are multiples of
// 1/8 in [-1, 1], exact in TF32 and bf16, so every sum of 1152 products is exact in fp32: the
// outputs must equal the reference exactly (bf16: rounded once). Needs 40 GiB free on the
// device, else skipped (an H100 or H200 has it); ~10-20 s, mostly the host filling x.
// GPU filter: *Index64*.
TEST(ConvGpu, Index64LargeImageForwardMatchesSampledReference) {
#if !PDNN_HAVE_CUDA
  GTEST_SKIP() << "needs a CUDA build";
#else
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  Context ctx(1, 1, Device::CUDA);
  if (const std::string lacks = lacks_free_memory(ctx, 40); !lacks.empty()) GTEST_SKIP() << lacks;
  const int64_t C = 128, S = 4100;
  const ConvGeom g = conv_geom("test", C, S, S, 3, 3, 1, 1, 1, 1);
  ASSERT_GT(C * S * S, int64_t{1} << 31);
  ASSERT_TRUE(cuda::conv_implicit_wide(g));
  // element i of tensor `salt`: a multiple of 1/8 in [-1, 1]
  auto val = [](uint64_t i, uint64_t salt) {
    uint64_t z = (i + 1 + (salt << 40)) * 0x9E3779B97F4A7C15ull;
    z ^= z >> 29;
    return static_cast<float>(static_cast<int>(z % 17) - 8) / 8.f;
  };
  const int64_t total = C * S * S;
  std::vector<float> wv(static_cast<size_t>(C * 9));
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = val(i, 2);
  // sampled output pixels: both ends and the middle of rows and columns, and 48 more
  std::vector<std::pair<int64_t, int64_t>> at;
  for (int64_t oy : {int64_t{0}, int64_t{1}, S / 2, S - 2, S - 1})
    for (int64_t ox : {int64_t{0}, S / 2 + 1, S - 1}) at.push_back({oy, ox});
  for (uint64_t i = 0; i < 48; ++i) {
    const uint64_t h = (i + 7) * 0xD1B54A32D192ED03ull;
    at.push_back({static_cast<int64_t>((h >> 20) % S), static_cast<int64_t>((h >> 42) % S)});
  }
  std::vector<double> ref;
  for (const auto& p : at) {
    double s = 0;
    for (int64_t ci = 0; ci < C; ++ci)
      for (int64_t r = 0; r < 3; ++r)
        for (int64_t q = 0; q < 3; ++q) {
          const int64_t iy = p.first - 1 + r, ix = p.second - 1 + q;
          if (iy < 0 || iy >= S || ix < 0 || ix >= S) continue;
          s += double(val(static_cast<uint64_t>((ci * S + iy) * S + ix), 1)) *
               wv[static_cast<size_t>((ci * 3 + r) * 3 + q)];
        }
    ref.push_back(s);
  }
  const ConvShape shape{g, 1, 1};
  CUstream_st* stream = ctx.cuda().stream();
  const int64_t chunk = int64_t{1} << 26;
  for (bool is_bf16 : {false, true}) {
    SCOPED_TRACE(is_bf16 ? "bf16" : "fp32 and tf32");
    const DType dt = is_bf16 ? DType::BF16 : DType::F32;
    const size_t es = dtype_size(dt);
    Tensor x = Tensor::empty(Shape{1, C, S, S}, dt, Device::CUDA, ctx);
    std::vector<float> buf(static_cast<size_t>(chunk));
    std::vector<bf16> buf16(is_bf16 ? static_cast<size_t>(chunk) : 0);
    for (int64_t o = 0; o < total; o += chunk) {
      const int64_t m = std::min(chunk, total - o);
      for (int64_t i = 0; i < m; ++i) buf[size_t(i)] = val(static_cast<uint64_t>(o + i), 1);
      if (is_bf16)
        cpu::cast_to_bf16(m, buf.data(), buf16.data(), CpuExec{1});
      cuda_copy(static_cast<char*>(x.raw_data()) + o * es, Device::CUDA,
                is_bf16 ? static_cast<const void*>(buf16.data()) : buf.data(), Device::CPU,
                static_cast<size_t>(m) * es, stream, true);
    }
    Tensor wh(Shape{1, C, 3, 3});
    for (int64_t i = 0; i < wh.numel(); ++i) wh[i] = wv[size_t(i)];
    const Tensor w = is_bf16 ? testing::to_bf16(wh, Device::CUDA, ctx) : wh.to(Device::CUDA, ctx);
    for (bool tf32 : is_bf16 ? std::vector<bool>{false} : std::vector<bool>{false, true}) {
      ctx.set_precision(tf32 ? Precision::Tf32 : Precision::Fp32);
      Tensor y = is_bf16 ? testing::bf16_poisoned(Shape{1, 1, S, S}, Device::CUDA, ctx)
                         : poisoned(Shape{1, 1, S, S}, Device::CUDA, ctx);
      if (is_bf16)
        cuda::conv2d_implicit_forward(
            ConvFwdBf16::of(shape, x.data<bf16>(), w.data<bf16>(), nullptr, y.data<bf16>()),
            ctx.cuda_exec());
      else
        cuda::conv2d_implicit_forward(ConvFwd::of(shape, x.data(), w.data(), nullptr, y.data()),
                                      ctx.cuda_exec());
      const Tensor yh = is_bf16 ? testing::widened(y, ctx) : y.to(Device::CPU, ctx);
      int bad = 0;
      for (size_t j = 0; j < at.size(); ++j) {
        const float want = is_bf16 ? kit::round_bf16(static_cast<float>(ref[j]))
                                   : static_cast<float>(ref[j]);
        const float got = yh[at[j].first * S + at[j].second];
        if (got != want && ++bad <= 5)
          ADD_FAILURE() << (tf32 ? "tf32" : is_bf16 ? "bf16" : "fp32") << " y[" << at[j].first
                        << "][" << at[j].second << "] = " << got << ", want " << want;
      }
      EXPECT_EQ(bad, 0);
    }
  }
#endif
}

// cuDNN's 4-d descriptors hold at most 2^31 - 1 elements (W4's conv2 at 1120 x 1120 has 2.57
// billion); a batch past that runs in slices of images. The limit lowered to about one image
// makes every case run slice by slice (the last slice shorter where the batch is odd), against
// the reference: the weight gradient accumulates over the slices, dx and y are written per slice.
TEST(ConvGpu, CudnnRunsBatchesPastItsDescriptorLimitInSlices) {
#if !PDNN_HAVE_CUDA || !PDNN_CUDNN_HEADER
  GTEST_SKIP() << "needs a CUDA build with cudnn.h";
#else
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  Context ctx(1, 1, Device::CUDA);
  if (ctx.cuda().cudnn() == nullptr) GTEST_SKIP() << cudnn_status();
  auto* cc = static_cast<cuda::CudnnContext*>(ctx.cuda().cudnn());
  int sliced = 0;
  for (const ConvCase& c : kCases) {
    if (c.n < 2) continue;
    SCOPED_TRACE(c.name);
    Inputs in = inputs_of(c);
    // the larger of an input and an output image, plus a little: one image a slice
    cc->max_tensor_elements = std::max(in.g.c * in.g.h * in.g.w, c.k * in.g.oh * in.g.ow) + 7;
    const Device G = Device::CUDA;
    const Tensor x = in.x.to(G, ctx), w = in.w.to(G, ctx), b = in.b.to(G, ctx),
                 dy = in.dy.to(G, ctx);
    Tensor y = poisoned(Shape{c.n, c.k, in.g.oh, in.g.ow}, G, ctx);
    ops::conv2d_forward(ctx, fwd_args<Tensor>(in, c, &x, &w, &b, &y, ConvAlgo::Cudnn));
    Tensor dx = poisoned(in.x.shape(), G, ctx);
    Tensor dw = in.dw0.to(G, ctx), db = in.db0.to(G, ctx);
    ops::conv2d_backward(
        ctx, bwd_args<Tensor>(in, c, &x, &w, &dy, &y, &dw, &db, &dx, ConvAlgo::Cudnn));
    const Tensor yh = y.to(Device::CPU, ctx);
    const testing::ConvReference r = conv_reference(in.g, c.n, c.k, in.x, in.w,
                                                    c.bias ? &in.b : nullptr, yh, in.dy, in.act);
    const double kf = double(in.g.col_rows()), kb = double(c.k * c.kernel * c.kernel),
                 kw = double(c.n * in.g.oh * in.g.ow);
    expect_conv_within(yh, r.y, r.y_abs, nullptr, kf, false, "y");
    expect_conv_within(dx.to(Device::CPU, ctx), r.dx, r.dx_abs, nullptr, kb, false, "dx");
    expect_conv_within(dw.to(Device::CPU, ctx), r.dw, r.dw_abs, &in.dw0, kw, false, "dw");
    if (c.bias) expect_conv_within(db.to(Device::CPU, ctx), r.db, r.db_abs, &in.db0, kw, false, "db");
    ++sliced;
  }
  EXPECT_GE(sliced, 5);
#endif
}

// With no algorithm forced, the first call of a shape times the candidates and records the
// choice; later calls (and a context reading the cache file) use it without timing again.
TEST(ConvGpu, ChoiceIsMadeOnceAndCached) {
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  const std::string cache = ::testing::TempDir() + "conv_algos_test.tsv";
  std::remove(cache.c_str());
  const ConvCase& c = kCases[0];
  std::string first_choice;
  for (int run = 0; run < 2; ++run) {
    Context ctx(1, 1, Device::CUDA);
    ctx.tuning().set_cache_file(cache, ctx.cuda().info().name);
    Inputs in = inputs_of(c);
    const Tensor x = in.x.to(Device::CUDA, ctx), w = in.w.to(Device::CUDA, ctx);
    Tensor y = poisoned(Shape{c.n, c.k, in.g.oh, in.g.ow}, Device::CUDA, ctx);
    ops::conv2d_forward(ctx, fwd_args<Tensor>(in, c, &x, &w, nullptr, &y));
    ASSERT_EQ(ctx.tuning().made().size(), 1u);
    const Tuning::Choice& ch = ctx.tuning().made()[0].second;
    if (run == 0) {
      EXPECT_FALSE(ch.from_file);
      first_choice = ch.choice;
    } else {
      EXPECT_TRUE(ch.from_file);
      EXPECT_EQ(ch.choice, first_choice);
    }
  }
  std::remove(cache.c_str());
}

// find consults a choice without listing it among the run's (a planned pass looks at the
// unplanned choice of its shape, which may come from the cache file: the run's header lists
// only what ran); lookup lists it.
TEST(Tuning, FindConsultsWithoutListing) {
  const std::string cache = ::testing::TempDir() + "pdnn_tuning_find_" + std::to_string(::getpid()) + ".tsv";
  std::ofstream(cache) << "gpu\tconv2d fwd a auto\timplicit\t0.5\n";
  Tuning t;
  t.set_cache_file(cache, "gpu");
  ASSERT_NE(t.find("conv2d fwd a auto"), nullptr);
  EXPECT_EQ(t.find("conv2d fwd a auto")->choice, "implicit");
  EXPECT_EQ(t.find("conv2d fwd a auto")->ms, 0.5);
  EXPECT_EQ(t.find("conv2d fwd b auto"), nullptr);
  EXPECT_TRUE(t.made().empty());
  ASSERT_NE(t.lookup("conv2d fwd a auto"), nullptr);
  EXPECT_EQ(t.made().size(), 1u);
  std::remove(cache.c_str());
}

// keep writes a detail of a choice to the file as a line of its own, read back by find (in this
// run and the next), never listed among the run's choices.
TEST(Tuning, KeepWritesADetailWithoutListingIt) {
  const std::string cache = ::testing::TempDir() + "pdnn_tuning_keep_" + std::to_string(::getpid()) + ".tsv";
  std::remove(cache.c_str());
  {
    Tuning t;
    t.set_cache_file(cache, "gpu");
    t.put("conv2d fwd a auto", "cudnn", 0.25);
    t.keep("cudnn-pick conv2d fwd a", "cudnn 91900 algo 1 math 3 ws 1024");
    ASSERT_NE(t.find("cudnn-pick conv2d fwd a"), nullptr);
    EXPECT_EQ(t.find("cudnn-pick conv2d fwd a")->choice, "cudnn 91900 algo 1 math 3 ws 1024");
    ASSERT_EQ(t.made().size(), 1u);
    EXPECT_EQ(t.made()[0].first, "conv2d fwd a auto");
  }
  Tuning t;
  t.set_cache_file(cache, "gpu");
  ASSERT_NE(t.find("cudnn-pick conv2d fwd a"), nullptr);
  EXPECT_EQ(t.find("cudnn-pick conv2d fwd a")->choice, "cudnn 91900 algo 1 math 3 ws 1024");
  EXPECT_TRUE(t.find("cudnn-pick conv2d fwd a")->from_file);
  EXPECT_TRUE(t.made().empty());
  std::remove(cache.c_str());
}

// cuDNN's own algorithm for a pass is kept beside the choice of cuDNN and taken from the cache by
// a later run, which then finds nothing (conv2d_cudnn_picks / adopt_picks): a run from the file
// runs what the run that timed it ran. A fresh context takes each pass's picks of another one
// as they were, runs the forward with them within the reference's bound, and leaves alone what
// is not this cuDNN's, past the cap, not strict fp32 math in fp32, malformed, or already picked.
// Through the tuning: a cache file that chose cuDNN with a pick gets that pick in the pass.
TEST(ConvGpu, CudnnPicksAreKeptAndTakenFromTheCache) {
#if !PDNN_HAVE_CUDA || !PDNN_CUDNN_HEADER
  GTEST_SKIP() << "needs a CUDA build with cudnn.h";
#else
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  if (!cuda::cudnn_api()) GTEST_SKIP() << "needs cuDNN: " << cudnn_status();
  // What conv2d_cudnn_adopt_picks asks of a cache: the value kept for a key, or nullptr.
  auto cached_in = [](const std::map<std::string, std::string>& file) {
    return [&file](const std::string& key) -> const std::string* {
      auto it = file.find(key);
      return it == file.end() ? nullptr : &it->second;
    };
  };
  const ConvCase& c = kCases[1];  // 5x5, no activation, a bias (added outside cuDNN)
  Inputs in = inputs_of(c);
  const Act act = in.act;
  std::vector<std::pair<std::string, std::string>> picks;
  for (const ConvPass pass : {ConvPass::Forward, ConvPass::BackwardData, ConvPass::BackwardWeights}) {
    Context ctx(1, 1, Device::CUDA);
    ASSERT_NE(ctx.cuda().cudnn(), nullptr);
    cuda::conv2d_cudnn_workspace_floats(pass, in.g, c.n, c.k, act, ctx.cuda_exec(), DType::F32);
    const auto made = cuda::conv2d_cudnn_picks(pass, in.g, c.n, c.k, act, ctx.cuda_exec(), DType::F32);
    ASSERT_EQ(made.size(), 1u);
    picks.push_back(made[0]);
    EXPECT_EQ(made[0].second.rfind("cudnn " + std::to_string(cuda::cudnn_api()->version) + " algo ", 0), 0u)
        << made[0].second;
    // Another context takes it as it was.
    Context other(1, 1, Device::CUDA);
    ASSERT_NE(other.cuda().cudnn(), nullptr);
    const std::map<std::string, std::string> file{made[0]};
    const auto from = cached_in(file);
    EXPECT_EQ(cuda::conv2d_cudnn_adopt_picks(pass, in.g, c.n, c.k, act, other.cuda_exec(), DType::F32, from), 1);
    EXPECT_EQ(cuda::conv2d_cudnn_picks(pass, in.g, c.n, c.k, act, other.cuda_exec(), DType::F32), made);
    // Picked already: nothing more is taken.
    EXPECT_EQ(cuda::conv2d_cudnn_adopt_picks(pass, in.g, c.n, c.k, act, other.cuda_exec(), DType::F32, from), 0);
    // What a fresh context leaves alone.
    int algo = -1, math = -1;
    size_t version = 0, ws = 0;
    ASSERT_EQ(std::sscanf(made[0].second.c_str(), "cudnn %zu algo %d math %d ws %zu", &version,
                          &algo, &math, &ws), 4);
    for (const std::string& bad :
         {strprintf("cudnn %zu algo %d math %d ws %zu", version + 1, algo, math, ws),
          strprintf("cudnn %zu algo %d math %d ws %zu", version, algo, math, size_t{1} << 40),
          strprintf("cudnn %zu algo %d math %d ws %zu", version, algo, 1, ws),
          strprintf("cudnn %zu algo %d math %d ws %zu", version, 99, math, ws),
          strprintf("cudnn %zu algo %d math %d ws %zu junk", version, algo, math, ws),
          std::string("cudnn")}) {
      Context fresh(1, 1, Device::CUDA);
      ASSERT_NE(fresh.cuda().cudnn(), nullptr);
      const std::map<std::string, std::string> f{{made[0].first, bad}};
      const auto from_bad = cached_in(f);
      EXPECT_EQ(cuda::conv2d_cudnn_adopt_picks(pass, in.g, c.n, c.k, act, fresh.cuda_exec(), DType::F32,
                                               from_bad), 0) << bad;
      EXPECT_TRUE(cuda::conv2d_cudnn_picks(pass, in.g, c.n, c.k, act, fresh.cuda_exec(), DType::F32).empty());
    }
  }
  // Through the tuning: the file chose cuDNN for the forward and kept a pick; the forward runs
  // on that pick (not one found now) and matches the reference.
  const std::string cache = ::testing::TempDir() + "pdnn_cudnn_pick_" + std::to_string(::getpid()) + ".tsv";
  {
    Context ctx(1, 1, Device::CUDA);
    const std::string device = ctx.cuda().info().name;
    const std::string key = gpu_conv_key(ConvPass::Forward, in.g, c.n, c.k, act, "fp32") + " auto";
    std::ofstream(cache) << device << "\t" << key << "\tcudnn\t0.1\n"
                         << device << "\tcudnn-pick " << picks[0].first << "\t" << picks[0].second
                         << "\t0\n";
    ctx.tuning().set_cache_file(cache, device);
    const Tensor x = in.x.to(Device::CUDA, ctx), w = in.w.to(Device::CUDA, ctx),
                 b = in.b.to(Device::CUDA, ctx);
    Tensor y = poisoned(Shape{c.n, c.k, in.g.oh, in.g.ow}, Device::CUDA, ctx);
    ops::conv2d_forward(ctx, fwd_args<Tensor>(in, c, &x, &w, &b, &y));
    ASSERT_EQ(ctx.tuning().made().size(), 1u);
    EXPECT_EQ(ctx.tuning().made()[0].second.choice, "cudnn");
    const std::vector<std::pair<std::string, std::string>> want{picks[0]};
    EXPECT_EQ(cuda::conv2d_cudnn_picks(ConvPass::Forward, in.g, c.n, c.k, act, ctx.cuda_exec(), DType::F32),
              want);
    const Tensor yh = y.to(Device::CPU, ctx);
    const testing::ConvReference r =
        conv_reference(in.g, c.n, c.k, in.x, in.w, c.bias ? &in.b : nullptr, yh, in.dy, in.act);
    expect_conv_within(yh, r.y, r.y_abs, nullptr, double(in.g.col_rows()), false, "y");
  }
  std::remove(cache.c_str());
#endif
}

// Under a memory plan (the context's workspace has a limit) the choice has its own key: it never
// overwrites an unplanned run's choice for the shape. It takes that choice without timing where
// it is one of pdnn's own algorithms and fits the plan's workspace (they run the same under a
// plan); a cuDNN choice is timed again, since cuDNN finds its algorithm within what the plan
// leaves. The unplanned choice is set here (Tuning::put), so both paths run whatever wins.
TEST(ConvGpu, ChoicesUnderAMemoryPlanAreKeptApart) {
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  constexpr double kNoRun = 1e-6;  // ms: no pass runs in a nanosecond, so a time of it was not measured
  for (const ConvCase& c : kCases) {
    for (const char* unplanned : {"implicit", "cudnn"}) {
      SCOPED_TRACE(std::string(c.name) + ", the unplanned choice " + unplanned);
      Context ctx(1, 1, Device::CUDA);
      Inputs in = inputs_of(c);
      const Tensor x = in.x.to(Device::CUDA, ctx), w = in.w.to(Device::CUDA, ctx);
      Tensor y = poisoned(Shape{c.n, c.k, in.g.oh, in.g.ow}, Device::CUDA, ctx);
      ops::conv2d_forward(ctx, fwd_args<Tensor>(in, c, &x, &w, nullptr, &y));
      ASSERT_EQ(ctx.tuning().made().size(), 1u);
      const std::string key = ctx.tuning().made()[0].first;
      ctx.tuning().put(key, unplanned, kNoRun);
      ctx.set_workspace_limit(Device::CUDA, size_t{1} << 28);
      ops::conv2d_forward(ctx, fwd_args<Tensor>(in, c, &x, &w, nullptr, &y));
      ASSERT_EQ(ctx.tuning().made().size(), 2u);
      const auto& [planned_key, planned] = ctx.tuning().made()[1];
      EXPECT_EQ(planned_key, key + "-planned");
      EXPECT_EQ(ctx.tuning().find(key)->choice, unplanned);  // not overwritten
      if (std::string(unplanned) == "implicit") {
        EXPECT_EQ(planned.choice, "implicit");
        EXPECT_EQ(planned.ms, kNoRun);  // taken, not timed
      } else {
        EXPECT_GT(planned.ms, kNoRun);  // timed again
      }
    }
  }
}

// Under a memory plan cuDNN finds its algorithms in the pass's own buffers and the plan's
// workspace (cudnnFind...Ex), the weight gradient's in a scratch there since the real one
// accumulates: every case and pass, fp32, TF32 and fp32 with transforms, whole batches and in
// slices, within the reference's bound from dw's random start; the picks are the planned ones.
TEST(ConvGpu, CudnnUnderAMemoryPlanFindsInThePlansBuffers) {
#if !PDNN_HAVE_CUDA || !PDNN_CUDNN_HEADER
  GTEST_SKIP() << "needs a CUDA build with cudnn.h";
#else
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  for (const char* arithmetic : {"fp32", "tf32", "fp32+transforms"}) {
    for (bool sliced : {false, true}) {
      Context ctx(1, 1, Device::CUDA);
      if (ctx.cuda().cudnn() == nullptr) GTEST_SKIP() << cudnn_status();
      const bool tf32 = std::string(arithmetic) == "tf32";
      ctx.set_precision(tf32 ? Precision::Tf32 : Precision::Fp32);
      ctx.set_conv_transforms(std::string(arithmetic) == "fp32+transforms");
      ctx.set_workspace_limit(Device::CUDA, size_t{16} << 20);  // 64 MiB
      auto* cc = static_cast<cuda::CudnnContext*>(ctx.cuda().cudnn());
      int ran = 0;
      for (const ConvCase& c : kCases) {
        if (sliced && c.n < 2) continue;
        SCOPED_TRACE(std::string(c.name) + " " + arithmetic + (sliced ? " in slices" : ""));
        Inputs in = inputs_of(c);
        cc->max_tensor_elements = sliced ? std::max(in.g.c * in.g.h * in.g.w,
                                                    c.k * in.g.oh * in.g.ow) + 7
                                         : int64_t{2147483647};
        expect_case_matches_reference(ctx, c, ConvAlgo::Cudnn, tf32 || ctx.conv_transforms());
        ++ran;
      }
      EXPECT_GE(ran, sliced ? 5 : 9);
      ASSERT_FALSE(cc->picks.empty());
      for (const auto& [key, pick] : cc->picks) EXPECT_NE(key.find(" planned"), std::string::npos) << key;
    }
  }
#endif
}

// A run that reads the cache file trains to the weights of the run that wrote it: the choice is
// the only thing the cache carries, so equal choices give the same kernels in the same order.
TEST(ConvGpu, RunWithTheCacheGivesTheWeightsOfTheRunThatWroteIt) {
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  const std::string cache = ::testing::TempDir() + "conv_algos_weights_test.tsv";
  std::remove(cache.c_str());
  auto train = [&](bool expect_from_file) {
    Context ctx(1, 1, Device::CUDA);
    ctx.tuning().set_cache_file(cache, ctx.cuda().info().name);
    Sequential m = make_caltech_model(16, 3);
    ctx.rng().seed(3);
    m.reset_parameters(ctx.rng());
    m.to(Device::CUDA, ctx);
    Sgd opt(m.parameters(), 0.01);
    ClassifierTrainer tr(m, opt, /*cuda_graph=*/false);
    Rng r(8);
    for (int s = 0; s < 3; ++s) {
      const Tensor x = testing::random_tensor(Shape{8, 3, 16, 16}, r);
      std::vector<int32_t> l(8);
      for (auto& v : l) v = static_cast<int32_t>(r.next() % 3);
      tr.step(ctx, x, testing::labels_tensor(l));
    }
    EXPECT_FALSE(ctx.tuning().made().empty());
    for (const auto& made : ctx.tuning().made())
      EXPECT_EQ(made.second.from_file, expect_from_file) << made.first;
    return m.parameters().values().to(Device::CPU, ctx);
  };
  const Tensor first = train(false);
  const Tensor second = train(true);
  testing::expect_close(second, first, 0, 0, "weights");
  std::remove(cache.c_str());
}

}  // namespace
}  // namespace pdnn
