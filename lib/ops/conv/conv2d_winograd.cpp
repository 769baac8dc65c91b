// Winograd F(4x4, 3x3) convolution kernels (see conv2d_winograd.h).
//
// Work is split into items = (image, block of tile rows), handed to threads dynamically (the
// weight gradient: fixed groups of items, see conv2d_3x3.h). Per item, in a per-thread slot of
// the workspace:
//   strip  input rows of the block, channel-last and zero-padded: (4 rows + 2, 4 tx + 2, cs)
//   V      transformed input tiles: (36, tiles, cs)          B^T d B
//   M      36 GEMMs V[xi] (tiles, c) x U[xi] (c, ks):        (36, tiles, ks)
//   out    output rows, channel-last: (4 rows, 4 tx, ks)     A^T M A + bias  (reuses strip)
// then out is transposed into y (NCHW). U (36, c, ks) = G g G^T is shared by all threads.
// cs, ks: channel counts rounded up to whole SIMD vectors.
#include "ops/conv/conv2d_winograd.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/parallel.h"
#include "ops/conv/conv2d_3x3.h"
#include "ops/simd.h"

namespace pdnn {
namespace cpu {

namespace {

using namespace conv3x3;  // round_up, threads_for, chunk, wgrad_groups
using simd::vf;
constexpr int L = simd::kLanes;
constexpr int kXi = 36;  // points of a transformed 6x6 tile

// 16 floats = one 64-byte line: slots and arrays start on their own lines.
inline int64_t round_line(int64_t n) { return round_up(n, 16); }

// Tiles per block: enough that V and M stay in L2 between the transforms and the GEMMs (2 MB
// per core on the Xeon here, 1 MB on Zen 4), but at least kMinBlockTiles, because each
// block streams all of U (36 c k floats: 2.4 MB at 128 -> 128 channels, beyond L2) through
// the GEMMs once. Measured (thread CPU time, forward, W4 shapes, batch 8): 32 -> 32 at 224
// best at 56 tiles (19.9 ms; 112: 20.7, 224: 22.7); 64 -> 64 at 112 at 28 (31.2; 56: 32.0,
// 112: 36.8); 128 -> 128 at 56 needs more than the L2 rule's 14 (41.7 ms; 28: 37.6,
// 56: 37.1, 98: 34.8, 196: 32.0).
constexpr int64_t kBlockBytes = 768 << 10;
constexpr int64_t kMinBlockTiles = 48;

// One convolution in the kernels' terms: ci planes of h x w, zero-padded by p, to co planes of
// oh x ow. The forward pass runs it with (c -> k, p); backward data with (k -> c, 2 - p).
struct Plan {
  int64_t ci, co, h, w, p, oh, ow;
  int64_t ty, tx;          // tiles down and across
  int64_t cs, ks;          // ci, co rounded up to whole vectors
  int64_t rows, nb, tb;    // tile rows per block, blocks per image, tiles per full block
  int64_t srows, scols;    // input strip of a full block

  int64_t strip_floats() const { return round_line(srows * scols * cs); }
  int64_t out_floats() const { return round_line(4 * rows * 4 * tx * ks); }
  int64_t v_floats() const { return round_line(kXi * tb * cs); }
  int64_t m_floats() const { return round_line(kXi * tb * ks); }
  int64_t u_floats() const { return round_line(kXi * ci * ks); }
  // Per-thread slots: forward (strip/out, V, M); weight gradient (strip, V, dy strip, dM).
  int64_t fwd_slot() const { return std::max(strip_floats(), out_floats()) + v_floats() + m_floats(); }
  int64_t wgrad_slot() const { return strip_floats() + v_floats() + out_floats() + m_floats(); }
};

Plan make_plan(int64_t ci, int64_t co, int64_t h, int64_t w, int64_t p) {
  Plan q;
  q.ci = ci;
  q.co = co;
  q.h = h;
  q.w = w;
  q.p = p;
  q.oh = h + 2 * p - 2;
  q.ow = w + 2 * p - 2;
  q.ty = (q.oh + 3) / 4;
  q.tx = (q.ow + 3) / 4;
  q.cs = round_up(ci, L);
  q.ks = round_up(co, L);
  const int64_t tiles_max =
      std::max<int64_t>(kMinBlockTiles, kBlockBytes / (kXi * 4 * (q.cs + q.ks)));
  q.rows = std::clamp<int64_t>(tiles_max / q.tx, 1, q.ty);
  q.nb = (q.ty + q.rows - 1) / q.rows;
  q.tb = q.rows * q.tx;
  q.srows = 4 * q.rows + 2;
  q.scols = 4 * q.tx + 2;
  return q;
}

Plan forward_plan(const ConvGeom& g, int64_t k) { return make_plan(g.c, k, g.h, g.w, g.ph); }
Plan data_plan(const ConvGeom& g, int64_t k) { return make_plan(k, g.c, g.oh, g.ow, 2 - g.ph); }

// ---- transforms of one 6-vector (or 4 -> 6, 6 -> 4, 6 -> 3) --------------------------------

// B^T d for the interpolation points 0, +-1, +-2, inf. The multiply-adds fused by hand: 6
// instructions fewer than rounding each product (the build does not contract: simd.h).
inline void bt6(const vf d[6], vf o[6]) {
  const vf four = simd::splat(4.f), two = simd::splat(2.f), five = simd::splat(5.f);
  o[0] = simd::fnma(five, d[2], simd::fma(four, d[0], d[4]));
  o[1] = simd::fnma(four, d[1] + d[2], d[3] + d[4]);
  o[2] = simd::fma(four, d[1] - d[2], d[4] - d[3]);
  o[3] = simd::fma(two, d[3] - d[1], d[4] - d[2]);
  o[4] = simd::fnma(two, d[3] - d[1], d[4] - d[2]);
  o[5] = simd::fnma(five, d[3], simd::fma(four, d[1], d[5]));
}

// A^T m (6 -> 4).
inline void at6(const vf m[6], vf o[4]) {
  const vf s1 = m[1] + m[2], d1 = m[1] - m[2], s2 = m[3] + m[4], d2 = m[3] - m[4];
  o[0] = m[0] + s1 + s2;
  o[1] = simd::fma(simd::splat(2.f), d2, d1);
  o[2] = simd::fma(simd::splat(4.f), s2, s1);
  o[3] = simd::fma(simd::splat(8.f), d2, d1) + m[5];
}

// A o (4 -> 6): the adjoint of at6.
inline void a4(const vf o[4], vf m[6]) {
  const vf e = o[0] + o[2], f = o[1] + o[3];
  const vf g = simd::fma(simd::splat(4.f), o[2], o[0]);
  const vf h = simd::fma(simd::splat(8.f), o[3], simd::splat(2.f) * o[1]);
  m[0] = o[0];
  m[1] = e + f;
  m[2] = e - f;
  m[3] = g + h;
  m[4] = g - h;
  m[5] = o[3];
}

// 24 G g (3 -> 6) and 24 G^T u (6 -> 3), in double: G's entries are 1/4 ... 1/24, so with
// the integer matrix 24 G both passes stay exact for integer data and one final division by
// 24^2 rounds once (the filter transforms run once per call: their cost does not matter).
inline void g3(const double g[3], double o[6]) {
  o[0] = 6 * g[0];
  o[1] = -4 * (g[0] + g[1] + g[2]);
  o[2] = -4 * (g[0] - g[1] + g[2]);
  o[3] = g[0] + 2 * g[1] + 4 * g[2];
  o[4] = g[0] - 2 * g[1] + 4 * g[2];
  o[5] = 24 * g[2];
}
inline void gt6(const double u[6], double o[3]) {
  o[0] = 6 * u[0] - 4 * (u[1] + u[2]) + (u[3] + u[4]);
  o[1] = 4 * (u[2] - u[1]) + 2 * (u[3] - u[4]);
  o[2] = 4 * (u[3] + u[4] - u[1] - u[2]) + 24 * u[5];
}

// out = T in T^T for a 1-D transform T of In -> Out values: T on every column, then every row.
template <int In, int Out, void (*T)(const double*, double*)>
void sandwich(const double (&in)[In][In], double (&out)[Out][Out]) {
  double t[Out][In], col[In], res[Out];
  for (int s = 0; s < In; ++s) {
    for (int r = 0; r < In; ++r) col[r] = in[r][s];
    T(col, res);
    for (int a = 0; a < Out; ++a) t[a][s] = res[a];
  }
  for (int a = 0; a < Out; ++a) T(t[a], out[a]);
}

// ---- filter transform ------------------------------------------------------------------------

// U[xi][i][o] = (G g G^T)[xi] for the kernel g from input plane i to output plane o; lanes
// o >= co are zero. flip: g is w[i][o] rotated by 180 degrees (backward data, w (ci, co, 3, 3));
// else g = w[o][i] (w (co, ci, 3, 3)). Rows i split over the threads of the enclosing region.
void transform_filters(const Plan& q, const float* w, bool flip, float* U) {
#pragma omp for schedule(static)
  for (int64_t i = 0; i < q.ci; ++i) {
    for (int64_t o = 0; o < q.ks; ++o) {
      if (o >= q.co) {
        for (int xi = 0; xi < kXi; ++xi) U[(xi * q.ci + i) * q.ks + o] = 0.f;
        continue;
      }
      double g[3][3];
      for (int r = 0; r < 3; ++r)
        for (int s = 0; s < 3; ++s)
          g[r][s] = flip ? w[((i * q.co + o) * 3 + 2 - r) * 3 + 2 - s]
                         : w[((o * q.ci + i) * 3 + r) * 3 + s];
      double u[6][6];
      sandwich<3, 6, g3>(g, u);
      for (int xi = 0; xi < kXi; ++xi)
        U[(xi * q.ci + i) * q.ks + o] = static_cast<float>(u[xi / 6][xi % 6] / 576);
    }
  }
}

// ---- layout changes ----------------------------------------------------------------------

// Input rows 4 r0 - p ... of one image, channel-last with zero padding:
// strip[sr][col][c] = x[c][4 r0 + sr - p][col - p] (0 outside), sr < 4 nr + 2, col < scols.
void fill_strip(const Plan& q, const float* x, int64_t r0, int64_t nr, float* strip) {
  const int64_t hw = q.h * q.w, row_floats = q.scols * q.cs;
  // Rows inside the image: the borders first, then the transposed pixels. Channel blocks are
  // the outer loop so that 16 planes are read at a time, each sequentially (the hardware
  // prefetchers follow that; all C planes at once they do not: 2x slower at 128 channels).
  const int64_t sr_lo = std::clamp<int64_t>(q.p - 4 * r0, 0, 4 * nr + 2);
  const int64_t sr_hi = std::clamp<int64_t>(q.h + q.p - 4 * r0, sr_lo, 4 * nr + 2);
  for (int64_t sr = 0; sr < 4 * nr + 2; ++sr) {
    float* row = strip + sr * row_floats;
    if (sr < sr_lo || sr >= sr_hi) {
      std::memset(row, 0, sizeof(float) * row_floats);
      continue;
    }
    std::memset(row, 0, sizeof(float) * q.p * q.cs);
    std::memset(row + (q.p + q.w) * q.cs, 0, sizeof(float) * (q.scols - q.p - q.w) * q.cs);
  }
  for (int64_t c0 = 0; c0 < q.ci; c0 += L) {
    const int rows = static_cast<int>(std::min<int64_t>(L, q.ci - c0));
    for (int64_t sr = sr_lo; sr < sr_hi; ++sr) {
      const float* src = x + c0 * hw + (4 * r0 + sr - q.p) * q.w;
      float* dst = strip + sr * row_floats + q.p * q.cs + c0;
      for (int64_t ix0 = 0; ix0 < q.w; ix0 += L)
        simd::transpose_block(src + ix0, hw, rows, static_cast<int>(std::min<int64_t>(L, q.w - ix0)),
                              dst + ix0 * q.cs, q.cs, L);
    }
  }
}

// dy rows 4 r0 ... of one image, channel-last: ds[orow][ox][k] = dy[k][4 r0 + orow][ox]
// (0 past the output's edge), orow < 4 nr, ox < 4 tx.
void fill_dy_strip(const Plan& q, const float* dy, int64_t r0, int64_t nr, float* ds) {
  const int64_t p = q.oh * q.ow, row_floats = 4 * q.tx * q.ks;
  const int64_t rows_in = std::clamp<int64_t>(q.oh - 4 * r0, 0, 4 * nr);
  for (int64_t orow = 0; orow < 4 * nr; ++orow) {
    float* row = ds + orow * row_floats;
    if (orow >= rows_in)
      std::memset(row, 0, sizeof(float) * row_floats);
    else
      std::memset(row + q.ow * q.ks, 0, sizeof(float) * (4 * q.tx - q.ow) * q.ks);
  }
  for (int64_t k0 = 0; k0 < q.co; k0 += L) {  // 16 planes at a time, as in fill_strip
    const int rows = static_cast<int>(std::min<int64_t>(L, q.co - k0));
    for (int64_t orow = 0; orow < rows_in; ++orow) {
      const float* src = dy + k0 * p + (4 * r0 + orow) * q.ow;
      float* dst = ds + orow * row_floats + k0;
      for (int64_t ox0 = 0; ox0 < q.ow; ox0 += L)
        simd::transpose_block(src + ox0, p, rows, static_cast<int>(std::min<int64_t>(L, q.ow - ox0)),
                              dst + ox0 * q.ks, q.ks, L);
    }
  }
}

// Output rows of a block from channel-last `out` into y (NCHW) of one image.
void store_rows(const Plan& q, const float* out, int64_t r0, int64_t nr, float* y) {
  const int64_t p = q.oh * q.ow, row_floats = 4 * q.tx * q.ks;
  const int64_t rows_out = std::min<int64_t>(q.oh - 4 * r0, 4 * nr);
  for (int64_t k0 = 0; k0 < q.co; k0 += L) {  // 16 planes at a time, as in fill_strip
    const int cols = static_cast<int>(std::min<int64_t>(L, q.co - k0));
    for (int64_t orow = 0; orow < rows_out; ++orow) {
      const float* src = out + orow * row_floats + k0;
      float* dst = y + k0 * p + (4 * r0 + orow) * q.ow;
      for (int64_t ox0 = 0; ox0 < q.ow; ox0 += L) {
        const int n = static_cast<int>(std::min<int64_t>(L, q.ow - ox0));
        simd::transpose_block(src + ox0 * q.ks, q.ks, n, cols, dst + ox0, p, n);
      }
    }
  }
}

// ---- tile transforms ---------------------------------------------------------------------

// V[xi][t][c] = (B^T d_t B)[xi] for the tiles t of a block of nr tile rows.
void transform_input(const Plan& q, const float* strip, int64_t nr, float* V) {
  const int64_t nt = nr * q.tx, vstride = q.tb * q.cs;
  for (int64_t t = 0; t < nt; ++t) {
    const int64_t trow = t / q.tx, tcol = t % q.tx;
    const float* base = strip + (4 * trow * q.scols + 4 * tcol) * q.cs;
    float* vt = V + t * q.cs;
    for (int64_t c0 = 0; c0 < q.cs; c0 += L) {
      vf T[6][6], d[6], o[6];
      for (int s = 0; s < 6; ++s) {
        for (int r = 0; r < 6; ++r) d[r] = simd::load(base + (r * q.scols + s) * q.cs + c0);
        bt6(d, o);
        for (int a = 0; a < 6; ++a) T[a][s] = o[a];
      }
      for (int a = 0; a < 6; ++a) {
        bt6(T[a], o);
        for (int b = 0; b < 6; ++b) simd::store(vt + (a * 6 + b) * vstride + c0, o[b]);
      }
    }
  }
}

// out[4 trow + i][4 tcol + j][k] = act((A^T M_t A)[i][j] + bias[k]) for the tiles of a block
// (the fused activation in the same write: conv2d.h).
void transform_output(const Plan& q, const float* M, const float* bias, Act act, int64_t nr,
                      float* out) {
  const bool fused = act.kind != FusedAct::None;
  const float slope = act.kind == FusedAct::LeakyReLU ? act.slope : 0.f;
  const int64_t nt = nr * q.tx, mstride = q.tb * q.ks, row_floats = 4 * q.tx * q.ks;
  for (int64_t t = 0; t < nt; ++t) {
    const int64_t trow = t / q.tx, tcol = t % q.tx;
    const float* mt = M + t * q.ks;
    float* ot = out + 4 * trow * row_floats + 4 * tcol * q.ks;
    for (int64_t k0 = 0; k0 < q.ks; k0 += L) {
      vf T[4][6], m[6], o[4];
      for (int b = 0; b < 6; ++b) {
        for (int a = 0; a < 6; ++a) m[a] = simd::load(mt + (a * 6 + b) * mstride + k0);
        at6(m, o);
        for (int i = 0; i < 4; ++i) T[i][b] = o[i];
      }
      const vf bv = bias ? simd::load(bias + k0) : simd::zero();
      for (int i = 0; i < 4; ++i) {
        at6(T[i], o);
        for (int j = 0; j < 4; ++j) {
          const vf v = o[j] + bv;
          simd::store(ot + i * row_floats + j * q.ks + k0, fused ? simd::leaky(v, slope) : v);
        }
      }
    }
  }
}

// dM[xi][t][k] = (A dY_t A^T)[xi] for the 4x4 dy tiles of a block (ds from fill_dy_strip).
void transform_dy(const Plan& q, const float* ds, int64_t nr, float* dM) {
  const int64_t nt = nr * q.tx, mstride = q.tb * q.ks, row_floats = 4 * q.tx * q.ks;
  for (int64_t t = 0; t < nt; ++t) {
    const int64_t trow = t / q.tx, tcol = t % q.tx;
    const float* dt = ds + 4 * trow * row_floats + 4 * tcol * q.ks;
    float* mt = dM + t * q.ks;
    for (int64_t k0 = 0; k0 < q.ks; k0 += L) {
      vf T[6][4], o[4], m[6];
      for (int j = 0; j < 4; ++j) {
        for (int i = 0; i < 4; ++i) o[i] = simd::load(dt + i * row_floats + j * q.ks + k0);
        a4(o, m);
        for (int a = 0; a < 6; ++a) T[a][j] = m[a];
      }
      for (int a = 0; a < 6; ++a) {
        a4(T[a], m);
        for (int b = 0; b < 6; ++b) simd::store(mt + (a * 6 + b) * mstride + k0, m[b]);
      }
    }
  }
}

// ---- the 36 GEMMs ------------------------------------------------------------------------

// c[r][v L + l] (+)= sum_j a[r a_row + j a_red] * b[j b_red + v L + l] for r < R, v < KV:
// R x KV vectors of accumulators held in registers over the whole reduction.
template <int R, int KV>
void gemm_tile(int64_t len, const float* a, int64_t a_row, int64_t a_red, const float* b,
               int64_t b_red, float* c, int64_t c_row, bool accumulate) {
  vf s[R][KV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < KV; ++v) s[r][v] = simd::zero();
  for (int64_t j = 0; j < len; ++j) {
    vf bv[KV];
    for (int v = 0; v < KV; ++v) bv[v] = simd::load(b + j * b_red + v * L);
    const float* aj = a + j * a_red;
    for (int r = 0; r < R; ++r) {
      const vf ar = simd::splat(aj[r * a_row]);
      for (int v = 0; v < KV; ++v) s[r][v] = simd::fma(ar, bv[v], s[r][v]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < KV; ++v) {
      float* cp = c + r * c_row + v * L;
      simd::store(cp, accumulate ? simd::load(cp) + s[r][v] : s[r][v]);
    }
}

// Rows of C per register tile: 12 x 2 vectors of accumulators (24 of the 32 AVX-512
// registers, the rest for the two B vectors and the broadcast A value).
constexpr int kTileRows = 12;

template <int KV>
void gemm_rows_kv(int64_t rows, int64_t len, const float* a, int64_t a_row, int64_t a_red,
                  const float* b, int64_t b_red, float* c, int64_t c_row, bool acc) {
  int64_t r = 0;
  for (; r + kTileRows <= rows; r += kTileRows)
    gemm_tile<kTileRows, KV>(len, a + r * a_row, a_row, a_red, b, b_red, c + r * c_row, c_row, acc);
  const float* ar = a + r * a_row;
  float* cr = c + r * c_row;
  switch (rows - r) {
    case 0: break;
    case 1: gemm_tile<1, KV>(len, ar, a_row, a_red, b, b_red, cr, c_row, acc); break;
    case 2: gemm_tile<2, KV>(len, ar, a_row, a_red, b, b_red, cr, c_row, acc); break;
    case 3: gemm_tile<3, KV>(len, ar, a_row, a_red, b, b_red, cr, c_row, acc); break;
    case 4: gemm_tile<4, KV>(len, ar, a_row, a_red, b, b_red, cr, c_row, acc); break;
    case 5: gemm_tile<5, KV>(len, ar, a_row, a_red, b, b_red, cr, c_row, acc); break;
    case 6: gemm_tile<6, KV>(len, ar, a_row, a_red, b, b_red, cr, c_row, acc); break;
    case 7: gemm_tile<7, KV>(len, ar, a_row, a_red, b, b_red, cr, c_row, acc); break;
    case 8: gemm_tile<8, KV>(len, ar, a_row, a_red, b, b_red, cr, c_row, acc); break;
    case 9: gemm_tile<9, KV>(len, ar, a_row, a_red, b, b_red, cr, c_row, acc); break;
    case 10: gemm_tile<10, KV>(len, ar, a_row, a_red, b, b_red, cr, c_row, acc); break;
    default: gemm_tile<11, KV>(len, ar, a_row, a_red, b, b_red, cr, c_row, acc); break;
  }
}

// C (rows, cols) (+)= A (rows, len) B (len, cols), cols a multiple of L; A element (r, j) at
// a[r a_row + j a_red], so A may be read transposed.
void gemm_block(int64_t rows, int64_t cols, int64_t len, const float* a, int64_t a_row,
                int64_t a_red, const float* b, int64_t b_red, float* c, int64_t c_row, bool acc) {
  int64_t j = 0;
  for (; j + 2 * L <= cols; j += 2 * L)
    gemm_rows_kv<2>(rows, len, a, a_row, a_red, b + j, b_red, c + j, c_row, acc);
  if (j < cols) gemm_rows_kv<1>(rows, len, a, a_row, a_red, b + j, b_red, c + j, c_row, acc);
}

// ---- the passes --------------------------------------------------------------------------

// Runs plan q (forward or backward data) over n images: y (n, co, oh, ow) from x (n, ci, h, w)
// with the kernels w as transform_filters reads them (flip for backward data).
void run_forward(const Plan& q, int64_t n, const float* x, const float* w, bool flip, Act act,
                 const float* b, float* y, int threads, float* ws) {
  float* U = ws;
  float* bias = U + q.u_floats();
  float* slots = bias + round_line(q.ks);
  if (b) {
    std::memcpy(bias, b, sizeof(float) * q.co);
    std::fill(bias + q.co, bias + q.ks, 0.f);
  }
  const int64_t items = n * q.nb, slot = q.fwd_slot();
  const int nt_req = threads_for(threads, items);
  const int64_t macs = n * q.co * q.ci * 9 * q.oh * q.ow;
#pragma omp parallel num_threads(nt_req) if (nt_req > 1 && PDNN_PAR(macs))
  {
    observe_team();
    transform_filters(q, w, flip, U);  // ends with the barrier of its omp for
    float* strip = slots + omp_get_thread_num() * slot;
    float* V = strip + std::max(q.strip_floats(), q.out_floats());
    float* M = V + q.v_floats();
    // Items are independent: dynamic, so that a core shared with another process does not
    // hold up the region (the result does not depend on which thread runs an item).
#pragma omp for schedule(dynamic)
    for (int64_t it = 0; it < items; ++it) {
      const int64_t i = it / q.nb, r0 = (it % q.nb) * q.rows;
      const int64_t nr = std::min(q.rows, q.ty - r0), ntiles = nr * q.tx;
      fill_strip(q, x + i * q.ci * q.h * q.w, r0, nr, strip);
      transform_input(q, strip, nr, V);
      for (int xi = 0; xi < kXi; ++xi)
        gemm_block(ntiles, q.ks, q.ci, V + xi * q.tb * q.cs, q.cs, 1, U + xi * q.ci * q.ks, q.ks,
                   M + xi * q.tb * q.ks, q.ks, false);
      transform_output(q, M, b ? bias : nullptr, act, nr, strip);
      store_rows(q, strip, r0, nr, y + i * q.co * q.oh * q.ow);
    }
  }
}

}  // namespace

size_t conv3x3_winograd_workspace_floats(const ConvGeom& g, int64_t n, int64_t k, int threads) {
  if (!conv3x3_applies(g)) return 0;  // the kernels reject g with a clear error
  const Plan f = forward_plan(g, k), d = data_plan(g, k);
  const int64_t fwd = f.u_floats() + round_line(f.ks) + threads_for(threads, n * f.nb) * f.fwd_slot();
  const int64_t data = d.u_floats() + round_line(d.ks) + threads_for(threads, n * d.nb) * d.fwd_slot();
  const int64_t wgrad =
      threads_for(threads, n * f.nb) * f.wgrad_slot() + wgrad_groups(n * f.nb) * f.u_floats();
  return static_cast<size_t>(std::max({fwd, data, wgrad}));
}

void conv3x3_winograd_forward(const ConvFwd& a, float* ws, CpuExec e) {
  conv3x3_check(a.g, "conv3x3_winograd");
  if (a.n <= 0) return;
  run_forward(forward_plan(a.g, a.k), a.n, a.x, a.w, false, a.act, a.b, a.y, e.threads, ws);
}

void conv3x3_winograd_backward_data(const ConvBwd& a, float* ws, CpuExec e) {
  conv3x3_check(a.g, "conv3x3_winograd");
  if (a.n <= 0) return;
  run_forward(data_plan(a.g, a.k), a.n, a.dy, a.w, true, Act{}, nullptr, a.dx, e.threads, ws);
}

void conv3x3_winograd_backward_weights(const ConvBwd& a, float* ws, CpuExec e) {
  const ConvGeom& g = a.g;
  const int64_t n = a.n, k = a.k;
  conv3x3_check(g, "conv3x3_winograd");
  if (n <= 0) return;
  const Plan q = forward_plan(g, k);
  const int64_t items = n * q.nb, slot = q.wgrad_slot(), groups = wgrad_groups(items);
  const int nt_req = threads_for(e.threads, groups);
  const int64_t macs = n * q.co * q.ci * 9 * q.oh * q.ow;
  float* dUs = ws + nt_req * slot;  // group g's dU at dUs + g * u_floats()
#pragma omp parallel num_threads(nt_req) if (nt_req > 1 && PDNN_PAR(macs))
  {
    observe_team();
    float* strip = ws + omp_get_thread_num() * slot;
    float* V = strip + q.strip_floats();
    float* ds = V + q.v_floats();
    float* dM = ds + q.out_floats();
    // Groups dynamically, as the forward pass's items: each group's sum is the same whichever
    // thread computes it. The implicit barrier publishes the groups' dU.
#pragma omp for schedule(dynamic)
    for (int64_t gr = 0; gr < groups; ++gr) {
      float* dU = dUs + gr * q.u_floats();
      std::memset(dU, 0, sizeof(float) * q.u_floats());
      int64_t lo, hi;
      chunk(items, gr, groups, &lo, &hi);
      for (int64_t it = lo; it < hi; ++it) {
        const int64_t i = it / q.nb, r0 = (it % q.nb) * q.rows;
        const int64_t nr = std::min(q.rows, q.ty - r0), ntiles = nr * q.tx;
        fill_strip(q, a.x + i * q.ci * q.h * q.w, r0, nr, strip);
        transform_input(q, strip, nr, V);
        fill_dy_strip(q, a.dy + i * q.co * q.oh * q.ow, r0, nr, ds);
        transform_dy(q, ds, nr, dM);
        // dU[xi] (ci, ks) += V[xi]^T (ci, tiles) dM[xi] (tiles, ks)
        for (int xi = 0; xi < kXi; ++xi)
          gemm_block(q.ci, q.ks, ntiles, V + xi * q.tb * q.cs, 1, q.cs, dM + xi * q.tb * q.ks,
                     q.ks, dU + xi * q.ci * q.ks, q.ks, true);
      }
    }
    // dw[o][i] += G^T (sum over groups, in group order, of dU[.][i][o]) G; the group sums of
    // input plane i gathered first in this thread's dM buffer, (36, ks).
    float* u = dM;
#pragma omp for schedule(static)
    for (int64_t i = 0; i < q.ci; ++i) {
      for (int xi = 0; xi < kXi; ++xi) {
        float* ux = u + xi * q.ks;
        const float* src = dUs + (xi * q.ci + i) * q.ks;
        std::memcpy(ux, src, sizeof(float) * q.ks);
        for (int64_t gr = 1; gr < groups; ++gr)
          for (int64_t o = 0; o < q.ks; o += L)
            simd::store(ux + o, simd::load(ux + o) + simd::load(src + gr * q.u_floats() + o));
      }
      for (int64_t o = 0; o < q.co; ++o) {
        double ut[6][6], gk[3][3];
        for (int xi = 0; xi < kXi; ++xi) ut[xi / 6][xi % 6] = u[xi * q.ks + o];
        sandwich<6, 3, gt6>(ut, gk);
        for (int r = 0; r < 9; ++r)
          a.dw[(o * q.ci + i) * 9 + r] += static_cast<float>(gk[r / 3][r % 3] / 576);
      }
    }
  }
}

}  // namespace cpu
}  // namespace pdnn
