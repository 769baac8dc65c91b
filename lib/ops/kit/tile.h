// The block tile of the GEMM-shaped kernels (.cu files only): the compute of one K step from
// k-major shared memory, the walk over a block's outputs for the epilogue, and the loaders and
// epilogue pieces the convolution kernels share.
//
// A tile configuration T names: BM x BN outputs a block, BK reduction elements a step; on the
// FMA path TM x TN outputs a thread, on the tensor-core path WM x WN warps of MI x NI m16n8
// accumulators each; SA, SB the padded row strides of the k-major operands in shared memory,
// As[kk][m] and Bs[kk][n].
//   FMA: thread (ty, tx) owns rows ty*4 + {0..3} (+ BM/2 when TM = 8) and columns tx*4 + {0..3}
//     (+ BN/2 when TN = 8): per kk, TM/4 + TN/4 float4 reads of shared memory and TM*TN FMAs.
//   MMA: warp (wm, wn) owns a (BM/WM) x (BN/WN) tile of MI x NI mma tiles; per mma step it
//     reads MI A and NI B fragments and issues MI*NI mma.sync; the sums stay fp32.
//     TF32 (m16n8k8): fragments read element by element (ldmatrix moves 16-bit pairs, and a
//     k-major TF32 fragment needs single 32-bit elements across rows).
//     BF16 (m16n8k16): the k pairs a fragment register holds are not contiguous in k-major
//     memory, so ldmatrix.trans gathers them: per 16 kk, MI ldmatrix.x4.trans (A) and NI
//     ldmatrix.x2.trans (B), one instruction for what would be 4 (A) or 2 (B) 16-bit pair reads
//     a lane, with no bank conflict when the rows' byte stride is 16 mod 128 (SA, SB = BM + 8,
//     BN + 8 bf16 elements: 16 bytes of padding).
#pragma once
#include <cstdint>

#include "ops/activation.h"
#include "ops/kit/act.h"
#include "ops/kit/mma.h"

namespace pdnn {
namespace kit {

// This thread's place in the block tile, for either path: FMA (ty, tx) = (tid / (BN/TN),
// tid % (BN/TN)); MMA: warp (wm, wn) = (warp / WN, warp % WN), gq = lane / 4, tq = lane % 4.
// The kernel computes them (with the lane and warp it has) and passes them as values: the
// compiler then places them exactly as when the kernels wrote these loops inline.

// Accumulators a thread keeps for tile T on precision P's path.
template <class T, class P>
constexpr int tile_acc() {
  return P::kMma ? T::MI * T::NI * 4 : T::TM * T::TN;
}

// acc += the product of one K step from stage s of the k-major operands in shared memory:
// As + s*BK*SA (BK x SA elements P::Elem) times Bs + s*BK*SB (BK x SB); the stage's address is
// formed here, beside the reads, as when the kernels wrote this loop inline (the same
// registers). kRound (TF32): round the operands as they are read (else they were rounded when
// stored). BF16: stored as bf16 (P::elem), rows 16-byte aligned, BK a multiple of 16.
template <class T, class P, bool kRound>
__device__ __forceinline__ void tile_step(float* acc, const typename P::Elem* As,
                                          const typename P::Elem* Bs, int s, int ty, int tx,
                                          int wm, int wn, int gq, int tq) {
  constexpr int BM = T::BM, BN = T::BN, BK = T::BK;
  const typename P::Elem* as = As + s * (BK * T::SA);
  const typename P::Elem* bs = Bs + s * (BK * T::SB);
  if constexpr (!P::kMma) {
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float av[T::TM], bv[T::TN];
#pragma unroll
      for (int gi = 0; gi < T::TM / 4; ++gi)
        *reinterpret_cast<float4*>(av + 4 * gi) =
            *reinterpret_cast<const float4*>(as + kk * T::SA + gi * (BM * 4 / T::TM) + ty * 4);
#pragma unroll
      for (int gj = 0; gj < T::TN / 4; ++gj)
        *reinterpret_cast<float4*>(bv + 4 * gj) =
            *reinterpret_cast<const float4*>(bs + kk * T::SB + gj * (BN * 4 / T::TN) + tx * 4);
#pragma unroll
      for (int i = 0; i < T::TM; ++i)
#pragma unroll
        for (int j = 0; j < T::TN; ++j) acc[i * T::TN + j] = fmaf(av[i], bv[j], acc[i * T::TN + j]);
    }
  } else if constexpr (P::kK == 16) {
    static_assert(BK % 16 == 0 && T::SA % 8 == 0 && T::SB % 8 == 0, "BF16 ldmatrix tiles");
    // Lane l gives the address of row l % 8 of 8x8 matrix l / 8 (ops/kit/mma.h).
    const int lane = gq * 4 + tq, mat = lane / 8, row = lane % 8;
#pragma unroll
    for (int k16 = 0; k16 < BK; k16 += 16) {
      uint32_t af[T::MI][4], bf[T::NI][2];
#pragma unroll
      for (int mi = 0; mi < T::MI; ++mi) {
        // matrix j: kk rows 8 (j / 2) .. + 7, m columns 8 (j % 2) .. + 7, transposed: a0..a3
        const int m = wm * (BM / T::WM) + mi * 16;
        ldmatrix_x4_trans(af[mi], as + (k16 + row + 8 * (mat / 2)) * T::SA + m + 8 * (mat % 2));
      }
#pragma unroll
      for (int ni = 0; ni < T::NI; ++ni) {
        // matrices 0, 1: kk rows 0-7 and 8-15 of n columns nn .. nn + 7, transposed: b0, b1
        // (lanes 16-31 give addresses x2 does not read)
        const int nn = wn * (BN / T::WN) + ni * 8;
        ldmatrix_x2_trans(bf[ni], bs + (k16 + row + 8 * (mat % 2)) * T::SB + nn);
      }
#pragma unroll
      for (int mi = 0; mi < T::MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < T::NI; ++ni) P::mma(acc + (mi * T::NI + ni) * 4, af[mi], bf[ni]);
    }
  } else {
#define PDNN_KIT_CV(v) (kRound ? tf32_bits(v) : __float_as_uint(v))
#pragma unroll
    for (int k8 = 0; k8 < BK; k8 += 8) {
      uint32_t af[T::MI][4], bf[T::NI][2];
#pragma unroll
      for (int mi = 0; mi < T::MI; ++mi) {
        const int m = wm * (BM / T::WM) + mi * 16 + gq;
        af[mi][0] = PDNN_KIT_CV(as[(k8 + tq) * T::SA + m]);
        af[mi][1] = PDNN_KIT_CV(as[(k8 + tq) * T::SA + m + 8]);
        af[mi][2] = PDNN_KIT_CV(as[(k8 + tq + 4) * T::SA + m]);
        af[mi][3] = PDNN_KIT_CV(as[(k8 + tq + 4) * T::SA + m + 8]);
      }
#pragma unroll
      for (int ni = 0; ni < T::NI; ++ni) {
        const int nn = wn * (BN / T::WN) + ni * 8 + gq;
        bf[ni][0] = PDNN_KIT_CV(bs[(k8 + tq) * T::SB + nn]);
        bf[ni][1] = PDNN_KIT_CV(bs[(k8 + tq + 4) * T::SB + nn]);
      }
#undef PDNN_KIT_CV
#pragma unroll
      for (int mi = 0; mi < T::MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < T::NI; ++ni) P::mma(acc + (mi * T::NI + ni) * 4, af[mi], bf[ni]);
    }
  }
}

// put(m, n, value) over a warp's MI x NI m16n8 accumulators laid out (mi * NI + ni) * 4, tile
// (mi, ni) at rows m0 + mi*16, columns n0 + ni*8 (m0, n0: the warp's first row and column).
template <int MI, int NI, class Put>
__device__ __forceinline__ void mma_tiles_for_each(const float* acc, int m0, int n0, int gq,
                                                   int tq, Put&& put) {
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
      frag_put(acc + (mi * NI + ni) * 4, m0 + mi * 16 + gq, n0 + ni * 8 + tq * 2, put);
}

// put(m, n, value) for each of this thread's outputs, (m0, n0) the block's first, in a fixed
// order (FMA: row-major over its TM x TN; MMA: over its accumulators, frag_put's order).
template <class T, class P, class Put>
__device__ __forceinline__ void tile_for_each(const float* acc, int ty, int tx, int wm, int wn,
                                              int gq, int tq, int m0, int n0, Put&& put) {
  constexpr int BM = T::BM, BN = T::BN;
  if constexpr (!P::kMma) {
#pragma unroll
    for (int i = 0; i < T::TM; ++i)
#pragma unroll
      for (int j = 0; j < T::TN; ++j)
        put(m0 + (i / 4) * (BM * 4 / T::TM) + ty * 4 + i % 4,
            n0 + (j / 4) * (BN * 4 / T::TN) + tx * 4 + j % 4, acc[i * T::TN + j]);
  } else {
#pragma unroll
    for (int mi = 0; mi < T::MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < T::NI; ++ni)
        frag_put(acc + (mi * T::NI + ni) * 4, m0 + wm * (BM / T::WM) + mi * 16 + gq,
                 n0 + wn * (BN / T::WN) + ni * 8 + tq * 2, put);
  }
}

// The forward epilogue's bias of channel m (0 without a bias): act_apply(v + bias_of(b, m), act).
__device__ __forceinline__ float bias_of(const float* bias, int m) {
  return bias ? __ldg(bias + m) : 0.f;
}

// ---- halo tiles (3x3 stride-1 kernels) -----------------------------------------------------
// Copies channels [c0, c0 + CH) of an input patch with its halo, XR x XW pixels from (iy0, ix0)
// of image xim (c channels of h x w), into xs[ch][CS] (rows of XW), by cp.async: zeros outside
// the image and past the channels. `any` is a valid address for the copies that read nothing.
// kRowCol: the destination addressed as ci*CS + row*XW + col rather than ci*CS + (its offset in
// the patch): the same address; each kernel keeps the form it was tuned with, which the compiler
// schedules into the same registers as before.
template <int CH, int XR, int XW, int CS, int THREADS, bool kRowCol>
__device__ __forceinline__ void load_halo_tile(float* xs, const float* xim, const float* any,
                                               int c0, int c, int h, int w, int iy0, int ix0,
                                               int tid) {
  const int hw = h * w;
  for (int e = tid; e < CH * XR * XW; e += THREADS) {
    const int ci = e / (XR * XW), rc = e - ci * (XR * XW);
    const int row = rc / XW, col = rc - row * XW;
    const int iy = iy0 + row, ix = ix0 + col;
    const bool ok = c0 + ci < c && static_cast<unsigned>(iy) < static_cast<unsigned>(h) &&
                    static_cast<unsigned>(ix) < static_cast<unsigned>(w);
    cp_async4(xs + ci * CS + (kRowCol ? row * XW + col : rc), ok ? xim + (c0 + ci) * hw + iy * w + ix : any,
              ok);
  }
}
// The elements of such a tile that this thread copied, rounded to TF32 in place (after its
// copies completed: cp_async_wait).
template <int CH, int XR, int XW, int CS, int THREADS>
__device__ __forceinline__ void round_halo_tile(float* xs, int tid) {
  for (int e = tid; e < CH * XR * XW; e += THREADS) {
    const int ci = e / (XR * XW), rc = e - ci * (XR * XW);
    xs[ci * CS + rc] = round_tf32(xs[ci * CS + rc]);
  }
}

// ---- bf16 halo tiles, pixel-major (the direct kernels' BF16 paths) --------------------------
// The walk both staging loaders below (HaloPairsBf16, HaloPairsF32) take over a halo tile of XB
// pixels in rows XWB wide (from an even column), by pixel pairs: thread t's units are pairs
// t / 4 + j THREADS / 4 (j < RJ), so that a unit's place in x follows from the previous one's
// by compile-time steps (no division a unit, 32-bit offsets) and its shared address from the
// thread's by a compile-time offset.
template <int XWB, int XB, int THREADS>
struct HaloPairWalk {
  static constexpr int NPP = XB / 2, PPT = THREADS / 4, RJ = (NPP + PPT - 1) / PPT;
  static constexpr int DROW = 2 * PPT / XWB, DCOL = 2 * PPT % XWB;  // the step, rows/columns
  static_assert(XWB % 2 == 0 && XB % XWB == 0 && THREADS % 4 == 0, "pixel pairs");
  int pp0, iy, ix, ix_end;  // the thread's first pair; the current unit's first pixel in x; the
                            // tile's column end

  __device__ __forceinline__ HaloPairWalk(int iy0, int ix0e, int tid) {
    pp0 = tid >> 2;
    const int r0 = 2 * pp0 / XWB;
    iy = iy0 + r0;
    ix = ix0e + 2 * pp0 - r0 * XWB;
    ix_end = ix0e + XWB;
  }
  __device__ __forceinline__ void next() {
    ix += DCOL;
    iy += DROW;
    if (ix >= ix_end) {
      ix -= XWB;
      ++iy;
    }
  }
  // Whether the thread whose first pair is pp has its unit j past the tile's pairs (only the
  // last round, j = RJ - 1, can be), and whether this thread has a unit j.
  __device__ __forceinline__ static bool past(int j, int pp) { return pp + j * PPT >= NPP; }
  __device__ __forceinline__ bool has(int j) const { return j < RJ - 1 || pp0 + j * PPT < NPP; }
  // In a tile of XP 16-bit units a pixel: the thread's first unit's first pixel at its 4-byte
  // column tid % 4 of xs, and unit j's offset from it.
  template <int XP>
  __device__ __forceinline__ static uint16_t* base(uint16_t* xs, int tid) {
    return xs + 2 * (tid >> 2) * XP + 2 * (tid & 3);
  }
  template <int XP>
  __device__ __forceinline__ static constexpr int unit(int j) { return 2 * j * PPT * XP; }
};

// G groups of 8 channels of a halo tile of x (NCHW bf16) staged through registers into shared
// memory as [pixel of the tile][channel] (XP elements a pixel: rows of channels for ldmatrix),
// XB pixels in rows XWB (even) wide from an even column. The units are (channel pair, pixel
// pair): thread t copies channel pairs t % 4 + 4 g at HaloPairWalk's pixel pairs; the two
// channels' pixel pairs become two channel pairs by byte permutes (a 4-byte store each).
// Where x's pixel pairs are 4-byte aligned (`pairs`: w even, x aligned, the tile from an even
// column) a unit's channel is one 4-byte load, else two 2-byte loads. Zeros outside the image
// and past its channels.
template <int XWB, int XB, int XP, int THREADS, int G>
struct HaloPairsBf16 {
  using Walk = HaloPairWalk<XWB, XB, THREADS>;
  static constexpr int RJ = Walk::RJ;
  static_assert(XP % 2 == 0, "pixel pairs");
  uint32_t r[G][RJ][2];  // group g: channel c's and c + 1's pixel pair

  // Channels cb + 8 g + 2 (tid % 4) (and + 1) of xim (nch channels of h x w), the tile's first
  // pixel (iy0, ix0e), ix0e even.
  __device__ __forceinline__ void load(const bf16* xim, int nch, int h, int w, int cb, int iy0,
                                       int ix0e, bool pairs, int tid) {
    Walk u(iy0, ix0e, tid);
    const int hw = h * w;
    const int c = cb + 2 * (tid & 3);
    // read only where the channel exists: offsets within an image are 32-bit
    const bf16* xc = xim + static_cast<int64_t>(c) * hw;
    if (pairs) {  // ix even, w even: both pixels in the image or neither
#pragma unroll
      for (int j = 0; j < RJ; ++j) {
        const bool ok = u.has(j) &&
                        static_cast<unsigned>(u.iy) < static_cast<unsigned>(h) &&
                        static_cast<unsigned>(u.ix) < static_cast<unsigned>(w);
        const int off = u.iy * w + u.ix;
#pragma unroll
        for (int g = 0; g < G; ++g) {
          const bf16* p = xc + static_cast<int64_t>(8 * g) * hw + off;
          r[g][j][0] = ok && c + 8 * g < nch ? ldg_bits32(p) : 0u;
          r[g][j][1] = ok && c + 8 * g + 1 < nch ? ldg_bits32(p + hw) : 0u;
        }
        u.next();
      }
    } else {
#pragma unroll
      for (int j = 0; j < RJ; ++j) {
        const bool in_y = u.has(j) &&
                          static_cast<unsigned>(u.iy) < static_cast<unsigned>(h);
        const bool ok0 = in_y && static_cast<unsigned>(u.ix) < static_cast<unsigned>(w);
        const bool ok1 = in_y && static_cast<unsigned>(u.ix + 1) < static_cast<unsigned>(w);
        const int off = u.iy * w + u.ix;
#pragma unroll
        for (int g = 0; g < G; ++g) {
          const bf16* p = xc + static_cast<int64_t>(8 * g) * hw + off;
          const bool c0 = c + 8 * g < nch, c1 = c + 8 * g + 1 < nch;
          r[g][j][0] =
              (ok0 && c0 ? ldg_bits16(p) : 0u) | (ok1 && c0 ? ldg_bits16(p + 1) : 0u) << 16;
          r[g][j][1] = (ok0 && c1 ? ldg_bits16(p + hw) : 0u) |
                       (ok1 && c1 ? ldg_bits16(p + hw + 1) : 0u) << 16;
        }
        u.next();
      }
    }
  }
  // The loaded units into xs (the stage's tile, at channel cb's column): (c, c + 1) at pixel
  // 2 pp, then at 2 pp + 1.
  __device__ __forceinline__ void store(uint16_t* xs, int tid) const {
    uint16_t* base = Walk::template base<XP>(xs, tid);
#pragma unroll
    for (int j = 0; j < RJ; ++j) {
      if (j == RJ - 1 && Walk::past(j, tid >> 2)) break;
#pragma unroll
      for (int g = 0; g < G; ++g) {
        uint32_t* dst = reinterpret_cast<uint32_t*>(base + Walk::template unit<XP>(j) + 8 * g);
        dst[0] = __byte_perm(r[g][j][0], r[g][j][1], 0x5410);
        dst[XP / 2] = __byte_perm(r[g][j][0], r[g][j][1], 0x7632);
      }
    }
  }
};

// The same tile for a float32 input on the TF32 path: a stage is 8 channels (32 bytes a pixel,
// as bf16's 16), a half of it 4, so that the tile's bytes, and every ldmatrix address into it,
// are bf16's (an ldmatrix row of 16 bytes holds 4 TF32 elements, which land in the mma's
// fragment order: kit/mma.h). The units are (channel, pixel pair): thread t copies channel
// cb + t % 4 at HaloPairsBf16's pixel pairs, one 8-byte load where `pairs` (w even, x 8-byte
// aligned, the tile from an even column), else two 4-byte ones; a 4-byte store a pixel,
// rounded to TF32 as it is stored (cvt.rna, once an element: the inner loop converts nothing).
// Not as it arrives: the rounding reads the loaded register, so in load() it made the warp
// wait for the next step's loads before the current step's mma (W4 conv2's TF32 forward, ncu:
// 61% of its stall cycles on those loads, 2.7x bf16's time where the rate and bytes give 2x);
// in store() the loads are in flight while the step computes, as bf16's are.
template <int XWB, int XB, int XP, int THREADS>
struct HaloPairsF32 {
  using Walk = HaloPairWalk<XWB, XB, THREADS>;
  static constexpr int RJ = Walk::RJ;
  static_assert(XP % 2 == 0, "pixel pairs");
  float r[RJ][2];  // pixel 2pp's and 2pp + 1's values as loaded

  __device__ __forceinline__ void load(const float* xim, int nch, int h, int w, int cb, int iy0,
                                       int ix0e, bool pairs, int tid) {
    Walk u(iy0, ix0e, tid);
    const int hw = h * w;
    const int c = cb + (tid & 3);
    const bool ck = c < nch;
    const float* xc = xim + static_cast<int64_t>(ck ? c : 0) * hw;
#pragma unroll
    for (int j = 0; j < RJ; ++j) {
      const bool in_y = ck && u.has(j) &&
                        static_cast<unsigned>(u.iy) < static_cast<unsigned>(h);
      const bool ok0 = in_y && static_cast<unsigned>(u.ix) < static_cast<unsigned>(w);
      const int off = u.iy * w + u.ix;
      if (pairs) {  // ix even, w even: both pixels in the image or neither
        const float2 v = ok0 ? __ldg(reinterpret_cast<const float2*>(xc + off)) : float2{0.f, 0.f};
        r[j][0] = v.x;
        r[j][1] = v.y;
      } else {
        const bool ok1 = in_y && static_cast<unsigned>(u.ix + 1) < static_cast<unsigned>(w);
        r[j][0] = ok0 ? __ldg(xc + off) : 0.f;
        r[j][1] = ok1 ? __ldg(xc + off + 1) : 0.f;
      }
      u.next();
    }
  }
  // The loaded units into xs (16-bit units, the stage's tile at its half's column): channel
  // cb + t % 4 at pixel 2 pp, then at 2 pp + 1.
  __device__ __forceinline__ void store(uint16_t* xs, int tid) const {
    uint16_t* base = Walk::template base<XP>(xs, tid);
#pragma unroll
    for (int j = 0; j < RJ; ++j) {
      if (j == RJ - 1 && Walk::past(j, tid >> 2)) break;
      uint32_t* dst = reinterpret_cast<uint32_t*>(base + Walk::template unit<XP>(j));
      dst[0] = tf32_bits(r[j][0]);
      dst[XP / 2] = tf32_bits(r[j][1]);
    }
  }
};

// ---- bf16 halo tiles from a channel-minor copy (cp.async) ---------------------------------
// One group of 16 channels of a halo tile into shared memory as [pixel of the tile][XP
// channels] (XB pixels in rows XWB wide, the tile's first pixel (iy0, ix0)), from xg: one
// image's group of a channel-minor copy, [h][w][16] (conv2d_gpu.h's conv2d_direct_channel_minor:
// a pixel's 16 channels are 32 contiguous bytes), by 16-byte cp.async, nothing through
// registers. Units (pixel, half of its channels): thread t copies units t + j THREADS. Zeros
// outside the image (cp.async's zero fill: the source is not read). The caller commits.
template <int XWB, int XB, int XP, int THREADS>
struct HaloCm16 {
  static constexpr int UNITS = 2 * XB, RJ = (UNITS + THREADS - 1) / THREADS;
  static_assert(XP % 8 == 0 && XP >= 16, "16-byte aligned pixels of 16 channels");
  __device__ __forceinline__ static void load(uint16_t* xs, const bf16* xg, int h, int w, int iy0,
                                              int ix0, int tid) {
#pragma unroll
    for (int j = 0; j < RJ; ++j) {
      const int e = tid + j * THREADS;
      if (RJ * THREADS > UNITS && e >= UNITS) break;
      const int p = e >> 1, hh = e & 1, r = p / XWB;  // XWB compile-time: a multiply
      const int iy = iy0 + r, ix = ix0 + p - r * XWB;
      const bool ok = static_cast<unsigned>(iy) < static_cast<unsigned>(h) &&
                      static_cast<unsigned>(ix) < static_cast<unsigned>(w);
      cp_async16(xs + p * XP + hh * 8, ok ? xg + (iy * w + ix) * 16 + hh * 8 : xg, ok);
    }
  }
};

// The halos of several images side by side in one tile (the direct kernels' BF16 paths at
// small outputs): image i's halo row r (hr rows), pixel pair cp (hwp pairs from an even column)
// at tile pixel i is + r rs + 2 cp, every image's halo its own (zeros outside its image, never a
// neighbour's pixels). (rs, is: row and image strides of the tile, chosen by the host so that
// consecutive output pixels fall on different bank groups.) The units are HaloPairsBf16's:
// thread t copies channel pairs t % 4 + 4 g at pixel pairs t / 4 + j THREADS / 4 of the
// flattened halos, the step (di images, dr rows, dc pairs) made once on the host, so that a unit
// follows from the previous one by adds and two carries (no division a unit).
struct ImgHalo {
  int imgs, hr, hwp, rs, is;  // images a tile, halo rows, halo pixel pairs a row, strides
  int di, dr, dc;             // THREADS / 4 pairs as images, rows, pairs (dr < hr, dc < hwp)
};
template <int XP, int THREADS, int G, int RJ>
struct HaloImagesBf16 {
  static constexpr int PPT = THREADS / 4;
  static_assert(THREADS % 4 == 0 && XP % 2 == 0, "pixel pairs");
  uint32_t r[G][RJ][2];
  int dst[RJ];  // unit j's tile pixel, -1 past the tile's halos

  // Channels cb + 8 g + 2 (tid % 4) (and + 1) of images x0 + i (img_elems elements apart, nch
  // channels of h x w; images past `left` are zeros), halo rows from iy0, columns from ix0e
  // (even). (i0, r0, c0): the thread's first unit, pair tid / 4 of the flattened halos.
  __device__ __forceinline__ void load(const bf16* x0, int64_t img_elems, int left, int nch, int h,
                                       int w, int cb, int iy0, int ix0e, bool pairs,
                                       const ImgHalo& gm, int i0, int r0, int c0, int tid) {
    int i = i0, rr = r0, cp = c0;
    const int hw = h * w, c = cb + 2 * (tid & 3);
#pragma unroll
    for (int j = 0; j < RJ; ++j) {
      const bool in_tile = i < gm.imgs;
      dst[j] = in_tile ? i * gm.is + rr * gm.rs + 2 * cp : -1;
      const int iy = iy0 + rr, ix = ix0e + 2 * cp;
      const bool in_y = in_tile && i < left && static_cast<unsigned>(iy) < static_cast<unsigned>(h);
      const bool ok0 = in_y && static_cast<unsigned>(ix) < static_cast<unsigned>(w);
      const bool ok1 = in_y && static_cast<unsigned>(ix + 1) < static_cast<unsigned>(w);
      // read only where the image and channel exist: the 64-bit image offset, 32-bit within
      const bf16* xc = x0 + (in_y ? i * img_elems : 0) + static_cast<int64_t>(c) * hw + iy * w + ix;
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const bf16* p = xc + static_cast<int64_t>(8 * g) * hw;
        const bool c0k = c + 8 * g < nch, c1k = c + 8 * g + 1 < nch;
        if (pairs) {  // ix even, w even: both pixels in the image or neither
          r[g][j][0] = ok0 && c0k ? ldg_bits32(p) : 0u;
          r[g][j][1] = ok0 && c1k ? ldg_bits32(p + hw) : 0u;
        } else {
          r[g][j][0] =
              (ok0 && c0k ? ldg_bits16(p) : 0u) | (ok1 && c0k ? ldg_bits16(p + 1) : 0u) << 16;
          r[g][j][1] = (ok0 && c1k ? ldg_bits16(p + hw) : 0u) |
                       (ok1 && c1k ? ldg_bits16(p + hw + 1) : 0u) << 16;
        }
      }
      cp += gm.dc;
      rr += gm.dr;
      i += gm.di;
      if (cp >= gm.hwp) {
        cp -= gm.hwp;
        ++rr;
      }
      if (rr >= gm.hr) {
        rr -= gm.hr;
        ++i;
      }
    }
  }
  // The loaded units into xs (the stage's tile, at channel cb's column), as HaloPairsBf16's.
  __device__ __forceinline__ void store(uint16_t* xs, int tid) const {
    uint16_t* base = xs + 2 * (tid & 3);
#pragma unroll
    for (int j = 0; j < RJ; ++j) {
      if (dst[j] < 0) continue;
#pragma unroll
      for (int g = 0; g < G; ++g) {
        uint32_t* d = reinterpret_cast<uint32_t*>(base + dst[j] * XP + 8 * g);
        d[0] = __byte_perm(r[g][j][0], r[g][j][1], 0x5410);
        d[XP / 2] = __byte_perm(r[g][j][0], r[g][j][1], 0x7632);
      }
    }
  }
};

}  // namespace kit
}  // namespace pdnn
