// Direct 3x3 stride-1 convolution kernels (see conv2d_direct.h). Images handed to threads
// dynamically; per thread a zero-padded copy of the current image (c, h + 2p, wq),
// wq = whole vectors of output pixels + 2, so that every load of a row is in bounds and the
// lanes past the row's end read zeros.
#include "ops/conv/conv2d_direct.h"

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
constexpr int kKB = 8;  // output channels per register block
constexpr int kNV = 3;  // vectors of pixels per register block: 8 x 3 = 24 accumulators


// ci planes of h x w, padded by p, to co planes of oh x ow (forward: c -> k, p; backward
// data: k -> c, 2 - p).
struct Plan {
  int64_t ci, co, h, w, p, oh, ow, hp, wq, nvec, kpad;
  int64_t wt_floats() const { return round_up(ci * 9 * kpad, 16); }
  int64_t pad_floats() const { return round_up(ci * hp * wq, 16); }
  // Per-lane weight-gradient partial sums: (kpad / kKB, ci, 3 rows) x kKB x 3 taps vectors.
  int64_t part_floats() const { return kpad * ci * 9 * L; }
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
  q.hp = h + 2 * p;
  q.nvec = (q.ow + L - 1) / L;
  q.wq = q.nvec * L + 2;
  q.kpad = round_up(co, kKB);
  return q;
}

// xp (ci, hp, wq) = x (ci, h, w) placed at (p, p), zeros around.
void pad_image(const Plan& q, const float* x, float* xp) {
  std::memset(xp, 0, sizeof(float) * q.ci * q.hp * q.wq);
  for (int64_t c = 0; c < q.ci; ++c)
    for (int64_t iy = 0; iy < q.h; ++iy)
      std::memcpy(xp + (c * q.hp + iy + q.p) * q.wq + q.p, x + (c * q.h + iy) * q.w,
                  sizeof(float) * q.w);
}

// wt[i][r][s][o] (o < kpad, 0 past co) = w[o][i][r][s] (w (co, ci, 3, 3)), or with flip the
// kernel of backward data: w[i][o][2 - r][2 - s] (w (ci, co, 3, 3)).
void arrange_weights(const Plan& q, const float* w, bool flip, float* wt) {
  for (int64_t i = 0; i < q.ci; ++i)
    for (int rs = 0; rs < 9; ++rs)
      for (int64_t o = 0; o < q.kpad; ++o)
        wt[(i * 9 + rs) * q.kpad + o] =
            o >= q.co ? 0.f : flip ? w[(i * q.co + o) * 9 + 8 - rs] : w[(o * q.ci + i) * 9 + rs];
}

// One output row, channels k0 .. k0 + 8, vectors v0 .. v0 + NV: y[k][oy][.] = bias[k] +
// sum over (i, r, s) of wt[i][r][s][k] * xp[i][oy + r][. + s].
template <int NV>
void forward_block(const Plan& q, const float* xp, const float* wt, const float* b, Act act,
                   int64_t oy, int64_t k0, int64_t v0, float* y) {
  vf acc[kKB][NV];
  for (int kk = 0; kk < kKB; ++kk) {
    const vf init = simd::splat(b && k0 + kk < q.co ? b[k0 + kk] : 0.f);
    for (int v = 0; v < NV; ++v) acc[kk][v] = init;
  }
  for (int64_t i = 0; i < q.ci; ++i)
    for (int r = 0; r < 3; ++r) {
      const float* row = xp + (i * q.hp + oy + r) * q.wq + v0 * L;
      for (int s = 0; s < 3; ++s) {
        vf xv[NV];
        for (int v = 0; v < NV; ++v) xv[v] = simd::load(row + v * L + s);
        const float* wk = wt + (i * 9 + r * 3 + s) * q.kpad + k0;
        for (int kk = 0; kk < kKB; ++kk) {
          const vf wv = simd::splat(wk[kk]);
          for (int v = 0; v < NV; ++v) acc[kk][v] = simd::fma(wv, xv[v], acc[kk][v]);
        }
      }
    }
  const int64_t plane = q.oh * q.ow;
  const bool fused = act.kind != FusedAct::None;
  const float slope = act.kind == FusedAct::LeakyReLU ? act.slope : 0.f;
  for (int kk = 0; kk < kKB && k0 + kk < q.co; ++kk)
    for (int v = 0; v < NV; ++v) {
      const int64_t ox = (v0 + v) * L;
      simd::store_first(y + (k0 + kk) * plane + oy * q.ow + ox,
                        fused ? simd::leaky(acc[kk][v], slope) : acc[kk][v],
                        static_cast<int>(std::min<int64_t>(L, q.ow - ox)));
    }
}

// Runs plan q over n images: y (n, co, oh, ow) from x (n, ci, h, w).
void run_forward(const Plan& q, int64_t n, const float* x, const float* w, bool flip, Act act,
                 const float* b, float* y, int threads, float* ws) {
  float* wt = ws;
  float* pads = wt + q.wt_floats();
  const int nt_req = threads_for(threads, n);
  const int64_t macs = n * q.co * q.ci * 9 * q.oh * q.ow;
#pragma omp parallel num_threads(nt_req) if (nt_req > 1 && PDNN_PAR(macs))
  {
    observe_team();
#pragma omp single
    arrange_weights(q, w, flip, wt);  // its implicit barrier publishes wt
    float* xp = pads + omp_get_thread_num() * q.pad_floats();
    // Images dynamically: a core shared with another process does not hold up the region.
#pragma omp for schedule(dynamic)
    for (int64_t im = 0; im < n; ++im) {
      pad_image(q, x + im * q.ci * q.h * q.w, xp);
      float* yi = y + im * q.co * q.oh * q.ow;
      // Channel blocks outermost: 8 output planes written at a time, each row by row.
      for (int64_t k0 = 0; k0 < q.co; k0 += kKB)
        for (int64_t oy = 0; oy < q.oh; ++oy) {
          int64_t v0 = 0;
          for (; v0 + kNV <= q.nvec; v0 += kNV) forward_block<kNV>(q, xp, wt, b, act, oy, k0, v0, yi);
          if (q.nvec - v0 == 2) forward_block<2>(q, xp, wt, b, act, oy, k0, v0, yi);
          if (q.nvec - v0 == 1) forward_block<1>(q, xp, wt, b, act, oy, k0, v0, yi);
        }
    }
  }
}

// Rows [oy0, oy1) of one image added into the per-lane partial sums of output channels
// k0 .. k0 + 8 and input plane i: part[kk][r][s] += dy[k0 + kk][oy][.] * xp[i][oy + r][. + s].
void wgrad_block(const Plan& q, const float* xp, const float* dy, int64_t i, int64_t k0,
                 int64_t oy0, int64_t oy1, float* part) {
  const int64_t plane = q.oh * q.ow;
  for (int r = 0; r < 3; ++r) {
    float* pr = part + r * kKB * 3 * L;
    vf acc[kKB][3];
    for (int kk = 0; kk < kKB; ++kk)
      for (int s = 0; s < 3; ++s) acc[kk][s] = simd::load(pr + (kk * 3 + s) * L);
    for (int64_t oy = oy0; oy < oy1; ++oy) {
      const float* row = xp + (i * q.hp + oy + r) * q.wq;
      for (int64_t v = 0; v < q.nvec; ++v) {
        const int n = static_cast<int>(std::min<int64_t>(L, q.ow - v * L));
        vf xv[3];
        for (int s = 0; s < 3; ++s) xv[s] = simd::load(row + v * L + s);
        for (int kk = 0; kk < kKB; ++kk) {
          if (k0 + kk >= q.co) break;
          const vf d = simd::load_first(dy + (k0 + kk) * plane + oy * q.ow + v * L, n);
          for (int s = 0; s < 3; ++s) acc[kk][s] = simd::fma(d, xv[s], acc[kk][s]);
        }
      }
    }
    for (int kk = 0; kk < kKB; ++kk)
      for (int s = 0; s < 3; ++s) simd::store(pr + (kk * 3 + s) * L, acc[kk][s]);
  }
}

}  // namespace

size_t conv3x3_direct_workspace_floats(const ConvGeom& g, int64_t n, int64_t k, int threads) {
  if (!conv3x3_applies(g)) return 0;  // the kernels reject g with a clear error
  const Plan f = make_plan(g.c, k, g.h, g.w, g.ph), d = make_plan(k, g.c, g.oh, g.ow, 2 - g.ph);
  const int nt = threads_for(threads, n);
  const int64_t fwd = f.wt_floats() + nt * f.pad_floats();
  const int64_t data = d.wt_floats() + nt * d.pad_floats();
  const int64_t wgrad = nt * f.pad_floats() + wgrad_groups(n) * f.part_floats();
  return static_cast<size_t>(std::max({fwd, data, wgrad}));
}

void conv3x3_direct_forward(const ConvFwd& a, float* ws, CpuExec e) {
  const ConvGeom& g = a.g;
  conv3x3_check(g, "conv3x3_direct");
  if (a.n <= 0) return;
  run_forward(make_plan(g.c, a.k, g.h, g.w, g.ph), a.n, a.x, a.w, false, a.act, a.b, a.y,
              e.threads, ws);
}

void conv3x3_direct_backward_data(const ConvBwd& a, float* ws, CpuExec e) {
  const ConvGeom& g = a.g;
  conv3x3_check(g, "conv3x3_direct");
  if (a.n <= 0) return;
  run_forward(make_plan(a.k, g.c, g.oh, g.ow, 2 - g.ph), a.n, a.dy, a.w, true, Act{}, nullptr,
              a.dx, e.threads, ws);
}

void conv3x3_direct_backward_weights(const ConvBwd& a, float* ws, CpuExec e) {
  const ConvGeom& g = a.g;
  const int64_t n = a.n, k = a.k;
  conv3x3_check(g, "conv3x3_direct");
  if (n <= 0) return;
  const Plan q = make_plan(g.c, k, g.h, g.w, g.ph);
  const int64_t groups = wgrad_groups(n);
  const int nt_req = threads_for(e.threads, groups);
  const int64_t macs = n * q.co * q.ci * 9 * q.oh * q.ow;
  float* parts = ws + nt_req * q.pad_floats();  // group g's partial sums at g * part_floats()
  // Rows per strip: 8 planes of dy rows within ~32 KB, so the 3 c passes over them hit L1.
  const int64_t strip = std::max<int64_t>(1, (32 << 10) / (kKB * q.ow * 4));
  const int64_t group = kKB * 9 * L;  // floats of partial sums per (k block, input plane)
#pragma omp parallel num_threads(nt_req) if (nt_req > 1 && PDNN_PAR(macs))
  {
    observe_team();
    float* xp = ws + omp_get_thread_num() * q.pad_floats();
    // Groups dynamically (each group's sums do not depend on the thread); the implicit
    // barrier publishes them.
#pragma omp for schedule(dynamic)
    for (int64_t gr = 0; gr < groups; ++gr) {
      float* part = parts + gr * q.part_floats();
      std::memset(part, 0, sizeof(float) * q.part_floats());
      for (int64_t im = n * gr / groups; im < n * (gr + 1) / groups; ++im) {
        pad_image(q, a.x + im * q.ci * q.h * q.w, xp);
        const float* dyi = a.dy + im * q.co * q.oh * q.ow;
        for (int64_t k0 = 0; k0 < q.co; k0 += kKB)
          for (int64_t oy0 = 0; oy0 < q.oh; oy0 += strip)
            for (int64_t i = 0; i < q.ci; ++i)
              wgrad_block(q, xp, dyi, i, k0, oy0, std::min(q.oh, oy0 + strip),
                          part + (k0 / kKB * q.ci + i) * group);
      }
    }
    // dw[k][i][r][s] += sum over groups (in order) and lanes of the partial sums.
#pragma omp for schedule(static)
    for (int64_t k0 = 0; k0 < q.co; k0 += kKB)
      for (int64_t i = 0; i < q.ci; ++i)
        for (int kk = 0; kk < kKB && k0 + kk < q.co; ++kk)
          for (int rs = 0; rs < 9; ++rs) {
            const int64_t off =
                (k0 / kKB * q.ci + i) * group + ((rs / 3) * kKB * 3 + kk * 3 + rs % 3) * L;
            vf acc = simd::load(parts + off);
            for (int64_t gr = 1; gr < groups; ++gr)
              acc += simd::load(parts + gr * q.part_floats() + off);
            float s = 0.f;
            for (int l = 0; l < L; ++l) s += acc[l];
            a.dw[((k0 + kk) * q.ci + i) * 9 + rs] += s;
          }
  }
}

}  // namespace cpu
}  // namespace pdnn
