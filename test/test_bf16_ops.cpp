// The bf16 mixed-precision ops (issue 32): casts, cuBLAS's bf16 GEMM, the activations, max
// pooling (with and without its fused dropout), dropout, the convolution's bias, BatchNorm, the
// graph model's merges (Concat's channel copies, Add) and the losses, each on bf16 tensors on
// the GPU against a double-precision reference computed from the same bf16 inputs, within the
// bounds of bf16_testing.h (derived per op below). The GPU tests skip without a device; the
// casts' CPU twin and the CPU's refusals run everywhere.
// (The convolutions in bf16: test_conv_gpu.cpp and test_conv_gpu_passes.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "bf16_testing.h"
#include "core/context.h"
#include "core/cuda_state.h"
#include "core/error.h"
#include "ops/activation.h"
#include "ops/batchnorm2d.h"
#include "ops/cast.h"
#include "ops/conv/conv2d.h"
#include "ops/dense.h"
#include "ops/dropout.h"
#include "ops/gemm.h"
#include "ops/kit/argmax.h"
#include "ops/kit/round.h"
#include "ops/loss.h"
#include "ops/maxpool2d.h"
#include "ops/merge.h"
#include "testing.h"

namespace pdnn {
namespace {

namespace pt = pdnn::testing;
using pt::kBf16U;
using pt::kFp32U;

#define PDNN_NEED_GPU()                                   \
  do {                                                    \
    std::string why_;                                     \
    if (!cuda_usable(&why_)) GTEST_SKIP() << "needs a GPU: " << why_; \
  } while (0)

std::vector<double> doubles(const Tensor& t) {
  std::vector<double> v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = t[i];
  return v;
}

// ---- CPU: the casts' twin and the refusals -------------------------------------------------

// The CPU cast is kit's rounding (the device's, bit for bit: test_kernel_kit.cpp), element by
// element, for every class of input; bf16 -> fp32 is exact, and a round trip of a bf16 value is
// the identity.
TEST(Bf16Cast, CpuCastIsTheKitRoundingAndRoundTrips) {
  Context ctx(2, 1);
  const float special[] = {0.f, -0.f, 1.f, -1.f, 1.00390625f /* 1 + 2^-8: a tie, to even */,
                           1.01171875f /* 1 + 3 2^-8: a tie, to even (up) */,
                           std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                           std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::denorm_min(), 3.3895314e38f,
                           std::numeric_limits<float>::quiet_NaN()};
  Rng rng(5);
  Tensor x = pt::random_tensor(Shape{3000}, rng, -50.f, 50.f);
  for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); ++i) x[int64_t(i)] = special[i];
  Tensor b(x.shape(), DType::BF16), back(x.shape());
  ops::cast(ctx, x, b);
  ops::cast(ctx, b, back);
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(back[i]));
      continue;
    }
    ASSERT_EQ(b.data<bf16>()[i].bits, kit::bf16_bits(x[i])) << "element " << i << ": " << x[i];
    ASSERT_EQ(back[i], kit::round_bf16(x[i])) << "element " << i;
    // |round(x) - x| <= 2^-8 |x| in the normal range (and the overflow to infinity aside)
    if (std::isfinite(back[i]) && std::fabs(x[i]) > 1e-37f)
      EXPECT_LE(std::fabs(double(back[i]) - x[i]), kBf16U * std::fabs(double(x[i])));
  }
  EXPECT_EQ(b.data<bf16>()[4].bits, 0x3f80);  // 1 + 2^-8 -> 1 (even)
  EXPECT_EQ(b.data<bf16>()[5].bits, 0x3f82);  // 1 + 3 2^-8 -> 1 + 2^-6 (even)
  // a bf16 value survives the round trip exactly
  Tensor b2(x.shape(), DType::BF16);
  ops::cast(ctx, back, b2);
  for (int64_t i = 0; i < x.numel(); ++i)
    if (!std::isnan(x[i])) ASSERT_EQ(b2.data<bf16>()[i].bits, b.data<bf16>()[i].bits) << i;
  // the flat parameter buffer's bf16 copy
  Tensor copy;
  ops::refresh_bf16_copy(ctx, x, copy);
  EXPECT_EQ(copy.dtype(), DType::BF16);
  EXPECT_EQ(copy.shape(), x.shape());
  for (int64_t i = 0; i < x.numel(); ++i)
    if (!std::isnan(x[i])) ASSERT_EQ(copy.data<bf16>()[i].bits, b.data<bf16>()[i].bits) << i;
  // only float32 <-> bfloat16
  Tensor i32(Shape{3000}, DType::I32);
  pt::expect_error_mentions([&] { ops::cast(ctx, i32, b); }, {"cast", "int32", "bfloat16"});
  pt::expect_error_mentions([&] { ops::cast(ctx, x, back); }, {"cast", "float32"});
}

// bf16 tensors never run on the CPU in silence: every op refuses them in one line.
TEST(Bf16Ops, TheCpuRefusesBf16TensorsInOneLine) {
  Context ctx(1, 1);
  Rng rng(2);
  const Tensor f = pt::random_tensor(Shape{2, 3, 4, 4}, rng);
  const Tensor x = pt::to_bf16(f, Device::CPU, ctx);
  Tensor y(x.shape(), DType::BF16), mask(x.shape());
  const std::vector<std::string> no_path = {"bfloat16", "the CPU has no bf16 path"};
  pt::expect_error_mentions([&] { ops::relu_forward(ctx, x, y); }, no_path);
  pt::expect_error_mentions([&] { ops::tanh_backward(ctx, x, x, y); }, no_path);
  pt::expect_error_mentions([&] { ops::dropout_forward(ctx, 0.5f, x, y, mask); }, no_path);
  const Pool2d pg{6, 4, 4, 2, 2, 2, 2};
  Tensor py(Shape{2, 3, 2, 2}, DType::BF16);
  pt::expect_error_mentions([&] { ops::maxpool2d_forward(ctx, pg, x, py, nullptr); }, no_path);
  pt::expect_error_mentions([&] { ops::add(ctx, x, x, y); }, no_path);
  Tensor cat(Shape{2, 6, 4, 4}, DType::BF16);
  pt::expect_error_mentions([&] { ops::channel_copy(ctx, x, 0, cat, 3, 3); }, no_path);
  Tensor gamma = Tensor::zeros(Shape{3}), beta = Tensor::zeros(Shape{3}),
         rm = Tensor::zeros(Shape{3}), rv = Tensor::zeros(Shape{3}), mean(Shape{3}),
         invstd(Shape{3});
  const BnGeom bg{2, 3, 16, 1e-5f, 0.1f, FusedAct::None, 0.f};
  pt::expect_error_mentions(
      [&] { ops::batchnorm2d_forward_train(ctx, bg, x, gamma, beta, rm, rv, mean, invstd, y); },
      no_path);
  const ConvGeom g = conv_geom("t", 3, 4, 4, 3, 3, 1, 1, 1, 1);
  const Tensor w = pt::to_bf16(pt::random_tensor(Shape{5, 3, 3, 3}, rng), Device::CPU, ctx);
  Tensor cy(Shape{2, 5, 4, 4}, DType::BF16);
  pt::expect_error_mentions(
      [&] {
        ops::conv2d_forward(ctx, ConvFwdTensors::of(ConvShape{g, 2, 5}, &x, &w, nullptr, &cy));
      },
      no_path);
  // mixed types are refused too, naming the types
  pt::expect_error_mentions([&] { ops::relu_forward(ctx, f, y); }, {"relu_forward", "bfloat16"});
  pt::expect_error_mentions([&] { ops::add(ctx, f, x, y); }, {"add", "float32", "bfloat16"});
  pt::expect_error_mentions([&] { ops::channel_copy(ctx, f, 0, cat, 0, 3); },
                            {"channel_copy", "float32", "bfloat16"});
  const Tensor wf = pt::random_tensor(Shape{5, 3, 3, 3}, rng);
  pt::expect_error_mentions(
      [&] {
        ops::conv2d_forward(ctx, ConvFwdTensors::of(ConvShape{g, 2, 5}, &x, &wf, nullptr, &cy));
      },
      {"conv2d_forward", "float32", "bfloat16"});
}

// ---- GPU ------------------------------------------------------------------------------------

// The device's cast is the host's, bit for bit; the parameter buffer's copy is one kernel of it.
TEST(Bf16Gpu, CastBitExactWithTheCpuAndTheParameterCopy) {
  PDNN_NEED_GPU();
  Context ctx(1, 1, Device::CUDA);
  Rng rng(9);
  Tensor x = pt::random_tensor(Shape{70001}, rng, -1e4f, 1e4f);
  x[0] = 1.00390625f;
  x[1] = std::numeric_limits<float>::max();
  x[2] = -0.f;
  const Tensor xd = x.to(Device::CUDA, ctx);
  Tensor bd = Tensor::empty(x.shape(), DType::BF16, Device::CUDA, ctx);
  ops::cast(ctx, xd, bd);
  Tensor copy;
  ops::refresh_bf16_copy(ctx, xd, copy);
  EXPECT_EQ(copy.device(), Device::CUDA);
  Tensor backd = Tensor::empty(x.shape(), DType::F32, Device::CUDA, ctx);
  ops::cast(ctx, bd, backd);
  const Tensor bh = bd.to(Device::CPU, ctx), ch = copy.to(Device::CPU, ctx),
               back = backd.to(Device::CPU, ctx);
  for (int64_t i = 0; i < x.numel(); ++i) {
    ASSERT_EQ(bh.data<bf16>()[i].bits, kit::bf16_bits(x[i])) << "element " << i;
    ASSERT_EQ(ch.data<bf16>()[i].bits, kit::bf16_bits(x[i])) << "element " << i;
    ASSERT_EQ(back[i], kit::round_bf16(x[i])) << "element " << i;
  }
}

#if PDNN_HAVE_CUDA
// Both widths of the device's casts (one element a thread; 4 a thread and the n % 4 left in the
// same launch), forced, equal the host's bit for bit both ways, at lengths around multiples of
// 4 and with pointers 1 element off (what Auto gives one a thread); 4 wide on such pointers is
// refused. Every element past n stays untouched (poison).
TEST(Bf16Gpu, CastEveryWidthAndTailBitExact) {
  PDNN_NEED_GPU();
  Context ctx(1, 1, Device::CUDA);
  Rng rng(10);
  const int64_t cap = 70013;
  Tensor x = pt::random_tensor(Shape{cap}, rng, -1e4f, 1e4f);
  x[1] = 1.00390625f;  // a tie, to even
  x[2] = std::numeric_limits<float>::max();
  x[3] = std::numeric_limits<float>::quiet_NaN();
  const Tensor xd = x.to(Device::CUDA, ctx);
  std::vector<uint16_t> want(static_cast<size_t>(cap));
  for (int64_t i = 0; i < cap; ++i) want[static_cast<size_t>(i)] = kit::bf16_bits(x[i]);
  int checked = 0;
  for (const cuda::CastWidth width : {cuda::CastWidth::One, cuda::CastWidth::X4})
    for (const int64_t off : {int64_t{0}, int64_t{1}})
      for (const int64_t n : {int64_t{1}, int64_t{3}, int64_t{4}, int64_t{5}, int64_t{7},
                              int64_t{8}, int64_t{70001}, cap - 1 - off}) {
        SCOPED_TRACE(std::string(width == cuda::CastWidth::X4 ? "4 wide" : "one") + ", offset " +
                     std::to_string(off) + ", n " + std::to_string(n));
        Tensor bd = pt::bf16_poisoned(Shape{cap}, Device::CUDA, ctx);
        Tensor f7(Shape{cap});
        f7.fill(-7.f);
        Tensor fd = f7.to(Device::CUDA, ctx);
        const float* xs = xd.data() + off;
        bf16* bs = bd.data<bf16>() + off;
        float* fs = fd.data() + off;
        if (width == cuda::CastWidth::X4 && off != 0) {
          EXPECT_FALSE(cuda::cast_takes_x4(xs, bs));
          pt::expect_error_mentions(
              [&] { cuda::cast_to_bf16(n, xs, bs, ctx.cuda_exec(), width); },
              {"cast_to_bf16", "aligned"});
          pt::expect_error_mentions(
              [&] { cuda::cast_to_f32(n, bs, fs, ctx.cuda_exec(), width); },
              {"cast_to_f32", "aligned"});
          continue;
        }
        cuda::cast_to_bf16(n, xs, bs, ctx.cuda_exec(), width);
        cuda::cast_to_f32(n, bs, fs, ctx.cuda_exec(), width);
        const Tensor bh = bd.to(Device::CPU, ctx), fh = fd.to(Device::CPU, ctx);
        const uint16_t poison = kit::bf16_bits(std::nanf(""));
        for (int64_t i = 0; i < cap; ++i) {
          const bool in = i >= off && i < off + n;
          const uint16_t b = bh.data<bf16>()[i].bits;
          ASSERT_EQ(b, in ? want[static_cast<size_t>(i)] : poison) << "element " << i;
          const float f = fh[i];
          if (!in) ASSERT_EQ(f, -7.f) << "element " << i;
          else if (std::isnan(x[i])) ASSERT_TRUE(std::isnan(f)) << "element " << i;
          else ASSERT_EQ(f, kit::round_bf16(x[i])) << "element " << i;
        }
        ++checked;
      }
  EXPECT_EQ(checked, 24);
}
#endif

#if PDNN_HAVE_CUDA
// C = alpha op(A) op(B) + beta C with bf16 A, B (cublasGemmEx, fp32 compute): into an fp32 C
// accumulating onto its values (the parameter gradients' case) and into a bf16 C. Bound: the
// products of bf16 values are exact in fp32; K sums on the tensor cores (K + 2) 2^-23 S; the
// fp32 C adds the base (2^-24); the bf16 C rounds once more (2^-8).
TEST(Bf16Gpu, GemmSumsInFp32IntoFp32OrBf16) {
  PDNN_NEED_GPU();
  Context ctx(1, 1, Device::CUDA);
  Rng rng(4);
  for (const bool ta : {false, true})
    for (const bool tb : {false, true}) {
      const int64_t M = 37, N = 70, K = 300;
      SCOPED_TRACE(std::string("trans_a ") + (ta ? "1" : "0") + " trans_b " + (tb ? "1" : "0"));
      const Tensor a = pt::bf16_rounded(pt::random_tensor(ta ? Shape{K, M} : Shape{M, K}, rng));
      const Tensor b = pt::bf16_rounded(pt::random_tensor(tb ? Shape{N, K} : Shape{K, N}, rng));
      const Tensor c0 = pt::random_tensor(Shape{M, N}, rng);
      const float alpha = 0.75f;
      std::vector<double> ref(M * N), s(M * N);
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j)
          for (int64_t q = 0; q < K; ++q) {
            const double p = alpha * double(a[ta ? q * M + i : i * K + q]) *
                             double(b[tb ? j * K + q : q * N + j]);
            ref[i * N + j] += p;
            s[i * N + j] += std::fabs(p);
          }
      const Tensor ad = pt::to_bf16(a, Device::CUDA, ctx), bd = pt::to_bf16(b, Device::CUDA, ctx);
      Tensor cd = c0.to(Device::CUDA, ctx);
      cuda::gemm(ta, tb, M, N, K, alpha, ad.data<bf16>(), bd.data<bf16>(), 1.f, cd.data(),
                 ctx.cuda_exec());
      pt::expect_bf16_sum_within(cd.to(Device::CPU, ctx), ref, s, &c0, double(K), 0.0,
                                 "fp32 C += A B");
      Tensor c16 = pt::bf16_poisoned(Shape{M, N}, Device::CUDA, ctx);
      cuda::gemm(ta, tb, M, N, K, alpha, ad.data<bf16>(), bd.data<bf16>(), 0.f,
                 c16.data<bf16>(), ctx.cuda_exec());
      pt::expect_bf16_sum_within(pt::widened(c16, ctx), ref, s, nullptr, double(K), kBf16U,
                                 "bf16 C = A B");
    }
}
#endif

// The dense layer in bf16 (bf16 x, w, y, dy, dx; fp32 b, dw, db) with a fused ReLU: the
// products on cuBLAS's bf16 GEMM with fp32 sums (bound as the GEMM's), y and dx rounded once,
// dw accumulated in fp32 onto its start, db summed over the rows in fp32 (n additions, 2^-24
// each, of the magnitudes and the start). The mask is read off the GPU's own y.
TEST(Bf16Gpu, DenseForwardAndBackward) {
  PDNN_NEED_GPU();
  Context ctx(1, 1, Device::CUDA);
  const Device G = Device::CUDA;
  Rng rng(14);
  const int64_t n = 40, in = 96, out = 24;
  const Act act{FusedAct::ReLU, 0.f};
  const Tensor xf = pt::bf16_rounded(pt::random_tensor(Shape{n, in}, rng));
  const Tensor wf = pt::bf16_rounded(pt::random_tensor(Shape{out, in}, rng));
  const Tensor dyf = pt::bf16_rounded(pt::random_tensor(Shape{n, out}, rng));
  const Tensor b = pt::random_tensor(Shape{out}, rng), dw0 = pt::random_tensor(Shape{out, in}, rng),
               db0 = pt::random_tensor(Shape{out}, rng);
  const Tensor x = pt::to_bf16(xf, G, ctx), w = pt::to_bf16(wf, G, ctx);
  const Tensor dy = pt::to_bf16(dyf, G, ctx);
  Tensor y = pt::bf16_poisoned(Shape{n, out}, G, ctx), dx = pt::bf16_poisoned(Shape{n, in}, G, ctx);
  Tensor dw = dw0.to(G, ctx), db = db0.to(G, ctx);
  ops::dense_forward(ctx, x, w, b.to(G, ctx), y, act);
  ops::dense_backward(ctx, x, w, dy, y, dw, db, &dx, act);
  const Tensor yh = pt::widened(y, ctx);
  std::vector<double> yr(n * out), ya(n * out), g(n * out), dxr(n * in), dxa(n * in),
      dwr(out * in), dwa(out * in), dbr(out), dba(out);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < out; ++o) {
      double z = b[o], za = std::fabs(double(b[o]));
      for (int64_t q = 0; q < in; ++q) {
        z += double(xf[i * in + q]) * wf[o * in + q];
        za += std::fabs(double(xf[i * in + q]) * wf[o * in + q]);
      }
      yr[i * out + o] = z > 0 ? z : 0.0;
      ya[i * out + o] = za;
      g[i * out + o] = yh[i * out + o] > 0.f ? double(dyf[i * out + o]) : 0.0;
    }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t q = 0; q < in; ++q)
      for (int64_t o = 0; o < out; ++o) {
        dxr[i * in + q] += g[i * out + o] * wf[o * in + q];
        dxa[i * in + q] += std::fabs(g[i * out + o] * wf[o * in + q]);
        dwr[o * in + q] += g[i * out + o] * xf[i * in + q];
        dwa[o * in + q] += std::fabs(g[i * out + o] * xf[i * in + q]);
      }
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < n; ++i) {
      dbr[o] += g[i * out + o];
      dba[o] += std::fabs(g[i * out + o]);
    }
    dba[o] = double(n) * kFp32U * (dba[o] + std::fabs(db0[o]));
    dbr[o] += db0[o];
  }
  pt::expect_bf16_sum_within(yh, yr, ya, nullptr, double(in), kBf16U, "y");
  pt::expect_bf16_sum_within(pt::widened(dx, ctx), dxr, dxa, nullptr, double(out), kBf16U, "dx");
  pt::expect_bf16_sum_within(dw.to(Device::CPU, ctx), dwr, dwa, &dw0, double(n), 0.0, "dW");
  pt::expect_within(db.to(Device::CPU, ctx), dbr, 0.0, dba, "db");
}

// dense_backward's dw_zero on the GPU, fp32 (cuBLAS and the thin small-batch product) and bf16
// (cuBLAS's bf16 GEMM into fp32): dw prefilled with NaN is written (neither GEMM reads it), and
// equals the same backward added onto zeros within the fp32 sums' bound (beta 0 may take
// another cuBLAS kernel: another order of the n products).
TEST(Bf16Gpu, DenseBackwardIntoZerosWritesWithoutReadingDw) {
  PDNN_NEED_GPU();
  Context ctx(1, 1, Device::CUDA);
  const Device G = Device::CUDA;
  Rng rng(15);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Act act{FusedAct::ReLU, 0.f};
  struct Case {
    bool bf;
    int64_t n, in, out;
  };
  // fp32: the thin product (weights up to 4 Mi elements), then cuBLAS (past them); bf16: cuBLAS
  for (const Case& c : {Case{false, 8, 96, 24}, Case{false, 8, 4096, 1040}, Case{true, 40, 96, 24}}) {
    const bool bf = c.bf;
    const int64_t n = c.n, in = c.in, out = c.out;
    SCOPED_TRACE(std::string(bf ? "bf16" : "fp32") + " " + std::to_string(out) + " x " +
                 std::to_string(in));
    const Tensor xf = pt::bf16_rounded(pt::random_tensor(Shape{n, in}, rng));
    const Tensor wf = pt::bf16_rounded(pt::random_tensor(Shape{out, in}, rng));
    const Tensor dyf = pt::bf16_rounded(pt::random_tensor(Shape{n, out}, rng));
    const Tensor x = bf ? pt::to_bf16(xf, G, ctx) : xf.to(G, ctx);
    const Tensor w = bf ? pt::to_bf16(wf, G, ctx) : wf.to(G, ctx);
    const Tensor dy = bf ? pt::to_bf16(dyf, G, ctx) : dyf.to(G, ctx);
    Tensor y = bf ? pt::bf16_poisoned(Shape{n, out}, G, ctx)
                  : Tensor::empty(Shape{n, out}, DType::F32, G, ctx);
    ops::dense_forward(ctx, x, w, Tensor(), y, act);
    Tensor none;
    Tensor added = Tensor::zeros(Shape{out, in}).to(G, ctx);
    ops::dense_backward(ctx, x, w, dy, y, added, none, nullptr, act, /*dw_zero=*/false);
    Tensor written(Shape{out, in});
    written.fill(nan);
    written = written.to(G, ctx);
    ops::dense_backward(ctx, x, w, dy, y, written, none, nullptr, act, /*dw_zero=*/true);
    const Tensor a = added.to(Device::CPU, ctx), b = written.to(Device::CPU, ctx);
    const Tensor yh = bf ? pt::widened(y, ctx) : y.to(Device::CPU, ctx);
    for (int64_t o = 0; o < out; ++o)
      for (int64_t q = 0; q < in; ++q) {
        double mag = 0.0;
        for (int64_t i = 0; i < n; ++i)
          if (yh[i * out + o] > 0.f) mag += std::fabs(double(dyf[i * out + o]) * xf[i * in + q]);
        const int64_t k = o * in + q;
        ASSERT_FALSE(std::isnan(b[k])) << "dW[" << k << "]: read, not written";
        // two fp32 sums of n products, each within (n + 1) u sum |products| of the exact one
        ASSERT_LE(std::fabs(double(b[k]) - a[k]), 2.0 * (n + 1) * kFp32U * mag) << "dW[" << k << "]";
      }
  }
}

// The activations on bf16 tensors, forward and backward, against double from the bf16 inputs
// (backward from the GPU's own bf16 y, as a model's backward reads it). Bounds: ReLU is exact
// (a maximum and a select); LeakyReLU one fp32 product then the rounding to bf16 (2^-8 + 2^-23);
// sigmoid and tanh a few fp32 operations and CUDA's expf/tanhf (within 2 ulp), 2^-8 + 2^-20.
TEST(Bf16Gpu, ActivationsForwardAndBackward) {
  PDNN_NEED_GPU();
  Context ctx(1, 1, Device::CUDA);
  Rng rng(6);
  const Shape s{3, 5, 7, 11};
  const Tensor xf = pt::bf16_rounded(pt::random_tensor(s, rng, -4.f, 4.f));
  const Tensor dyf = pt::bf16_rounded(pt::random_tensor(s, rng));
  const Tensor x = pt::to_bf16(xf, Device::CUDA, ctx), dy = pt::to_bf16(dyf, Device::CUDA, ctx);
  const float slope = 0.2f;
  struct Case {
    const char* name;
    std::function<void(const Tensor&, Tensor&)> fwd;
    std::function<void(const Tensor&, const Tensor&, const Tensor&, Tensor&)> bwd;  // x, y, dy
    std::function<double(double)> f;
    std::function<double(double, double, double)> df;  // x, y, dy
    double rel;
  };
  const double smooth = kBf16U + 0x1.0p-20;
  const std::vector<Case> cases = {
      {"relu", [&](const Tensor& a, Tensor& b) { ops::relu_forward(ctx, a, b); },
       [&](const Tensor& a, const Tensor&, const Tensor& d, Tensor& o) {
         ops::relu_backward(ctx, a, d, o);
       },
       [](double v) { return v > 0 ? v : 0.0; },
       [](double v, double, double d) { return v > 0 ? d : 0.0; }, 0.0},
      {"leaky_relu", [&](const Tensor& a, Tensor& b) { ops::leaky_relu_forward(ctx, slope, a, b); },
       [&](const Tensor& a, const Tensor&, const Tensor& d, Tensor& o) {
         ops::leaky_relu_backward(ctx, slope, a, d, o);
       },
       [&](double v) { return v > 0 ? v : double(slope) * v; },
       [&](double v, double, double d) { return v > 0 ? d : double(slope) * d; },
       kBf16U + 0x1.0p-23},
      {"sigmoid", [&](const Tensor& a, Tensor& b) { ops::sigmoid_forward(ctx, a, b); },
       [&](const Tensor&, const Tensor& yv, const Tensor& d, Tensor& o) {
         ops::sigmoid_backward(ctx, yv, d, o);
       },
       [](double v) { return 1.0 / (1.0 + std::exp(-v)); },
       [](double, double yv, double d) { return d * yv * (1.0 - yv); }, smooth},
      {"tanh", [&](const Tensor& a, Tensor& b) { ops::tanh_forward(ctx, a, b); },
       [&](const Tensor&, const Tensor& yv, const Tensor& d, Tensor& o) {
         ops::tanh_backward(ctx, yv, d, o);
       },
       [](double v) { return std::tanh(v); },
       [](double, double yv, double d) { return d * (1.0 - yv * yv); }, smooth},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Tensor y = pt::bf16_poisoned(s, Device::CUDA, ctx);
    Tensor dx = pt::bf16_poisoned(s, Device::CUDA, ctx);
    c.fwd(x, y);
    c.bwd(x, y, dy, dx);
    const Tensor yh = pt::widened(y, ctx), dxh = pt::widened(dx, ctx);
    std::vector<double> yr(xf.numel()), dr(xf.numel());
    for (int64_t i = 0; i < xf.numel(); ++i) {
      yr[i] = c.f(xf[i]);
      dr[i] = c.df(xf[i], yh[i], dyf[i]);
    }
    pt::expect_within(yh, yr, c.rel, {}, "y");
    pt::expect_within(dxh, dr, c.rel, {}, "dx");
  }
  // in place (y == x, dx == dy), as the layers run them
  Tensor inplace = pt::to_bf16(xf, Device::CUDA, ctx);
  ops::relu_forward(ctx, inplace, inplace);
  const Tensor ih = pt::widened(inplace, ctx);
  for (int64_t i = 0; i < xf.numel(); ++i) ASSERT_EQ(ih[i], std::max(xf[i], 0.f)) << i;
}

// Max pooling on bf16 (2x2 s2 as W4, 3x3 s2 overlapping): the maximum and its offset by the
// CPU's rule (kit::window_max on the same values: exact, ties and all, which bf16's coarse values
// make common), dx exact without overlap (one term) and within 2^-8 + a few fp32 additions with
// overlap; backward from the recorded argmax and from x alike; through the input's activation.
TEST(Bf16Gpu, MaxPoolForwardAndBackwardByTheArgmaxRule) {
  PDNN_NEED_GPU();
  Context ctx(1, 1, Device::CUDA);
  Rng rng(12);
  for (const int64_t k : {2, 3}) {
    const int64_t s = 2, n = 2, c = 3, h = 9, w = 10;
    const int64_t oh = (h - k) / s + 1, ow = (w - k) / s + 1;
    SCOPED_TRACE("kernel " + std::to_string(k));
    const Pool2d g{n * c, h, w, oh, ow, k, s};
    // few distinct values: ties inside windows
    Tensor xf = pt::random_tensor(Shape{n, c, h, w}, rng, -2.f, 2.f);
    for (int64_t i = 0; i < xf.numel(); ++i) xf[i] = std::round(xf[i] * 4.f) / 4.f;
    const Tensor dyf = pt::bf16_rounded(pt::random_tensor(Shape{n, c, oh, ow}, rng));
    const Tensor x = pt::to_bf16(xf, Device::CUDA, ctx), dy = pt::to_bf16(dyf, Device::CUDA, ctx);
    Tensor y = pt::bf16_poisoned(Shape{n, c, oh, ow}, Device::CUDA, ctx);
    Tensor am = Tensor::empty(y.shape(), DType::U8, Device::CUDA, ctx);
    ops::maxpool2d_forward(ctx, g, x, y, &am);
    const Tensor yh = pt::widened(y, ctx), amh = am.to(Device::CPU, ctx);
    std::vector<double> dxr(xf.numel(), 0.0), dxa(xf.numel(), 0.0);
    for (int64_t p = 0; p < g.planes; ++p)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          const kit::WindowMax m = kit::window_max<int64_t>(xf.data() + p * h * w, w, k, s, oy, ox);
          const int64_t o = (p * oh + oy) * ow + ox;
          ASSERT_EQ(yh[o], m.value) << "output " << o;
          ASSERT_EQ(int(amh.data<uint8_t>()[o]), m.at) << "output " << o;
          const int64_t at = p * h * w + (oy * s + m.at / k) * w + ox * s + m.at % k;
          dxr[at] += dyf[o];
          dxa[at] += std::fabs(dyf[o]);
        }
    for (double& v : dxa) v *= 4 * kFp32U;  // up to 4 fp32 additions
    for (const bool recorded : {true, false}) {
      Tensor dx = pt::bf16_poisoned(x.shape(), Device::CUDA, ctx);
      ops::maxpool2d_backward(ctx, g, recorded ? nullptr : &x, dy, recorded ? &am : nullptr, dx);
      pt::expect_within(pt::widened(dx, ctx), dxr, k == 2 ? 0.0 : kBf16U, dxa,
                        recorded ? "dx (recorded argmax)" : "dx (argmax found again in x)");
    }
    if (k == 2) {  // through the activation of the layer before, LeakyReLU read off y
      const Act act{FusedAct::LeakyReLU, 0.1f};
      Tensor dx = pt::bf16_poisoned(x.shape(), Device::CUDA, ctx);
      ops::maxpool2d_backward(ctx, g, nullptr, dy, &am, dx, &y, act);
      std::vector<double> r(dxr);
      for (int64_t i = 0; i < xf.numel(); ++i)
        if (!(xf[i] > 0.f)) r[i] = double(kit::round_bf16(0.1f * float(dxr[i])));
      // the product in fp32 rounded once: the reference rounds as the kernel
      pt::expect_within(pt::widened(dx, ctx), r, 0.0, {}, "dx through LeakyReLU");
    }
  }
}

#if PDNN_HAVE_CUDA  // calls cuda:: kernels directly: only CUDA builds have them
// The 2x2 stride-2 pooling kernels (4 outputs a thread, vector accesses; maxpool2d.cu) against
// the general ones on the same data, in fp32 and bf16: every output, argmax byte, mask float and
// dx element bit for bit (NaN as NaN). A tensor one element off its 16-byte alignment takes
// the general kernel (x in forward, dx in backward), so both run on the same shape; the data has
// ties in most windows and NaNs in some.
template <class E>
void expect_2x2_kernels_equal_general_ones(Context& ctx) {
  const CudaExec e = ctx.cuda_exec();
  const int64_t n = 2, c = 3, h = 12, w = 16, oh = 6, ow = 8;
  const Pool2d g{n * c, h, w, oh, ow, 2, 2};
  const int64_t in = g.planes * h * w, out = g.planes * oh * ow;
  constexpr DType dt = std::is_same_v<E, bf16> ? DType::BF16 : DType::F32;
  Rng rng(41);
  // x at offset 0 (aligned) and 1 (not) of one buffer; dy, y (the pool's, for the activation)
  Tensor xf(Shape{in + 8});
  for (int64_t i = 0; i < xf.numel(); ++i)
    xf[i] = i % 37 == 5 ? std::numeric_limits<float>::quiet_NaN()
                        : std::round(static_cast<float>(Rng::to_unit(rng.next()) * 8.0 - 4.0)) / 2.f;
  Tensor xs(Shape{in + 8});
  for (int64_t i = 0; i + 1 < xs.numel(); ++i) xs[i + 1] = xf[i];
  const Tensor dyf = pt::bf16_rounded(pt::random_tensor(Shape{out}, rng));
  const auto dev = [&](const Tensor& f) {
    return dt == DType::BF16 ? pt::to_bf16(f, Device::CUDA, ctx) : f.to(Device::CUDA, ctx);
  };
  const Tensor x = dev(xf), x_off = dev(xs), dy = dev(dyf);
  const E* xa = x.data<E>();
  const E* xb = x_off.data<E>() + 1;
  const auto host_bytes = [&](const Tensor& t) {
    const Tensor hcpy = t.to(Device::CPU, ctx);
    const uint8_t* b = hcpy.data<uint8_t>();
    return std::vector<uint8_t>(b, b + hcpy.nbytes());
  };
  const auto expect_same = [&](const Tensor& a, const Tensor& b, const char* what) {
    if (a.dtype() == DType::U8) {
      ASSERT_EQ(host_bytes(a), host_bytes(b)) << what;
      return;
    }
    const Tensor fa = a.dtype() == DType::BF16 ? pt::widened(a, ctx) : a.to(Device::CPU, ctx);
    const Tensor fb = b.dtype() == DType::BF16 ? pt::widened(b, ctx) : b.to(Device::CPU, ctx);
    ASSERT_EQ(fa.numel(), fb.numel()) << what;
    for (int64_t i = 0; i < fa.numel(); ++i) {
      if (std::isnan(fa[i]) && std::isnan(fb[i])) continue;
      uint32_t ba, bb;
      std::memcpy(&ba, &fa.data()[i], 4);
      std::memcpy(&bb, &fb.data()[i], 4);
      ASSERT_EQ(ba, bb) << what << " at " << i << ": " << fa[i] << " vs " << fb[i];
    }
  };
  const auto fresh = [&](int64_t len, DType t) { return Tensor::empty(Shape{len}, t, Device::CUDA, ctx); };
  // forward, with and without the argmax, and with the fused dropout
  Tensor y2 = fresh(out, dt), yg = fresh(out, dt), a2 = fresh(out, DType::U8), ag = fresh(out, DType::U8);
  cuda::maxpool2d_forward(g, xa, y2.data<E>(), a2.data<uint8_t>(), e);
  cuda::maxpool2d_forward(g, xb, yg.data<E>(), ag.data<uint8_t>(), e);
  expect_same(y2, yg, "y");
  expect_same(a2, ag, "argmax");
  Tensor y2n = fresh(out, dt);
  cuda::maxpool2d_forward(g, xa, y2n.data<E>(), static_cast<uint8_t*>(nullptr), e);
  expect_same(y2n, yg, "y without the argmax");
  Tensor& counter = ctx.device_rng_counter();
  Tensor yd2 = fresh(out, dt), ydg = fresh(out, dt), m2 = fresh(out, DType::F32), mg = fresh(out, DType::F32);
  Tensor ad2 = fresh(out, DType::U8), adg = fresh(out, DType::U8);
  cuda::maxpool2d_dropout_forward(g, 0.4f, 99, counter.data<int64_t>(), 3, xa, yd2.data<E>(),
                                  ad2.data<uint8_t>(), m2.data(), e);
  cuda::maxpool2d_dropout_forward(g, 0.4f, 99, counter.data<int64_t>(), 3, xb, ydg.data<E>(),
                                  adg.data<uint8_t>(), mg.data(), e);
  expect_same(yd2, ydg, "y with dropout");
  expect_same(m2, mg, "dropout mask");
  expect_same(ad2, adg, "argmax with dropout");
  // backward: dx one element off its alignment takes the general kernel
  const Act leaky{FusedAct::LeakyReLU, 0.1f}, none{};
  for (const bool recorded : {true, false})
    for (const bool through_act : {false, true}) {
      SCOPED_TRACE(std::string(recorded ? "recorded argmax" : "argmax from x") +
                   (through_act ? ", through LeakyReLU" : ""));
      Tensor d2 = fresh(in, dt), dgb = fresh(in + 8, dt);
      const E* yp = through_act ? y2.data<E>() : nullptr;
      const uint8_t* ap = recorded ? a2.data<uint8_t>() : nullptr;
      cuda::maxpool2d_backward(g, recorded ? nullptr : xa, dy.data<E>(), ap, yp,
                               through_act ? leaky : none, d2.data<E>(), e);
      cuda::maxpool2d_backward(g, recorded ? nullptr : xa, dy.data<E>(), ap, yp,
                               through_act ? leaky : none, dgb.data<E>() + 1, e);
      expect_same(d2, dgb.slice(1, Shape{in}), "dx");
      Tensor dm2 = fresh(in, dt), dmg = fresh(in + 8, dt);
      cuda::maxpool2d_dropout_backward(g, recorded ? nullptr : xa, dy.data<E>(),
                                       recorded ? ad2.data<uint8_t>() : nullptr, m2.data(),
                                       through_act ? yd2.data<E>() : nullptr,
                                       through_act ? leaky : none, dm2.data<E>(), e);
      cuda::maxpool2d_dropout_backward(g, recorded ? nullptr : xa, dy.data<E>(),
                                       recorded ? ad2.data<uint8_t>() : nullptr, m2.data(),
                                       through_act ? yd2.data<E>() : nullptr,
                                       through_act ? leaky : none, dmg.data<E>() + 1, e);
      expect_same(dm2, dmg.slice(1, Shape{in}), "dx with dropout");
    }
}

TEST(Bf16Gpu, MaxPool2x2KernelsEqualTheGeneralOnesBitForBit) {
  PDNN_NEED_GPU();
  Context ctx(1, 1, Device::CUDA);
  {
    SCOPED_TRACE("fp32");
    expect_2x2_kernels_equal_general_ones<float>(ctx);
  }
  {
    SCOPED_TRACE("bf16");
    expect_2x2_kernels_equal_general_ones<bf16>(ctx);
  }
}
#endif

// Dropout and max pooling with its fused dropout on bf16: the mask is fp32's bit for bit (the
// same counter draw), and y, dx are the fp32 products rounded once: round_bf16(x * mask), exactly.
TEST(Bf16Gpu, DropoutMasksAreFp32sAndProductsRoundOnce) {
  PDNN_NEED_GPU();
  Rng rng(21);
  const Shape s{4, 3, 8, 8};
  const Tensor xf = pt::bf16_rounded(pt::random_tensor(s, rng, -3.f, 3.f));
  const Tensor dyf = pt::bf16_rounded(pt::random_tensor(s, rng));
  const float p = 0.3f;
  Context c32(1, 7, Device::CUDA), c16(1, 7, Device::CUDA);  // the same draw
  const Tensor x32 = xf.to(Device::CUDA, c32);
  Tensor y32 = Tensor::empty(s, DType::F32, Device::CUDA, c32), m32 = y32.clone(c32);
  ops::dropout_forward(c32, p, x32, y32, m32);
  const Tensor x16 = pt::to_bf16(xf, Device::CUDA, c16), dy16 = pt::to_bf16(dyf, Device::CUDA, c16);
  Tensor y16 = pt::bf16_poisoned(s, Device::CUDA, c16);
  Tensor m16 = Tensor::empty(s, DType::F32, Device::CUDA, c16);
  ops::dropout_forward(c16, p, x16, y16, m16);
  Tensor dx16 = pt::bf16_poisoned(s, Device::CUDA, c16);
  ops::dropout_backward(c16, dy16, m16, dx16);
  const Tensor mh32 = m32.to(Device::CPU, c32), mh16 = m16.to(Device::CPU, c16),
               yh32 = y32.to(Device::CPU, c32), yh16 = pt::widened(y16, c16),
               dxh = pt::widened(dx16, c16);
  for (int64_t i = 0; i < xf.numel(); ++i) {
    ASSERT_EQ(mh16[i], mh32[i]) << "mask " << i;
    ASSERT_EQ(yh16[i], kit::round_bf16(yh32[i])) << "y " << i;
    ASSERT_EQ(dxh[i], kit::round_bf16(dyf[i] * mh16[i])) << "dx " << i;
  }
  // max pooling 2x2 with dropout: y = round(max * mask); backward dy * mask at the argmax
  const Pool2d g{12, 8, 8, 4, 4, 2, 2};
  const Shape ps{4, 3, 4, 4};
  Tensor py32 = Tensor::empty(ps, DType::F32, Device::CUDA, c32), pm32 = py32.clone(c32);
  ops::maxpool2d_dropout_forward(c32, g, p, x32, py32, nullptr, pm32);
  Tensor py16 = pt::bf16_poisoned(ps, Device::CUDA, c16);
  Tensor pm16 = Tensor::empty(ps, DType::F32, Device::CUDA, c16);
  Tensor am = Tensor::empty(ps, DType::U8, Device::CUDA, c16);
  ops::maxpool2d_dropout_forward(c16, g, p, x16, py16, &am, pm16);
  const Tensor pdyf = pt::bf16_rounded(pt::random_tensor(ps, rng));
  Tensor pdx = pt::bf16_poisoned(s, Device::CUDA, c16);
  ops::maxpool2d_dropout_backward(c16, g, nullptr, pt::to_bf16(pdyf, Device::CUDA, c16), &am,
                                  pm16, pdx);
  const Tensor a = pm32.to(Device::CPU, c32), b = pm16.to(Device::CPU, c16),
               ya = py32.to(Device::CPU, c32), yb = pt::widened(py16, c16),
               amh = am.to(Device::CPU, c16), pdxh = pt::widened(pdx, c16);
  std::vector<double> want(xf.numel(), 0.0);
  for (int64_t o = 0; o < a.numel(); ++o) {
    ASSERT_EQ(b[o], a[o]) << "pool mask " << o;
    ASSERT_EQ(yb[o], kit::round_bf16(ya[o])) << "pool y " << o;
    const int64_t pl = o / 16, oy = (o % 16) / 4, ox = o % 4, at = amh.data<uint8_t>()[o];
    want[pl * 64 + (2 * oy + at / 2) * 8 + 2 * ox + at % 2] =
        kit::round_bf16(pdyf[o] * b[o]);
  }
  pt::expect_within(pdxh, want, 0.0, {}, "pool dx");
}

// The convolution's bias on bf16 outputs: y + b in fp32, rounded once (exact against the host's
// rounding); db (fp32) += the sums of a bf16 dy in double (2^-24 of the sum and the base).
TEST(Bf16Gpu, BiasAddAndItsGradient) {
  PDNN_NEED_GPU();
  Context ctx(1, 1, Device::CUDA);
  Rng rng(8);
  const int64_t n = 3, k = 5, p = 37;
  const Tensor yf = pt::bf16_rounded(pt::random_tensor(Shape{n, k, p}, rng, -5.f, 5.f));
  const Tensor b = pt::random_tensor(Shape{k}, rng);
  Tensor y = pt::to_bf16(yf, Device::CUDA, ctx);
  ops::bias_add(ctx, n, k, p, b.to(Device::CUDA, ctx), y);
  const Tensor yh = pt::widened(y, ctx);
  for (int64_t i = 0; i < yf.numel(); ++i)
    ASSERT_EQ(yh[i], kit::round_bf16(yf[i] + b[(i / p) % k])) << i;
  const Tensor db0 = pt::random_tensor(Shape{k}, rng);
  Tensor db = db0.to(Device::CUDA, ctx);
  ops::bias_backward(ctx, n, k, p, y, db);
  std::vector<double> ref(k, 0.0), abs(k, 0.0);
  for (int64_t i = 0; i < yh.numel(); ++i) {
    ref[(i / p) % k] += yh[i];
    abs[(i / p) % k] += std::fabs(yh[i]);
  }
  for (int64_t c = 0; c < k; ++c) {
    abs[c] = kFp32U * (abs[c] + std::fabs(db0[c]));
    ref[c] += db0[c];
  }
  pt::expect_within(db.to(Device::CPU, ctx), ref, 0.0, abs, "db");
}

// BatchNorm on bf16 (and fp32) x / y / dy / dx with fp32 statistics and parameters, training
// and eval, plain and with a fused LeakyReLU, planes of 50, 64, 1225 and 1600 elements (the
// kernels' scalar and vector accesses), each channel one block and 2, 4, 8 blocks of a cluster
// (forced; 0: the shape's choice). 1225 and 1600 over 6 images give every block of 8 work at
// 1225, and some none at 1600 (a rank past the channel's last access still joins the sums).
// Statistics: double sums of the bf16 values (the float mean and invstd within 2^-22 relative of
// the double ones). y and dx: fp32 arithmetic with cancellation (x * scale + shift; g - a - xhat
// b), so the bound is u (2^-8 for a bf16 y or dx, 2^-24 for fp32's) of the value plus 2^-20 of
// the magnitudes of its terms; dgamma, dbeta: double sums of fp32 products, 2^-22 of the sum of
// magnitudes.
template <class E>
void expect_batchnorm_within_bounds(Context& ctx, int splits) {
  const Device G = Device::CUDA;
  const double u = std::is_same<E, bf16>::value ? kBf16U : kFp32U;
  // x on the GPU as E (the values are bf16's, so the same in both), a tensor of NaN, and back
  auto dev = [&](const Tensor& f) {
    return std::is_same<E, bf16>::value ? pt::to_bf16(f, G, ctx) : f.to(G, ctx);
  };
  auto poisoned = [&](const Shape& sh) {
    if (std::is_same<E, bf16>::value) return pt::bf16_poisoned(sh, G, ctx);
    Tensor f(sh);
    f.fill(std::nanf(""));
    return f.to(G, ctx);
  };
  auto back = [&](const Tensor& t) {
    return std::is_same<E, bf16>::value ? pt::widened(t, ctx) : t.to(Device::CPU, ctx);
  };
  Rng rng(30);
  const int64_t n = 6, c = 3;
  for (const int64_t hw : {int64_t{50}, int64_t{64}, int64_t{1225}, int64_t{1600}})
  for (const FusedAct fa : {FusedAct::None, FusedAct::LeakyReLU}) {
    SCOPED_TRACE(std::string(fused_act_name(fa)) + " hw " + std::to_string(hw) + " splits " +
                 std::to_string(splits));
    const float slope = fa == FusedAct::LeakyReLU ? 0.2f : 0.f;
    BnGeom g{n, c, hw, 1e-5f, 0.1f, fa, slope};
    g.splits = splits;
#if PDNN_HAVE_CUDA
    if (splits > 0) EXPECT_EQ(cuda::batchnorm2d_splits(g), splits);
#endif
    const Shape s{n, c, hw};
    const Tensor xf = pt::bf16_rounded(pt::random_tensor(s, rng, -2.f, 3.f));
    const Tensor dyf = pt::bf16_rounded(pt::random_tensor(s, rng));
    const Tensor gamma = pt::random_tensor(Shape{c}, rng, 0.5f, 1.5f),
                 beta = pt::random_tensor(Shape{c}, rng);
    Tensor rm = Tensor::zeros(Shape{c}).to(G, ctx), rv = Tensor::zeros(Shape{c}).to(G, ctx);
    Tensor mean = Tensor::empty(Shape{c}, DType::F32, G, ctx), invstd = mean.clone(ctx);
    const Tensor x = dev(xf), gd = gamma.to(G, ctx), bd = beta.to(G, ctx);
    Tensor y = poisoned(s);
    ops::batchnorm2d_forward_train(ctx, g, x, gd, bd, rm, rv, mean, invstd, y);
    const Tensor mh = mean.to(Device::CPU, ctx), ih = invstd.to(Device::CPU, ctx), yh = back(y);
    std::vector<double> yr(xf.numel()), ya(xf.numel());
    for (int64_t ch = 0; ch < c; ++ch) {
      double s1 = 0, s2 = 0;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t q = 0; q < hw; ++q) s1 += xf[(i * c + ch) * hw + q];
      const double mu = s1 / double(n * hw);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t q = 0; q < hw; ++q) {
          const double d = xf[(i * c + ch) * hw + q] - mu;
          s2 += d * d;
        }
      const double is = 1.0 / std::sqrt(s2 / double(n * hw) + 1e-5);
      EXPECT_NEAR(mh[ch], mu, 0x1.0p-22 * (std::fabs(mu) + 1.0)) << "mean " << ch;
      EXPECT_NEAR(ih[ch], is, 0x1.0p-22 * is) << "invstd " << ch;
      const double scale = is * gamma[ch];
      for (int64_t i = 0; i < n; ++i)
        for (int64_t q = 0; q < hw; ++q) {
          const int64_t e = (i * c + ch) * hw + q;
          const double z = (xf[e] - mu) * scale + beta[ch];
          yr[e] = fa == FusedAct::None || z > 0 ? z : slope * z;  // None: no activation
          ya[e] = 0x1.0p-20 * (std::fabs(xf[e] * scale) + std::fabs(mu * scale) +
                               std::fabs(double(beta[ch])));
        }
    }
    pt::expect_within(yh, yr, u, ya, "y");
    // backward through the batch statistics, from the GPU's own y, mean and invstd
    Tensor dgamma = Tensor::zeros(Shape{c}).to(G, ctx), dbeta = dgamma.clone(ctx);
    Tensor dx = poisoned(s);
    ops::batchnorm2d_backward(ctx, g, true, x, y, dev(dyf), mean, invstd, gd, dgamma, dbeta, &dx);
    std::vector<double> dxr(xf.numel()), dxa(xf.numel()), dgr(c), dga(c), dbr(c), dba(c);
    for (int64_t ch = 0; ch < c; ++ch) {
      double s1 = 0, s2 = 0, a1 = 0, a2 = 0;
      auto gj = [&](int64_t e) {
        if (fa == FusedAct::None || yh[e] > 0.f) return double(dyf[e]);
        return double(float(slope * dyf[e]));
      };
      for (int64_t i = 0; i < n; ++i)
        for (int64_t q = 0; q < hw; ++q) {
          const int64_t e = (i * c + ch) * hw + q;
          const double xhat = (xf[e] - mh[ch]) * double(ih[ch]);
          s1 += gj(e);
          s2 += gj(e) * xhat;
          a1 += std::fabs(gj(e));
          a2 += std::fabs(gj(e) * xhat);
        }
      dbr[ch] = s1;
      dba[ch] = 0x1.0p-22 * a1;
      dgr[ch] = s2;
      dga[ch] = 0x1.0p-22 * a2;
      const double gs = gamma[ch] * double(ih[ch]), m = double(n * hw);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t q = 0; q < hw; ++q) {
          const int64_t e = (i * c + ch) * hw + q;
          const double xhat = (xf[e] - mh[ch]) * double(ih[ch]);
          dxr[e] = gs * (gj(e) - s1 / m - xhat * s2 / m);
          dxa[e] = 0x1.0p-20 * std::fabs(gs) *
                   (std::fabs(gj(e)) + std::fabs(s1 / m) + std::fabs(xhat * s2 / m));
        }
    }
    pt::expect_within(back(dx), dxr, u, dxa, "dx");
    pt::expect_within(dgamma.to(Device::CPU, ctx), dgr, 0.0, dga, "dgamma");
    pt::expect_within(dbeta.to(Device::CPU, ctx), dbr, 0.0, dba, "dbeta");
    // eval: the running statistics (as the kernel left them), elementwise
    Tensor ye = poisoned(s);
    ops::batchnorm2d_forward_eval(ctx, g, x, gd, bd, rm, rv, mean, invstd, ye);
    const Tensor rmh = rm.to(Device::CPU, ctx), rvh = rv.to(Device::CPU, ctx);
    std::vector<double> er(xf.numel()), ea(xf.numel());
    for (int64_t e = 0; e < xf.numel(); ++e) {
      const int64_t ch = (e / hw) % c;
      const double is = 1.0 / std::sqrt(double(rvh[ch]) + 1e-5), scale = is * gamma[ch];
      const double z = (xf[e] - double(rmh[ch])) * scale + beta[ch];
      er[e] = fa == FusedAct::None || z > 0 ? z : slope * z;
      ea[e] = 0x1.0p-20 * (std::fabs(xf[e] * scale) + std::fabs(rmh[ch] * scale) +
                           std::fabs(double(beta[ch])));
    }
    pt::expect_within(back(ye), er, u, ea, "eval y");
  }
}

TEST(Bf16Gpu, BatchNormEverySplitInBf16AndFp32) {
  PDNN_NEED_GPU();
  Context ctx(1, 1, Device::CUDA);
  for (const int splits : {0, 1, 2, 4, 8}) {
    {
      SCOPED_TRACE("bf16");
      expect_batchnorm_within_bounds<bf16>(ctx, splits);
    }
    {
      SCOPED_TRACE("fp32");
      expect_batchnorm_within_bounds<float>(ctx, splits);
    }
  }
}

// The graph model's merges in bf16: Concat's channel copies move bf16 elements as they are (bit
// for bit), Add sums in fp32 and rounds once: against the double sum of the same bf16 inputs, one
// fp32 rounding (2^-24) then bf16's (2^-8). y may be one of the operands, as in the model's
// gradient sums.
TEST(Bf16Gpu, MergesCopyChannelsExactlyAndAddInFp32) {
  PDNN_NEED_GPU();
  Context ctx(1, 1, Device::CUDA);
  Rng rng(17);
  const Tensor fa = pt::random_tensor(Shape{3, 5, 7, 6}, rng, -4.f, 4.f);
  const Tensor fb = pt::random_tensor(Shape{3, 2, 7, 6}, rng, -4.f, 4.f);
  const Tensor a = pt::to_bf16(fa, Device::CUDA, ctx), b = pt::to_bf16(fb, Device::CUDA, ctx);
  Tensor cat = pt::bf16_poisoned(Shape{3, 7, 7, 6}, Device::CUDA, ctx);
  ops::channel_copy(ctx, a, 0, cat, 0, 5);
  ops::channel_copy(ctx, b, 0, cat, 5, 2);
  Tensor back = pt::bf16_poisoned(Shape{3, 2, 7, 6}, Device::CUDA, ctx);
  ops::channel_copy(ctx, cat, 5, back, 0, 2);
  const Tensor ha = a.to(Device::CPU, ctx), hb = b.to(Device::CPU, ctx),
               hc = cat.to(Device::CPU, ctx), hback = back.to(Device::CPU, ctx);
  const int64_t plane = 7 * 6;
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t c = 0; c < 7; ++c)
      for (int64_t r = 0; r < plane; ++r) {
        const uint16_t want = c < 5 ? ha.data<bf16>()[(i * 5 + c) * plane + r].bits
                                    : hb.data<bf16>()[(i * 2 + c - 5) * plane + r].bits;
        ASSERT_EQ(hc.data<bf16>()[(i * 7 + c) * plane + r].bits, want)
            << "image " << i << " channel " << c << " element " << r;
      }
  for (int64_t k = 0; k < hb.numel(); ++k)
    ASSERT_EQ(hback.data<bf16>()[k].bits, hb.data<bf16>()[k].bits) << "element " << k;

  const Tensor fc = pt::random_tensor(fa.shape(), rng, -4.f, 4.f);
  const Tensor c = pt::to_bf16(fc, Device::CUDA, ctx);
  const Tensor ra = pt::bf16_rounded(fa), rc = pt::bf16_rounded(fc);
  std::vector<double> ref(static_cast<size_t>(fa.numel()));
  for (int64_t k = 0; k < fa.numel(); ++k) ref[size_t(k)] = double(ra[k]) + double(rc[k]);
  Tensor y = pt::bf16_poisoned(fa.shape(), Device::CUDA, ctx);
  ops::add(ctx, a, c, y);
  pt::expect_within(pt::widened(y, ctx), ref, kBf16U + 2 * kFp32U, {}, "add");
  Tensor acc = c.clone(ctx);  // y aliasing an operand: the gradient sums' case
  ops::add(ctx, acc, a, acc);
  pt::expect_within(pt::widened(acc, ctx), ref, kBf16U + 2 * kFp32U, {}, "add in place");
}

// The losses read bf16 logits / probabilities in fp32 and write bf16 gradients; probabilities,
// row losses, the per-chunk sums and the metrics stay fp32 / double. Bounds: softmax and its
// loss a few fp32 operations and expf (2^-20 relative); the gradients fp32 arithmetic (2^-20 of
// their terms) then the rounding to bf16 (2^-8); accuracy counts exact (the argmax of the same
// values, ties to the lowest index).
TEST(Bf16Gpu, LossesReadBf16InFp32AndWriteBf16Gradients) {
  PDNN_NEED_GPU();
  Context ctx(1, 1, Device::CUDA);
  const Device G = Device::CUDA;
  Rng rng(40);
  const int64_t n = 33, k = 6;
  Tensor zf = pt::bf16_rounded(pt::random_tensor(Shape{n, k}, rng, -6.f, 6.f));
  zf[7] = zf[8];  // a tie in row 1
  std::vector<int32_t> lab(n);
  for (auto& l : lab) l = static_cast<int32_t>(rng.next() % k);
  const Tensor labels = pt::labels_tensor(lab).to(G, ctx);
  const Tensor z = pt::to_bf16(zf, G, ctx);
  Tensor probs = Tensor::empty(Shape{n, k}, DType::F32, G, ctx);
  Tensor row = Tensor::empty(Shape{n}, DType::F32, G, ctx);
  ops::softmax_cross_entropy_forward(ctx, z, labels, probs, row);
  const float scale = 1.f / float(n);
  Tensor dz = pt::bf16_poisoned(Shape{n, k}, G, ctx);
  ops::softmax_cross_entropy_backward(ctx, scale, probs, labels, dz);
  Tensor acc = Tensor::zeros(Shape{3}, DType::F64).to(G, ctx);
  Tensor metric_parts = Tensor::empty(Shape{ops::metric_parts(n)}, DType::F64, G, ctx);
  ops::classifier_metrics(ctx, z, labels, row, metric_parts, acc);
  const Tensor ph = probs.to(Device::CPU, ctx), rh = row.to(Device::CPU, ctx);
  const Tensor acch = acc.to(Device::CPU, ctx);
  std::vector<double> pr(n * k), lr(n), la(n), dr(n * k), da(n * k);
  double loss_sum = 0, correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    double m = zf[i * k], sum = 0;
    int64_t best = 0;
    for (int64_t j = 1; j < k; ++j) {
      m = std::max(m, double(zf[i * k + j]));
      if (zf[i * k + j] > zf[i * k + best]) best = j;
    }
    for (int64_t j = 0; j < k; ++j) sum += std::exp(zf[i * k + j] - m);
    for (int64_t j = 0; j < k; ++j) pr[i * k + j] = std::exp(zf[i * k + j] - m) / sum;
    lr[i] = std::log(sum) - (zf[i * k + lab[i]] - m);
    la[i] = 0x1.0p-20 * (std::fabs(std::log(sum)) + std::fabs(zf[i * k + lab[i]] - m));
    loss_sum += rh[i];
    correct += best == lab[i] ? 1 : 0;
    for (int64_t j = 0; j < k; ++j) {  // from the GPU's own probabilities
      dr[i * k + j] = double(ph[i * k + j]) * scale - (lab[i] == j ? scale : 0.0);
      da[i * k + j] = 0x1.0p-20 * (std::fabs(ph[i * k + j] * scale) + scale);
    }
  }
  pt::expect_within(ph, pr, 0x1.0p-20, {}, "probs");
  pt::expect_within(rh, lr, 0.0, la, "row loss");
  pt::expect_within(pt::widened(dz, ctx), dr, kBf16U, da, "dz");
  EXPECT_EQ(acch.data<double>()[1], correct);
  EXPECT_EQ(acch.data<double>()[2], double(n));
  EXPECT_NEAR(acch.data<double>()[0], loss_sum, 1e-9 * std::fabs(loss_sum));

  // binary cross-entropy on bf16 probabilities and on bf16 logits (targets fp32)
  const int64_t m = 5000;  // two chunks
  Tensor pf = pt::random_tensor(Shape{m}, rng, 0.01f, 0.99f);
  pf[0] = 1.f;  // log(0) clamped at -100
  pf = pt::bf16_rounded(pf);
  Tensor tf(Shape{m});
  for (int64_t i = 0; i < m; ++i) tf[i] = i % 3 == 0 ? 1.f : i % 3 == 1 ? 0.f : 0.3f;
  const Tensor lf = pt::bf16_rounded(pt::random_tensor(Shape{m}, rng, -8.f, 8.f));
  const Tensor t = tf.to(G, ctx), p16 = pt::to_bf16(pf, G, ctx), l16 = pt::to_bf16(lf, G, ctx);
  Tensor parts = Tensor::empty(Shape{loss_chunks(m)}, DType::F32, G, ctx);
  Tensor parts_l = parts.clone(ctx);
  ops::binary_cross_entropy_forward(ctx, p16, t, parts);
  ops::bce_with_logits_forward(ctx, l16, t, parts_l);
  Tensor dp = pt::bf16_poisoned(Shape{m}, G, ctx), dl = pt::bf16_poisoned(Shape{m}, G, ctx);
  ops::binary_cross_entropy_backward(ctx, 0.5f, p16, t, dp);
  ops::bce_with_logits_backward(ctx, 0.5f, l16, t, dl);
  std::vector<double> cr(loss_chunks(m), 0.0), clr(loss_chunks(m), 0.0), dpr(m), dlr(m);
  for (int64_t i = 0; i < m; ++i) {
    const double pi = pf[i], zi = lf[i];
    cr[i / kLossChunk] +=
        -(tf[i] * std::max(std::log(pi), -100.0) + (1 - tf[i]) * std::max(std::log1p(-pi), -100.0));
    clr[i / kLossChunk] += std::max(zi, 0.0) - zi * tf[i] + std::log1p(std::exp(-std::fabs(zi)));
    dpr[i] = 0.5 * (pi - tf[i]) / std::max((1 - pi) * pi, 1e-12);
    dlr[i] = 0.5 * (1.0 / (1.0 + std::exp(-zi)) - tf[i]);
  }
  pt::expect_within(parts.to(Device::CPU, ctx), cr, 1e-6, {}, "bce parts");
  pt::expect_within(parts_l.to(Device::CPU, ctx), clr, 1e-6, {}, "bce-with-logits parts");
  // dp: p - t, (1 - p) p, the quotient: 4 fp32 roundings of terms of p's size, then bf16;
  // dl: expf and a quotient, then the difference with t: 2^-20 of |s| + |t|.
  std::vector<double> dpa(m), dla(m);
  for (int64_t i = 0; i < m; ++i) {
    dpa[i] = 0x1.0p-20 * std::fabs(dpr[i]);
    dla[i] = 0x1.0p-20 * 0.5 * (1.0 + std::fabs(tf[i]));
  }
  pt::expect_within(pt::widened(dp, ctx), dpr, kBf16U, dpa, "bce dp");
  pt::expect_within(pt::widened(dl, ctx), dlr, kBf16U, dla, "bce-with-logits dz");
}

}  // namespace
}  // namespace pdnn
