// Implicit-GEMM convolution on the GPU, forward and backward-weights (conv2d_gpu.h): each pass
// is one matrix product C (M x N) = A (M x K) B (K x N) whose operands are gathered straight
// from the NCHW tensors into shared memory, a tile at a time (the im2col matrix of W4's conv2 would
// be 3.7 GB). A stride-1 backward-data runs on the forward kernel over flipped weights
// (conv2d.cu); strided backward-data has its own kernel (conv2d_implicit_backward_data.cu).
//
//   pass              M   N                        K                     A(m, kk)           B(kk, n)
//   forward           k   n*oh*ow output pixels    c*kh*kw taps          w[m][tap]          x at the pixel's tap
//   backward-weights  k   c*kh*kw taps             n*oh*ow pixels, split act'(y).dy[m][px]  x at the pixel's tap
//
// The pipeline (one block = one BM x BN tile of C, K walked in steps of BK): every element of
// the A and B tiles is copied global -> shared memory by cp.async (4 bytes each; the source size
// 0 where the tap falls in the padding, so the copy writes the zero), STAGES steps in flight, so
// the gathers of steps k+1..k+STAGES-1 overlap the arithmetic of step k and no register holds a
// loaded value. Per step: wait for the oldest copy group, (backward-weights with a fused
// activation: each thread multiplies the dy elements it copied by act'(y) of the y elements it
// copied beside them), one barrier, queue the copies of step k+STAGES-1 into the buffer freed
// by step k-1, compute step k.
//
// Shared memory is k-major, As[kk][m] and Bs[kk][n], rows padded by 8 floats: the TF32 fragment
// reads (8 rows t, 8 columns g a warp) and the copies below fall on 32 different banks.
// Who copies what:
//   - operands contiguous along K (forward's A = weights, backward-weights' A = dy and B = x
//     along the pixels): a warp covers 4 kk x 8 rows, lane l at (l % 4, l / 4); the warp's kk
//     group is fixed for the block, so a backward-weights thread decodes its pixel (image, row,
//     column) once per step for all its A and B elements;
//   - forward's B (x along the pixels of a row): lanes along n, each thread keeps its columns'
//     image offset and top-left input position in registers; the tap (ci, r, q) of each kk comes
//     from a table in shared memory, filled once per block.
// Compute, per step of BK:
//   - fp32 (FMA units): thread (ty, tx) owns TM x TN outputs, rows ty*4 + {0..3} (+ BM/2 when
//     TM = 8), columns tx*4 + {0..3} (+ BN/2 when TN = 8): per kk, TM/4 + TN/4 float4 reads of
//     shared memory and TM*TN FMAs.
//   - TF32 (tensor cores, mma.sync m16n8k8): warp (wm, wn) owns a (BM/WM) x (BN/WN) tile of
//     MI x NI mma tiles; per 8 kk it reads MI A fragments and NI B fragments (4 and 2 floats a
//     thread), rounds them to TF32 (round to nearest, as cuBLAS) and issues MI*NI mma.sync; the
//     sums stay fp32.
// Backward-weights splits K over blockIdx.z: each split writes its partial tile to a workspace
// and sum_splits adds them in split order (deterministic; PyTorch's default cuDNN algorithms
// for this pass use atomics and are not). Its bias gradient is summed in the same blocks (those
// of the first column of tiles), from the shared A tile after the activation, in a fixed order.
//
// Index arithmetic: 32-bit within one image and for N, K, 64-bit image offsets, so a batch of
// any size whose n*oh*ow stays under 2^31 runs (W4 at 1344: 3.7 billion elements in a tensor).
// An image of 2^31 elements or more (the U-Net at batch 1 from side 4096) runs the 64-bit
// instantiation (I = int64_t, chosen on the host by conv_implicit_wide, conv2d_gpu_ws.h): only
// the tap table's offsets, ci*h*w + r*w + q, are 64-bit there (16-byte entries instead of 8,
// 9 KB more shared memory for the forward's table); every product, plane and count stays 32-bit
// (h*w < 2^31 up to a side of 46,000; conv_implicit_fits), and the 32-bit instantiation is the
// same code as before the switch.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <type_traits>

#include "core/error.h"
#include "cuda/launch.h"
#include "ops/conv/conv2d_gpu.h"
#include "ops/kit/mma.h"
#include "ops/kit/split_k.h"
#include "ops/kit/tile.h"

namespace pdnn {
namespace cuda {

namespace {

using namespace kit;

// ---- tile configurations -----------------------------------------------------------------
// BM x BN outputs a block, BK reduction elements a step, STAGES steps in flight; TM x TN
// outputs a thread on the FMA path, WM x WN warps on the tensor-core path.
template <int BM_, int BN_, int BK_, int TM_, int TN_, int WM_, int WN_, int STAGES_>
struct Cfg {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, TM = TM_, TN = TN_, WM = WM_, WN = WN_;
  static constexpr int STAGES = STAGES_;
  static constexpr int THREADS = (BM / TM) * (BN / TN), WARPS = THREADS / 32;
  static constexpr int MI = BM / WM / 16, NI = BN / WN / 8;
  static constexpr int SA = BM + 8, SB = BN + 8;  // padded rows (8 mod 32 banks)
  static constexpr int A_STAGE = BK * SA, B_STAGE = BK * SB;
  // Elements a thread copies per step.
  static constexpr int RA = BM * BK / THREADS, RB = BK * BN / THREADS;
  // K-contiguous copies: a warp covers 4 kk x 8 rows; KG groups of 4 kk fill BK.
  static constexpr int KG = BK / 4;
  static_assert(WM * WN == WARPS, "the warps cover the block on the tensor-core path");
  static_assert(TM % 4 == 0 && TN % 4 == 0 && MI >= 1 && NI >= 1 && BK % 8 == 0, "tile shape");
  static_assert(WARPS % KG == 0, "each warp keeps one group of 4 kk");
  static_assert(RA >= 1 && RB >= 1 && BM * BK % THREADS == 0 && BK * BN % THREADS == 0,
                "every thread copies alike");
  static_assert(BM % (8 * (WARPS / KG)) == 0 && BN % (8 * (WARPS / KG)) == 0,
                "the K-contiguous copies cover the rows");
  static size_t smem_bytes(bool mask) {
    return sizeof(float) * STAGES * (A_STAGE * (mask ? 2 : 1) + B_STAGE);
  }
};
// The configurations the kernels are built in (tile_name() below names them).
using C128x128 = Cfg<128, 128, 16, 8, 8, 2, 4, 3>;
using C64x128 = Cfg<64, 128, 16, 8, 8, 2, 2, 4>;
using C32x256 = Cfg<32, 256, 16, 8, 8, 1, 4, 3>;
using C32x128 = Cfg<32, 128, 16, 4, 8, 1, 4, 4>;
using C32x32 = Cfg<32, 32, 8, 4, 4, 1, 2, 4>;

enum Pass { kForward, kBackwardWeights };
// Taps a forward keeps in its shared table (9 KB): W4's widest layer has 128*9 = 1152.
constexpr int kTapTable = 1152;

// A tap's (offset within the image, r<<16|q) in the tables below: int2, or with 64-bit offsets
// longlong2 (I = int64_t).
template <class I>
using TapEntry = typename std::conditional<sizeof(I) == 8, longlong2, int2>::type;
template <class I>
__device__ __forceinline__ TapEntry<I> tap_entry(I off, int rq) {
  TapEntry<I> t;
  t.x = off;
  t.y = rq;
  return t;
}

struct Args {
  int n, c, h, w, k, kh, kw, sh, sw, ph, pw, oh, ow;
  int M, N, K;
  const float* x;     // both passes: the B gather
  const float* wt;    // forward: A
  const float* dy;    // backward-weights: A
  const float* y;     // backward-weights with a fused activation: act' read off it
  const float* bias;  // forward
  float* out;         // forward: y (n,k,oh,ow); backward-weights: the split partials (z, M, N)
  float* bias_part;   // backward-weights with a bias gradient: (z, M) row sums
  Act act;
  int k_chunk;        // backward-weights: reduction elements per split, a multiple of BK
  FastDiv ohw, ow_div, taps, kw_div;
};

// ---- the kernel ---------------------------------------------------------------------------
template <class T, int PASS, class P, bool MASK, class I>
__global__ void __launch_bounds__(T::THREADS) igemm(const Args a) {
  constexpr int BM = T::BM, BN = T::BN, BK = T::BK, STAGES = T::STAGES, THREADS = T::THREADS;
  extern __shared__ __align__(16) float smem[];
  float* As = smem;                                   // STAGES x [BK][SA]
  float* Bs = As + STAGES * T::A_STAGE;               // STAGES x [BK][SB]
  float* Ys = MASK ? Bs + STAGES * T::B_STAGE : nullptr;  // STAGES x [BK][SA]: y beside dy
  // (ci*h*w + r*w + q, r<<16|q) of a tap: forward, of each kk when K fits (else decoded at each
  // copy); backward-weights, of the block's BN columns.
  __shared__ TapEntry<I> tap_tab[PASS == kForward ? kTapTable : BN];

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int hw = a.h * a.w, ohw = a.oh * a.ow;
  const int k_begin = PASS == kBackwardWeights ? blockIdx.z * a.k_chunk : 0;
  const int k_end = PASS == kBackwardWeights ? min(a.K, k_begin + a.k_chunk) : a.K;
  const int steps = (k_end - k_begin + BK - 1) / BK;

  // K-contiguous copies: this thread's kk within a step, and the first of its rows.
  const int ck = lane % 4 + 4 * (warp % T::KG);
  const int crow = lane / 4 + 8 * (warp / T::KG);
  constexpr int kRowStep = 8 * (T::WARPS / T::KG);

  // ---- set-up that stays fixed along K ------------------------------------------------------
  constexpr int NB = BN < THREADS ? BN : THREADS;  // forward B: columns copied side by side
  constexpr int CB = BN / NB, RS = THREADS / NB;   // columns a thread, kk stride between its rows
  int64_t col_off[PASS == kForward ? CB : 1];      // x offset of (image, iy0, ix0)
  int col_iy[PASS == kForward ? CB : 1], col_ix[PASS == kForward ? CB : 1];
  if (PASS == kForward) {
    for (int kk = tid; kk < min(a.K, kTapTable); kk += THREADS) {
      const uint32_t ci = a.taps.div(kk), rq = kk - ci * a.taps.d;
      const uint32_t r = a.kw_div.div(rq), q = rq - r * a.kw_div.d;
      tap_tab[kk] = tap_entry<I>(static_cast<I>(ci) * hw + static_cast<int>(r) * a.w + static_cast<int>(q),
                                 static_cast<int>(r << 16 | q));
    }
#pragma unroll
    for (int u = 0; u < CB; ++u) {
      const int nn = n0 + tid % NB + u * NB;
      col_iy[u] = INT_MIN / 2;  // a column past N: every tap out of range, copies write 0
      col_ix[u] = 0;
      col_off[u] = 0;
      if (nn < a.N) {
        const uint32_t img = a.ohw.div(nn), pix = nn - img * a.ohw.d;
        const uint32_t oy = a.ow_div.div(pix), ox = pix - oy * a.ow_div.d;
        col_iy[u] = static_cast<int>(oy) * a.sh - a.ph;
        col_ix[u] = static_cast<int>(ox) * a.sw - a.pw;
        col_off[u] = static_cast<int64_t>(img) * a.c * hw + static_cast<int64_t>(col_iy[u]) * a.w +
                     col_ix[u];
      }
    }
    __syncthreads();  // tap_tab
  } else {
    for (int i = tid; i < BN; i += THREADS) {
      const int nn = n0 + i;
      TapEntry<I> t = tap_entry<I>(0, 0x7fff << 16);  // a column past N: row 32767, out of range
      if (nn < a.N) {
        const uint32_t ci = a.taps.div(nn), rq = nn - ci * a.taps.d;
        const uint32_t r = a.kw_div.div(rq), q = rq - r * a.kw_div.d;
        t = tap_entry<I>(static_cast<I>(ci) * hw + static_cast<int>(r) * a.w + static_cast<int>(q),
                         static_cast<int>(r << 16 | q));
      }
      tap_tab[i] = t;
    }
    __syncthreads();  // tap_tab
  }

  // ---- the copies of one step into stage s -------------------------------------------------
  auto load = [&](int s, int k0) {
    float* as = As + s * T::A_STAGE;
    float* bs = Bs + s * T::B_STAGE;
    const int kk = k0 + ck;
    const bool kk_ok = kk < k_end;
    if (PASS == kForward) {
#pragma unroll
      for (int i = 0; i < T::RA; ++i) {
        const int m = crow + i * kRowStep;
        const bool ok = kk_ok && m0 + m < a.M;
        cp_async4(as + ck * T::SA + m, ok ? a.wt + static_cast<int64_t>(m0 + m) * a.K + kk : a.wt, ok);
      }
#pragma unroll
      for (int u = 0; u < CB; ++u)
#pragma unroll
        for (int j = 0; j < BK / RS; ++j) {
          const int kl = tid / NB + j * RS, kb = k0 + kl;
          TapEntry<I> t;
          if (a.K <= kTapTable) {
            t = tap_tab[kb < k_end ? kb : 0];
          } else {
            const uint32_t ci = a.taps.div(kb), rq = kb - ci * a.taps.d;
            const uint32_t r = a.kw_div.div(rq), q = rq - r * a.kw_div.d;
            t = tap_entry<I>(static_cast<I>(ci) * hw + static_cast<int>(r) * a.w + static_cast<int>(q),
                             static_cast<int>(r << 16 | q));
          }
          const int rq = static_cast<int>(t.y);
          const int iy = col_iy[u] + (rq >> 16), ix = col_ix[u] + (rq & 0xffff);
          const bool ok = kb < k_end && static_cast<unsigned>(iy) < static_cast<unsigned>(a.h) &&
                          static_cast<unsigned>(ix) < static_cast<unsigned>(a.w);
          cp_async4(bs + kl * T::SB + tid % NB + u * NB, ok ? a.x + col_off[u] + t.x : a.x, ok);
        }
    } else {
      // this thread's pixel: (image, oy, ox) of reduction element kk
      int64_t dy_off = 0, x_off = 0;
      int iy0 = INT_MIN / 2, ix0 = 0;
      if (kk_ok) {
        const uint32_t img = a.ohw.div(kk), pix = kk - img * a.ohw.d;
        const uint32_t oy = a.ow_div.div(pix), ox = pix - oy * a.ow_div.d;
        dy_off = static_cast<int64_t>(img) * a.k * ohw + pix;
        iy0 = static_cast<int>(oy) * a.sh - a.ph;
        ix0 = static_cast<int>(ox) * a.sw - a.pw;
        x_off = static_cast<int64_t>(img) * a.c * hw + static_cast<int64_t>(iy0) * a.w + ix0;
      }
#pragma unroll
      for (int i = 0; i < T::RA; ++i) {
        const int m = crow + i * kRowStep;
        const bool ok = kk_ok && m0 + m < a.M;
        const int64_t idx = dy_off + static_cast<int64_t>(m0 + m) * ohw;
        cp_async4(as + ck * T::SA + m, ok ? a.dy + idx : a.dy, ok);
        if (MASK) cp_async4(Ys + s * T::A_STAGE + ck * T::SA + m, ok ? a.y + idx : a.y, ok);
      }
#pragma unroll
      for (int i = 0; i < T::RB; ++i) {
        const int nl = crow + i * kRowStep;
        const TapEntry<I> t = tap_tab[nl];
        const int rq = static_cast<int>(t.y);
        const int iy = iy0 + (rq >> 16), ix = ix0 + (rq & 0xffff);
        const bool ok = static_cast<unsigned>(iy) < static_cast<unsigned>(a.h) &&
                        static_cast<unsigned>(ix) < static_cast<unsigned>(a.w);
        cp_async4(bs + ck * T::SB + nl, ok ? a.x + x_off + t.x : a.x, ok);
      }
    }
  };

  // ---- accumulators and the compute of one stage ------------------------------------------
  constexpr int kAcc = tile_acc<T, P>();
  float acc[kAcc];
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc[i] = 0.f;
  const int ty = tid / (BN / T::TN), tx = tid % (BN / T::TN);  // FMA path
  const int wm = warp / T::WN, wn = warp % T::WN, gq = lane / 4, tq = lane % 4;  // TF32 path
  const bool want_bias = PASS == kBackwardWeights && a.bias_part != nullptr && blockIdx.x == 0;
  float bias_sum = 0.f;  // backward-weights: row tid's sum of act'.dy over this split

  // TF32: operands rounded as the fragments are read
  auto compute = [&](int s) {
    tile_step<T, P, true>(acc, As, Bs, s, ty, tx, wm, wn, gq, tq);
  };

  // ---- the pipeline -----------------------------------------------------------------------
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < steps) load(s, k_begin + s * BK);
    cp_async_commit();
  }
  for (int st = 0; st < steps; ++st) {
    const int s = st % STAGES;
    cp_async_wait<STAGES - 2>();
    if (MASK) {
      // dy through the activation, on the elements this thread copied (its own copies are
      // complete after the wait; the barrier below publishes the result).
      float* as = As + s * T::A_STAGE;
      const float* ys = Ys + s * T::A_STAGE;
#pragma unroll
      for (int i = 0; i < T::RA; ++i) {
        const int e = ck * T::SA + crow + i * kRowStep;
        const float v = as[e];
        as[e] = act_grad(ys[e], v, a.act);
      }
    }
    __syncthreads();
    if (st + STAGES - 1 < steps) load((st + STAGES - 1) % STAGES, k_begin + (st + STAGES - 1) * BK);
    cp_async_commit();
    if (want_bias && tid < BM) {
      const float* as = As + s * T::A_STAGE;
#pragma unroll
      for (int kk = 0; kk < BK; ++kk) bias_sum += as[kk * T::SA + tid];
    }
    compute(s);
  }
  cp_async_wait<0>();

  // ---- epilogue -------------------------------------------------------------------------
  tile_for_each<T, P>(acc, ty, tx, wm, wn, gq, tq, m0, n0, [&](int m, int nn, float v) {
    if (m >= a.M || nn >= a.N) return;
    if (PASS == kForward) {
      const uint32_t img = a.ohw.div(nn), pix = nn - img * a.ohw.d;
      const int64_t o = (static_cast<int64_t>(img) * a.k + m) * ohw + pix;
      a.out[o] = act_apply(v + bias_of(a.bias, m), a.act);
    } else {
      a.out[(static_cast<int64_t>(blockIdx.z) * a.M + m) * a.N + nn] = v;
    }
  });
  if (want_bias && tid < BM && m0 + tid < a.M)
    a.bias_part[static_cast<int64_t>(blockIdx.z) * a.M + m0 + tid] = bias_sum;
}

// ---- host side --------------------------------------------------------------------------
Args args_of(const ConvGeom& g, int64_t n, int64_t k, Act act, int pass) {
  const int64_t taps = g.c * g.kh * g.kw, pixels = n * g.oh * g.ow;
  PDNN_CHECK(conv_implicit_fits(g, n, k),
             "implicit-GEMM convolution: %lld images of %lld x %lld x %lld are too large for "
             "its indexing (a plane, n*oh*ow and the weights under 2^31 elements)", (long long)n,
             (long long)g.c, (long long)g.h, (long long)g.w);
  (void)pass;
  Args a{};
  set_conv_geom32(a, g, n, k, act);
  a.ohw = FastDiv(static_cast<uint32_t>(g.oh * g.ow));
  a.ow_div = FastDiv(static_cast<uint32_t>(g.ow));
  a.taps = FastDiv(static_cast<uint32_t>(g.kh * g.kw));
  a.kw_div = FastDiv(static_cast<uint32_t>(g.kw));
  a.M = a.k;
  a.N = static_cast<int>(pass == kForward ? pixels : taps);
  a.K = static_cast<int>(pass == kForward ? taps : pixels);
  return a;
}

template <class T, int PASS, class P, bool MASK, class I>
void launch_one(const Args& a, int z, CudaExec e) {
  auto kernel = igemm<T, PASS, P, MASK, I>;
  const size_t smem = T::smem_bytes(MASK);
  // Above 48 KB a kernel must ask for its dynamic shared memory (once per instantiation; not a
  // stream operation, so also fine while a graph is being captured).
  static bool attr_set = false;
  if (!attr_set) {
    PDNN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem)));
    attr_set = true;
  }
  const dim3 grid(static_cast<unsigned>((a.N + T::BN - 1) / T::BN),
                  static_cast<unsigned>((a.M + T::BM - 1) / T::BM), static_cast<unsigned>(z));
  kernel<<<grid, T::THREADS, smem, stream_of(e)>>>(a);
  PDNN_CUDA_LAUNCH_CHECK("implicit-GEMM convolution");
}

template <class T, int PASS, bool MASK>
void launch(const Args& a, int z, CudaExec e, bool wide) {
  with_precision(e.tf32, [&](auto p) {
    with_index(wide, [&](auto i) { launch_one<T, PASS, decltype(p), MASK, decltype(i)>(a, z, e); });
  });
}

template <int PASS, bool MASK>
void launch_tile(ConvTile t, const Args& a, int z, CudaExec e, bool wide) {
  switch (t) {
    case ConvTile::T128x128: return launch<C128x128, PASS, MASK>(a, z, e, wide);
    case ConvTile::T64x128: return launch<C64x128, PASS, MASK>(a, z, e, wide);
    case ConvTile::T32x256: return launch<C32x256, PASS, MASK>(a, z, e, wide);
    case ConvTile::T32x128: return launch<C32x128, PASS, MASK>(a, z, e, wide);
    case ConvTile::T32x32: return launch<C32x32, PASS, MASK>(a, z, e, wide);
    case ConvTile::Auto: break;
  }
  PDNN_CHECK(false, "implicit-GEMM convolution: no tile chosen");
}

// The host's tile sizes (conv2d_gpu_ws.h, which the workspace is sized by) are the kernels'.
template <class C>
constexpr bool dims_are(ConvTile t) {
  return conv_tile_dims(t).bm == C::BM && conv_tile_dims(t).bn == C::BN &&
         conv_tile_dims(t).bk == C::BK;
}
static_assert(dims_are<C128x128>(ConvTile::T128x128) && dims_are<C64x128>(ConvTile::T64x128) &&
                  dims_are<C32x256>(ConvTile::T32x256) && dims_are<C32x128>(ConvTile::T32x128) &&
                  dims_are<C32x32>(ConvTile::T32x32),
              "conv_tile_dims must match the kernels' configurations");

// Backward-weights: the split of the reduction on this device (conv2d_gpu_ws.h).
KSplit split_of(ConvTile t, int64_t M, int64_t N, int64_t K) {
  return conv2d_implicit_backward_weights_split(t, M, N, K, device_sms());
}

}  // namespace

void conv2d_implicit_forward(const ConvFwd& c, CudaExec e, ConvTile tile, ConvIndex index) {
  const ConvGeom& g = c.g;
  const int64_t n = c.n, k = c.k;
  if (n * k * g.oh * g.ow == 0) return;
  Args a = args_of(g, n, k, c.act, kForward);
  a.x = c.x;
  a.wt = c.w;
  a.bias = c.b;
  a.out = c.y;
  if (tile == ConvTile::Auto) tile = conv_implicit_tile(ConvPass::Forward, g, n, k);
  launch_tile<kForward, false>(tile, a, 1, e, index == ConvIndex::Wide || conv_implicit_wide(g));
}

void conv2d_implicit_backward_weights(const ConvBwd& c, float* ws, CudaExec e, ConvTile tile,
                                      ConvIndex index) {
  const ConvGeom& g = c.g;
  const int64_t n = c.n, k = c.k;
  if (k * g.c * g.kh * g.kw == 0) return;
  PDNN_CHECK(c.act.kind == FusedAct::None || c.y, "conv2d_implicit_backward_weights: act needs y");
  if (tile == ConvTile::Auto) tile = conv_implicit_tile(ConvPass::BackwardWeights, g, n, k);
  Args a = args_of(g, n, k, c.act, kBackwardWeights);
  const KSplit s = split_of(tile, a.M, a.N, a.K);
  a.x = c.x;
  a.dy = c.dy;
  a.y = c.y;
  a.out = ws;
  a.bias_part = c.db ? ws + static_cast<int64_t>(s.splits) * a.M * a.N : nullptr;
  a.k_chunk = s.k_chunk;
  const bool wide = index == ConvIndex::Wide || conv_implicit_wide(g);
  if (c.act.kind == FusedAct::None)
    launch_tile<kBackwardWeights, false>(tile, a, s.splits, e, wide);
  else
    launch_tile<kBackwardWeights, true>(tile, a, s.splits, e, wide);
  sum_splits(s.splits, a.M, a.N, ws, a.bias_part, c.dw, c.db, e,
             "implicit-GEMM backward-weights sum");
}

}  // namespace cuda
}  // namespace pdnn
