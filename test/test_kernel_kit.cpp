// The kernel toolkit (ops/kit/): the rounding twins against an independent definition of their
// rounding (CPU), the argmax rule on ties and NaNs against the CPU's max pooling (CPU), and on a
// GPU the device side of each piece against the host: rounding bit for bit, the TF32 and BF16
// mma wrappers with ldmatrix through a one-warp tile GEMM within bounds derived from the unit
// roundoff, ldmatrix.x1, the argmax rule, and the split sum's fixed order (bit for bit its host
// twin, each group count). The GPU tests skip, saying why, without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/cuda_state.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "ops/kit/act.h"
#include "ops/kit/argmax.h"
#include "ops/kit/round.h"
#include "ops/kit/split_k.h"
#include "ops/maxpool2d.h"
#if PDNN_HAVE_CUDA
#include "kernel_kit_probe.h"
#endif

namespace pdnn {
namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
uint32_t to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// The rounding of a finite float to `keep` mantissa bits by its definition: the two neighbours
// that keep `keep` bits (toward zero, and one unit further; past the largest finite value that
// unit is 2^128, where the result is an infinity), the nearer in exact (double) arithmetic,
// ties by `away` (TF32: away from zero) or to the even neighbour (BF16). Returns float bits.
uint32_t round_by_definition(float f, int keep, bool away) {
  const int drop = 23 - keep;
  const uint32_t u = to_bits(f), sign = u & 0x80000000u, mag = u & 0x7fffffffu;
  const uint32_t lo = mag & ~((1u << drop) - 1u), hi = lo + (1u << drop);
  const double x = std::fabs(static_cast<double>(f));
  const double vlo = static_cast<double>(from_bits(lo));
  const double vhi = hi >= 0x7f800000u ? std::ldexp(1.0, 128) : static_cast<double>(from_bits(hi));
  const double dlo = x - vlo, dhi = vhi - x;  // exact: both fit a double's mantissa
  bool up = dhi < dlo;
  if (dhi == dlo) up = away ? true : ((lo >> drop) & 1u) != 0;
  const uint32_t r = up ? (hi >= 0x7f800000u ? 0x7f800000u : hi) : lo;
  return sign | r;
}

// Float bit patterns that cover every class: all 2^16 high halves (every sign, exponent and top
// mantissa bits: zeros, subnormals, normals, infinities, NaNs) with low halves at and around the
// TF32 (bit 12) and BF16 (bit 15) rounding points, plus random patterns.
std::vector<uint32_t> rounding_patterns() {
  const uint32_t lows[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x2000, 0x3000, 0x7fff,
                           0x8000, 0x8001, 0x9000, 0xefff, 0xf000, 0xffff};
  std::vector<uint32_t> v;
  for (uint32_t hi = 0; hi < 0x10000u; ++hi)
    for (uint32_t lo : lows) v.push_back(hi << 16 | lo);
  Rng rng(20261127);
  for (int i = 0; i < 100000; ++i) v.push_back(static_cast<uint32_t>(rng.next()));
  return v;
}

bool is_nan_bits(uint32_t u) { return (u & 0x7fffffffu) > 0x7f800000u; }

TEST(KernelKit, RoundingTwinsFollowTheirDefinition) {
  for (uint32_t u : rounding_patterns()) {
    const float f = from_bits(u);
    if (is_nan_bits(u)) {
      EXPECT_EQ(kit::bf16_bits(f), 0x7fff) << std::hex << u;
      // TF32 keeps the high 19 bits of a NaN (cvt.rna's arithmetic; see round.h)
      EXPECT_EQ(kit::tf32_bits(f), u & 0xffffe000u) << std::hex << u;
      continue;
    }
    if ((u & 0x7fffffffu) == 0x7f800000u) {  // infinities stay
      EXPECT_EQ(kit::tf32_bits(f), u);
      EXPECT_EQ(static_cast<uint32_t>(kit::bf16_bits(f)) << 16, u);
      continue;
    }
    ASSERT_EQ(kit::tf32_bits(f), round_by_definition(f, 10, true)) << std::hex << u;
    ASSERT_EQ(static_cast<uint32_t>(kit::bf16_bits(f)) << 16, round_by_definition(f, 7, false))
        << std::hex << u;
    ASSERT_EQ(to_bits(kit::round_bf16(f)), static_cast<uint32_t>(kit::bf16_bits(f)) << 16);
    ASSERT_EQ(to_bits(kit::round_tf32(f)), kit::tf32_bits(f));
  }
  // The tie rules by example: 1 + 2^-11 is half a TF32 unit above 1 (away: 1 + 2^-10); 1 + 2^-8
  // is half a BF16 unit above 1 (even: 1), 1 + 3 2^-8 half a unit above 1 + 2^-7 (even: 1 + 2^-6).
  EXPECT_EQ(kit::round_tf32(1.f + 0x1.0p-11f), 1.f + 0x1.0p-10f);
  EXPECT_EQ(kit::round_tf32(-1.f - 0x1.0p-11f), -1.f - 0x1.0p-10f);
  EXPECT_EQ(kit::round_bf16(1.f + 0x1.0p-8f), 1.f);
  EXPECT_EQ(kit::round_bf16(1.f + 3 * 0x1.0p-8f), 1.f + 0x1.0p-6f);
  EXPECT_TRUE(std::isinf(kit::round_bf16(std::numeric_limits<float>::max())));
  EXPECT_TRUE(std::isinf(kit::round_tf32(std::numeric_limits<float>::max())));
  // bf16x2: the first operand in the low half (the lower k of an mma fragment register)
  EXPECT_EQ(kit::bf16x2_bits(1.f, -2.f), 0x3f80u | 0xc000u << 16);
}

// One rounding's relative error is at most the unit roundoff, 2^-11 (TF32) and 2^-8 (BF16),
// over the normal range: the bound the GPU tests below are derived from.
TEST(KernelKit, RoundingWithinUnitRoundoff) {
  Rng rng(7);
  for (int i = 0; i < 200000; ++i) {
    const float f = static_cast<float>(std::ldexp(2.0 * Rng::to_unit(rng.next()) - 1.0,
                                                  static_cast<int>(rng.next() % 200) - 100));
    if (f == 0.f) continue;
    const double a = std::fabs(static_cast<double>(f));
    ASSERT_LE(std::fabs(kit::round_tf32(f) - static_cast<double>(f)), 0x1.0p-11 * a) << f;
    ASSERT_LE(std::fabs(kit::round_bf16(f) - static_cast<double>(f)), 0x1.0p-8 * a) << f;
  }
}

TEST(KernelKit, FusedActivationEpilogue) {
  const Act none{}, relu{FusedAct::ReLU, 0.f}, leaky{FusedAct::LeakyReLU, 0.2f};
  EXPECT_EQ(kit::act_apply(-3.f, none), -3.f);
  EXPECT_EQ(kit::act_apply(-3.f, relu), 0.f);
  EXPECT_EQ(kit::act_apply(-3.f, leaky), 0.2f * -3.f);
  EXPECT_EQ(kit::act_apply(2.f, leaky), 2.f);
  // the derivative read off y: 0 counts as the negative side (as PyTorch's gradient at 0)
  EXPECT_EQ(kit::act_grad(0.f, 5.f, relu), 0.f);
  EXPECT_EQ(kit::act_grad(0.f, 5.f, leaky), 0.2f * 5.f);
  EXPECT_EQ(kit::act_grad(1.f, 5.f, leaky), 5.f);
  EXPECT_EQ(kit::grad_through_act(-1.f, 5.f, none), 5.f);
}

// Windows with ties, NaNs, infinities: the rule, and the CPU's max pooling (its vectorised 2x2
// path and its general row loop apply the rule lane by lane) agree with window_max everywhere.
std::vector<float> tricky_plane(int h, int w, uint64_t seed) {
  Rng rng(seed);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> x(static_cast<size_t>(h * w));
  for (float& v : x) {
    const uint64_t r = rng.next() % 16;
    v = r == 0 ? nan : r == 1 ? -inf : r == 2 ? inf : static_cast<float>(rng.next() % 3);  // ties
  }
  return x;
}

TEST(KernelKit, ArgmaxRuleTiesAndNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  {
    const float x[4] = {1.f, 3.f, 3.f, 2.f};  // a tie: the first 3
    const kit::WindowMax m = kit::window_max<int>(x, 2, 2, 2, 0, 0);
    EXPECT_EQ(m.at, 1);
    EXPECT_EQ(m.value, 3.f);
  }
  {
    const float x[4] = {nan, 5.f, nan, 1.f};  // NaNs win; the last one
    const kit::WindowMax m = kit::window_max<int>(x, 2, 2, 2, 0, 0);
    EXPECT_EQ(m.at, 2);
    EXPECT_TRUE(std::isnan(m.value));
  }
  {
    const float x[4] = {-inf, -inf, -inf, -inf};  // nothing beats the start: offset 0
    EXPECT_EQ(kit::window_max<int>(x, 2, 2, 2, 0, 0).at, 0);
  }
  // CPU max pooling (2x2/2: the vectorised path; 3x3/2 and 3x3/3: the row loop) against the rule
  for (const int64_t k : {2, 3})
    for (const int64_t s : {int64_t{2}, k}) {
      const int64_t h = 13, w = 37, oh = (h - k) / s + 1, ow = (w - k) / s + 1;
      const std::vector<float> x = tricky_plane(static_cast<int>(h), static_cast<int>(w), 11 + k + s);
      std::vector<float> y(static_cast<size_t>(oh * ow));
      std::vector<uint8_t> am(y.size());
      cpu::maxpool2d_forward(Pool2d{1, h, w, oh, ow, k, s}, x.data(), y.data(), am.data(), CpuExec{1});
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          const kit::WindowMax m = kit::window_max<int64_t>(x.data(), w, k, s, oy, ox);
          const size_t o = static_cast<size_t>(oy * ow + ox);
          ASSERT_EQ(am[o], m.at) << "k" << k << " s" << s << " at " << oy << "," << ox;
          ASSERT_EQ(to_bits(y[o]), to_bits(m.value));
        }
    }
}

#define PDNN_NEED_GPU()                                             \
  do {                                                              \
    std::string why;                                                \
    if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why; \
  } while (0)

// (in a build without CUDA the GPU tests below are listed and skip, as on a machine without one)
#if PDNN_HAVE_CUDA

Tensor on_gpu(const std::vector<float>& v, Context& ctx) {
  Tensor t(Shape{static_cast<int64_t>(v.size())});
  std::memcpy(t.data(), v.data(), v.size() * sizeof(float));
  return t.to(Device::CUDA, ctx);
}
Tensor on_gpu_u32(const std::vector<uint32_t>& v, Context& ctx) {
  Tensor t(Shape{static_cast<int64_t>(v.size())}, DType::I32);
  std::memcpy(t.data<int32_t>(), v.data(), v.size() * sizeof(uint32_t));
  return t.to(Device::CUDA, ctx);
}
std::vector<uint32_t> u32_of(const Tensor& d, Context& ctx) {
  const Tensor h = d.to(Device::CPU, ctx);
  std::vector<uint32_t> v(static_cast<size_t>(h.numel()));
  std::memcpy(v.data(), h.data<int32_t>(), v.size() * sizeof(uint32_t));
  return v;
}
std::vector<float> f32_of(const Tensor& d, Context& ctx) {
  const Tensor h = d.to(Device::CPU, ctx);
  return std::vector<float>(h.data(), h.data() + h.numel());
}
uint32_t* u32p(Tensor& t) { return reinterpret_cast<uint32_t*>(t.data<int32_t>()); }

#endif  // PDNN_HAVE_CUDA

// The device's cvt instructions and the host twins, bit for bit on every pattern; NaNs as NaNs
// (the device's NaN payload is not specified: round.h).
TEST(KernelKitGpu, RoundingBitExactWithTheHost) {
  PDNN_NEED_GPU();
#if PDNN_HAVE_CUDA
  Context ctx(1, 0, Device::CUDA);
  const std::vector<uint32_t> pat = rounding_patterns();
  std::vector<float> x(pat.size());
  for (size_t i = 0; i < pat.size(); ++i) x[i] = from_bits(pat[i]);
  const int n = static_cast<int>(x.size());
  Tensor xd = on_gpu(x, ctx);
  Tensor t = Tensor::empty(Shape{n}, DType::I32, Device::CUDA, ctx);
  Tensor b = Tensor::empty(Shape{n}, DType::I32, Device::CUDA, ctx);
  Tensor b2 = Tensor::empty(Shape{n / 2}, DType::I32, Device::CUDA, ctx);
  kit_probe::tf32_bits(n, xd.data(), u32p(t), ctx.cuda_exec());
  kit_probe::bf16_bits(n, xd.data(), u32p(b), ctx.cuda_exec());
  kit_probe::bf16x2_bits(n, xd.data(), u32p(b2), ctx.cuda_exec());
  const std::vector<uint32_t> tv = u32_of(t, ctx), bv = u32_of(b, ctx), b2v = u32_of(b2, ctx);
  int64_t bad = 0;
  for (size_t i = 0; i < x.size() && bad < 10; ++i) {
    const uint32_t ht = kit::tf32_bits(x[i]), hb = kit::bf16_bits(x[i]);
    const bool nan = std::isnan(x[i]);
    // A NaN whose payload lies only in the low 13 bits: the hardware's answer is not pinned.
    const bool low_payload_nan = nan && (pat[i] & 0x007fe000u) == 0;
    const bool tf32_ok = nan ? low_payload_nan || is_nan_bits(tv[i]) : tv[i] == ht;
    const bool bf16_ok = nan ? is_nan_bits(bv[i] << 16) : bv[i] == hb;
    if (!tf32_ok || !bf16_ok) {
      ++bad;
      ADD_FAILURE() << std::hex << "x " << pat[i] << ": tf32 device " << tv[i] << " host " << ht
                    << ", bf16 device " << bv[i] << " host " << hb;
    }
    if (i % 2 == 0 && i + 1 < x.size() && !nan && !std::isnan(x[i + 1]))
      EXPECT_EQ(b2v[i / 2], kit::bf16x2_bits(x[i], x[i + 1])) << std::hex << pat[i];
  }
#endif
}

#if PDNN_HAVE_CUDA
// c = a b (16 x 8, depth K) against double references:
//   - of the rounded operands (the host twins): the mma's fp32 accumulation of K exact products
//     (a TF32 or BF16 product fits a float's mantissa) errs by at most K 2^-23 sum |a~||b~|
//     (2^-23: allowing truncation instead of round-to-nearest in the adds) - tight enough that
//     any fragment in the wrong place (an O(1) change) fails;
//   - of the operands as given: (2u + u^2) sum |a||b| more, u the unit roundoff (2^-11, 2^-8).
void expect_tile_gemm(const char* what, int K, double u, const std::vector<float>& a,
                      const std::vector<float>& b, const std::vector<float>& c,
                      float (*round)(float), bool kmajor) {
  auto A = [&](int m, int k) { return a[kmajor ? k * 16 + m : m * K + k]; };
  auto B = [&](int k, int n) { return b[kmajor ? k * 8 + n : n * K + k]; };
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 8; ++n) {
      double exact = 0, rounded = 0, mag = 0, mag_r = 0;
      for (int k = 0; k < K; ++k) {
        exact += static_cast<double>(A(m, k)) * B(k, n);
        rounded += static_cast<double>(round(A(m, k))) * round(B(k, n));
        mag += std::fabs(static_cast<double>(A(m, k)) * B(k, n));
        mag_r += std::fabs(static_cast<double>(round(A(m, k))) * round(B(k, n)));
      }
      const double acc = K * 0x1.0p-23 * mag_r;
      const double got = c[static_cast<size_t>(m * 8 + n)];
      EXPECT_LE(std::fabs(got - rounded), acc) << what << " (" << m << "," << n << ")";
      EXPECT_LE(std::fabs(got - exact), (2 * u + u * u) * mag + acc) << what << " (" << m << "," << n << ")";
    }
}

std::vector<float> uniform(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(2.0 * Rng::to_unit(rng.next()) - 1.0);
  return v;
}
#endif  // PDNN_HAVE_CUDA

TEST(KernelKitGpu, TileGemmTf32WithinUnitRoundoff) {
  PDNN_NEED_GPU();
#if PDNN_HAVE_CUDA
  Context ctx(1, 0, Device::CUDA);
  for (const int K : {8, 32, 64}) {
    const std::vector<float> a = uniform(16 * K, 100 + K), bt = uniform(8 * K, 200 + K);
    Tensor ad = on_gpu(a, ctx), bd = on_gpu(bt, ctx);
    Tensor cd = Tensor::empty(Shape{16 * 8}, DType::F32, Device::CUDA, ctx);
    kit_probe::tile_gemm_tf32(K, ad.data(), bd.data(), cd.data(), ctx.cuda_exec());
    expect_tile_gemm("tf32", K, 0x1.0p-11, a, bt, f32_of(cd, ctx), kit::round_tf32, false);
  }
#endif
}

TEST(KernelKitGpu, TileGemmBf16WithinUnitRoundoff) {
  PDNN_NEED_GPU();
#if PDNN_HAVE_CUDA
  Context ctx(1, 0, Device::CUDA);
  for (const bool kmajor : {false, true})
    for (const int K : {16, 32, 64}) {
      const std::vector<float> a = uniform(16 * K, 300 + K), b = uniform(8 * K, 400 + K);
      Tensor ad = on_gpu(a, ctx), bd = on_gpu(b, ctx);
      Tensor cd = Tensor::empty(Shape{16 * 8}, DType::F32, Device::CUDA, ctx);
      kit_probe::tile_gemm_bf16(K, kmajor, ad.data(), bd.data(), cd.data(), ctx.cuda_exec());
      expect_tile_gemm(kmajor ? "bf16 k-major (ldmatrix .trans)" : "bf16", K, 0x1.0p-8, a, b,
                       f32_of(cd, ctx), kit::round_bf16, kmajor);
    }
#endif
}

TEST(KernelKitGpu, LdmatrixX1Layout) {
  PDNN_NEED_GPU();
#if PDNN_HAVE_CUDA
  Context ctx(1, 0, Device::CUDA);
  std::vector<uint32_t> m(64);
  for (uint32_t i = 0; i < 64; ++i) m[i] = 0x100u + i;  // element (r, c) = 0x100 + 8r + c
  Tensor md = on_gpu_u32(m, ctx);
  for (const bool trans : {false, true}) {
    Tensor rd = Tensor::empty(Shape{32}, DType::I32, Device::CUDA, ctx);
    kit_probe::ldmatrix_x1(trans, u32p(md), u32p(rd), ctx.cuda_exec());
    const std::vector<uint32_t> r = u32_of(rd, ctx);
    for (uint32_t t = 0; t < 32; ++t) {
      const uint32_t row = t / 4, col = 2 * (t % 4);  // lane t: row t/4, elements 2(t%4), +1
      const uint32_t lo = trans ? m[col * 8 + row] : m[row * 8 + col];
      const uint32_t hi = trans ? m[(col + 1) * 8 + row] : m[row * 8 + col + 1];
      EXPECT_EQ(r[t], lo | hi << 16) << (trans ? "trans " : "") << "lane " << t;
    }
  }
#endif
}

TEST(KernelKitGpu, ArgmaxRuleAsTheCpu) {
  PDNN_NEED_GPU();
#if PDNN_HAVE_CUDA
  Context ctx(1, 0, Device::CUDA);
  for (const int k : {2, 3}) {
    const int h = 17, w = 29, s = 2, oh = (h - k) / s + 1, ow = (w - k) / s + 1;
    const std::vector<float> x = tricky_plane(h, w, 77 + k);
    Tensor xd = on_gpu(x, ctx);
    Tensor vd = Tensor::empty(Shape{oh * ow}, DType::F32, Device::CUDA, ctx);
    Tensor ad = Tensor::empty(Shape{oh * ow}, DType::I32, Device::CUDA, ctx);
    kit_probe::window_max(h, w, k, s, oh, ow, xd.data(), vd.data(), ad.data<int32_t>(),
                          ctx.cuda_exec());
    const std::vector<float> v = f32_of(vd, ctx);
    const std::vector<uint32_t> at = u32_of(ad, ctx);
    for (int oy = 0; oy < oh; ++oy)
      for (int ox = 0; ox < ow; ++ox) {
        const kit::WindowMax m = kit::window_max<int>(x.data(), w, k, s, oy, ox);
        const size_t o = static_cast<size_t>(oy * ow + ox);
        EXPECT_EQ(static_cast<int>(at[o]), m.at) << "k" << k << " at " << oy << "," << ox;
        EXPECT_EQ(std::isnan(v[o]), std::isnan(m.value));
        if (!std::isnan(m.value)) EXPECT_EQ(v[o], m.value);
      }
  }
#endif
}

// kit::sum_splits against its host twin, bit for bit, for every group count the order takes
// (1 to 32: few splits, many; lengths on both sides of 16,384) with and without the bias row,
// the partial sums' magnitudes spread over 2^-20..2^20 so that any other order of the adds
// rounds differently (checked: the plain left-to-right sum differs somewhere), and within the
// bound of a recursive sum against double.
TEST(KernelKitGpu, SplitSumIsItsHostTwinsOrderBitForBit) {
  PDNN_NEED_GPU();
#if PDNN_HAVE_CUDA
  Context ctx(1, 0, Device::CUDA);
  struct Case {
    int splits, M, N;
    bool bias;
  };
  const Case cases[] = {{1, 3, 5, true},     {2, 64, 600, false}, {5, 4, 9, true},
                        {9, 7, 11, true},    {20, 5, 9, true},    {392, 32, 27, true},
                        {523, 64, 288, true}, {64, 128, 1152, false}, {37, 130, 129, true}};
  std::vector<int> groups_seen;
  bool order_shows = false;
  Rng rng(33);
  auto value = [&] {
    const double u = Rng::to_unit(rng.next()), v = Rng::to_unit(rng.next());
    return static_cast<float>((2.0 * u - 1.0) * std::ldexp(1.0, static_cast<int>(40 * v) - 20));
  };
  for (const Case& c : cases) {
    const int64_t mn = static_cast<int64_t>(c.M) * c.N;
    groups_seen.push_back(kit::sum_split_groups(c.splits, mn));
    groups_seen.push_back(kit::sum_split_groups(c.splits, c.M));
    std::vector<float> part(static_cast<size_t>(c.splits * mn)), bpart(static_cast<size_t>(c.splits) * c.M);
    std::vector<float> dw(static_cast<size_t>(mn)), db(static_cast<size_t>(c.M));
    for (float& v : part) v = value();
    for (float& v : bpart) v = value();
    for (float& v : dw) v = value();
    for (float& v : db) v = value();
    Tensor part_d = on_gpu(part, ctx), bpart_d = on_gpu(bpart, ctx), dw_d = on_gpu(dw, ctx),
           db_d = on_gpu(db, ctx);
    kit::sum_splits(c.splits, c.M, c.N, part_d.data(), c.bias ? bpart_d.data() : nullptr,
                    dw_d.data(), c.bias ? db_d.data() : nullptr, ctx.cuda_exec(), "test");
    const std::vector<float> got_w = f32_of(dw_d, ctx), got_b = f32_of(db_d, ctx);
    std::vector<float> want_w = dw, want_b = db;
    kit::sum_splits_host(c.splits, mn, part.data(), want_w.data());
    if (c.bias) kit::sum_splits_host(c.splits, c.M, bpart.data(), want_b.data());
    const std::string what = "splits " + std::to_string(c.splits) + ", " + std::to_string(c.M) +
                             " x " + std::to_string(c.N);
    for (int64_t i = 0; i < mn; ++i) {
      ASSERT_EQ(to_bits(got_w[i]), to_bits(want_w[i])) << what << ": dw[" << i << "]";
      double exact = dw[i], mag = std::fabs(dw[i]), serial = 0.0;
      float plain = 0.f;
      for (int z = 0; z < c.splits; ++z) {
        const float p = part[static_cast<size_t>(z * mn + i)];
        exact += p;
        mag += std::fabs(p);
        plain += p;
      }
      serial = static_cast<double>(dw[i] + plain);
      if (to_bits(static_cast<float>(serial)) != to_bits(got_w[i])) order_shows = true;
      // a recursive float sum of splits + 1 terms: |error| <= (splits + 1) u sum |terms|
      ASSERT_LE(std::fabs(got_w[i] - exact), (c.splits + 1) * std::ldexp(1.0, -24) * mag)
          << what << ": dw[" << i << "]";
    }
    for (int m = 0; m < c.M; ++m)
      ASSERT_EQ(to_bits(got_b[m]), to_bits(c.bias ? want_b[m] : db[m])) << what << ": db[" << m << "]";
  }
  for (const int g : {1, 2, 4, 8, 16, 32})
    EXPECT_NE(std::find(groups_seen.begin(), groups_seen.end(), g), groups_seen.end())
        << "no case sums in " << g << " groups";
  EXPECT_TRUE(order_shows) << "no case tells the grouped order from the plain one";
#endif
}

}  // namespace
}  // namespace pdnn
