// Winograd F(4x4, 2x2) over the stride phases of 4x4 stride-2 padding-1 convolutions (see
// conv2d_k4s2.h).
//
// A pass runs over the batch in chunks of images (a number fixed by the shape), each in three
// stages separated by the barriers of one parallel region:
//   1. transform: per item (image, row of tiles), the input rows go channel-last into a
//      zero-padded strip in the thread's slot, then every tile is transformed (B^T d B) into
//      V (tiles, points, channels);
//   2. GEMMs:     per item (point, block of rows, block of columns) one block of the 25 (backward
//      data: 4 phases x 25) products M[xi] = V[xi] U[xi] (weights: dU[xi] = V[xi]^T dM[xi]),
//      a single-threaded OpenBLAS call inside the region;
//   3. output:    per item (image, row of tiles), M (tiles, points, channels) back to 4x4 tiles
//      (A^T M A, bias and activation in the same write), channel-last in the slot, then
//      transposed into NCHW.
// U, the transformed kernels (reduction channels, points, output channels), is made once per
// call before the first chunk. Every array keeps a tile's (or a kernel's) 25 points together, so
// the transforms read and write a few sequential streams, and each point's matrix is a strided
// view for the GEMM (leading dimension 25x the row). U is written with streaming stores: W5's
// D.8 has 52 MB of it for 8 MB of weights, which otherwise made its transform 3x slower.
// Channel counts are rounded up to whole vectors (cs, ks) with zeros in the padding lanes of V
// and U, so the GEMMs need no tails.
#include "ops/conv/conv2d_k4s2.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/parallel.h"
#include "ops/gemm.h"
#include "ops/simd.h"

namespace pdnn {

bool conv4x4s2_applies(const ConvGeom& g) {
  return g.kh == 4 && g.kw == 4 && g.sh == 2 && g.sw == 2 && g.ph == 1 && g.pw == 1 &&
         g.h % 2 == 0 && g.w % 2 == 0;
}

void conv4x4s2_check(const ConvGeom& g, const char* kernel) {
  PDNN_CHECK(conv4x4s2_applies(g), "%s: needs a 4x4 kernel, stride 2, padding 1 on an input of "
             "even height and width, got %lldx%lld stride %lldx%lld padding %lldx%lld on %lldx%lld",
             kernel, (long long)g.kh, (long long)g.kw, (long long)g.sh, (long long)g.sw,
             (long long)g.ph, (long long)g.pw, (long long)g.h, (long long)g.w);
}

namespace cpu {
namespace {

using simd::vf;
constexpr int L = simd::kLanes;
constexpr int kXi = 25;  // points of a transformed 5x5 tile

inline int64_t round_up(int64_t a, int64_t m) { return (a + m - 1) / m * m; }
// 16 floats = one 64-byte line: arrays and slots start on their own lines.
inline int64_t round_line(int64_t n) { return round_up(n, 16); }

// Chunks of images. A chunk's V and M go through memory twice (written by one stage, read by
// the next) and U once per chunk (read by the GEMMs): chunks of about kChunkFloats floats of V
// and M (8 MB) stay in the last-level cache, but never so many chunks that re-reading U costs
// more than V and M. Measured (bench_conv, 1 thread, ms forward / backward data / weights,
// chunks of 64 MB vs 8 MB): W5's 64 -> 128 at 32x32 (U 3 MB) 29 / 44 / 28 vs 26 / 24 / 21;
// 256 -> 512 at 8x8 (U 52 MB) 29 / 30 / 30 vs 40 / 50 / 40. The number of chunks depends on the
// shape alone, so the weight gradient sums in the same order at any thread count.
constexpr int64_t kChunkFloats = int64_t{2} << 20;
// GEMM blocks: at most kMaxBlock rows (tiles) or columns, and more blocks, while neither side
// drops below kMinBlock, until the 25 (or 100) products give kMinItems pieces, so that 8 or 16
// threads find work. The cut depends on the shape alone: OpenBLAS's Haswell kernels round a
// block's edge differently from its middle, so another cut would change the results. Measured
// (OpenBLAS 0.3.21 SkylakeX, 1 thread, 25 products 64 x 512 x 1024, W5's D.8): 106 GFLOP/s
// whole, 101-105 in column blocks of 128-256, 89 of 64, 72-83 in row blocks of 32-48; D.8's
// forward pass 36 ms with 75 blocks of 176 columns, 32 with 50 of 256 (kMinItems 64 vs 48).
constexpr int64_t kMaxBlock = 256;
constexpr int64_t kMinBlock = 96;
constexpr int64_t kMinItems = 48;

// A GEMM of `rows` x `cols` (cols a multiple of L) cut into nr x nc blocks of rb x cb.
struct Blocks {
  int64_t rb, cb, nr, nc;
  int64_t per_point() const { return nr * nc; }
};

Blocks make_blocks(int64_t rows, int64_t cols, int64_t points) {
  int64_t nr = (rows + kMaxBlock - 1) / kMaxBlock, nc = (cols + kMaxBlock - 1) / kMaxBlock;
  while (points * nr * nc < kMinItems) {
    const int64_t rb = (rows + nr - 1) / nr, cb = (cols + nc - 1) / nc;
    if (rb >= cb && rb >= 2 * kMinBlock)
      ++nr;
    else if (cb >= 2 * kMinBlock)
      ++nc;
    else if (rb >= 2 * kMinBlock)
      ++nr;
    else
      break;
  }
  Blocks b;
  b.rb = (rows + nr - 1) / nr;
  b.cb = round_up((cols + nc - 1) / nc, L);
  b.nr = (rows + b.rb - 1) / b.rb;
  b.nc = (cols + b.cb - 1) / b.cb;
  return b;
}

// One pass in the kernels' terms: the convolution c x h x w -> k x oh x ow and its tiling.
struct Plan {
  int64_t c, k, h, w, oh, ow;
  int64_t ty, tx, tiles;  // tiles down, across, per image
  int64_t cs, ks;         // c, k rounded up to whole vectors
};

Plan make_plan(const ConvGeom& g, int64_t k) {
  Plan q;
  q.c = g.c;
  q.k = k;
  q.h = g.h;
  q.w = g.w;
  q.oh = g.oh;
  q.ow = g.ow;
  q.ty = (q.oh + 3) / 4;
  q.tx = (q.ow + 3) / 4;
  q.tiles = q.ty * q.tx;
  q.cs = round_up(q.c, L);
  q.ks = round_up(q.k, L);
  return q;
}

// Images per chunk when an image's V and M take `per_image` floats and U `u` floats.
int64_t chunk_images(int64_t n, int64_t per_image, int64_t u) {
  const int64_t total = n * per_image;
  const int64_t chunks = std::clamp<int64_t>((total + kChunkFloats - 1) / kChunkFloats, 1,
                                             std::max<int64_t>(1, total / std::max<int64_t>(1, u)));
  return (n + chunks - 1) / chunks;
}

// ---- 1-D transforms (see the matrices in conv2d_k4s2.h) ---------------------------------------

// B^T d (5 -> 5).
inline void bt5(const vf d[5], vf o[5]) {
  const vf two = simd::splat(2.f), three = simd::splat(3.f);
  const vf t = d[3] - d[1];
  o[0] = simd::fma(two, d[0] - d[2], t);
  o[1] = (d[1] + d[2]) - t;
  o[2] = simd::fma(three, d[2], -(two * d[1] + d[3]));
  o[3] = t;
  o[4] = simd::fma(-two, t, d[4] - d[2]);
}

// A^T m (5 -> 4).
inline void at5(const vf m[5], vf o[4]) {
  const vf s = m[1] + m[2], d = m[1] - m[2];
  o[0] = s + m[0] + m[3];
  o[1] = simd::fma(simd::splat(2.f), m[3], d);
  o[2] = simd::fma(simd::splat(4.f), m[3], s);
  o[3] = simd::fma(simd::splat(8.f), m[3], d) + m[4];
}

// A o (4 -> 5): the adjoint of at5.
inline void a4(const vf o[4], vf m[5]) {
  const vf e = o[0] + o[2], f = o[1] + o[3];
  m[0] = o[0];
  m[1] = e + f;
  m[2] = e - f;
  m[3] = simd::fma(simd::splat(2.f), o[1], o[0]) +
         simd::fma(simd::splat(8.f), o[3], simd::splat(4.f) * o[2]);
  m[4] = o[3];
}

// 6 G g (2 -> 5) and (6 G)^T u (5 -> 2), with the integer matrix 6 G: exact for integer data.
inline void g2(vf g0, vf g1, vf o[5]) {
  const vf three = simd::splat(3.f);
  o[0] = three * g0;
  o[1] = three * (g0 + g1);
  o[2] = g0 - g1;
  o[3] = simd::fma(simd::splat(2.f), g1, g0);
  o[4] = simd::splat(6.f) * g1;
}
inline void gt5(const vf u[5], vf o[2]) {
  o[0] = simd::fma(simd::splat(3.f), u[0] + u[1], u[2]) + u[3];
  o[1] = simd::fma(simd::splat(3.f), u[1], simd::fma(simd::splat(2.f), u[3], simd::splat(6.f) * u[4])) - u[2];
}

// u[xi] = (6G g 6G^T)[xi] (xi = 5 a + b) for the 2x2 kernel g of each lane.
inline void filter_tile(const vf g[2][2], vf u[kXi]) {
  vf col[2][5];
  for (int s = 0; s < 2; ++s) g2(g[0][s], g[1][s], col[s]);
  for (int a = 0; a < 5; ++a) g2(col[0][a], col[1][a], u + 5 * a);
}

// g = (6G)^T u 6G: the 2x2 kernel gradient of the 25 points u[xi], each lane its own.
inline void filter_tile_adjoint(const vf u[kXi], vf g[2][2]) {
  vf rows[5][2];
  for (int a = 0; a < 5; ++a) gt5(u + 5 * a, rows[a]);
  for (int s = 0; s < 2; ++s) {
    const vf in[5] = {rows[0][s], rows[1][s], rows[2][s], rows[3][s], rows[4][s]};
    vf out[2];
    gt5(in, out);
    g[0][s] = out[0];
    g[1][s] = out[1];
  }
}

// The 16 taps of the kernels w[kk][ch] (w (k, c, 4, 4)) for `n` consecutive kk (step `stride`
// floats between their kernels), one vector per tap with lane l for kernel l, divided by 36:
// (6G) (g / 36) (6G)^T = G g G^T. Lanes >= n are 0.
inline void load_taps(const float* wk, int64_t stride, int n, vf taps[16]) {
  alignas(64) float t[16 * L];
  for (int r = 0; r < 16; r += L)
    simd::transpose_block(wk + r, stride, n, std::min(L, 16 - r), t + r * L, L, L);
  for (int r = 0; r < 16; ++r) taps[r] = simd::load(t + r * L) / simd::splat(36.f);
}

// ---- tile transforms over a channel-last strip (stride between pixels: `cs` floats) ---------

// v[xi] = (B^T d B)[xi] for the 5x5 tile whose pixel (r, s) is at p + r * rstep + s * sstep.
inline void input_tile(const float* p, int64_t rstep, int64_t sstep, float* v, int64_t xstride) {
  vf t[5][5], d[5], o[5];
  for (int s = 0; s < 5; ++s) {
    for (int r = 0; r < 5; ++r) d[r] = simd::load(p + r * rstep + s * sstep);
    bt5(d, o);
    for (int a = 0; a < 5; ++a) t[a][s] = o[a];
  }
  for (int a = 0; a < 5; ++a) {
    bt5(t[a], o);
    for (int b = 0; b < 5; ++b) simd::store(v + (5 * a + b) * xstride, o[b]);
  }
}

// out pixel (i, j) at p + i * rstep + j * sstep = act((A^T M A)[i][j] + bias), M[xi] at
// m + xi * xstride.
inline void output_tile(const float* m, int64_t xstride, vf bias, bool fused, float slope,
                        float* p, int64_t rstep, int64_t sstep) {
  vf t[4][5], c[5], o[4];
  for (int b = 0; b < 5; ++b) {
    for (int a = 0; a < 5; ++a) c[a] = simd::load(m + (5 * a + b) * xstride);
    at5(c, o);
    for (int i = 0; i < 4; ++i) t[i][b] = o[i];
  }
  for (int i = 0; i < 4; ++i) {
    at5(t[i], o);
    for (int j = 0; j < 4; ++j) {
      const vf v = o[j] + bias;
      simd::store(p + i * rstep + j * sstep, fused ? simd::leaky(v, slope) : v);
    }
  }
}

// ---- layout changes -----------------------------------------------------------------------

// Rows r0 ... r0 + nrows - 1 of one image x (c, h, w), channel-last and zero-padded into
// strip[r][col][ch] = x[ch][r0 + r][col - 1] (0 outside the image), col < scols, ch < cs.
void fill_strip(const float* x, int64_t c, int64_t h, int64_t w, int64_t r0, int64_t nrows,
                int64_t scols, int64_t cs, float* strip) {
  const int64_t hw = h * w, row_floats = scols * cs;
  const int64_t lo = std::clamp<int64_t>(-r0, 0, nrows), hi = std::clamp<int64_t>(h - r0, lo, nrows);
  for (int64_t r = 0; r < nrows; ++r) {
    float* row = strip + r * row_floats;
    if (r < lo || r >= hi) {
      std::memset(row, 0, sizeof(float) * row_floats);
      continue;
    }
    std::memset(row, 0, sizeof(float) * cs);
    std::memset(row + (w + 1) * cs, 0, sizeof(float) * (scols - w - 1) * cs);
  }
  // 16 planes at a time, each read sequentially (as conv2d_winograd.cpp's fill_strip).
  for (int64_t c0 = 0; c0 < c; c0 += L) {
    const int planes = static_cast<int>(std::min<int64_t>(L, c - c0));
    for (int64_t r = lo; r < hi; ++r) {
      const float* src = x + c0 * hw + (r0 + r) * w;
      float* dst = strip + r * row_floats + cs + c0;
      for (int64_t i0 = 0; i0 < w; i0 += L)
        simd::transpose_block(src + i0, hw, planes, static_cast<int>(std::min<int64_t>(L, w - i0)),
                              dst + i0 * cs, cs, L);
    }
  }
}

// Rows r0 ... of a channel-last buffer `out` (rows of `ocols` pixels, ks floats each) into
// y (k, h, w) of one image, rows [r0, min(r0 + nrows, h)), columns [0, w).
// With `act` (backward data), each value v is stored as act'(a) v, a the value of `act_src`
// (n, k, h, w of the same image) at its place: the derivative of the activation that made the
// convolution's input, folded in here instead of a pass of its own over dx.
void store_rows(const float* out, int64_t nrows, int64_t ocols, int64_t ks, int64_t k, int64_t h,
                int64_t w, int64_t r0, float* y, const float* act_src = nullptr, Act act = {}) {
  const int64_t hw = h * w, rows = std::min(nrows, h - r0);
  const float slope = act.kind == FusedAct::LeakyReLU ? act.slope : 0.f;
  for (int64_t k0 = 0; k0 < k; k0 += L) {
    const int planes = static_cast<int>(std::min<int64_t>(L, k - k0));
    for (int64_t r = 0; r < rows; ++r) {
      const float* src = out + r * ocols * ks + k0;
      float* dst = y + k0 * hw + (r0 + r) * w;
      for (int64_t i0 = 0; i0 < w; i0 += L) {
        const int m = static_cast<int>(std::min<int64_t>(L, w - i0));
        simd::transpose_block(src + i0 * ks, ks, m, planes, dst + i0, hw, m);
      }
      if (act.kind == FusedAct::None) continue;
      for (int j = 0; j < planes; ++j) {
        float* d = dst + j * hw;
        const float* a = act_src + (k0 + j) * hw + (r0 + r) * w;
        for (int64_t i = 0; i < w; ++i) d[i] = a[i] > 0.f ? d[i] : slope * d[i];
      }
    }
  }
}

// ---- the pieces of a pass --------------------------------------------------------------------

// Forward and backward weights: the input x transformed. Item (image i of the chunk, tile row
// ty): x rows 8 ty - 1 ... 8 ty + 8 (10 rows: the 5 phase rows of each of the two row
// phases), tiles t0 + tx; V[t][xi][b cs + ch] for phase b = 2 by + bx.
void transform_x(const Plan& q, const float* x_img, int64_t ty, int64_t t0, float* strip,
                 float* V) {
  const int64_t scols = 8 * q.tx + 2, rstep = scols * q.cs, rc = 4 * q.cs;
  fill_strip(x_img, q.c, q.h, q.w, 8 * ty - 1, 10, scols, q.cs, strip);
  for (int64_t tx = 0; tx < q.tx; ++tx)
    for (int b = 0; b < 4; ++b) {
      const int by = b / 2, bx = b % 2;
      // phase pixel (r, s) of the tile = strip row 2 r + by, column 8 tx + 2 s + bx
      const float* base = strip + by * rstep + (8 * tx + bx) * q.cs;
      float* v = V + (t0 + tx) * kXi * rc + b * q.cs;
      for (int64_t c0 = 0; c0 < q.cs; c0 += L)
        input_tile(base + c0, 2 * rstep, 2 * q.cs, v + c0, rc);
    }
}

// Backward data: dy transformed, per output phase p = 2 py + px. Item (image, tile row ty): dy
// rows 4 ty - 1 ... 4 ty + 4 (6 rows, zero-padded); V[t][p][xi][kk].
void transform_dy_phases(const Plan& q, const float* dy_img, int64_t ty, int64_t t0,
                         float* strip, float* V) {
  const int64_t scols = 4 * q.tx + 2, rstep = scols * q.ks;
  fill_strip(dy_img, q.k, q.oh, q.ow, 4 * ty - 1, 6, scols, q.ks, strip);
  for (int p = 0; p < 4; ++p) {
    const int py = p / 2, px = p % 2;
    for (int64_t tx = 0; tx < q.tx; ++tx) {
      const float* base = strip + py * rstep + (4 * tx + px) * q.ks;
      float* v = V + ((t0 + tx) * 4 + p) * kXi * q.ks;
      for (int64_t k0 = 0; k0 < q.ks; k0 += L) input_tile(base + k0, rstep, q.ks, v + k0, q.ks);
    }
  }
}

// Backward weights: dM[t][xi][kk] = (A dY A^T)[xi] for the 4x4 dy tiles of tile row ty.
void transform_dy_adjoint(const Plan& q, const float* dy_img, int64_t ty, int64_t t0,
                          float* strip, float* dM) {
  // fill_strip's first column is the left zero padding, not read here.
  const int64_t scols = 4 * q.tx + 1, rstep = scols * q.ks;
  fill_strip(dy_img, q.k, q.oh, q.ow, 4 * ty, 4, scols, q.ks, strip);
  for (int64_t tx = 0; tx < q.tx; ++tx)
    for (int64_t k0 = 0; k0 < q.ks; k0 += L) {
      const float* p = strip + (4 * tx + 1) * q.ks + k0;
      vf t[5][4], o[4], m[5];
      for (int j = 0; j < 4; ++j) {
        for (int i = 0; i < 4; ++i) o[i] = simd::load(p + i * rstep + j * q.ks);
        a4(o, m);
        for (int a = 0; a < 5; ++a) t[a][j] = m[a];
      }
      float* d = dM + (t0 + tx) * kXi * q.ks + k0;
      for (int a = 0; a < 5; ++a) {
        a4(t[a], m);
        for (int b = 0; b < 5; ++b) simd::store(d + (5 * a + b) * q.ks, m[b]);
      }
    }
}

// U[b cs + ch][xi][kk] = (G w_b G^T)[xi], w_b[ay][ax] = w[kk][ch][2 ay + by][2 ax + bx]; zero
// where ch >= c or kk >= k. L output channels kk at a time (the contiguous side of U); rows ch
// split over the threads of the enclosing region.
void transform_filters_forward(const Plan& q, const float* w, float* U) {
  // Blocks of L kernels kk outermost, so that the L kernels read for each ch are L sequential
  // streams (ch innermost: the kernels of one kk are 64 bytes apart).
#pragma omp for schedule(static) nowait
  for (int64_t it = 0; it < q.ks / L * q.cs; ++it) {
    const int64_t k0 = it / q.cs * L, ch = it % q.cs;
    vf t[16];
    const int n = ch < q.c ? static_cast<int>(std::clamp<int64_t>(q.k - k0, 0, L)) : 0;
    if (n > 0)
      load_taps(w + (k0 * q.c + ch) * 16, q.c * 16, n, t);
    else
      std::fill(t, t + 16, simd::zero());
    for (int b = 0; b < 4; ++b) {
      const int by = b / 2, bx = b % 2;
      const vf g[2][2] = {{t[by * 4 + bx], t[by * 4 + 2 + bx]},
                          {t[(2 + by) * 4 + bx], t[(2 + by) * 4 + 2 + bx]}};
      vf u[kXi];
      filter_tile(g, u);
      float* ub = U + (b * q.cs + ch) * kXi * q.ks + k0;
      for (int xi = 0; xi < kXi; ++xi) simd::store_stream(ub + xi * q.ks, u[xi]);
    }
  }
  simd::stream_fence();  // the streamed stores done before the barrier publishes U
#pragma omp barrier
}

// Backward data: U[kk][p][xi][ch] = (G w'_p G^T)[xi], w'_p[ay][ax] =
// w[kk][ch][3 - 2 ay - py][3 - 2 ax - px]; zero where kk >= k or ch >= c. L channels ch at a
// time; rows kk split over the threads.
void transform_filters_data(const Plan& q, const float* w, float* U) {
#pragma omp for schedule(static) nowait
  for (int64_t kk = 0; kk < q.ks; ++kk)
    for (int64_t c0 = 0; c0 < q.cs; c0 += L) {
      vf t[16];
      const int n = kk < q.k ? static_cast<int>(std::clamp<int64_t>(q.c - c0, 0, L)) : 0;
      if (n > 0)
        load_taps(w + (kk * q.c + c0) * 16, 16, n, t);
      else
        std::fill(t, t + 16, simd::zero());
      for (int p = 0; p < 4; ++p) {
        const int py = p / 2, px = p % 2;
        const vf g[2][2] = {{t[(3 - py) * 4 + 3 - px], t[(3 - py) * 4 + 1 - px]},
                            {t[(1 - py) * 4 + 3 - px], t[(1 - py) * 4 + 1 - px]}};
        vf u[kXi];
        filter_tile(g, u);
        float* up = U + (kk * 4 + p) * kXi * q.cs + c0;
        for (int xi = 0; xi < kXi; ++xi) simd::store_stream(up + xi * q.cs, u[xi]);
      }
    }
  simd::stream_fence();  // the streamed stores done before the barrier publishes U
#pragma omp barrier
}

// dw[kk][ch][2 ay + by][2 ax + bx] += ((6G)^T dU 6G)[ay][ax] / 36, L output channels kk at a
// time: the 16 taps of each kernel gathered in vectors, then transposed back and added to its
// 16 contiguous floats. Rows ch split over the threads.
void add_weight_gradient(const Plan& q, const float* dU, float* dw) {
  // Blocks of L kernels kk outermost, as in transform_filters_forward.
#pragma omp for schedule(static)
  for (int64_t it = 0; it < (q.k + L - 1) / L * q.c; ++it) {
    const int64_t k0 = it / q.c * L, ch = it % q.c;
    alignas(64) float taps[16 * L], lines[L * 16];
    for (int b = 0; b < 4; ++b) {
      const int by = b / 2, bx = b % 2;
      vf u[kXi], g[2][2];
      const float* du = dU + (b * q.cs + ch) * kXi * q.ks + k0;
      for (int xi = 0; xi < kXi; ++xi) u[xi] = simd::load(du + xi * q.ks);
      filter_tile_adjoint(u, g);
      for (int ay = 0; ay < 2; ++ay)
        for (int ax = 0; ax < 2; ++ax)
          simd::store(taps + ((2 * ay + by) * 4 + 2 * ax + bx) * L, g[ay][ax] / simd::splat(36.f));
    }
    const int n = static_cast<int>(std::min<int64_t>(L, q.k - k0));
    for (int r = 0; r < 16; r += L)
      simd::transpose_block(taps + r * L, L, std::min(L, 16 - r), n, lines + r, 16, std::min(L, 16 - r));
    for (int l = 0; l < n; ++l) {
      float* wk = dw + ((k0 + l) * q.c + ch) * 16;
      for (int r = 0; r < 16; ++r) wk[r] += lines[l * 16 + r];
    }
  }
}

int team_for(int threads, int64_t macs) {
  return threads > 1 && macs >= (int64_t{1} << 22) ? threads : 1;
}

enum class Pass { Forward, Data, Weights };

// Where a pass keeps its arrays in the workspace, in floats from its start: U (or dU) at 0, the
// forward's bias (padded to ks) at `bias`, V and M (or dM) of one chunk at `v`, then one slot
// per thread: the input strip, then the output rows (or the dy strip) at `strip` into the slot.
struct Layout {
  int64_t chunk;  // images per chunk
  int64_t bias, v, slots, slot, strip, total;
};

Layout layout(const Plan& q, Pass pass, int64_t n, int threads) {
  const int64_t rc = 4 * q.cs, x_strip = round_line(10 * (8 * q.tx + 2) * q.cs);
  int64_t u, per_image, second;
  Layout l;
  if (pass == Pass::Data) {  // the four phases' U, V, M; dy strip, then 8 rows of dx
    u = 4 * kXi * q.ks * q.cs;
    per_image = 4 * kXi * q.tiles * (q.ks + q.cs);
    l.strip = round_line(6 * (4 * q.tx + 2) * q.ks);
    second = round_line(8 * 8 * q.tx * q.cs);
  } else {  // x strip, then 4 rows of y (forward) or 4 rows of dy (weights)
    u = kXi * rc * q.ks;
    per_image = kXi * q.tiles * (rc + q.ks);
    l.strip = x_strip;
    second = round_line(4 * (4 * q.tx + 1) * q.ks);
  }
  l.chunk = chunk_images(n, per_image, u);
  l.bias = round_line(u);
  l.v = l.bias + (pass == Pass::Forward ? round_line(q.ks) : 0);
  l.slots = l.v + round_line(l.chunk * per_image);
  l.slot = l.strip + second;
  l.total = l.slots + std::max(1, threads) * l.slot;
  return l;
}

}  // namespace

size_t conv4x4s2_workspace_floats(const ConvGeom& g, int64_t n, int64_t k, int threads) {
  if (!conv4x4s2_applies(g) || n <= 0) return 0;  // the kernels reject g with a clear error
  const Plan q = make_plan(g, k);
  return static_cast<size_t>(std::max({layout(q, Pass::Forward, n, threads).total,
                                       layout(q, Pass::Data, n, threads).total,
                                       layout(q, Pass::Weights, n, threads).total}));
}

void conv4x4s2_forward(const ConvFwd& a, float* ws, CpuExec e) {
  const ConvGeom& g = a.g;
  const int64_t n = a.n, k = a.k;
  conv4x4s2_check(g, "conv4x4s2");
  if (n <= 0) return;
  const Plan q = make_plan(g, k);
  const Layout l = layout(q, Pass::Forward, n, e.threads);
  const int64_t rc = 4 * q.cs, chunk = l.chunk;
  float* U = ws;
  float* bias = ws + l.bias;
  float* V = ws + l.v;
  if (a.b) {
    std::memcpy(bias, a.b, sizeof(float) * q.k);
    std::fill(bias + q.k, bias + q.ks, 0.f);
  }
  const bool fused = a.act.kind != FusedAct::None;
  const float slope = a.act.kind == FusedAct::LeakyReLU ? a.act.slope : 0.f;
  const int nt = team_for(e.threads, n * q.k * q.c * 16 * q.oh * q.ow);
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    observe_team();
    float* strip = ws + l.slots + omp_get_thread_num() * l.slot;
    float* out = strip + l.strip;
    transform_filters_forward(q, a.w, U);  // ends with its omp for's barrier
    for (int64_t i0 = 0; i0 < n; i0 += chunk) {
      const int64_t m = std::min(chunk, n - i0), T = m * q.tiles;
      float* M = V + kXi * T * rc;
      // Items are independent: dynamic, so that a core shared with another process does not
      // hold up the region (no result depends on which thread runs an item).
#pragma omp for schedule(dynamic)
      for (int64_t it = 0; it < m * q.ty; ++it) {
        const int64_t i = it / q.ty, ty = it % q.ty;
        transform_x(q, a.x + (i0 + i) * q.c * q.h * q.w, ty, (i * q.ty + ty) * q.tx, strip, V);
      }
      const Blocks cb = make_blocks(T, q.ks, kXi);
#pragma omp for schedule(dynamic)
      for (int64_t it = 0; it < kXi * cb.per_point(); ++it) {
        const int64_t xi = it / cb.per_point(), r0 = (it % cb.per_point()) / cb.nc * cb.rb,
                      c0 = (it % cb.nc) * cb.cb;
        gemm(false, false, std::min(cb.rb, T - r0), std::min(cb.cb, q.ks - c0), rc, 1.f,
             V + (r0 * kXi + xi) * rc, kXi * rc, U + xi * q.ks + c0, kXi * q.ks, 0.f,
             M + (r0 * kXi + xi) * q.ks + c0, kXi * q.ks, CpuExec{1});
      }
#pragma omp for schedule(dynamic)
      for (int64_t it = 0; it < m * q.ty; ++it) {
        const int64_t i = it / q.ty, ty = it % q.ty;
        const int64_t ocols = 4 * q.tx;
        for (int64_t tx = 0; tx < q.tx; ++tx) {
          const int64_t t = (i * q.ty + ty) * q.tx + tx;
          for (int64_t k0 = 0; k0 < q.ks; k0 += L)
            output_tile(M + t * kXi * q.ks + k0, q.ks, a.b ? simd::load(bias + k0) : simd::zero(),
                        fused, slope, out + 4 * tx * q.ks + k0, ocols * q.ks, q.ks);
        }
        store_rows(out, 4, ocols, q.ks, q.k, q.oh, q.ow, 4 * ty,
                   a.y + (i0 + i) * q.k * q.oh * q.ow);
      }
    }
  }
}

void conv4x4s2_backward_data(const ConvBwd& a, float* ws, CpuExec e) {
  const ConvGeom& g = a.g;
  const int64_t n = a.n, k = a.k;
  conv4x4s2_check(g, "conv4x4s2");
  if (n <= 0) return;
  const Plan q = make_plan(g, k);
  const Layout l = layout(q, Pass::Data, n, e.threads);
  const int64_t chunk = l.chunk;
  float* U = ws;
  float* V = ws + l.v;
  const int nt = team_for(e.threads, n * q.k * q.c * 16 * q.oh * q.ow);
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    observe_team();
    float* strip = ws + l.slots + omp_get_thread_num() * l.slot;
    float* out = strip + l.strip;
    transform_filters_data(q, a.w, U);
    for (int64_t i0 = 0; i0 < n; i0 += chunk) {
      const int64_t m = std::min(chunk, n - i0), T = m * q.tiles;
      float* M = V + 4 * kXi * T * q.ks;
#pragma omp for schedule(dynamic)
      for (int64_t it = 0; it < m * q.ty; ++it) {
        const int64_t i = it / q.ty, ty = it % q.ty;
        transform_dy_phases(q, a.dy + (i0 + i) * q.k * q.oh * q.ow, ty, (i * q.ty + ty) * q.tx,
                            strip, V);
      }
      const Blocks cb = make_blocks(T, q.cs, 4 * kXi);
#pragma omp for schedule(dynamic)
      for (int64_t it = 0; it < 4 * kXi * cb.per_point(); ++it) {
        const int64_t px = it / cb.per_point(), r0 = (it % cb.per_point()) / cb.nc * cb.rb,
                      c0 = (it % cb.nc) * cb.cb;
        gemm(false, false, std::min(cb.rb, T - r0), std::min(cb.cb, q.cs - c0), q.ks, 1.f,
             V + (r0 * 4 * kXi + px) * q.ks, 4 * kXi * q.ks, U + px * q.cs + c0, 4 * kXi * q.cs,
             0.f, M + (r0 * 4 * kXi + px) * q.cs + c0, 4 * kXi * q.cs, CpuExec{1});
      }
#pragma omp for schedule(dynamic)
      for (int64_t it = 0; it < m * q.ty; ++it) {
        const int64_t i = it / q.ty, ty = it % q.ty;
        const int64_t ocols = 8 * q.tx, rstep = ocols * q.cs;
        for (int p = 0; p < 4; ++p) {
          const int py = p / 2, px = p % 2;
          for (int64_t tx = 0; tx < q.tx; ++tx) {
            const int64_t t = (i * q.ty + ty) * q.tx + tx;
            // pixel (i, j) of the phase tile = dx row 2 i + py, column 8 tx + 2 j + px
            float* o = out + py * rstep + (8 * tx + px) * q.cs;
            for (int64_t c0 = 0; c0 < q.cs; c0 += L)
              output_tile(M + (t * 4 + p) * kXi * q.cs + c0, q.cs, simd::zero(), false, 0.f, o + c0,
                          2 * rstep, 2 * q.cs);
          }
        }
        const int64_t img = (i0 + i) * q.c * q.h * q.w;
        store_rows(out, 8, ocols, q.cs, q.c, q.h, q.w, 8 * ty, a.dx + img,
                   a.dx_act.kind == FusedAct::None ? nullptr : a.dx_src + img, a.dx_act);
      }
    }
  }
}

void conv4x4s2_backward_weights(const ConvBwd& a, float* ws, CpuExec e) {
  const ConvGeom& g = a.g;
  const int64_t n = a.n, k = a.k;
  conv4x4s2_check(g, "conv4x4s2");
  if (n <= 0) return;
  const Plan q = make_plan(g, k);
  const Layout l = layout(q, Pass::Weights, n, e.threads);
  const int64_t rc = 4 * q.cs, chunk = l.chunk;
  float* dU = ws;
  float* V = ws + l.v;
  const Blocks bl = make_blocks(rc, q.ks, kXi);  // blocks of dU: the tiles are the reduction
  const int nt = team_for(e.threads, n * q.k * q.c * 16 * q.oh * q.ow);
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    observe_team();
    float* strip = ws + l.slots + omp_get_thread_num() * l.slot;
    float* dstrip = strip + l.strip;
    for (int64_t i0 = 0; i0 < n; i0 += chunk) {
      const int64_t m = std::min(chunk, n - i0), T = m * q.tiles;
      float* dM = V + kXi * T * rc;
#pragma omp for schedule(dynamic)
      for (int64_t it = 0; it < m * q.ty; ++it) {
        const int64_t i = it / q.ty, ty = it % q.ty, t0 = (i * q.ty + ty) * q.tx;
        transform_x(q, a.x + (i0 + i) * q.c * q.h * q.w, ty, t0, strip, V);
        transform_dy_adjoint(q, a.dy + (i0 + i) * q.k * q.oh * q.ow, ty, t0, dstrip, dM);
      }
      // dU[xi] (rc, ks) (+)= V[xi]^T (rc, T) dM[xi] (T, ks), the chunks in order.
#pragma omp for schedule(dynamic)
      for (int64_t it = 0; it < kXi * bl.per_point(); ++it) {
        const int64_t xi = it / bl.per_point(), r0 = (it % bl.per_point()) / bl.nc * bl.rb,
                      c0 = (it % bl.nc) * bl.cb;
        gemm(true, false, std::min(bl.rb, rc - r0), std::min(bl.cb, q.ks - c0), T, 1.f,
             V + xi * rc + r0, kXi * rc, dM + xi * q.ks + c0, kXi * q.ks, i0 == 0 ? 0.f : 1.f,
             dU + (r0 * kXi + xi) * q.ks + c0, kXi * q.ks, CpuExec{1});
      }
    }
    add_weight_gradient(q, dU, a.dw);
  }
}

}  // namespace cpu
}  // namespace pdnn
