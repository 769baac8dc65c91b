// The 3x3 stride-1 kernels, Winograd F(4x4, 3x3) (ops/conv/conv2d_winograd.h) and direct
// (ops/conv/conv2d_direct.h), at every convolution shape of W3 and W4 (batch reduced) and odd
// ones, forward, backward data and backward weights, two ways:
//  - exact: small integer data with weights that are multiples of 576 = 24^2 (so G g G^T is
//    an integer) make every intermediate an integer; where the sum of absolute values that
//    bounds every partial sum stays below 2^24 (checked), float arithmetic is exact and the
//    kernels must equal the naive convolution bit for bit. This catches any indexing slip.
//  - rounding: uniform real data against the naive convolution in double, every element
//    within the error bound stated in the kernel's header, computed elementwise here.
// Also: 1 vs 2 threads, finite differences through Conv2d, and the per-shape algorithm rule.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "layers/conv2d.h"
#include "ops/conv/conv2d_direct.h"
#include "ops/conv/conv2d_winograd.h"
#include "ops/conv/conv2d.h"
#include "conv_testing.h"
#include "testing.h"

using namespace pdnn;
namespace pt = pdnn::testing;
using pt::abs_of;
using pt::abs_sandwich;
using pt::expect_exact;
using pt::expect_within_bound;
using pt::gamma_m;
using pt::max_of;
using pt::sparse_ints;
using pt::uniform;

namespace {

struct Shape3x3 {
  const char* name;
  int64_t n, c, h, w, k, p;
};

// Every 3x3 convolution of W3 and W4, and odd ones.
const Shape3x3 kShapes[] = {
    {"W3 conv1 1->32 28x28", 2, 1, 28, 28, 32, 0},
    {"W3 conv2 32->64 26x26", 2, 32, 26, 26, 64, 0},
    {"W4 conv1 3->32 224 p1", 1, 3, 224, 224, 32, 1},
    {"W4 conv2 32->32 224 p1", 1, 32, 224, 224, 32, 1},
    {"W4 conv3 32->64 112 p1", 1, 32, 112, 112, 64, 1},
    {"W4 conv4 64->64 112 p1", 1, 64, 112, 112, 64, 1},
    {"W4 conv5 64->128 56 p1", 1, 64, 56, 56, 128, 1},
    {"W4 conv6 128->128 56 p1", 1, 128, 56, 56, 128, 1},
    {"1x1 output (3x3 input)", 3, 4, 3, 3, 5, 0},
    {"1x1 input, pad 1", 2, 3, 1, 1, 4, 1},
    {"1 channel in and out", 2, 1, 9, 7, 1, 1},
    {"batch 1, 5x5 not a tile multiple", 1, 5, 7, 5, 3, 0},
    {"17 -> 33 channels (vector tails)", 2, 17, 10, 13, 33, 1},
    {"pad 2, 6x9", 3, 6, 6, 9, 7, 2},
};

int64_t out_size(int64_t s, int64_t p) { return s + 2 * p - 2; }

// Under AddressSanitizer + UBSan (make test-sanitize, -O1) the W4-sized shapes took 190 s of
// CI's 2 cores, the naive double references and the instrumented kernels at 0.5 GFLOP a pass:
// there the suite keeps the small shapes, which hold every edge, tail and padding case the
// sanitizers watch; `make test` and `make test-avx2` run every shape.
bool left_out_under_sanitizers(const Shape3x3& s) {
#if defined(PDNN_SANITIZED)
  return s.n * s.c * s.h * s.w * s.k > 4000000;
#else
  (void)s;
  return false;
#endif
}

// ---- naive references, in double ----------------------------------------------------------

std::vector<double> naive_forward(const Shape3x3& s, const std::vector<float>& x,
                                  const std::vector<float>& w, const std::vector<float>& b) {
  const int64_t oh = out_size(s.h, s.p), ow = out_size(s.w, s.p);
  std::vector<double> y(s.n * s.k * oh * ow);
  for (int64_t i = 0; i < s.n; ++i)
    for (int64_t o = 0; o < s.k; ++o) {
      double* yo = &y[(i * s.k + o) * oh * ow];
      for (int64_t q = 0; q < oh * ow; ++q) yo[q] = b.empty() ? 0.0 : b[o];
      for (int64_t c = 0; c < s.c; ++c)
        for (int r = 0; r < 3; ++r)
          for (int t = 0; t < 3; ++t) {
            const double wv = w[((o * s.c + c) * 3 + r) * 3 + t];
            for (int64_t oy = 0; oy < oh; ++oy) {
              const int64_t iy = oy + r - s.p;
              if (iy < 0 || iy >= s.h) continue;
              const float* xr = &x[((i * s.c + c) * s.h + iy) * s.w];
              const int64_t lo = std::max<int64_t>(0, s.p - t), hi = std::min(ow, s.w + s.p - t);
              for (int64_t ox = lo; ox < hi; ++ox) yo[oy * ow + ox] += wv * xr[ox + t - s.p];
            }
          }
    }
  return y;
}

std::vector<double> naive_backward_data(const Shape3x3& s, const std::vector<float>& dy,
                                        const std::vector<float>& w) {
  const int64_t oh = out_size(s.h, s.p), ow = out_size(s.w, s.p);
  std::vector<double> dx(s.n * s.c * s.h * s.w, 0.0);
  for (int64_t i = 0; i < s.n; ++i)
    for (int64_t o = 0; o < s.k; ++o)
      for (int64_t c = 0; c < s.c; ++c)
        for (int r = 0; r < 3; ++r)
          for (int t = 0; t < 3; ++t) {
            const double wv = w[((o * s.c + c) * 3 + r) * 3 + t];
            for (int64_t oy = 0; oy < oh; ++oy) {
              const int64_t iy = oy + r - s.p;
              if (iy < 0 || iy >= s.h) continue;
              double* dr = &dx[((i * s.c + c) * s.h + iy) * s.w];
              const float* dyr = &dy[((i * s.k + o) * oh + oy) * ow];
              const int64_t lo = std::max<int64_t>(0, s.p - t), hi = std::min(ow, s.w + s.p - t);
              for (int64_t ox = lo; ox < hi; ++ox) dr[ox + t - s.p] += wv * dyr[ox];
            }
          }
  return dx;
}

std::vector<double> naive_backward_weights(const Shape3x3& s, const std::vector<float>& dy,
                                           const std::vector<float>& x) {
  const int64_t oh = out_size(s.h, s.p), ow = out_size(s.w, s.p);
  std::vector<double> dw(s.k * s.c * 9, 0.0);
  for (int64_t i = 0; i < s.n; ++i)
    for (int64_t o = 0; o < s.k; ++o)
      for (int64_t c = 0; c < s.c; ++c)
        for (int r = 0; r < 3; ++r)
          for (int t = 0; t < 3; ++t) {
            double acc = 0.0;
            for (int64_t oy = 0; oy < oh; ++oy) {
              const int64_t iy = oy + r - s.p;
              if (iy < 0 || iy >= s.h) continue;
              const float* xr = &x[((i * s.c + c) * s.h + iy) * s.w];
              const float* dyr = &dy[((i * s.k + o) * oh + oy) * ow];
              const int64_t lo = std::max<int64_t>(0, s.p - t), hi = std::min(ow, s.w + s.p - t);
              for (int64_t ox = lo; ox < hi; ++ox)
                acc += static_cast<double>(dyr[ox]) * xr[ox + t - s.p];
            }
            dw[((o * s.c + c) * 3 + r) * 3 + t] += acc;
          }
  return dw;
}

// ---- the error bound's bracket: the transforms with absolute values ------------------------

const double kBT[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                          {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
const double kG[6][3] = {{1. / 4, 0, 0},          {-1. / 6, -1. / 6, -1. / 6},
                         {-1. / 6, 1. / 6, -1. / 6}, {1. / 24, 1. / 12, 1. / 6},
                         {1. / 24, -1. / 12, 1. / 6}, {0, 0, 1}};
const double kAT[4][6] = {
    {1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};

const auto kBTm = [](int a, int l) { return kBT[a][l]; };
const auto kGm = [](int a, int l) { return kG[a][l]; };
const auto kGtm = [](int a, int l) { return kG[l][a]; };
const auto kATm = [](int a, int l) { return kAT[a][l]; };
const auto kAm = [](int a, int l) { return kAT[l][a]; };

// |B^T| |d| |B| of the 6x6 input tile at tile (ty, tx) of plane xc (h x w, padding p).
void abs_input_tile(const float* xc, int64_t h, int64_t w, int64_t p, int64_t ty, int64_t tx,
                    double* out) {
  double d[36];
  for (int r = 0; r < 6; ++r)
    for (int t = 0; t < 6; ++t) {
      const int64_t iy = 4 * ty + r - p, ix = 4 * tx + t - p;
      d[r * 6 + t] = iy >= 0 && iy < h && ix >= 0 && ix < w ? std::fabs(xc[iy * w + ix]) : 0.0;
    }
  abs_sandwich<6, 6>(kBTm, d, out);
}

// sum_c |A^T| ((|G| |g| |G|^T) . (|B^T| |d| |B|)) |A| for every output of a convolution of x
// (n, ci, h, w) with kernels g(o, i) = w[o][i] (w (co, ci, 3, 3)), or w[i][o] rotated by 180
// degrees when `flip` (backward data's kernels). *tile_max (if given): the largest entry over
// whole tiles, outputs past the edge included (those are computed too, then dropped).
std::vector<double> bracket_forward(int64_t n, int64_t ci, int64_t h, int64_t w, int64_t co,
                                    int64_t p, const std::vector<float>& x,
                                    const std::vector<float>& wt, bool flip,
                                    double* tile_max = nullptr) {
  if (tile_max) *tile_max = 0.0;
  const int64_t oh = out_size(h, p), ow = out_size(w, p), ty = (oh + 3) / 4, tx = (ow + 3) / 4;
  std::vector<double> U(co * ci * 36), V(ci * 36), y(n * co * oh * ow);
  for (int64_t o = 0; o < co; ++o)
    for (int64_t i = 0; i < ci; ++i) {
      double g[9];
      for (int r = 0; r < 3; ++r)
        for (int t = 0; t < 3; ++t)
          g[r * 3 + t] = std::fabs(flip ? wt[((i * co + o) * 3 + 2 - r) * 3 + 2 - t]
                                        : wt[((o * ci + i) * 3 + r) * 3 + t]);
      abs_sandwich<6, 3>(kGm, g, &U[(o * ci + i) * 36]);
    }
  for (int64_t im = 0; im < n; ++im)
    for (int64_t a = 0; a < ty; ++a)
      for (int64_t b = 0; b < tx; ++b) {
        for (int64_t i = 0; i < ci; ++i)
          abs_input_tile(&x[(im * ci + i) * h * w], h, w, p, a, b, &V[i * 36]);
        for (int64_t o = 0; o < co; ++o) {
          double S[36] = {}, Y[16];
          for (int64_t i = 0; i < ci; ++i)
            for (int e = 0; e < 36; ++e) S[e] += U[(o * ci + i) * 36 + e] * V[i * 36 + e];
          abs_sandwich<4, 6>(kATm, S, Y);
          if (tile_max) *tile_max = std::max(*tile_max, *std::max_element(Y, Y + 16));
          for (int r = 0; r < 4; ++r)
            for (int t = 0; t < 4; ++t)
              if (4 * a + r < oh && 4 * b + t < ow)
                y[((im * co + o) * oh + 4 * a + r) * ow + 4 * b + t] = Y[r * 4 + t];
        }
      }
  return y;
}

// sum over tiles of |G|^T ((|A| |dY| |A|^T) . (|B^T| |d| |B|)) |G| for every weight.
std::vector<double> bracket_weights(const Shape3x3& s, const std::vector<float>& dy,
                                    const std::vector<float>& x) {
  const int64_t oh = out_size(s.h, s.p), ow = out_size(s.w, s.p), ty = (oh + 3) / 4,
                tx = (ow + 3) / 4;
  std::vector<double> S(s.k * s.c * 36, 0.0), V(s.c * 36), D(s.k * 36), dw(s.k * s.c * 9);
  for (int64_t im = 0; im < s.n; ++im)
    for (int64_t a = 0; a < ty; ++a)
      for (int64_t b = 0; b < tx; ++b) {
        for (int64_t i = 0; i < s.c; ++i)
          abs_input_tile(&x[(im * s.c + i) * s.h * s.w], s.h, s.w, s.p, a, b, &V[i * 36]);
        for (int64_t o = 0; o < s.k; ++o) {
          double t16[16];
          for (int r = 0; r < 4; ++r)
            for (int t = 0; t < 4; ++t)
              t16[r * 4 + t] = 4 * a + r < oh && 4 * b + t < ow
                                   ? std::fabs(dy[((im * s.k + o) * oh + 4 * a + r) * ow + 4 * b + t])
                                   : 0.0;
          abs_sandwich<6, 4>(kAm, t16, &D[o * 36]);
        }
        for (int64_t o = 0; o < s.k; ++o)
          for (int64_t i = 0; i < s.c; ++i)
            for (int e = 0; e < 36; ++e) S[(o * s.c + i) * 36 + e] += D[o * 36 + e] * V[i * 36 + e];
      }
  for (int64_t q = 0; q < s.k * s.c; ++q) abs_sandwich<3, 6>(kGtm, &S[q * 36], &dw[q * 9]);
  return dw;
}

using Results = pt::KernelResults;
using Kernels = pt::CpuKernels;
const Kernels kWinograd{"winograd", cpu::conv3x3_winograd_workspace_floats,
                        cpu::conv3x3_winograd_forward, cpu::conv3x3_winograd_backward_data,
                        cpu::conv3x3_winograd_backward_weights};
const Kernels kDirect{"direct", cpu::conv3x3_direct_workspace_floats, cpu::conv3x3_direct_forward,
                      cpu::conv3x3_direct_backward_data, cpu::conv3x3_direct_backward_weights};

// The three kernels on one shape's data, at `threads` threads.
Results run_kernels(const Kernels& kn, const Shape3x3& s, const std::vector<float>& x,
                    const std::vector<float>& w, const std::vector<float>& b,
                    const std::vector<float>& dy, int threads, Act act = {}) {
  const ConvGeom g = conv_geom("test", s.c, s.h, s.w, 3, 3, 1, 1, s.p, s.p);
  return pt::run_kernels(kn, ConvShape{g, s.n, s.k}, x, w, b, dy, threads, act);
}

}  // namespace

// Integer data: all three passes equal the naive convolution exactly, at 1 and 2 threads.
TEST(Conv3x3, ExactOnIntegerDataAtEveryShape) {
  for (const Shape3x3& s : kShapes) {
    if (left_out_under_sanitizers(s)) continue;
    SCOPED_TRACE(s.name);
    Rng rng(17);
    const int64_t oh = out_size(s.h, s.p), ow = out_size(s.w, s.p);
    // Sparser data for more channels/tiles, so that every sum of absolute values (the bracket,
    // which bounds every partial sum) stays below 2^24: then float arithmetic is exact.
    // The weight gradient's partial sums (before G^T . G) are bounded by 36x its bracket:
    // every row of G has an entry >= 1/6.
    double density = 1.0, largest = 0.0;
    std::vector<float> x, w, b, dy;
    for (int attempt = 0; attempt < 12; ++attempt, density /= 2) {
      x = sparse_ints(s.n * s.c * s.h * s.w, density, 1.f, rng);
      w = sparse_ints(s.k * s.c * 9, density, 576.f, rng);
      b = sparse_ints(s.k, 1.0, 3.f, rng);
      dy = sparse_ints(s.n * s.k * oh * ow, density, 1.f, rng);
      double fmax, dmax;
      bracket_forward(s.n, s.c, s.h, s.w, s.k, s.p, x, w, false, &fmax);
      bracket_forward(s.n, s.k, oh, ow, s.c, 2 - s.p, dy, w, true, &dmax);
      largest = std::max({fmax + 3, dmax, 36 * max_of(bracket_weights(s, dy, x))});
      if (largest < 0x1p24) break;
    }
    ASSERT_LT(largest, 0x1p24) << "no exact test data found";
    const std::vector<double> yref = naive_forward(s, x, w, b);
    const std::vector<double> dxref = naive_backward_data(s, dy, w);
    const std::vector<double> dwref = naive_backward_weights(s, dy, x);
    for (const Kernels* kn : {&kWinograd, &kDirect})
      for (int threads : {1, 2}) {
        const Results r = run_kernels(*kn, s, x, w, b, dy, threads);
        const std::string at = std::string(" ") + kn->name + " at " + std::to_string(threads) + " threads";
        expect_exact(r.y, yref, "forward" + at);
        expect_exact(r.dx, dxref, "backward data" + at);
        expect_exact(r.dw, dwref, "backward weights" + at);
      }
  }
}

// An activation fused into the forward kernels' output write gives exactly the unfused output
// with the activation applied after it (ReLU, LeakyReLU at slopes 0.2 and 1), at 1 and 2 threads.
TEST(Conv3x3, FusedActivationEqualsTheActivationAfter) {
  for (const Shape3x3& s : kShapes) {
    if (left_out_under_sanitizers(s)) continue;
    SCOPED_TRACE(s.name);
    Rng rng(23);
    const int64_t oh = out_size(s.h, s.p), ow = out_size(s.w, s.p);
    const std::vector<float> x = uniform(s.n * s.c * s.h * s.w, 1.f, rng);
    const std::vector<float> w = uniform(s.k * s.c * 9, 0.3f, rng);
    const std::vector<float> b = uniform(s.k, 0.5f, rng);
    const std::vector<float> dy = uniform(s.n * s.k * oh * ow, 1.f, rng);
    for (const Kernels* kn : {&kWinograd, &kDirect})
      for (int threads : {1, 2}) {
        const std::vector<float> plain = run_kernels(*kn, s, x, w, b, dy, threads).y;
        int negatives = 0;
        for (float v : plain) negatives += v < 0.f;
        ASSERT_GT(negatives, 0) << "the data should exercise the activation's negative side";
        for (const Act act : {Act{FusedAct::ReLU, 0.f}, Act{FusedAct::LeakyReLU, 0.2f},
                              Act{FusedAct::LeakyReLU, 1.f}}) {
          const std::vector<float> fused = run_kernels(*kn, s, x, w, b, dy, threads, act).y;
          ASSERT_EQ(fused.size(), plain.size());
          for (size_t i = 0; i < plain.size(); ++i) {
            const float want = plain[i] > 0.f ? plain[i] : act.slope * plain[i];
            ASSERT_EQ(fused[i], want) << kn->name << " " << fused_act_name(act.kind) << " slope "
                                      << act.slope << " at " << threads << " threads, element "
                                      << i;
          }
        }
      }
  }
}

// Real data: every element within the stated bound of the naive result in double; all three
// passes bit-identical at 1 and 2 threads. Winograd's
// bound is the header's; the direct kernels' the plain sum's, gamma_m sum |w||x| with m the
// number of terms (9c + 1 for y, 9k for dx, n oh ow + lanes + threads for dw).
TEST(Conv3x3, WithinTheRoundingBoundAtEveryShape) {
  for (const Shape3x3& s : kShapes) {
    if (left_out_under_sanitizers(s)) continue;
    SCOPED_TRACE(s.name);
    Rng rng(23);
    const int64_t oh = out_size(s.h, s.p), ow = out_size(s.w, s.p);
    const int64_t tiles = s.n * ((oh + 3) / 4) * ((ow + 3) / 4);
    const std::vector<float> x = uniform(s.n * s.c * s.h * s.w, 1.f, rng);
    const std::vector<float> w = uniform(s.k * s.c * 9, 1.f / std::sqrt(9.f * s.c), rng);
    const std::vector<float> b = uniform(s.k, 1.f, rng);
    const std::vector<float> dy = uniform(s.n * s.k * oh * ow, 1.f, rng);
    const std::vector<double> yref = naive_forward(s, x, w, b);
    const std::vector<double> dxref = naive_backward_data(s, dy, w);
    const std::vector<double> dwref = naive_backward_weights(s, dy, x);
    // Winograd's brackets, then the direct sums of absolute values.
    std::vector<double> wf = bracket_forward(s.n, s.c, s.h, s.w, s.k, s.p, x, w, false);
    for (size_t i = 0; i < wf.size(); ++i) wf[i] += std::fabs(b[(i / (oh * ow)) % s.k]);
    const std::vector<double> wd = bracket_forward(s.n, s.k, oh, ow, s.c, 2 - s.p, dy, w, true);
    const std::vector<double> ww = bracket_weights(s, dy, x);
    const std::vector<float> ax = abs_of(x), aw = abs_of(w), ady = abs_of(dy);
    const std::vector<double> df = naive_forward(s, ax, aw, abs_of(b));
    const std::vector<double> dd = naive_backward_data(s, ady, aw);
    const std::vector<double> dwb = naive_backward_weights(s, ady, ax);
    for (const Kernels* kn : {&kWinograd, &kDirect}) {
      const bool wino = kn == &kWinograd;
      const Results r1 = run_kernels(*kn, s, x, w, b, dy, 1), r2 = run_kernels(*kn, s, x, w, b, dy, 2);
      for (const Results* r : {&r1, &r2}) {
        const std::string at = std::string(" ") + kn->name + (r == &r1 ? " at 1 thread" : " at 2 threads");
        const double ef = wino ? expect_within_bound(r->y, yref, wf, gamma_m(s.c + 31), "forward" + at)
                               : expect_within_bound(r->y, yref, df, gamma_m(9 * s.c + 1), "forward" + at);
        const double ed = wino ? expect_within_bound(r->dx, dxref, wd, gamma_m(s.k + 30), "backward data" + at)
                               : expect_within_bound(r->dx, dxref, dd, gamma_m(9 * s.k), "backward data" + at);
        const double ew =
            wino ? expect_within_bound(r->dw, dwref, ww, gamma_m(tiles + 32), "backward weights" + at)
                 : expect_within_bound(r->dw, dwref, dwb, gamma_m(s.n * oh * ow + 16 + 2),
                                       "backward weights" + at);
        RecordProperty(std::string(s.name) + at + ": error / bound (fwd, data, weights)",
                       std::to_string(ef) + " " + std::to_string(ed) + " " + std::to_string(ew));
      }
      EXPECT_EQ(r1.y, r2.y) << kn->name << " forward, 1 vs 2 threads";
      EXPECT_EQ(r1.dx, r2.dx) << kn->name << " backward data, 1 vs 2 threads";
      EXPECT_EQ(r1.dw, r2.dw) << kn->name << " backward weights, 1 vs 2 threads";
    }
  }
}

// The bracket's amplification over the direct sum's sum_c |g||d| (9 per channel for
// |g| = |d| = 1) is as stated in the header: kappa_i kappa_j with kappa = (16, 17, 24, 48),
// 28x at a tile's first output, 256x at its last.
TEST(Conv3x3, WinogradBoundAmplificationIsAsStated) {
  const std::vector<float> ones(36, 1.f), w(9, 1.f);
  const std::vector<double> br = bracket_forward(1, 1, 6, 6, 1, 0, ones, w, false);
  const double kappa[4] = {16, 17, 24, 48};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_DOUBLE_EQ(br[i * 4 + j], kappa[i] * kappa[j]);
}

// Gradients of Conv2d with the Winograd and direct algorithms against central differences.
TEST(Conv3x3, Conv2dGradientsMatchFiniteDifferences) {
  Context ctx(1, 11);
  struct Cfg { int64_t n, c, h, w, k, p; bool bias; };
  for (ConvAlgo a : {ConvAlgo::Winograd, ConvAlgo::Direct})
    for (const Cfg& f : {Cfg{2, 3, 7, 5, 4, 1, true}, Cfg{1, 2, 6, 6, 3, 0, false},
                         Cfg{2, 2, 5, 9, 2, 2, true}, Cfg{1, 1, 1, 1, 2, 1, true}}) {
      Conv2d conv(f.c, f.k, 3, 1, f.p, f.bias);
      conv.set_algo(a);
      conv.reset_parameters(ctx.rng());
      Tensor x = pt::random_tensor(Shape{f.n, f.c, f.h, f.w}, ctx.rng());
      SCOPED_TRACE(conv.describe() + " " + conv_algo_name(a));
      // The convolution is affine in x, w and b, so a central difference has no truncation
      // error at any step: its only error is the float rounding of the two forwards, divided by
      // the step. Winograd's transforms amplify that rounding up to 256x (see the bound test
      // above), enough at the default step of 1e-3 to cross the tolerance on some CPUs (CI's,
      // at -O1). A step of 0.25 divides the rounding term by 250 and leaves the check as strict.
      pt::GradCheckOptions opt;
      opt.eps = 0.25;
      pt::check_layer_gradients(ctx, conv, x, opt);
    }
}

TEST(Conv3x3, RejectsOtherGeometries) {
  EXPECT_FALSE(conv3x3_applies(conv_geom("t", 2, 8, 8, 3, 3, 2, 2, 1, 1)));
  EXPECT_FALSE(conv3x3_applies(conv_geom("t", 2, 8, 8, 5, 5, 1, 1, 2, 2)));
  EXPECT_FALSE(conv3x3_applies(conv_geom("t", 2, 8, 8, 3, 3, 1, 1, 3, 3)));
  EXPECT_TRUE(conv3x3_applies(conv_geom("t", 2, 8, 8, 3, 3, 1, 1, 2, 2)));
  Context ctx(1);
  Conv2d conv(2, 3, 3, 2, 1);  // stride 2
  Tensor x(Shape{1, 2, 8, 8}), y(conv.output_shape(x.shape()));
  conv.set_algo(ConvAlgo::Winograd);
  pt::expect_error_mentions([&] { conv.forward(ctx, x, y); }, {"winograd", "stride"});
  conv.set_algo(ConvAlgo::Direct);
  pt::expect_error_mentions([&] { conv.forward(ctx, x, y); }, {"direct", "stride"});
}
