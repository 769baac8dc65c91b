// Max pooling: CPU kernels and dispatch (see maxpool2d.h).
#include "ops/maxpool2d.h"

#include <algorithm>
#include <cstring>
#include <limits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "core/parallel.h"
#include "core/rng.h"
#include "ops/basic.h"
#include "ops/dispatch.h"
#include "ops/kit/act.h"
#include "ops/kit/argmax.h"

namespace pdnn {

namespace cpu {

namespace {

// The common 2x2 stride-2 window (every pool in W2..W4): the four candidates of an output are
// two adjacent pairs of two rows, compared in row-major order; the offsets are 0, 1 (top row),
// 2, 3 (bottom row).
#if defined(__AVX512F__)
// AVX-512 version of the scalar row loop below: 16 outputs per step from 32 inputs of each row,
// de-interleaved into the four window candidates, compared with mask registers. The scalar
// loop is written with selects, but GCC 12 emits compare-and-branch code for it, which
// mispredicts on real activations. Measured (1 thread, this machine): W2 b128's pool forward
// in the app 0.60-0.69 -> 0.21-0.42 ms, whole step 3.46 -> 3.13 ms (median of 4 alternating
// runs); W3's pool (19 MB in) is bound by this VM's ~8 GB/s memory bandwidth either way.
// A row has only 12-14 outputs in W2/W3, so its tail is the common case: masked stores there
// are slow on this CPU, so when spill_ok the full 16 lanes are stored (and 32 inputs read):
// the lanes past the row's end land on the next output row of the same plane, written after
// this one. spill_ok is false near a plane's end, where planes of other threads begin.
// ar may be null (nothing recorded).
void maxpool2x2_row(const float* __restrict x0, const float* __restrict x1, int32_t ow,
                    float* __restrict yr, uint8_t* __restrict ar, bool spill_ok) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  for (int32_t ox = 0; ox < ow; ox += 16) {
    const int32_t n = std::min<int32_t>(16, ow - ox);  // outputs this step; 2n inputs per row
    // Reading past the row pair's end is harmless inside the plane (those lanes are dropped);
    // unmasked loads there, masked ones only where the plane ends.
    const __mmask16 lo = n >= 8 || spill_ok ? 0xFFFF : static_cast<__mmask16>((1u << (2 * n)) - 1);
    const __mmask16 hi = spill_ok ? 0xFFFF
                         : n > 8  ? static_cast<__mmask16>((1u << (2 * n - 16)) - 1)
                                  : 0;
    const __m512 p0 = _mm512_maskz_loadu_ps(lo, x0 + 2 * ox), q0 = _mm512_maskz_loadu_ps(hi, x0 + 2 * ox + 16);
    const __m512 p1 = _mm512_maskz_loadu_ps(lo, x1 + 2 * ox), q1 = _mm512_maskz_loadu_ps(hi, x1 + 2 * ox + 16);
    const __m512 a = _mm512_permutex2var_ps(p0, even, q0), b = _mm512_permutex2var_ps(p0, odd, q0);
    const __m512 c = _mm512_permutex2var_ps(p1, even, q1), d = _mm512_permutex2var_ps(p1, odd, q1);
    __m512 best = a;
    __m512i bi = _mm512_setzero_si512();
    // kit::argmax_takes in mask registers: row-major order, strict '>', a NaN candidate wins.
    __mmask16 t = _mm512_cmp_ps_mask(b, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q);
    best = _mm512_mask_blend_ps(t, best, b);
    bi = _mm512_mask_blend_epi32(t, bi, _mm512_set1_epi32(1));
    t = _mm512_cmp_ps_mask(c, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(c, c, _CMP_UNORD_Q);
    best = _mm512_mask_blend_ps(t, best, c);
    bi = _mm512_mask_blend_epi32(t, bi, _mm512_set1_epi32(2));
    t = _mm512_cmp_ps_mask(d, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(d, d, _CMP_UNORD_Q);
    best = _mm512_mask_blend_ps(t, best, d);
    bi = _mm512_mask_blend_epi32(t, bi, _mm512_set1_epi32(3));
    if (n == 16 || spill_ok) {
      _mm512_storeu_ps(yr + ox, best);
      if (ar) _mm512_mask_cvtepi32_storeu_epi8(ar + ox, 0xFFFF, bi);
    } else {
      const __mmask16 out = static_cast<__mmask16>((1u << n) - 1);
      _mm512_mask_storeu_ps(yr + ox, out, best);
      if (ar) _mm512_mask_cvtepi32_storeu_epi8(ar + ox, out, bi);
    }
  }
}
#endif

void maxpool2x2_plane(const Pool2d& g, const float* __restrict xp, float* __restrict yp,
                      uint8_t* __restrict ap) {
  const int32_t w = static_cast<int32_t>(g.w), ow = static_cast<int32_t>(g.ow);
#if defined(__AVX512F__)
  for (int32_t oy = 0; oy < static_cast<int32_t>(g.oh); ++oy) {
    const int32_t r0 = 2 * oy * w;
    // Spilling past the row end stays inside this plane only if 16 lanes fit before its end.
    const bool spill_ok = (oy + 1) * ow + 16 <= static_cast<int32_t>(g.oh) * ow;
    maxpool2x2_row(xp + r0, xp + r0 + w, ow, yp + oy * ow, ap ? ap + oy * ow : nullptr, spill_ok);
  }
  return;
#endif
  for (int32_t oy = 0; oy < static_cast<int32_t>(g.oh); ++oy) {
    const int32_t r0 = 2 * oy * w, r1 = r0 + w;
    const float* __restrict x0 = xp + r0;
    const float* __restrict x1 = xp + r1;
    float* __restrict yr = yp + oy * ow;
    for (int32_t ox = 0; ox < ow; ++ox) {
      const float a = x0[2 * ox], b = x0[2 * ox + 1], c = x1[2 * ox], d = x1[2 * ox + 1];
      float best = a;
      uint8_t bi = 0;
      // The argmax rule (ops/kit/argmax.h) as selects: no branch.
      bool t = kit::argmax_takes(b, best);
      best = t ? b : best;
      bi = t ? 1 : bi;
      t = kit::argmax_takes(c, best);
      best = t ? c : best;
      bi = t ? 2 : bi;
      t = kit::argmax_takes(d, best);
      best = t ? d : best;
      bi = t ? 3 : bi;
      yr[ox] = best;
      if (ap) ap[oy * ow + ox] = bi;
    }
  }
}

// One plane of any geometry.
void maxpool_plane(const Pool2d& g, const float* __restrict xp, float* __restrict yp,
                   uint8_t* __restrict ap) {
  if (g.k == 2 && g.s == 2) {
    maxpool2x2_plane(g, xp, yp, ap);
    return;
  }
  const int32_t s = static_cast<int32_t>(g.s);
  for (int64_t oy = 0; oy < g.oh; ++oy) {
    // One output row at a time, window offsets (ky, kx) outermost and outputs innermost: the
    // comparisons become branch-free selects over a row (a compare-and-branch per element
    // mispredicts half the time on real data and cost ~4 ns per input). Each output still
    // sees its window in row-major order, so the first maximum wins.
    float* __restrict yr = yp + oy * g.ow;
    uint8_t* __restrict ar = ap ? ap + oy * g.ow : nullptr;
    uint8_t off[256];  // this row's offsets (kept only when ap is given)
    for (int64_t ox = 0; ox < g.ow; ++ox) yr[ox] = -std::numeric_limits<float>::infinity();
    for (int64_t ox0 = 0; ox0 < g.ow; ox0 += 256) {
      const int32_t n = static_cast<int32_t>(std::min<int64_t>(256, g.ow - ox0));
      for (int32_t j = 0; j < n; ++j) off[j] = 0;
      for (int64_t ky = 0; ky < g.k; ++ky) {
        const int64_t row = (oy * g.s + ky) * g.w;
        for (int64_t kx = 0; kx < g.k; ++kx) {
          const float* __restrict xr = xp + row + kx + ox0 * s;
          float* __restrict yo = yr + ox0;
          const uint8_t here = static_cast<uint8_t>(ky * g.k + kx);
          for (int32_t j = 0; j < n; ++j) {
            const float v = xr[j * s];
            const bool take = kit::argmax_takes(v, yo[j]);  // the argmax rule, as a select
            yo[j] = take ? v : yo[j];
            off[j] = take ? here : off[j];
          }
        }
      }
      if (ar) std::memcpy(ar + ox0, off, static_cast<size_t>(n));
    }
  }
}

// The offset of the maximum of the window at (oy, ox) of plane xp, by the forward's rule.
inline int window_argmax(const Pool2d& g, const float* __restrict xp, int64_t oy, int64_t ox) {
  return kit::window_max(xp, g.w, g.k, g.s, oy, ox).at;
}

}  // namespace

void maxpool2d_forward(const Pool2d& g, const float* x, float* y, uint8_t* argmax, CpuExec e) {
  const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
  // Planes are independent: parallel over N*C, each plane's outputs in order (deterministic).
  parallel_for(e, g.planes, PDNN_PAR(g.planes * in_plane), [=](int64_t p) {
    maxpool_plane(g, x + p * in_plane, y + p * out_plane, argmax ? argmax + p * out_plane : nullptr);
  });
}

void maxpool2d_dropout_forward(const Pool2d& g, float p, uint64_t seed, const int64_t* base,
                               uint64_t skip, const float* x, float* y, uint8_t* argmax,
                               float* mask, CpuExec e) {
  const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
  const float scale = 1.f / (1.f - p);
  const double pd = p;
  const uint64_t b = static_cast<uint64_t>(*base) + skip;
  parallel_for(e, g.planes, PDNN_PAR(g.planes * in_plane), [=](int64_t q) {
    float* __restrict yp = y + q * out_plane;
    float* __restrict mp = mask + q * out_plane;
    maxpool_plane(g, x + q * in_plane, yp, argmax ? argmax + q * out_plane : nullptr);
    const uint64_t first = b + static_cast<uint64_t>(q * out_plane) + 1;
    for (int64_t o = 0; o < out_plane; ++o) {
      const bool keep = Rng::to_unit(Rng::at(seed, first + static_cast<uint64_t>(o))) >= pd;
      mp[o] = keep ? scale : 0.f;
      yp[o] *= mp[o];
    }
  });
}

namespace {
// kMask: windows do not overlap (checked by the op), so dx = dy * mask rounds once, as the
// two layers' passes. argmax null: each maximum found again in x.
template <bool kMask>
void maxpool_backward_planes(const Pool2d& g, const float* x, const float* dy,
                             const uint8_t* argmax, const float* mask, const float* y, Act act,
                             float* dx, CpuExec e) {
  const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
  // Where offset j of a window lands relative to the window's corner.
  int64_t rel[kMaxPoolKernelMax * kMaxPoolKernelMax];
  for (int64_t j = 0; j < g.k * g.k; ++j) rel[j] = (j / g.k) * g.w + j % g.k;
  parallel_for(e, g.planes, PDNN_PAR(g.planes * in_plane), [=, &rel](int64_t p) {
    float* dxp = dx + p * in_plane;
    const float* dyp = dy + p * out_plane;
    const uint8_t* ap = argmax ? argmax + p * out_plane : nullptr;
    const float* xp = x ? x + p * in_plane : nullptr;
    const float* mp = kMask ? mask + p * out_plane : nullptr;
    std::memset(dxp, 0, static_cast<size_t>(in_plane) * sizeof(float));
    const float* yp = y ? y + p * out_plane : nullptr;
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        const int64_t o = oy * g.ow + ox;
        const int off = ap ? ap[o] : window_argmax(g, xp, oy, ox);
        float& d = dxp[oy * g.s * g.w + ox * g.s + rel[off]];
        const float v = kMask ? dyp[o] * mp[o] : dyp[o];
        if (yp)  // through the activation (windows do not overlap: checked by the op)
          d = kit::act_grad(yp[o], v, act);
        else
          d += v;
      }
  });
}

}  // namespace

void maxpool2d_backward(const Pool2d& g, const float* x, const float* dy, const uint8_t* argmax,
                        const float* y, Act act, float* dx, CpuExec e) {
  maxpool_backward_planes<false>(g, x, dy, argmax, nullptr,
                                 act.kind == FusedAct::None ? nullptr : y, act, dx, e);
}

void maxpool2d_dropout_backward(const Pool2d& g, const float* x, const float* dy,
                                const uint8_t* argmax, const float* mask, const float* y, Act act,
                                float* dx, CpuExec e) {
  maxpool_backward_planes<true>(g, x, dy, argmax, mask, act.kind == FusedAct::None ? nullptr : y,
                                act, dx, e);
}

}  // namespace cpu

namespace ops {

namespace {
// The shapes and types of a pooling call's tensors against its geometry.
void check_pool(const char* op, const Pool2d& g, const Tensor* x, const Tensor& y,
                const Tensor* argmax, const Tensor* mask) {
  PDNN_CHECK(g.k >= 1 && g.k <= kMaxPoolKernelMax,
             "%s: kernel %lld (the one-byte argmax holds windows up to %lldx%lld)", op,
             static_cast<long long>(g.k), static_cast<long long>(kMaxPoolKernelMax),
             static_cast<long long>(kMaxPoolKernelMax));
  PDNN_CHECK((!x || x->numel() == g.planes * g.h * g.w) && y.numel() == g.planes * g.oh * g.ow &&
                 (!argmax || (argmax->numel() == y.numel() && argmax->dtype() == DType::U8)) &&
                 (!mask || (mask->numel() == y.numel() && mask->dtype() == DType::F32)),
             "%s: x %s, y %s, argmax %s %s, mask %s do not fit the geometry", op,
             x ? x->shape().str().c_str() : "-", y.shape().str().c_str(),
             argmax ? argmax->shape().str().c_str() : "-",
             argmax ? dtype_name(argmax->dtype()) : "", mask ? mask->shape().str().c_str() : "-");
}
template <class E = float>
const E* ptr(const Tensor* t) {
  return t ? t->data<E>() : nullptr;
}
uint8_t* bytes(Tensor* t) { return t ? t->data<uint8_t>() : nullptr; }
const uint8_t* bytes(const Tensor* t) { return t ? t->data<uint8_t>() : nullptr; }
}  // namespace

void maxpool2d_forward(Context& ctx, const Pool2d& g, const Tensor& x, Tensor& y,
                       Tensor* argmax) {
  const Device d = op_device("maxpool2d_forward", {&x, &y, argmax});
  check_pool("maxpool2d_forward", g, &x, y, argmax, nullptr);
  check_same_dtype("maxpool2d_forward", {&x, &y});
  PDNN_DISPATCH_TYPED(ctx, d, x.dtype(), maxpool2d_forward, g, x.data<E>(), y.data<E>(),
                      bytes(argmax));
}

namespace {
void check_pool_act(const char* op, const Pool2d& g, const Tensor& dy, const Tensor* y, Act act) {
  if (act.kind == FusedAct::None) return;
  PDNN_CHECK(y && y->numel() == dy.numel() && g.s >= g.k,
             "%s: backward through the input's activation needs the output and windows that do "
             "not overlap (kernel %lld, stride %lld)", op, static_cast<long long>(g.k),
             static_cast<long long>(g.s));
}
// y when the activation is read off it (any type), else null.
const Tensor* act_tensor(const Tensor* y, Act act) {
  return act.kind == FusedAct::None ? nullptr : y;
}
template <class E = float>
const E* act_y(const Tensor* y, Act act) {
  return act.kind == FusedAct::None || !y ? nullptr : y->data<E>();
}
}  // namespace

void maxpool2d_backward(Context& ctx, const Pool2d& g, const Tensor* x, const Tensor& dy,
                        const Tensor* argmax, Tensor& dx, const Tensor* y, Act act) {
  check_pool_act("maxpool2d_backward", g, dy, y, act);
  const Device d =
      op_device("maxpool2d_backward", {x, &dy, argmax, &dx, act_tensor(y, act)});
  PDNN_CHECK(argmax || x, "maxpool2d_backward: neither the argmax nor x to find it again in");
  check_pool("maxpool2d_backward", g, &dx, dy, argmax, nullptr);
  PDNN_CHECK(!x || x->numel() == dx.numel(), "maxpool2d_backward: x %s, dx %s",
             x->shape().str().c_str(), dx.shape().str().c_str());
  check_same_dtype("maxpool2d_backward", {&dy, &dx, x, act_tensor(y, act)});
  PDNN_DISPATCH_TYPED(ctx, d, dy.dtype(), maxpool2d_backward, g,
                      argmax ? nullptr : ptr<E>(x), dy.data<E>(), bytes(argmax),
                      act_y<E>(y, act), act, dx.data<E>());
}

void maxpool2d_dropout_forward(Context& ctx, const Pool2d& g, float p, const Tensor& x, Tensor& y,
                               Tensor* argmax, Tensor& mask) {
  const Device d = op_device("maxpool2d_dropout_forward", {&x, &y, argmax, &mask});
  check_pool("maxpool2d_dropout_forward", g, &x, y, argmax, &mask);
  PDNN_CHECK(p >= 0.f && p < 1.f, "maxpool2d_dropout_forward: p = %g must be in [0, 1)", p);
  PDNN_CHECK(g.s >= g.k, "maxpool2d_dropout_forward: overlapping windows (kernel %lld, stride %lld)",
             static_cast<long long>(g.k), static_cast<long long>(g.s));
  check_same_dtype("maxpool2d_dropout_forward", {&x, &y});
  if (x.dtype() == DType::BF16 && d == Device::CPU) fail_bf16_on_cpu("maxpool2d_dropout_forward");
  const int64_t n = y.numel();
  const uint64_t seed = ctx.rng().seed();
  const Rng::RowDraw draw = ctx.rng().plan_rows(n, y.rank() > 0 ? y.shape(0) : 1);
  if (d == Device::CPU) {
    const int64_t base = static_cast<int64_t>(ctx.rng().reserve(draw.advance));
    cpu::maxpool2d_dropout_forward(g, p, seed, &base, draw.skip, x.data(), y.data(),
                                   bytes(argmax), mask.data(), ctx.cpu_exec());
    return;
  }
  Tensor& counter = ctx.device_rng_counter();
  PDNN_DISPATCH_TYPED(ctx, d, x.dtype(), maxpool2d_dropout_forward, g, p, seed,
                      counter.data<int64_t>(), draw.skip, x.data<E>(), y.data<E>(),
                      bytes(argmax), mask.data());
  counter_add(ctx, counter, static_cast<int64_t>(draw.advance));
  ctx.mirror_rng_advance(draw.advance);
}

void maxpool2d_dropout_backward(Context& ctx, const Pool2d& g, const Tensor* x, const Tensor& dy,
                                const Tensor* argmax, const Tensor& mask, Tensor& dx,
                                const Tensor* y, Act act) {
  check_pool_act("maxpool2d_dropout_backward", g, dy, y, act);
  const Device d = op_device("maxpool2d_dropout_backward",
                             {x, &dy, argmax, &mask, &dx, act_tensor(y, act)});
  PDNN_CHECK(argmax || x, "maxpool2d_dropout_backward: neither the argmax nor x to find it again in");
  check_pool("maxpool2d_dropout_backward", g, &dx, dy, argmax, &mask);
  PDNN_CHECK(!x || x->numel() == dx.numel(), "maxpool2d_dropout_backward: x %s, dx %s",
             x->shape().str().c_str(), dx.shape().str().c_str());
  PDNN_CHECK(g.s >= g.k, "maxpool2d_dropout_backward: overlapping windows (kernel %lld, stride %lld)",
             static_cast<long long>(g.k), static_cast<long long>(g.s));
  check_same_dtype("maxpool2d_dropout_backward", {&dy, &dx, x, act_tensor(y, act)});
  PDNN_DISPATCH_TYPED(ctx, d, dy.dtype(), maxpool2d_dropout_backward, g,
                      argmax ? nullptr : ptr<E>(x), dy.data<E>(), bytes(argmax), mask.data(),
                      act_y<E>(y, act), act, dx.data<E>());
}

}  // namespace ops
}  // namespace pdnn
