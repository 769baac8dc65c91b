// Max pooling on the GPU (see maxpool2d.h). Forward: one thread per output, the window in row-major
// order with the CPU's rule (strict '>', a NaN wins), the maximum's offset in its window kept in
// one byte (or not at all). Backward: a gather, one thread per input pixel, adding dy of the
// outputs whose window holds the pixel and whose maximum it is (the recorded offset, or the
// window's maximum found again in x by the forward's rule), in ascending output order (the
// CPU's order, so the sums are bit-identical); no atomics and no scatter. bf16 tensors (x, y,
// dy, dx; the argmax and the dropout mask as in fp32): the same kernels over bf16 elements read
// as float, the outputs rounded once (a maximum is one of the inputs: exact; with dropout, the
// product with the mask rounds).
#include <cmath>

#include "cuda/launch.h"
#include "ops/kit/act.h"
#include "ops/kit/argmax.h"
#include "ops/kit/round.h"
#include "ops/maxpool2d.h"

namespace pdnn {
namespace cuda {

namespace {

// 32-bit geometry (checked on launch): 64-bit division is a long software sequence on the GPU.
struct Pool32 {
  int planes, h, w, oh, ow, k, s;
};

// The inverted dropout applied in the pool's write (kDrop), with dropout's draw.
struct Drop {
  float p;
  uint64_t seed;
  const int64_t* base;
  uint64_t skip;  // a data-parallel rank's offset into the global batch's draw
  float* mask;
};

// The offset of the maximum of window (oy, ox) in plane xp, by the forward's rule.
template <class E>
__device__ __forceinline__ int window_argmax(const Pool32& g, const E* __restrict__ xp, int oy,
                                             int ox) {
  return kit::window_max(xp, g.w, g.k, g.s, oy, ox).at;
}

template <bool kDrop, class E>
__global__ void maxpool_f(Pool32 g, Drop drop, const E* __restrict__ x, E* __restrict__ y,
                          uint8_t* __restrict__ argmax) {
  const int p_out = g.oh * g.ow;
  const uint64_t base = kDrop ? static_cast<uint64_t>(*drop.base) + drop.skip : 0;
  const float scale = kDrop ? 1.f / (1.f - drop.p) : 1.f;
  for (int plane = blockIdx.y; plane < g.planes; plane += gridDim.y) {
    const E* xp = x + static_cast<int64_t>(plane) * g.h * g.w;
    for (int o = blockIdx.x * blockDim.x + threadIdx.x; o < p_out; o += gridDim.x * blockDim.x) {
      const int oy = o / g.ow, ox = o - oy * g.ow;
      const kit::WindowMax wm = kit::window_max(xp, g.w, g.k, g.s, oy, ox);
      float best = wm.value;
      const int bi = wm.at;
      const int64_t at = static_cast<int64_t>(plane) * p_out + o;
      if (kDrop) {
        const bool keep = rng_to_unit(rng_at(drop.seed, base + static_cast<uint64_t>(at) + 1)) >=
                          static_cast<double>(drop.p);
        const float m = keep ? scale : 0.f;
        drop.mask[at] = m;
        best *= m;
      }
      y[at] = kit::from_f32<E>(best);
      if (argmax) argmax[at] = static_cast<uint8_t>(bi);
    }
  }
}

// One thread per input pixel; kNoOverlap (stride >= kernel): at most one window holds it.
// mask: the fused dropout's (dy * mask is what reaches the pool's output; non-overlapping
// windows only), or null. argmax null: each window's maximum found again in x.
// y, act: through the activation of the layer before (ops/maxpool2d.h; kNoOverlap only).
template <bool kNoOverlap, bool kMask, class E>
__global__ void maxpool_b(Pool32 g, FastDiv div_w, FastDiv div_s, const E* __restrict__ x,
                          const E* __restrict__ dy, const uint8_t* __restrict__ argmax,
                          const float* __restrict__ mask, const E* __restrict__ y, Act act,
                          E* __restrict__ dx) {
  using kit::to_f32;
  const int p_in = g.h * g.w, p_out = g.oh * g.ow;
  for (int plane = blockIdx.y; plane < g.planes; plane += gridDim.y) {
    const E* dyp = dy + static_cast<int64_t>(plane) * p_out;
    const uint8_t* ap = argmax ? argmax + static_cast<int64_t>(plane) * p_out : nullptr;
    const E* xp = x ? x + static_cast<int64_t>(plane) * p_in : nullptr;
    const float* mp = kMask ? mask + static_cast<int64_t>(plane) * p_out : nullptr;
    E* dxp = dx + static_cast<int64_t>(plane) * p_in;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < p_in; i += gridDim.x * blockDim.x) {
      const int yy = div_w.div(i), xx = i - yy * g.w;
      float s = 0.f;
      if (kNoOverlap) {
        const int oy = div_s.div(yy), ox = div_s.div(xx);
        const int ky = yy - oy * g.s, kx = xx - ox * g.s;
        if (oy < g.oh && ox < g.ow && ky < g.k && kx < g.k) {
          const int o = oy * g.ow + ox;
          const int at = ap ? ap[o] : window_argmax(g, xp, oy, ox);
          if (at == ky * g.k + kx) {
            s = kMask ? to_f32(dyp[o]) * mp[o] : to_f32(dyp[o]);
            if (y) {
              const float yv = to_f32(y[static_cast<int64_t>(plane) * p_out + o]);
              s = kit::act_grad(yv, s, act);
            }
          }
        }
      } else {
        // Outputs oy with oy*s <= yy < oy*s + k, in ascending order (the CPU's).
        const int oy0 = yy >= g.k ? (yy - g.k) / g.s + 1 : 0, oy1 = min(g.oh - 1, yy / g.s);
        const int ox0 = xx >= g.k ? (xx - g.k) / g.s + 1 : 0, ox1 = min(g.ow - 1, xx / g.s);
        for (int oy = oy0; oy <= oy1; ++oy)
          for (int ox = ox0; ox <= ox1; ++ox) {
            const int o = oy * g.ow + ox;
            const int at = ap ? ap[o] : window_argmax(g, xp, oy, ox);
            if (at == (yy - oy * g.s) * g.k + (xx - ox * g.s)) s += to_f32(dyp[o]);
          }
      }
      dxp[i] = kit::from_f32<E>(s);
    }
  }
}

Pool32 pool32(const Pool2d& g) {
  PDNN_CHECK(g.planes < (int64_t{1} << 31) && g.h * g.w < (int64_t{1} << 31),
             "maxpool on the GPU: sizes beyond 32-bit indexing");
  return {static_cast<int>(g.planes), static_cast<int>(g.h), static_cast<int>(g.w),
          static_cast<int>(g.oh),     static_cast<int>(g.ow), static_cast<int>(g.k),
          static_cast<int>(g.s)};
}

template <bool kDrop, class E>
void launch_forward(const Pool2d& g, const Drop& drop, const E* x, E* y, uint8_t* argmax,
                    CudaExec e) {
  if (g.planes * g.oh * g.ow <= 0) return;
  maxpool_f<kDrop><<<grid2d(g.oh * g.ow, g.planes, tpb(e)), tpb(e), 0, stream_of(e)>>>(
      pool32(g), drop, x, y, argmax);
  PDNN_CUDA_LAUNCH_CHECK(kDrop ? "maxpool2d_dropout_forward" : "maxpool2d_forward");
}

template <bool kMask, class E>
void launch_backward(const Pool2d& g, const E* x, const E* dy, const uint8_t* argmax,
                     const float* mask, const E* y, Act act, E* dx, CudaExec e) {
  if (g.planes * g.h * g.w <= 0) return;
  const FastDiv dw(static_cast<uint32_t>(g.w)), ds(static_cast<uint32_t>(g.s));
  if (act.kind == FusedAct::None) y = nullptr;
  if (kMask || g.s >= g.k)
    maxpool_b<true, kMask><<<grid2d(g.h * g.w, g.planes, tpb(e, 128)), tpb(e, 128), 0,
                             stream_of(e)>>>(pool32(g), dw, ds, x, dy, argmax, mask, y, act, dx);
  else
    maxpool_b<false, false><<<grid2d(g.h * g.w, g.planes, tpb(e, 128)), tpb(e, 128), 0,
                              stream_of(e)>>>(pool32(g), dw, ds, x, dy, argmax, nullptr,
                                              static_cast<const E*>(nullptr), act, dx);
  PDNN_CUDA_LAUNCH_CHECK(kMask ? "maxpool2d_dropout_backward" : "maxpool2d_backward");
}

}  // namespace

template <class T>
void maxpool2d_forward(const Pool2d& g, const T* x, T* y, uint8_t* argmax, CudaExec e) {
  launch_forward<false>(g, Drop{}, x, y, argmax, e);
}
template <class T>
void maxpool2d_backward(const Pool2d& g, const T* x, const T* dy, const uint8_t* argmax,
                        const T* y, Act act, T* dx, CudaExec e) {
  launch_backward<false>(g, x, dy, argmax, nullptr, y, act, dx, e);
}
template <class T>
void maxpool2d_dropout_forward(const Pool2d& g, float p, uint64_t seed, const int64_t* base,
                               uint64_t skip, const T* x, T* y, uint8_t* argmax, float* mask,
                               CudaExec e) {
  launch_forward<true>(g, Drop{p, seed, base, skip, mask}, x, y, argmax, e);
}
template <class T>
void maxpool2d_dropout_backward(const Pool2d& g, const T* x, const T* dy, const uint8_t* argmax,
                                const float* mask, const T* y, Act act, T* dx, CudaExec e) {
  launch_backward<true>(g, x, dy, argmax, mask, y, act, dx, e);
}

// Both precisions' entry points (maxpool2d.h).
#define PDNN_INSTANTIATE(T)                                                                  \
  template void maxpool2d_forward(const Pool2d&, const T*, T*, uint8_t*, CudaExec);          \
  template void maxpool2d_backward(const Pool2d&, const T*, const T*, const uint8_t*,        \
                                   const T*, Act, T*, CudaExec);                             \
  template void maxpool2d_dropout_forward(const Pool2d&, float, uint64_t, const int64_t*,    \
                                          uint64_t, const T*, T*, uint8_t*, float*, CudaExec); \
  template void maxpool2d_dropout_backward(const Pool2d&, const T*, const T*, const uint8_t*, \
                                           const float*, const T*, Act, T*, CudaExec);
PDNN_INSTANTIATE(float)
PDNN_INSTANTIATE(bf16)
#undef PDNN_INSTANTIATE

}  // namespace cuda
}  // namespace pdnn
