// Direct 3x3 stride-1 convolution on the GPU, with halo tiles in shared memory (conv2d_gpu.h):
// the GPU twin of conv2d_direct.cpp, for every channel count. Every W4 convolution is of this
// kind. The implicit-GEMM kernels (conv2d_implicit_gemm.cu) gather one input element per
// (tap, pixel) pair, nine copies of each input element, each with its own address arithmetic:
// measured on the H200 (ncu), 60-80% of their instructions were copies and index arithmetic.
// Here a block copies a tile of the input with its one-pixel halo once per chunk of channels,
// and all nine taps read it from shared memory.
//
// Forward (and backward-data, which is the forward of dy with the kernels rotated by 180
// degrees, the channel roles swapped and padding 2 - p):
//   block = BM output channels x a TH x TW patch of output pixels of one image; the reduction
//   walks the input channels CK at a time. A stage holds the input patch with its halo,
//   xs[CK][TH+2][TW+2], and the weights of those channels, ws[9][CK][BM] (from a copy of the
//   weights re-laid out as [input channel][tap][output channel] by prep_weights_k, once per
//   call: 147 K floats at most in W4). STAGES stages in flight (cp.async, as in the
//   implicit-GEMM kernels).
//   - fp32 (FMA): thread (ty, tx) computes 8 output channels (ty*4 + {0..3}, BM/2 + ty*4 +
//     {0..3}) x 8 consecutive pixels of one row of the patch. Per input channel and kernel row
//     r: 10 input values from shared memory (the 8 pixels and their 2 neighbours), then for
//     each kernel column q two float4 of weights and 64 FMAs: 16 loads for 192 FMAs.
//   - TF32 (mma.sync m16n8k8): warp (wm, wn) computes (BM/WM) channels x (TH*TW/WN) pixels as
//     MI x NI mma tiles; an 8-deep step is 8 input channels at one tap, so a stage of CK = 8
//     channels is 9 steps. Each lane's B elements sit at (channel t, its pixel + tap offset) of
//     the halo tile; weights are rounded to TF32 when re-laid out and the input tile in place
//     when it arrives, so no conversion sits in the inner loop.
// Backward-weights: dw[m][c][tap] += sum over images and pixels of g[m][pixel] x[c][pixel +
//   tap], g = act'(y) dy (y copied beside dy and applied in shared memory, as in the implicit
//   kernel). Block = BM output channels x BC input channels (x 9 taps); the reduction walks
//   TH x TW patches of output pixels, split over blockIdx.z (each split writes its partial sums,
//   added in split order afterwards: deterministic). A stage holds gs[BM][TH*TW] and the input
//   patch with its halo xs[BC][TH+2][TW+2].
//   - fp32: thread computes 8 output channels x 1 input channel x 9 taps (72 sums); per row of
//     the patch and 4 pixels: 8 float4 of g (the same for the whole warp: broadcast) and 3 x 6
//     input values, for 288 FMAs.
//   - TF32: warp (wm, wn) computes 32 output channels x 8 input channels x 9 taps (MI = 2, NI =
//     9 mma tiles, one per tap); an 8-deep step is 8 pixels of a row of the patch.
// Shared-memory strides are padded so that a warp's reads fall on different banks (noted at
// each). Index arithmetic: 64-bit image offsets, 32-bit within an image.
#include <algorithm>
#include <climits>
#include <cstdint>

#include "core/error.h"
#include "cuda/launch.h"
#include "ops/conv/conv2d_3x3.h"
#include "ops/conv/conv2d_gpu.h"
#include "ops/kit/mma.h"
#include "ops/kit/split_k.h"
#include "ops/kit/tile.h"

namespace pdnn {
namespace cuda {

namespace {

using namespace kit;

constexpr int round_up_c(int a, int m) { return (a + m - 1) / m * m; }

// ---- weights re-laid out: out[i][tap][o] (o < Mp, zero past the output channels) ----------
// forward: i = input channel c, o = output channel k, from w[k][c][tap];
// backward-data (flip): i = k, o = c, from w[k][c][8 - tap] (the kernel rotated by 180 degrees).
__global__ void prep_weights_k(int k, int c, int Mp, bool flip, bool round, const float* __restrict__ w,
                               float* __restrict__ out) {
  const int in_ch = flip ? k : c;
  const int64_t total = static_cast<int64_t>(in_ch) * 9 * Mp;
  PDNN_GRID_LOOP(e, total) {
    const int o = static_cast<int>(e % Mp);
    const int tap = static_cast<int>((e / Mp) % 9);
    const int i = static_cast<int>(e / (9 * Mp));
    float v = 0.f;
    if (!flip && o < k) v = w[(static_cast<int64_t>(o) * c + i) * 9 + tap];
    if (flip && o < c) v = w[(static_cast<int64_t>(i) * c + o) * 9 + 8 - tap];
    out[e] = round ? round_tf32(v) : v;
  }
}

// ---- forward --------------------------------------------------------------------------------
template <int BM_, int TH_, int TW_, int WM_, int WN_, int STAGES_>
struct FwdCfg {
  static constexpr int BM = BM_, TH = TH_, TW = TW_, BN = TH * TW, CK = 8, STAGES = STAGES_;
  static constexpr int THREADS = (BM / 8) * (BN / 8);  // FMA: 8 x 8 outputs a thread
  // Blocks an SM must hold (registers capped to fit): two warps a scheduler at least.
  static constexpr int MIN_BLOCKS = THREADS >= 256 ? 1 : 2;
  static constexpr int WM = WM_, WN = WN_, MI = BM / WM / 16, NI = BN / WN / 8;
  static constexpr int XW = TW + 2, XR = TH + 2;
  // input channel stride: 8 mod 32 banks, so the TF32 B reads (8 channels t x 8 pixels g) and
  // the FMA row reads spread over the banks
  static constexpr int CS = round_up_c(XR * XW, 32) + 8;
  static constexpr int SA = BM + 8;  // weight rows: 8 mod 32 banks for the A fragments
  static constexpr int X_STAGE = CK * CS, W_STAGE = 9 * CK * SA;
  static_assert(WM * WN * 32 == THREADS, "the warps cover the block on the tensor-core path");
  static_assert(TW % 8 == 0 && BM % 16 == 0 && MI >= 1 && NI >= 1, "tile shape");
  static size_t smem_bytes() { return sizeof(float) * STAGES * (X_STAGE + W_STAGE); }
};
using Fwd128 = FwdCfg<128, 8, 16, 2, 4, 2>;   // 256 threads
using Fwd64 = FwdCfg<64, 8, 16, 2, 2, 3>;     // 128 threads
using Fwd32 = FwdCfg<32, 16, 16, 1, 4, 3>;    // 128 threads

struct FwdArgs {
  int n, c, h, w, k, oh, ow, pad, Mp, tiles_x, tiles_y;
  const float* x;
  const float* wp;  // [c][9][Mp]
  const float* bias;
  float* y;
  Act act;
  const float* msrc;  // y = act'(msrc) . (the sum) when mact is not None (backward-data)
  Act mact;
};

template <class T, class P>
__global__ void __launch_bounds__(T::THREADS, T::MIN_BLOCKS) direct_fwd(const FwdArgs a) {
  constexpr bool TF32 = P::kMma;
  constexpr int BM = T::BM, TH = T::TH, TW = T::TW, CK = T::CK, XW = T::XW, XR = T::XR;
  constexpr int CS = T::CS, SA = T::SA, STAGES = T::STAGES, THREADS = T::THREADS;
  extern __shared__ __align__(16) float smem[];
  float* Xs = smem;                           // STAGES x [CK][CS]
  float* Ws = smem + STAGES * T::X_STAGE;     // STAGES x [9][CK][SA]
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int tile = blockIdx.x;
  const int img = tile / (a.tiles_x * a.tiles_y);
  const int trest = tile - img * a.tiles_x * a.tiles_y;
  const int oy0 = (trest / a.tiles_x) * TH, ox0 = (trest % a.tiles_x) * TW;
  const int m0 = blockIdx.y * BM;
  const int iy0 = oy0 - a.pad, ix0 = ox0 - a.pad;
  const int hw = a.h * a.w;
  const float* xim = a.x + static_cast<int64_t>(img) * a.c * hw;
  const int steps = (a.c + CK - 1) / CK;

  auto load = [&](int s, int ci0) {
    load_halo_tile<CK, XR, XW, CS, THREADS, true>(Xs + s * T::X_STAGE, xim, a.x, ci0, a.c, a.h, a.w, iy0,
                                            ix0, tid);
    float* ws = Ws + s * T::W_STAGE;
    for (int e = tid; e < 9 * CK * (BM / 4); e += THREADS) {
      const int m4 = e % (BM / 4), ct = e / (BM / 4);  // ct = ci * 9 + tap
      const int ci = ct / 9, tap = ct - ci * 9;
      const bool ok = ci0 + ci < a.c;
      cp_async16(ws + (tap * CK + ci) * SA + m4 * 4,
                 ok ? a.wp + (static_cast<int64_t>(ci0 + ci) * 9 + tap) * a.Mp + m0 + m4 * 4 : a.wp, ok);
    }
  };
  // TF32: the input tile rounded in place, each thread the elements it copied.
  auto round_tile = [&](int s) {
    round_halo_tile<CK, XR, XW, CS, THREADS>(Xs + s * T::X_STAGE, tid);
  };

  // FMA path: 8 channels x 8 pixels a thread.
  const int ty = tid / (T::BN / 8), tx = tid % (T::BN / 8);
  const int py = tx / (TW / 8), px0 = (tx % (TW / 8)) * 8;
  // TF32 path
  const int wm = warp / T::WN, wn = warp % T::WN, gq = lane / 4, tq = lane % 4;
  int boff[T::NI];  // this lane's pixel of each n tile, as an offset in the halo tile
#pragma unroll
  for (int ni = 0; ni < T::NI; ++ni) {
    const int pn = wn * (T::BN / T::WN) + ni * 8 + gq;
    boff[ni] = (pn / TW) * XW + pn % TW;
  }
  constexpr int kAcc = TF32 ? T::MI * T::NI * 4 : 64;
  float acc[kAcc];
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc[i] = 0.f;

  auto compute = [&](int s) {
    const float* xs = Xs + s * T::X_STAGE;
    const float* ws = Ws + s * T::W_STAGE;
    if constexpr (!TF32) {
#pragma unroll 1
      for (int ci = 0; ci < CK; ++ci)
#pragma unroll
        for (int r = 0; r < 3; ++r) {
          float xv[10];
#pragma unroll
          for (int j = 0; j < 10; ++j) xv[j] = xs[ci * CS + (py + r) * XW + px0 + j];
#pragma unroll
          for (int q = 0; q < 3; ++q) {
            const float* wr = ws + ((r * 3 + q) * CK + ci) * SA;
            float av[8];
            *reinterpret_cast<float4*>(av) = *reinterpret_cast<const float4*>(wr + ty * 4);
            *reinterpret_cast<float4*>(av + 4) = *reinterpret_cast<const float4*>(wr + BM / 2 + ty * 4);
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
              for (int j = 0; j < 8; ++j) acc[i * 8 + j] = fmaf(av[i], xv[j + q], acc[i * 8 + j]);
          }
        }
    } else {
#pragma unroll
      for (int tap = 0; tap < 9; ++tap) {
        const int toff = (tap / 3) * XW + tap % 3;
        uint32_t af[T::MI][4], bf[T::NI][2];
#pragma unroll
        for (int mi = 0; mi < T::MI; ++mi) {
          const int m = wm * (BM / T::WM) + mi * 16 + gq;
          const float* wr = ws + (tap * CK + tq) * SA + m;
          af[mi][0] = __float_as_uint(wr[0]);
          af[mi][1] = __float_as_uint(wr[8]);
          af[mi][2] = __float_as_uint(wr[4 * SA]);
          af[mi][3] = __float_as_uint(wr[4 * SA + 8]);
        }
#pragma unroll
        for (int ni = 0; ni < T::NI; ++ni) {
          const float* xr = xs + tq * CS + boff[ni] + toff;
          bf[ni][0] = __float_as_uint(xr[0]);
          bf[ni][1] = __float_as_uint(xr[4 * CS]);
        }
#pragma unroll
        for (int mi = 0; mi < T::MI; ++mi)
#pragma unroll
          for (int ni = 0; ni < T::NI; ++ni) P::mma(acc + (mi * T::NI + ni) * 4, af[mi], bf[ni]);
      }
    }
  };

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < steps) load(s, s * CK);
    cp_async_commit();
  }
  for (int st = 0; st < steps; ++st) {
    const int s = st % STAGES;
    cp_async_wait<STAGES - 2>();
    if (TF32) round_tile(s);
    __syncthreads();
    if (st + STAGES - 1 < steps) load((st + STAGES - 1) % STAGES, (st + STAGES - 1) * CK);
    cp_async_commit();
    compute(s);
  }
  cp_async_wait<0>();

  const int64_t ohw = static_cast<int64_t>(a.oh) * a.ow;
  float* yim = a.y + static_cast<int64_t>(img) * a.k * ohw;
  auto put = [&](int m, int p, float v) {  // p: pixel of the patch
    const int oy = oy0 + p / TW, ox = ox0 + p % TW;
    if (m >= a.k || oy >= a.oh || ox >= a.ow) return;
    const int64_t o = m * ohw + static_cast<int64_t>(oy) * a.ow + ox;
    v = act_apply(v + bias_of(a.bias, m), a.act);
    if (a.mact.kind != FusedAct::None) v = act_grad(__ldg(a.msrc + (yim - a.y) + o), v, a.mact);
    yim[o] = v;
  };
  if (!TF32) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int m = m0 + (i / 4) * (BM / 2) + ty * 4 + i % 4;
#pragma unroll
      for (int j = 0; j < 8; ++j) put(m, py * TW + px0 + j, acc[i * 8 + j]);
    }
  } else {
    mma_tiles_for_each<T::MI, T::NI>(acc, m0 + wm * (BM / T::WM), wn * (T::BN / T::WN), gq, tq,
                                     put);
  }
}

// ---- backward-weights ---------------------------------------------------------------------
template <int BM_, int BC_, int TH_, int TW_, int WM_, int WN_, int STAGES_>
struct BwwCfg {
  static constexpr int BM = BM_, BC = BC_, TH = TH_, TW = TW_, P = TH * TW, STAGES = STAGES_;
  static constexpr int THREADS = (BM / 8) * BC;  // FMA: 8 output channels x 1 input channel
  static constexpr int MIN_BLOCKS = THREADS >= 256 ? 1 : 2;
  static constexpr int WM = WM_, WN = WN_;       // TF32: a warp 32 output x 8 input channels
  static constexpr int XW = TW + 2, XR = TH + 2;
  // g rows: 4 mod 32 banks (TF32 A reads: 8 rows g x 4 pixels t); input channel stride: odd
  // for the FMA path (a warp reads 32 channels at one place), 4 mod 32 for the TF32 B reads
  // (8 channels g x 4 pixels t)
  static constexpr int SG = P + 4;
  static constexpr int CS_F = round_up_c(XR * XW, 32) + 1, CS_T = round_up_c(XR * XW, 32) + 4;
  static_assert(WM * 32 == BM && WN * 8 == BC && WM * WN * 32 == THREADS, "warps cover the block");
  static_assert(TW % 8 == 0 && BC <= 32, "tile shape");
  static size_t smem_bytes(bool mask, bool tf32) {
    return sizeof(float) * STAGES * (BM * SG * (mask ? 2 : 1) + BC * (tf32 ? CS_T : CS_F));
  }
};
using Bww64 = BwwCfg<64, 32, 8, 16, 2, 4, 2>;  // 256 threads (two stages: 185 KB with y)
using Bww32 = BwwCfg<32, 32, 8, 16, 1, 4, 3>;  // 128 threads

struct BwwArgs {
  int n, c, h, w, k, oh, ow, pad, tiles_x, tiles_y, tiles, per_split;
  const float* x;
  const float* dy;
  const float* y;   // with a fused activation
  float* part;      // (splits, k, c*9)
  float* bias_part; // (splits, k) or null
  Act act;
};

template <class T, class Prec, bool MASK>
__global__ void __launch_bounds__(T::THREADS, T::MIN_BLOCKS) direct_bww(const BwwArgs a) {
  constexpr bool TF32 = Prec::kMma;
  constexpr int BM = T::BM, BC = T::BC, TH = T::TH, TW = T::TW, P = T::P, XW = T::XW, XR = T::XR;
  constexpr int SG = T::SG, CS = TF32 ? T::CS_T : T::CS_F, STAGES = T::STAGES, THREADS = T::THREADS;
  constexpr int G_STAGE = BM * SG, X_STAGE = BC * CS;
  extern __shared__ __align__(16) float smem[];
  float* Gs = smem;                                          // STAGES x [BM][SG]
  float* Xs = Gs + STAGES * G_STAGE;                         // STAGES x [BC][CS]
  float* Ys = MASK ? Xs + STAGES * X_STAGE : nullptr;        // STAGES x [BM][SG]
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int c0 = blockIdx.x * BC, m0 = blockIdx.y * BM;
  const int t_begin = blockIdx.z * a.per_split, t_end = min(a.tiles, t_begin + a.per_split);
  const int steps = max(0, t_end - t_begin);
  const int hw = a.h * a.w;
  const int64_t ohw = static_cast<int64_t>(a.oh) * a.ow;

  auto load = [&](int s, int t) {  // pixel tile t
    const int img = t / (a.tiles_x * a.tiles_y), trest = t - img * a.tiles_x * a.tiles_y;
    const int oy0 = (trest / a.tiles_x) * TH, ox0 = (trest % a.tiles_x) * TW;
    const int64_t goff = static_cast<int64_t>(img) * a.k * ohw;
    float* gs = Gs + s * G_STAGE;
    for (int e = tid; e < BM * P; e += THREADS) {
      const int m = e / P, p = e - m * P;
      const int oy = oy0 + p / TW, ox = ox0 + p % TW;
      const bool ok = m0 + m < a.k && oy < a.oh && ox < a.ow;
      const int64_t idx = goff + (m0 + m) * ohw + static_cast<int64_t>(oy) * a.ow + ox;
      cp_async4(gs + m * SG + p, ok ? a.dy + idx : a.dy, ok);
      if (MASK) cp_async4(Ys + s * G_STAGE + m * SG + p, ok ? a.y + idx : a.y, ok);
    }
    load_halo_tile<BC, XR, XW, CS, THREADS, false>(Xs + s * X_STAGE, a.x + static_cast<int64_t>(img) * a.c * hw,
                                            a.x, c0, a.c, a.h, a.w, oy0 - a.pad, ox0 - a.pad, tid);
  };
  // After the wait: act' applied to the g elements this thread copied; TF32 rounding of both
  // tiles' elements it copied.
  auto fix = [&](int s) {
    float* gs = Gs + s * G_STAGE;
    if (MASK)
      for (int e = tid; e < BM * P; e += THREADS) {
        const int m = e / P, p = e - m * P;
        const float v = gs[m * SG + p], yv = Ys[s * G_STAGE + m * SG + p];
        // the exact value, for the bias sum; the TF32 path rounds it where it reads it
        gs[m * SG + p] = act_grad(yv, v, a.act);
      }
    if (TF32) round_halo_tile<BC, XR, XW, CS, THREADS>(Xs + s * X_STAGE, tid);
  };

  const bool want_bias = a.bias_part != nullptr && blockIdx.x == 0;
  float bias_sum = 0.f;
  // FMA path: output channels mg*8 + {0..7}, input channel cl.
  const int cl = tid % BC, mg = tid / BC;
  // TF32 path
  const int wm = warp / T::WN, wn = warp % T::WN, gq = lane / 4, tq = lane % 4;
  constexpr int kAcc = 72;  // FMA: 8 x 9; TF32: MI 2 x NI 9 x 4
  float acc[kAcc];
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc[i] = 0.f;

  auto compute = [&](int s) {
    const float* gs = Gs + s * G_STAGE;
    const float* xs = Xs + s * X_STAGE;
    if constexpr (!TF32) {
      for (int py = 0; py < TH; ++py)
#pragma unroll
        for (int px0 = 0; px0 < TW; px0 += 4) {
          float dv[8][4];
#pragma unroll
          for (int i = 0; i < 8; ++i)
            *reinterpret_cast<float4*>(dv[i]) =
                *reinterpret_cast<const float4*>(gs + (mg * 8 + i) * SG + py * TW + px0);
#pragma unroll
          for (int r = 0; r < 3; ++r) {
            float xv[6];
#pragma unroll
            for (int j = 0; j < 6; ++j) xv[j] = xs[cl * CS + (py + r) * XW + px0 + j];
#pragma unroll
            for (int q = 0; q < 3; ++q)
#pragma unroll
              for (int i = 0; i < 8; ++i) {
                float s4 = acc[i * 9 + r * 3 + q];
#pragma unroll
                for (int j = 0; j < 4; ++j) s4 = fmaf(dv[i][j], xv[j + q], s4);
                acc[i * 9 + r * 3 + q] = s4;
              }
          }
        }
    } else {
#pragma unroll 2
      for (int p0 = 0; p0 < P; p0 += 8) {
        const int py = p0 / TW, px0 = p0 % TW;
        uint32_t af[2][4];
#pragma unroll
        for (int mi = 0; mi < 2; ++mi) {
          const float* gr = gs + (wm * 32 + mi * 16 + gq) * SG + p0 + tq;
          af[mi][0] = __float_as_uint(round_tf32(gr[0]));
          af[mi][1] = __float_as_uint(round_tf32(gr[8 * SG]));
          af[mi][2] = __float_as_uint(round_tf32(gr[4]));
          af[mi][3] = __float_as_uint(round_tf32(gr[8 * SG + 4]));
        }
        const float* xr = xs + (wn * 8 + gq) * CS + py * XW + px0 + tq;
#pragma unroll
        for (int tap = 0; tap < 9; ++tap) {
          uint32_t bf[2];
          bf[0] = __float_as_uint(xr[(tap / 3) * XW + tap % 3]);
          bf[1] = __float_as_uint(xr[(tap / 3) * XW + tap % 3 + 4]);
#pragma unroll
          for (int mi = 0; mi < 2; ++mi) Prec::mma(acc + (mi * 9 + tap) * 4, af[mi], bf);
        }
      }
    }
  };

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < steps) load(s, t_begin + s);
    cp_async_commit();
  }
  for (int st = 0; st < steps; ++st) {
    const int s = st % STAGES;
    cp_async_wait<STAGES - 2>();
    fix(s);
    __syncthreads();
    if (st + STAGES - 1 < steps) load((st + STAGES - 1) % STAGES, t_begin + st + STAGES - 1);
    cp_async_commit();
    if (want_bias && tid < BM) {
      const float* gr = Gs + s * G_STAGE + tid * SG;
      for (int p = 0; p < P; ++p) bias_sum += gr[p];
    }
    compute(s);
  }
  cp_async_wait<0>();

  const int N = a.c * 9;
  float* out = a.part + static_cast<int64_t>(blockIdx.z) * a.k * N;
  auto put = [&](int m, int ci, int tap, float v) {
    if (m < a.k && ci < a.c) out[static_cast<int64_t>(m) * N + ci * 9 + tap] = v;
  };
  if (!TF32) {
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int t = 0; t < 9; ++t) put(m0 + mg * 8 + i, c0 + cl, t, acc[i * 9 + t]);
  } else {
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int tap = 0; tap < 9; ++tap)
        frag_put(acc + (mi * 9 + tap) * 4, m0 + wm * 32 + mi * 16 + gq, c0 + wn * 8 + tq * 2,
                 [&](int m, int ci, float v) { put(m, ci, tap, v); });
  }
  if (want_bias && tid < BM && m0 + tid < a.k)
    a.bias_part[static_cast<int64_t>(blockIdx.z) * a.k + m0 + tid] = bias_sum;
}

// ---- host side ----------------------------------------------------------------------------
template <class K>
void ensure_smem(K kernel, size_t bytes) {
  // Above 48 KB a kernel must ask for its dynamic shared memory (not a stream operation).
  PDNN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(bytes)));
}

void check_geom(const ConvGeom& g, int64_t n, int64_t k) {
  conv3x3_check(g, "direct 3x3 convolution (GPU)");
  PDNN_CHECK(g.c * g.h * g.w < INT_MAX && k * g.oh * g.ow < INT_MAX && n < INT_MAX / 4,
             "direct 3x3 convolution: an image of %lld x %lld x %lld is too large for its "
             "32-bit indexing within an image", (long long)g.c, (long long)g.h, (long long)g.w);
}

// y (n, out_ch, oh, ow) = conv3x3 of x (n, in_ch, h, w) with re-laid-out weights wp.
template <class T>
void launch_fwd(const FwdArgs& a, CudaExec e) {
  const dim3 grid(static_cast<unsigned>(static_cast<int64_t>(a.n) * a.tiles_x * a.tiles_y),
                  static_cast<unsigned>((a.k + T::BM - 1) / T::BM));
  const size_t smem = T::smem_bytes();
  with_precision(e.tf32, [&](auto p) {
    using P = decltype(p);
    static bool once = (ensure_smem(direct_fwd<T, P>, smem), true);
    (void)once;
    direct_fwd<T, P><<<grid, T::THREADS, smem, stream_of(e)>>>(a);
  });
  PDNN_CUDA_LAUNCH_CHECK("direct 3x3 convolution");
}

void run_fwd(int in_ch, int h, int w, int out_ch, int oh, int ow, int pad, int64_t n,
             const float* x, const float* wp, int Mp, const float* b, float* y, Act act,
             DirectTile tile, CudaExec e, const float* msrc = nullptr, Act mact = {}) {
  FwdArgs a{};
  a.msrc = msrc;
  a.mact = mact;
  a.n = static_cast<int>(n);
  a.c = in_ch;
  a.h = h;
  a.w = w;
  a.k = out_ch;
  a.oh = oh;
  a.ow = ow;
  a.pad = pad;
  a.Mp = Mp;
  a.x = x;
  a.wp = wp;
  a.bias = b;
  a.y = y;
  a.act = act;
  const int th = tile == DirectTile::M32 ? 16 : 8, tw = 16;
  a.tiles_x = (ow + tw - 1) / tw;
  a.tiles_y = (oh + th - 1) / th;
  if (tile == DirectTile::M128) launch_fwd<Fwd128>(a, e);
  else if (tile == DirectTile::M64) launch_fwd<Fwd64>(a, e);
  else launch_fwd<Fwd32>(a, e);
}

// The block tile of a forward-kind pass with out_ch output channels at oh x ow, as measured on
// the H100 (W4's layers, results/bench/conv_gpu.csv of 2026-11-26): in fp32 the 32-row tile
// (8 x 8 outputs a thread over 16 x 16 pixels) wins up to 64 channels at 112 x 112 and above
// (conv4 forward 1.53 ms against 1.62 for 64 rows), the 64-row tile at 56 x 56 and for 128
// channels (conv5 0.97 against 1.05 for 128 rows); on the tensor cores the tile of the channel
// count wins (conv4 0.78 ms on 64 rows against 0.89 on 32, conv6 0.75 on 128 against 0.79).
DirectTile fwd_tile(int64_t out_ch, int64_t oh, int64_t ow, bool tf32) {
  if (out_ch <= 32) return DirectTile::M32;
  if (tf32) return out_ch <= 64 ? DirectTile::M64 : DirectTile::M128;
  return out_ch <= 64 && oh * ow >= 112 * 112 ? DirectTile::M32 : DirectTile::M64;
}

int sm_count() {
  int dev = 0, sms = 0;
  PDNN_CUDA_CHECK(cudaGetDevice(&dev));
  PDNN_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms;
}

struct BwwPlan {
  int bm, tiles_x, tiles_y, tiles, splits, per_split;
};
BwwPlan bww_plan(const ConvGeom& g, int64_t n, int64_t k, DirectTile tile) {
  BwwPlan p{};
  p.bm = tile == DirectTile::M32 ? 32 : 64;
  p.tiles_x = static_cast<int>((g.ow + 15) / 16);
  p.tiles_y = static_cast<int>((g.oh + 7) / 8);
  p.tiles = static_cast<int>(n) * p.tiles_x * p.tiles_y;
  const int64_t blocks = ((k + p.bm - 1) / p.bm) * ((g.c + 31) / 32);
  // about four blocks a multiprocessor, at least 8 patches a split
  const int64_t want = std::max<int64_t>(1, 4 * sm_count() / blocks);
  const int64_t splits = std::max<int64_t>(1, std::min<int64_t>(want, p.tiles / 8));
  p.per_split = static_cast<int>((p.tiles + splits - 1) / splits);
  p.splits = (p.tiles + p.per_split - 1) / p.per_split;
  return p;
}

template <class T, class P, bool MASK>
void launch_bww_one(const BwwArgs& a, int splits, CudaExec e) {
  const size_t smem = T::smem_bytes(MASK, P::kMma);
  static bool once = (ensure_smem(direct_bww<T, P, MASK>, smem), true);
  (void)once;
  const dim3 grid(static_cast<unsigned>((a.c + T::BC - 1) / T::BC),
                  static_cast<unsigned>((a.k + T::BM - 1) / T::BM), static_cast<unsigned>(splits));
  direct_bww<T, P, MASK><<<grid, T::THREADS, smem, stream_of(e)>>>(a);
  PDNN_CUDA_LAUNCH_CHECK("direct 3x3 backward-weights");
}

template <class T>
void launch_bww(const BwwArgs& a, int splits, bool mask, CudaExec e) {
  with_precision(e.tf32, [&](auto p) {
    if (mask) launch_bww_one<T, decltype(p), true>(a, splits, e);
    else launch_bww_one<T, decltype(p), false>(a, splits, e);
  });
}

}  // namespace

const char* direct_tile_name(DirectTile t) {
  switch (t) {
    case DirectTile::Auto: return "auto";
    case DirectTile::M128: return "m128";
    case DirectTile::M64: return "m64";
    case DirectTile::M32: return "m32";
  }
  return "?";
}

size_t conv2d_direct_ws(ConvPass pass, const ConvGeom& g, int64_t n, int64_t k) {
  if (pass == ConvPass::BackwardWeights) {
    const BwwPlan p = bww_plan(g, n, k, DirectTile::M64);  // the larger of either tile's split
    const BwwPlan q = bww_plan(g, n, k, DirectTile::M32);
    const int s = std::max(p.splits, q.splits);
    return static_cast<size_t>(s) * static_cast<size_t>(k) * static_cast<size_t>(g.c * 9 + 1);
  }
  // forward: weights [c][9][Mp]; backward-data: [k][9][Mp of c]
  const int64_t in_ch = pass == ConvPass::Forward ? g.c : k;
  const int64_t out_ch = pass == ConvPass::Forward ? k : g.c;
  return static_cast<size_t>(in_ch * 9 * conv3x3::round_up(out_ch, 128));
}

void conv2d_direct_forward(const ConvFwd& a, float* ws, CudaExec e, DirectTile tile) {
  const ConvGeom& g = a.g;
  const int64_t n = a.n, k = a.k;
  check_geom(g, n, k);
  if (n * k * g.oh * g.ow == 0) return;
  if (tile == DirectTile::Auto) tile = fwd_tile(k, g.oh, g.ow, e.tf32);
  const int Mp = static_cast<int>(conv3x3::round_up(k, 128));
  const int64_t total = g.c * 9 * Mp;
  prep_weights_k<<<blocks_for(total), kThreads, 0, stream_of(e)>>>(
      static_cast<int>(k), static_cast<int>(g.c), Mp, false, e.tf32, a.w, ws);
  PDNN_CUDA_LAUNCH_CHECK("direct 3x3 weights");
  run_fwd(static_cast<int>(g.c), static_cast<int>(g.h), static_cast<int>(g.w),
          static_cast<int>(k), static_cast<int>(g.oh), static_cast<int>(g.ow),
          static_cast<int>(g.ph), n, a.x, ws, Mp, a.b, a.y, a.act, tile, e);
}

void conv2d_direct_backward_data(const ConvBwd& a, float* ws, CudaExec e, DirectTile tile) {
  const ConvGeom& g = a.g;
  const int64_t n = a.n, k = a.k;
  PDNN_CHECK(a.act.kind == FusedAct::None,
             "conv2d_direct_backward_data: dy must already be through the activation");
  PDNN_CHECK(a.dx_act.kind == FusedAct::None || a.dx_src,
             "conv2d_direct_backward_data: dx through an activation needs its source");
  check_geom(g, n, k);
  if (n * g.c * g.h * g.w == 0) return;
  if (tile == DirectTile::Auto) tile = fwd_tile(g.c, g.h, g.w, e.tf32);
  const int Mp = static_cast<int>(conv3x3::round_up(g.c, 128));
  const int64_t total = k * 9 * Mp;
  prep_weights_k<<<blocks_for(total), kThreads, 0, stream_of(e)>>>(
      static_cast<int>(k), static_cast<int>(g.c), Mp, true, e.tf32, a.w, ws);
  PDNN_CUDA_LAUNCH_CHECK("direct 3x3 weights (rotated)");
  // dx = conv3x3(dy, rotated weights) with padding 2 - p: from k channels at oh x ow to c
  // channels at h x w.
  run_fwd(static_cast<int>(k), static_cast<int>(g.oh), static_cast<int>(g.ow),
          static_cast<int>(g.c), static_cast<int>(g.h), static_cast<int>(g.w),
          static_cast<int>(2 - g.ph), n, a.dy, ws, Mp, nullptr, a.dx, Act{}, tile, e, a.dx_src,
          a.dx_act);
}

void conv2d_direct_backward_weights(const ConvBwd& c, float* ws, CudaExec e, DirectTile tile) {
  const ConvGeom& g = c.g;
  const int64_t n = c.n, k = c.k;
  check_geom(g, n, k);
  if (k * g.c == 0) return;
  PDNN_CHECK(c.act.kind == FusedAct::None || c.y, "conv2d_direct_backward_weights: act needs y");
  if (tile == DirectTile::Auto) tile = k > 32 ? DirectTile::M64 : DirectTile::M32;
  if (tile == DirectTile::M128) tile = DirectTile::M64;  // the widest weight tile
  const BwwPlan p = bww_plan(g, n, k, tile);
  BwwArgs a{};
  a.n = static_cast<int>(n);
  a.c = static_cast<int>(g.c);
  a.h = static_cast<int>(g.h);
  a.w = static_cast<int>(g.w);
  a.k = static_cast<int>(k);
  a.oh = static_cast<int>(g.oh);
  a.ow = static_cast<int>(g.ow);
  a.pad = static_cast<int>(g.ph);
  a.tiles_x = p.tiles_x;
  a.tiles_y = p.tiles_y;
  a.tiles = p.tiles;
  a.per_split = p.per_split;
  a.x = c.x;
  a.dy = c.dy;
  a.y = c.y;
  a.act = c.act;
  a.part = ws;
  const int64_t N = g.c * 9;
  a.bias_part = c.db ? ws + static_cast<int64_t>(p.splits) * k * N : nullptr;
  const bool mask = c.act.kind != FusedAct::None;
  if (tile == DirectTile::M64) launch_bww<Bww64>(a, p.splits, mask, e);
  else launch_bww<Bww32>(a, p.splits, mask, e);
  sum_splits(p.splits, static_cast<int>(k), static_cast<int>(N), ws, a.bias_part, c.dw, c.db, e,
             "direct 3x3 backward-weights sum");
}

}  // namespace cuda
}  // namespace pdnn
