// Max pooling on the GPU (see maxpool2d.h). Forward: one thread per output, the window in row-major
// order with the CPU's rule (strict '>', a NaN wins), the maximum's offset in its window kept in
// one byte (or not at all). Backward: a gather, one thread per input pixel, adding dy of the
// outputs whose window holds the pixel and whose maximum it is (the recorded offset, or the
// window's maximum found again in x by the forward's rule), in ascending output order (the
// CPU's order, so the sums are bit-identical); no atomics and no scatter. bf16 tensors (x, y,
// dy, dx; the argmax and the dropout mask as in fp32): the same kernels over bf16 elements read
// as float, the outputs rounded once (a maximum is one of the inputs: exact; with dropout, the
// product with the mask rounds).
// The 2x2 stride-2 windows that tile a plane (W4's pools; ow a multiple of 4, the tensors'
// rows 16-byte aligned) take a kernel of their own: a thread reads two 8-element rows of x and
// writes 4 outputs, 4 argmax bytes (and 4 mask floats) in one vector access each; backward the
// same 4 outputs' dy (argmax, mask, y) in and the 16 pixels of dx out. The one-element-a-thread
// kernels moved 2-byte scalars: W4's pools in bf16 ran at 3-5x their copy floor (0.5 ms of
// 1.0 in forward and backward of the first pool on an H200). Both are the same rule and the
// same float operations as the general kernels, so their results are bit for bit equal.
#include <cmath>
#include <cstdint>

#include "cuda/launch.h"
#include "ops/kit/act.h"
#include "ops/kit/argmax.h"
#include "ops/kit/round.h"
#include "ops/kit/vec.h"
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

using kit::load4;
using kit::load8;
using kit::store4;
using kit::store8;

// The 2x2 windows of 4 outputs from their two input rows r0, r1 (8 elements each), by the
// general kernels' rule and order (kit::argmax_takes over (0,0), (0,1), (1,0), (1,1)).
__device__ __forceinline__ void windows2x2(const float (&r0)[8], const float (&r1)[8],
                                           float (&best)[4], int (&at)[4]) {
  for (int j = 0; j < 4; ++j) {
    const float v[4] = {r0[2 * j], r0[2 * j + 1], r1[2 * j], r1[2 * j + 1]};
    best[j] = -INFINITY;
    at[j] = 0;
    for (int i = 0; i < 4; ++i)
      if (kit::argmax_takes(v[i], best[j])) best[j] = v[i], at[j] = i;
  }
}

// 2x2 stride 2 tiling the planes (h = 2 oh, w = 2 ow, ow % 4 == 0): the planes' rows stack, so
// output row r (over all planes) reads input rows 2r and 2r + 1. Thread: 4 outputs of a row.
struct Grid2x2 {
  int groups;    // planes * oh * ow / 4 (below 2^31)
  FastDiv per_row;  // ow / 4 groups a row
  int q_row, w, ow;
};

template <bool kDrop, class E>
__global__ void maxpool2x2_f(Grid2x2 g, Drop drop, const E* __restrict__ x, E* __restrict__ y,
                             uint8_t* __restrict__ argmax) {
  const uint64_t base = kDrop ? static_cast<uint64_t>(*drop.base) + drop.skip : 0;
  const float scale = kDrop ? 1.f / (1.f - drop.p) : 1.f;
  for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < g.groups; t += gridDim.x * blockDim.x) {
    const int r = static_cast<int>(g.per_row.div(static_cast<uint32_t>(t))), q = t - r * g.q_row;
    const E* x0 = x + static_cast<int64_t>(2 * r) * g.w + 8 * q;
    float r0[8], r1[8], best[4], m[4];
    int at[4];
    load8(x0, r0);
    load8(x0 + g.w, r1);
    windows2x2(r0, r1, best, at);
    const int64_t o = static_cast<int64_t>(r) * g.ow + 4 * q;
    if (kDrop) {
      for (int j = 0; j < 4; ++j) {
        const bool keep = rng_to_unit(rng_at(drop.seed, base + static_cast<uint64_t>(o + j) + 1)) >=
                          static_cast<double>(drop.p);
        m[j] = keep ? scale : 0.f;
        best[j] *= m[j];
      }
      store4(drop.mask + o, m);
    }
    store4(y + o, best);
    if (argmax)
      *reinterpret_cast<uint32_t*>(argmax + o) =
          static_cast<uint32_t>(at[0]) | static_cast<uint32_t>(at[1]) << 8 |
          static_cast<uint32_t>(at[2]) << 16 | static_cast<uint32_t>(at[3]) << 24;
  }
}

// argmax null: the windows' maxima found again in x. y, act: through the activation before.
template <bool kMask, class E>
__global__ void maxpool2x2_b(Grid2x2 g, const E* __restrict__ x, const E* __restrict__ dy,
                             const uint8_t* __restrict__ argmax, const float* __restrict__ mask,
                             const E* __restrict__ y, Act act, E* __restrict__ dx) {
  for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < g.groups; t += gridDim.x * blockDim.x) {
    const int r = static_cast<int>(g.per_row.div(static_cast<uint32_t>(t))), q = t - r * g.q_row;
    const int64_t o = static_cast<int64_t>(r) * g.ow + 4 * q;
    const int64_t i0 = static_cast<int64_t>(2 * r) * g.w + 8 * q;
    int at[4];
    if (argmax) {
      const uint32_t a = *reinterpret_cast<const uint32_t*>(argmax + o);
      for (int j = 0; j < 4; ++j) at[j] = static_cast<int>((a >> (8 * j)) & 0xffu);
    } else {
      float r0[8], r1[8], best[4];
      load8(x + i0, r0);
      load8(x + i0 + g.w, r1);
      windows2x2(r0, r1, best, at);
    }
    float d[4];
    load4(dy + o, d);
    if (kMask) {
      float m[4];
      load4(mask + o, m);
      for (int j = 0; j < 4; ++j) d[j] *= m[j];
    }
    if (y) {
      float yv[4];
      load4(y + o, yv);
      for (int j = 0; j < 4; ++j) d[j] = kit::act_grad(yv[j], d[j], act);
    }
    float d0[8], d1[8];
    for (int j = 0; j < 4; ++j) {
      d0[2 * j] = at[j] == 0 ? d[j] : 0.f;
      d0[2 * j + 1] = at[j] == 1 ? d[j] : 0.f;
      d1[2 * j] = at[j] == 2 ? d[j] : 0.f;
      d1[2 * j + 1] = at[j] == 3 ? d[j] : 0.f;
    }
    store8(dx + i0, d0);
    store8(dx + i0 + g.w, d1);
  }
}

// Whether the 2x2 kernels run: their geometry, and every tensor aligned to its vector access
// (x's and dx's rows 8 elements, y's, dy's 4, the argmax's 4 bytes, the mask's 4 floats).
template <class E>
bool takes_2x2(const Pool2d& g, const E* x8, const E* y4, const uint8_t* argmax,
               const float* mask) {
  return g.k == 2 && g.s == 2 && g.h == 2 * g.oh && g.w == 2 * g.ow && g.ow % 4 == 0 &&
         g.planes * g.oh * g.ow / 4 < (int64_t{1} << 31) && aligned(x8, 16) &&
         aligned(y4, 4 * sizeof(E)) && aligned(argmax, 4) && aligned(mask, 16);
}

Grid2x2 grid_2x2(const Pool2d& g) {
  const int q_row = static_cast<int>(g.ow / 4);
  return {static_cast<int>(g.planes * g.oh * q_row), FastDiv(static_cast<uint32_t>(q_row)), q_row,
          static_cast<int>(g.w), static_cast<int>(g.ow)};
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
  if (takes_2x2(g, x, y, argmax, kDrop ? drop.mask : nullptr)) {
    const Grid2x2 v = grid_2x2(g);
    maxpool2x2_f<kDrop><<<blocks_for(v.groups, tpb(e)), tpb(e), 0, stream_of(e)>>>(v, drop, x, y,
                                                                                  argmax);
  } else {
    maxpool_f<kDrop><<<grid2d(g.oh * g.ow, g.planes, tpb(e)), tpb(e), 0, stream_of(e)>>>(
        pool32(g), drop, x, y, argmax);
  }
  PDNN_CUDA_LAUNCH_CHECK(kDrop ? "maxpool2d_dropout_forward" : "maxpool2d_forward");
}

template <bool kMask, class E>
void launch_backward(const Pool2d& g, const E* x, const E* dy, const uint8_t* argmax,
                     const float* mask, const E* y, Act act, E* dx, CudaExec e) {
  if (g.planes * g.h * g.w <= 0) return;
  const FastDiv dw(static_cast<uint32_t>(g.w)), ds(static_cast<uint32_t>(g.s));
  if (act.kind == FusedAct::None) y = nullptr;
  if (takes_2x2(g, x, y, argmax, mask) && aligned(dy, 4 * sizeof(E)) && aligned(dx, 16)) {
    const Grid2x2 v = grid_2x2(g);
    maxpool2x2_b<kMask><<<blocks_for(v.groups, tpb(e)), tpb(e), 0, stream_of(e)>>>(
        v, x, dy, argmax, mask, y, act, dx);
  } else if (kMask || g.s >= g.k)
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
