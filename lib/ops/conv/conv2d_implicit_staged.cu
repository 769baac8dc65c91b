// The register-staged implicit-GEMM convolution on the GPU (conv2d_gpu.h): each thread loads
// its elements of the next K step into registers while the block computes the current one,
// then stores them into shared memory. The first implicit-GEMM kernel of pdnn (issue 17); it
// serves two uses:
//   - fp32 and TF32: the backward-data of strided convolutions (W5's k4 s2 layers, and any
//     shape the direct kernels do not take; a stride-1 backward-data runs as a forward over
//     flipped weights, conv2d.cu). Forward and backward-weights moved to the cp.async pipeline
//     of conv2d_implicit_gemm.cu, so fp32/TF32 instantiate kBackwardData only.
//   - bf16: all three passes (bf16 tensors, fp32 sums). cp.async copies 4 bytes at the least,
//     and the NCHW gathers are single 2-byte elements (a tap's neighbours along K are a plane
//     or a kernel row apart), so bf16 stages through registers, as this kernel always did.
//     Each element is rounded to bf16 where it is stored (a no-op for the tensors' own values;
//     act'(y) dy rounded once, as the tensor every other path would hold), the bias gradient
//     sums those same rounded values in fp32.
//
//   forward:           M = k, N = n*oh*ow pixels, K = c*kh*kw taps,
//                      A(m, kk) = w[m][kk], B(kk, n) = x at the pixel's tap
//   backward-data:     M = c, N = n*(dx pixels of a phase), K = k*(taps of the phase),
//                      A(m, kk) = w[ko][m][r][q], B(kk, n) = act'.dy at ((iy+p-r)/s, (ix+p-q)/s)
//   backward-weights:  M = k, N = c*kh*kw taps, K = n*oh*ow pixels (split over blockIdx.z,
//                      the splits added in order by kit::sum_splits: deterministic),
//                      A(m, kk) = act'.dy[m][pixel], B(kk, n) = x at the pixel's tap
//
// Backward-data splits dx into its s*s phases (iy mod s, ix mod s), one per blockIdx.z: only the
// taps r = (iy + p) mod s (mod s) reach a pixel of a phase, so the product has no zero terms
// (for k4 s2 layers, a quarter of the taps).
//
// Tiling (Tile below): a block computes a BM x BN tile of C, walking K in steps of BK = 16: its
// threads load the A and B tiles into registers (the next step's loads in flight while the
// current step computes), store them k-major into shared memory (As[kk][m], Bs[kk][n], rows
// padded by 8 elements so the compute reads without bank conflicts), then compute (kit's
// tile_step):
//   - fp32 (FMA units): thread (ty, tx) owns TM x TN outputs, rows ty*4 + {0..3} (+ BM/2 when
//     TM = 8) and columns tx*4 + {0..3} (+ BN/2 when TN = 8): per kk, TM/4 + TN/4 float4 reads
//     of shared memory and TM*TN FMAs.
//   - TF32 (tensor cores, mma.sync m16n8k8): warp (wm, wn) owns a (BM/WM) x (BN/WN) tile made
//     of MI x NI mma tiles; per 8 kk it loads MI A fragments and NI B fragments (4 and 2 floats
//     a thread) and issues MI*NI mma.sync. Inputs are rounded to TF32 as they enter shared
//     memory, the sums stay fp32.
//   - bf16 (tensor cores, mma.sync m16n8k16): the same warp tiles; per 16 kk (one step) MI
//     ldmatrix.x4.trans and NI ldmatrix.x2.trans fragments from the bf16 k-major tiles (the k
//     pairs of a fragment register are 2 rows apart there: .trans gathers them) and MI*NI
//     mma.sync.
// The configuration follows M (the input channels of backward-data, the output channels
// otherwise): 128 x 128 above 64 (256 threads), 64 x 128, 32 x 256 or 16 x 256 below (128
// threads). Floor, per output element: K multiply-adds at the tensor cores' rate; per step a
// thread loads RA + RB elements (8 + 8 on 128 x 128) with their index arithmetic, which is
// what limits it at small K (measured on W4/W5 in apps/bench_conv_gpu --precision bf16).
//
// Index arithmetic: 32-bit within one image, 64-bit image offsets and output addresses. An
// image of 2^31 elements or more (the U-Net at batch 1 from side 4096) runs the forward and
// backward-weights in their 64-bit instantiation (I = int64_t, chosen on the host by
// conv_implicit_wide, conv2d_gpu_ws.h), where x's tap offset, ci*h*w + r*w + q, is 64-bit (the
// backward-weights' tap table 24-byte entries instead of 16); the 32-bit instantiation is the
// same code as before the switch. Backward-data has one instantiation: its gathers of dy and
// its writes of dx already take the channel's plane in 64 bits (ko*oh*ow, (img*c + m)*h*w), and
// the rest are a plane's or the weights' offsets. What stays 32-bit: conv_implicit_fits.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <type_traits>

#include "core/error.h"
#include "cuda/launch.h"
#include "ops/conv/conv2d_gpu.h"
#include "ops/kit/split_k.h"
#include "ops/kit/tile.h"

namespace pdnn {
namespace cuda {

namespace {

using namespace kit;

template <int BM_, int BN_, int TM_, int TN_, int WM_, int WN_>
struct Tile {
  static constexpr int BM = BM_, BN = BN_, BK = 16;
  static constexpr int TM = TM_, TN = TN_, TY = BM / TM, TX = BN / TN, THREADS = TY * TX;
  static constexpr int WM = WM_, WN = WN_, MI = BM / WM / 16, NI = BN / WN / 8;
  static constexpr int SA = BM + 8, SB = BN + 8;  // padded rows: 8 or 24 mod 32 banks
  static constexpr int RA = BM * BK / THREADS, RB = BK * BN / THREADS;  // loads a thread
  // Blocks an SM must hold at once (registers capped to fit): two 256-thread blocks hide each
  // other's load latency at 128 registers a thread (a cap of 168 on the 128-thread tiles made
  // the backward-weights kernels spill, so those keep what they need).
  static constexpr int MIN_BLOCKS = THREADS >= 256 ? 2 : 1;
  static_assert(WM * WN * 32 == THREADS, "the warps cover the block");
  static_assert(TM % 4 == 0 && TN % 4 == 0 && MI >= 1 && NI >= 1, "tile shape");
  static_assert(THREADS % BK == 0 && RA >= 1 && RB >= 1, "load split");
  static_assert(BM * BK % THREADS == 0 && BK * BN % THREADS == 0, "every thread loads alike");
};
using Tile128x128 = Tile<128, 128, 8, 8, 2, 4>;
using Tile64x128 = Tile<64, 128, 8, 8, 2, 2>;
using Tile32x256 = Tile<32, 256, 8, 8, 1, 4>;
using Tile16x256 = Tile<16, 256, 4, 8, 1, 4>;
using Tile32x32 = Tile<32, 32, 4, 4, 1, 2>;

enum Pass { kForward, kBackwardData, kBackwardWeights };

// Everything a launch needs; the per-block product (Gemm) is derived from it in the kernel.
// E: the tensors' element type (float; bf16 for the bf16 kernels).
template <class E>
struct ConvArgsOf {
  int n, c, h, w, k, kh, kw, sh, sw, ph, pw, oh, ow;
  const E* x;         // forward, backward-weights
  const E* wt;        // forward, backward-data
  const E* dy;        // backward passes
  const E* y;         // backward passes, read for act' (null when act is None)
  const float* bias;  // forward; backward-data (a transposed convolution's bias)
  E* out;             // y or dx
  float* part;        // backward-weights: the split partial products (splits, M, N)
  float* bias_part;   // backward-weights with a bias gradient: (splits, k) row sums
  Act act;
  int k_chunk;        // backward-weights: reduction elements per split, a multiple of BK
};

// act'(y) dy: the gradient through the activation fused into the forward's output write.
template <class E>
__device__ __forceinline__ float through_act(float dy, const E* y, int64_t i, Act a) {
  if (a.kind == FusedAct::None) return dy;
  return act_grad(ldg_f32(y + i), dy, a);
}

// The product of one block: its sizes, its share of K, and for backward-data its phase.
// Backward-weights: a tile column's tap, (offset ci*h*w + r*w + q, r, q, valid): int4, or
// with a 64-bit offset (I = int64_t) TapW.
struct TapW {
  long long x;
  int y, z, w;
};
template <class I>
using TapOf = typename std::conditional<sizeof(I) == 8, TapW, int4>::type;
template <class I>
__device__ __forceinline__ TapOf<I> tap_of(I off, int r, int q, int valid) {
  TapOf<I> t;
  t.x = off;
  t.y = r;
  t.z = q;
  t.w = valid;
  return t;
}

struct Gemm {
  int M, N, K, k_begin, k_end;
  int py, px, r0y, r0x, ty, tx, oy_off, ox_off, hp, wp;  // backward-data phase
  FastDiv n_img, n_row, k_a, k_b;                         // index splits (see gemm_of)
};

template <int PASS, class A>
__device__ Gemm gemm_of(const A& a) {
  Gemm g{};
  if (PASS == kForward) {
    g.M = a.k;
    g.N = a.n * a.oh * a.ow;
    g.K = a.c * a.kh * a.kw;
    g.n_img = FastDiv(a.oh * a.ow);  // pixel -> (image, oy*ow + ox)
    g.n_row = FastDiv(a.ow);
    g.k_a = FastDiv(a.kh * a.kw);  // tap -> (ci, r*kw + q)
    g.k_b = FastDiv(a.kw);
  } else if (PASS == kBackwardData) {
    g.py = blockIdx.z / a.sw;
    g.px = blockIdx.z % a.sw;
    g.r0y = (g.py + a.ph) % a.sh;
    g.r0x = (g.px + a.pw) % a.sw;
    g.ty = g.r0y < a.kh ? (a.kh - g.r0y + a.sh - 1) / a.sh : 0;
    g.tx = g.r0x < a.kw ? (a.kw - g.r0x + a.sw - 1) / a.sw : 0;
    g.oy_off = (g.py + a.ph - g.r0y) / a.sh;  // oy = iy' + oy_off - rr
    g.ox_off = (g.px + a.pw - g.r0x) / a.sw;
    g.hp = g.py < a.h ? (a.h - g.py + a.sh - 1) / a.sh : 0;
    g.wp = g.px < a.w ? (a.w - g.px + a.sw - 1) / a.sw : 0;
    g.M = a.c;
    g.N = a.n * g.hp * g.wp;
    g.K = a.k * g.ty * g.tx;
    g.n_img = FastDiv(max(1, g.hp * g.wp));
    g.n_row = FastDiv(max(1, g.wp));
    g.k_a = FastDiv(max(1, g.ty * g.tx));  // (ko, rr*tx + qq)
    g.k_b = FastDiv(max(1, g.tx));
  } else {
    g.M = a.k;
    g.N = a.c * a.kh * a.kw;
    g.K = a.n * a.oh * a.ow;
    g.n_img = FastDiv(a.oh * a.ow);  // reduction index -> (image, pixel)
    g.n_row = FastDiv(a.ow);
    g.k_a = FastDiv(a.kh * a.kw);  // tap -> (ci, r*kw + q)
    g.k_b = FastDiv(a.kw);
  }
  if (PASS == kBackwardWeights) {
    g.k_begin = blockIdx.z * a.k_chunk;
    g.k_end = min(g.K, g.k_begin + a.k_chunk);
  } else {
    g.k_begin = 0;
    g.k_end = g.K;
  }
  return g;
}

template <class T, int PASS, class P, class I>
__global__ void __launch_bounds__(T::THREADS, T::MIN_BLOCKS)
    implicit_gemm(const ConvArgsOf<typename P::Data> a) {
  using E = typename P::Data;
  constexpr bool kBf16 = P::kK == 16;
  constexpr int BM = T::BM, BN = T::BN, BK = T::BK, THREADS = T::THREADS;
  constexpr int RA = T::RA, RB = T::RB;
  __shared__ __align__(16) typename P::Elem As[2][BK][T::SA];
  __shared__ __align__(16) typename P::Elem Bs[2][BK][T::SB];
  // backward-weights: each tile column's tap, as (ci*h*w + r*w + q, r, q, valid)
  __shared__ TapOf<I> taps[PASS == kBackwardWeights ? BN : 1];

  const Gemm g = gemm_of<PASS>(a);
  const int tid = threadIdx.x;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  // (an empty share of K, as a phase no tap reaches, still writes its zeros and bias)
  if (m0 >= g.M || n0 >= g.N) return;
  const int hw = a.h * a.w, ohw = a.oh * a.ow;

  // ---- per-thread set-up of the loads: what stays fixed along K -----------------------------
  // A is loaded with lanes along kk (16 consecutive kk per 16 threads), B along n (forward,
  // backward-data) or along kk (backward-weights), so that consecutive lanes read consecutive
  // addresses of the tensor each operand comes from.
  const int a_kk = tid % BK;  // this thread's kk within a tile of A; rows a_m + i*(THREADS/BK)
  const int a_m = tid / BK;
  // B along n: element e = tid + i*THREADS sits at (kk = e / BN, n = e % BN).
  constexpr int kBCols = BN >= THREADS ? BN / THREADS : 1;  // distinct n of a thread
  static_assert(BN % THREADS == 0 || THREADS % BN == 0, "B rows split evenly");
  const int b_row0 = tid / BN, b_col0 = tid % BN;  // element tid's place in the B tile
  int64_t bcol_base[kBCols];  // forward: x offset of the image; backward-data: dy's
  int bcol_y[kBCols], bcol_x[kBCols];
  if (PASS != kBackwardWeights) {
#pragma unroll
    for (int u = 0; u < kBCols; ++u) {
      const int nn = n0 + (tid + u * THREADS) % BN;
      bcol_y[u] = INT_MIN / 2;  // out of range: every tap of a column past N reads 0
      bcol_x[u] = 0;
      bcol_base[u] = 0;
      if (nn < g.N) {
        const uint32_t img = g.n_img.div(nn), pix = nn - img * g.n_img.d;
        const uint32_t row = g.n_row.div(pix), col = pix - row * g.n_row.d;
        if (PASS == kForward) {
          bcol_base[u] = static_cast<int64_t>(img) * a.c * hw;
          bcol_y[u] = static_cast<int>(row) * a.sh - a.ph;
          bcol_x[u] = static_cast<int>(col) * a.sw - a.pw;
        } else {
          bcol_base[u] = static_cast<int64_t>(img) * a.k * ohw;
          bcol_y[u] = static_cast<int>(row) + g.oy_off;
          bcol_x[u] = static_cast<int>(col) + g.ox_off;
        }
      }
    }
  } else {
    for (int i = tid; i < BN; i += THREADS) {
      const int nn = n0 + i;
      TapOf<I> t = tap_of<I>(0, 0, 0, 0);
      if (nn < g.N) {
        const uint32_t ci = g.k_a.div(nn), rq = nn - ci * g.k_a.d;
        const uint32_t r = g.k_b.div(rq), q = rq - r * g.k_b.d;
        t = tap_of<I>(static_cast<I>(ci) * hw + static_cast<int>(r) * a.w + static_cast<int>(q),
                      static_cast<int>(r), static_cast<int>(q), 1);
      }
      taps[i] = t;
    }
    __syncthreads();
  }
  float bias_sum[RA];  // backward-weights: this thread's A row sums (the bias gradient)
#pragma unroll
  for (int i = 0; i < RA; ++i) bias_sum[i] = 0.f;
  const bool want_bias = PASS == kBackwardWeights && a.bias_part != nullptr && blockIdx.x == 0;

  float ra[RA], rb[RB];
  // Loads the A and B tiles of the K step starting at k0 into ra, rb (0 outside the tensors).
  auto load = [&](int k0) {
    const int kk = k0 + a_kk;
    const bool kk_ok = kk < g.k_end;
    if (PASS == kForward) {
      const int K = g.K;
#pragma unroll
      for (int i = 0; i < RA; ++i) {
        const int m = m0 + a_m + i * (THREADS / BK);
        ra[i] = kk_ok && m < g.M ? ldg_f32(a.wt + static_cast<int64_t>(m) * K + kk) : 0.f;
      }
    } else if (PASS == kBackwardData) {
      // kk = (ko, rr, qq): w[ko][ci][r0y + rr*sh][r0x + qq*sw]
      int off = 0;
      if (kk_ok) {
        const uint32_t ko = g.k_a.div(kk), t = kk - ko * g.k_a.d;
        const uint32_t rr = g.k_b.div(t), qq = t - rr * g.k_b.d;
        off = static_cast<int>(ko) * a.c * a.kh * a.kw + (g.r0y + static_cast<int>(rr) * a.sh) * a.kw +
              g.r0x + static_cast<int>(qq) * a.sw;
      }
#pragma unroll
      for (int i = 0; i < RA; ++i) {
        const int m = m0 + a_m + i * (THREADS / BK);
        ra[i] = kk_ok && m < g.M ? ldg_f32(a.wt + off + m * a.kh * a.kw) : 0.f;
      }
    } else {
      // kk = reduction index (image, pixel): act'(y) dy[img][m][pixel]
      int64_t off = 0;
      if (kk_ok) {
        const uint32_t img = g.n_img.div(kk), pix = kk - img * g.n_img.d;
        off = static_cast<int64_t>(img) * a.k * ohw + pix;
      }
#pragma unroll
      for (int i = 0; i < RA; ++i) {
        const int m = m0 + a_m + i * (THREADS / BK);
        float v = 0.f;
        if (kk_ok && m < g.M) {
          const int64_t idx = off + static_cast<int64_t>(m) * ohw;
          v = through_act(ldg_f32(a.dy + idx), a.y, idx, a.act);
          // bf16: the operand as stored (and summed into the bias gradient)
          if (kBf16) v = round_bf16(v);
        }
        ra[i] = v;
        if (want_bias) bias_sum[i] += v;
      }
    }

    if (PASS == kBackwardWeights) {
      // lanes along kk: this thread's kk is fixed per step, its taps are n = a_m + i*(THREADS/BK)
      int64_t base = 0;
      int iy0 = INT_MIN / 2, ix0 = 0;
      if (kk_ok) {
        const uint32_t img = g.n_img.div(kk), pix = kk - img * g.n_img.d;
        const uint32_t oy = g.n_row.div(pix), ox = pix - oy * g.n_row.d;
        base = static_cast<int64_t>(img) * a.c * hw;
        iy0 = static_cast<int>(oy) * a.sh - a.ph;
        ix0 = static_cast<int>(ox) * a.sw - a.pw;
      }
      const E* xb = a.x + base;
#pragma unroll
      for (int i = 0; i < RB; ++i) {
        const TapOf<I> t = taps[a_m + i * (THREADS / BK)];
        const int iy = iy0 + t.y, ix = ix0 + t.z;
        const bool ok = t.w && static_cast<unsigned>(iy) < static_cast<unsigned>(a.h) &&
                        static_cast<unsigned>(ix) < static_cast<unsigned>(a.w);
        rb[i] = ok ? ldg_f32(xb + t.x + iy0 * a.w + ix0) : 0.f;
      }
    } else {
#pragma unroll
      for (int i = 0; i < RB; ++i) {
        // Element tid + i*THREADS: its row offset is a compile-time constant past b_row0, so
        // the (ci, r, q) split of a row is computed once for the elements that share it.
        const int u = ((i * THREADS) % BN) / THREADS;  // which of its columns (0 when BN <= THREADS)
        const int kb = k0 + b_row0 + (i * THREADS) / BN;
        float v = 0.f;
        if (kb < g.k_end) {
          if (PASS == kForward) {
            const uint32_t ci = g.k_a.div(kb), rq = kb - ci * g.k_a.d;
            const uint32_t r = g.k_b.div(rq), q = rq - r * g.k_b.d;
            const int iy = bcol_y[u] + static_cast<int>(r), ix = bcol_x[u] + static_cast<int>(q);
            if (static_cast<unsigned>(iy) < static_cast<unsigned>(a.h) &&
                static_cast<unsigned>(ix) < static_cast<unsigned>(a.w))
              v = ldg_f32(a.x + bcol_base[u] + static_cast<I>(ci) * hw + iy * a.w + ix);
          } else {
            const uint32_t ko = g.k_a.div(kb), t = kb - ko * g.k_a.d;
            const uint32_t rr = g.k_b.div(t), qq = t - rr * g.k_b.d;
            const int oy = bcol_y[u] - static_cast<int>(rr), ox = bcol_x[u] - static_cast<int>(qq);
            if (static_cast<unsigned>(oy) < static_cast<unsigned>(a.oh) &&
                static_cast<unsigned>(ox) < static_cast<unsigned>(a.ow)) {
              const int64_t idx = bcol_base[u] + static_cast<int64_t>(ko) * ohw + oy * a.ow + ox;
              v = through_act(ldg_f32(a.dy + idx), a.y, idx, a.act);
            }
          }
        }
        rb[i] = v;
      }
    }
  };
  // Stores ra, rb into buffer `buf` (k-major), as the tensor cores take them (P::elem: rounded
  // to TF32, or to bf16).
  auto store = [&](int buf) {
#pragma unroll
    for (int i = 0; i < RA; ++i) As[buf][a_kk][a_m + i * (THREADS / BK)] = P::elem(ra[i]);
    if (PASS == kBackwardWeights) {
#pragma unroll
      for (int i = 0; i < RB; ++i) Bs[buf][a_kk][a_m + i * (THREADS / BK)] = P::elem(rb[i]);
    } else {
#pragma unroll
      for (int i = 0; i < RB; ++i)
        Bs[buf][b_row0 + (i * THREADS) / BN][b_col0 + (i * THREADS) % BN] = P::elem(rb[i]);
    }
  };

  // ---- the main loop -------------------------------------------------------------------
  constexpr int kAcc = tile_acc<T, P>();
  float acc[kAcc];
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc[i] = 0.f;
  const int ty = tid / T::TX, tx = tid % T::TX;  // FMA path
  const int warp = tid / 32, lane = tid % 32;     // TF32 path
  const int wm = warp / T::WN, wn = warp % T::WN, gq = lane / 4, tq = lane % 4;
  // TF32, bf16: the operands were rounded as they were stored
  auto compute = [&](int buf) {
    tile_step<T, P, false>(acc, &As[buf][0][0], &Bs[buf][0][0], 0, ty, tx, wm, wn, gq, tq);
  };

  load(g.k_begin);
  store(0);
  __syncthreads();
  int buf = 0;
  for (int k0 = g.k_begin; k0 < g.k_end; k0 += BK) {
    const bool more = k0 + BK < g.k_end;
    if (more) load(k0 + BK);
    compute(buf);
    if (more) store(buf ^ 1);
    __syncthreads();
    buf ^= 1;
  }

  // ---- epilogue ------------------------------------------------------------------------
  tile_for_each<T, P>(acc, ty, tx, wm, wn, gq, tq, m0, n0, [&](int m, int nn, float v) {
    if (m >= g.M || nn >= g.N) return;
    if (PASS == kForward) {
      const uint32_t img = g.n_img.div(nn), pix = nn - img * g.n_img.d;
      const int64_t o = (static_cast<int64_t>(img) * a.k + m) * ohw + pix;
      a.out[o] = from_f32<E>(act_apply(v + bias_of(a.bias, m), a.act));
    } else if (PASS == kBackwardData) {
      const uint32_t img = g.n_img.div(nn), pix = nn - img * g.n_img.d;
      const uint32_t iy = g.n_row.div(pix), ix = pix - iy * g.n_row.d;
      const int64_t o = (static_cast<int64_t>(img) * a.c + m) * hw +
                        (static_cast<int>(iy) * a.sh + g.py) * a.w + static_cast<int>(ix) * a.sw + g.px;
      a.out[o] = from_f32<E>(v + bias_of(a.bias, m));
    } else {
      a.part[(static_cast<int64_t>(blockIdx.z) * g.M + m) * g.N + nn] = v;
    }
  });
  if (want_bias) {
    // The 16 lanes that share a row of A hold its partial sums: add them in a fixed order.
#pragma unroll
    for (int i = 0; i < RA; ++i) {
      float s = bias_sum[i];
#pragma unroll
      for (int off = BK / 2; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
      const int m = m0 + a_m + i * (THREADS / BK);
      if (a_kk == 0 && m < g.M) a.bias_part[static_cast<int64_t>(blockIdx.z) * g.M + m] = s;
    }
  }
}

template <class E>
ConvArgsOf<E> args_of(const ConvGeom& g, int64_t n, int64_t k, Act act) {
  PDNN_CHECK(conv_implicit_fits(g, n, k),
             "implicit-GEMM convolution: an image of %lld x %lld x %lld (or %lld images) is too "
             "large for its indexing (a plane, n*oh*ow and the weights under 2^31 elements)",
             (long long)g.c, (long long)g.h, (long long)g.w, (long long)n);
  ConvArgsOf<E> a{};
  set_conv_geom32(a, g, n, k, act);
  return a;
}

template <class T, int PASS, class P, class I>
void launch(const ConvArgsOf<typename P::Data>& a, int M, int N, int z, CudaExec e) {
  const dim3 grid(static_cast<unsigned>((N + T::BN - 1) / T::BN),
                  static_cast<unsigned>((M + T::BM - 1) / T::BM), static_cast<unsigned>(z));
  implicit_gemm<T, PASS, P, I><<<grid, T::THREADS, 0, stream_of(e)>>>(a);
  PDNN_CUDA_LAUNCH_CHECK("implicit-GEMM convolution");
}

// The tile for a product with M rows (the narrower side): conv2d_implicit_staged_rows
// (conv2d_gpu_ws.h), whose bf16 weight-gradient split takes BN 128 for 128 and 64 rows, 256 for
// the others, and BK 16.
static_assert(Tile128x128::BN == 128 && Tile64x128::BN == 128 && Tile32x256::BN == 256 &&
                  Tile16x256::BN == 256 && Tile16x256::BK == 16,
              "conv2d_implicit_bf16_backward_weights_split must see the kernels' tiles");
template <int PASS, class P, class I = int>
void launch_for(const ConvArgsOf<typename P::Data>& a, int M, int N, int z, CudaExec e) {
  switch (conv2d_implicit_staged_rows(M)) {
    case 128: return launch<Tile128x128, PASS, P, I>(a, M, N, z, e);
    case 64: return launch<Tile64x128, PASS, P, I>(a, M, N, z, e);
    case 32: return launch<Tile32x256, PASS, P, I>(a, M, N, z, e);
    default: return launch<Tile16x256, PASS, P, I>(a, M, N, z, e);
  }
}

// Backward-data of operands `c` in precision P (dx_act not applied here).
template <class P, class C>
void backward_data(const C& c, CudaExec e) {
  const ConvGeom& g = c.g;
  if (c.n * g.c * g.h * g.w == 0) return;
  PDNN_CHECK(c.act.kind == FusedAct::None || c.y, "conv2d_implicit_backward_data: act needs y");
  ConvArgsOf<typename P::Data> a = args_of<typename P::Data>(g, c.n, c.k, c.act);
  a.dy = c.dy;
  a.y = c.y;
  a.wt = c.w;
  a.bias = nullptr;  // the kernel can add a bias per input channel; no caller has one
  a.out = c.dx;
  // The largest phase: the first, ceil(h/s) x ceil(w/s) pixels.
  const int hp = (a.h + a.sh - 1) / a.sh, wp = (a.w + a.sw - 1) / a.sw;
  launch_for<kBackwardData, P>(a, a.c, a.n * hp * wp, a.sh * a.sw, e);
}

// bf16 backward-weights: the split of the reduction over the tile the launch will choose, on
// this device.
KSplit bf16_split(const ConvGeom& g, int64_t n, int64_t k) {
  return conv2d_implicit_bf16_backward_weights_split(g, n, k, device_sms());
}

}  // namespace

void conv2d_implicit_backward_data(const ConvBwd& c, CudaExec e) {
  with_precision(e.tf32, [&](auto p) { backward_data<decltype(p)>(c, e); });
}

void conv2d_implicit_backward_data(const ConvBwdBf16& c, CudaExec e) { backward_data<BF16>(c, e); }

void conv2d_implicit_forward(const ConvFwdBf16& c, CudaExec e, ConvIndex index) {
  const ConvGeom& g = c.g;
  if (c.n * c.k * g.oh * g.ow == 0) return;
  ConvArgsOf<bf16> a = args_of<bf16>(g, c.n, c.k, c.act);
  a.x = c.x;
  a.wt = c.w;
  a.bias = c.b;
  a.out = c.y;
  with_index(index == ConvIndex::Wide || conv_implicit_wide(g), [&](auto i) {
    launch_for<kForward, BF16, decltype(i)>(a, a.k, a.n * a.oh * a.ow, 1, e);
  });
}

void conv2d_implicit_backward_weights(const ConvBwdBf16& c, float* ws, CudaExec e,
                                      ConvIndex index) {
  const ConvGeom& g = c.g;
  if (c.k * g.c * g.kh * g.kw == 0) return;
  PDNN_CHECK(c.act.kind == FusedAct::None || c.y,
             "conv2d_implicit_backward_weights: act needs y");
  ConvArgsOf<bf16> a = args_of<bf16>(g, c.n, c.k, c.act);
  const KSplit s = bf16_split(g, c.n, c.k);
  const int M = a.k, N = a.c * a.kh * a.kw;
  a.x = c.x;
  a.dy = c.dy;
  a.y = c.y;
  a.part = ws;
  a.bias_part = c.db ? ws + static_cast<int64_t>(s.splits) * M * N : nullptr;
  a.k_chunk = s.k_chunk;
  with_index(index == ConvIndex::Wide || conv_implicit_wide(g), [&](auto i) {
    launch_for<kBackwardWeights, BF16, decltype(i)>(a, M, N, s.splits, e);
  });
  sum_splits(s.splits, M, N, ws, a.bias_part, c.dw, c.db, e,
             "implicit-GEMM backward-weights sum (bf16)");
}

}  // namespace cuda
}  // namespace pdnn
