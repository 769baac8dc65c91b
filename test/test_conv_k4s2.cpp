// The 4x4 stride-2 padding-1 kernels, Winograd F(4x4, 2x2) over the stride phases
// (ops/conv/conv2d_k4s2.h), at every such convolution of W5 (batch reduced) and odd shapes,
// forward, backward data and backward weights, two ways (as test_conv3x3.cpp):
//  - exact: small integer data with weights that are multiples of 36 (so G g G^T is an integer)
//    make every intermediate an integer; where the sum of absolute values that bounds every
//    partial sum stays below 2^24 (checked), float arithmetic is exact and the kernels must equal
//    the naive convolution bit for bit. This catches any indexing slip.
//  - rounding: uniform real data against the naive convolution in double, every element within
//    the error bound stated in the kernel's header, computed elementwise here.
// Also: 1, 2 and 3 threads bit-identical, the fused activation, several chunks of images,
// finite differences through Conv2d and ConvTranspose2d, and the geometry check.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "layers/activation.h"
#include "layers/conv2d.h"
#include "layers/conv_transpose2d.h"
#include "model/sequential.h"
#include "ops/conv/conv2d.h"
#include "ops/conv/conv2d_k4s2.h"
#include "ops/conv/direct_taps.h"
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

// x (n, c, h, w) -> y (n, k, h/2, w/2).
struct ShapeK4 {
  const char* name;
  int64_t n, c, h, w, k;
  int64_t oh() const { return h / 2; }
  int64_t ow() const { return w / 2; }
};

// The four geometries of W5's stride-2 layers (each serves a Conv2d of D and, transposed, a
// ConvTranspose2d of G), and odd ones.
const ShapeK4 kShapes[] = {
    {"W5 D.0 / G.12: 3 -> 64, 64x64", 1, 3, 64, 64, 64},
    {"W5 D.2 / G.9: 64 -> 128, 32x32", 1, 64, 32, 32, 128},
    {"W5 D.5 / G.6: 128 -> 256, 16x16", 1, 128, 16, 16, 256},
    {"W5 D.8 / G.3: 256 -> 512, 8x8", 2, 256, 8, 8, 512},
    {"17 -> 33 channels, 6x10 (vector tails, part tiles)", 2, 17, 6, 10, 33},
    {"2x2 input: one output pixel", 3, 5, 2, 2, 4},
    {"1 channel in and out, 12x4", 2, 1, 12, 4, 1},
    {"batch 5, 16 -> 16, 16x8", 5, 16, 16, 8, 16},
    {"1 -> 1 channel, 18 images of 256x128: two chunks", 18, 1, 256, 128, 1},
};

ConvGeom geom_of(const ShapeK4& s) { return conv_geom("test", s.c, s.h, s.w, 4, 4, 2, 2, 1, 1); }

// ---- naive references, in double ----------------------------------------------------------

// x pixel (iy, ix) of plane xc, 0 outside.
inline double at(const float* xc, int64_t h, int64_t w, int64_t iy, int64_t ix) {
  return iy >= 0 && iy < h && ix >= 0 && ix < w ? xc[iy * w + ix] : 0.0;
}

std::vector<double> naive_forward(const ShapeK4& s, const std::vector<float>& x,
                                  const std::vector<float>& w, const std::vector<float>& b) {
  const int64_t oh = s.oh(), ow = s.ow();
  std::vector<double> y(s.n * s.k * oh * ow);
  for (int64_t i = 0; i < s.n; ++i)
    for (int64_t o = 0; o < s.k; ++o)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double acc = b.empty() ? 0.0 : b[o];
          for (int64_t c = 0; c < s.c; ++c) {
            const float* xc = &x[(i * s.c + c) * s.h * s.w];
            const float* wk = &w[(o * s.c + c) * 16];
            for (int r = 0; r < 4; ++r)
              for (int t = 0; t < 4; ++t)
                acc += wk[r * 4 + t] * at(xc, s.h, s.w, 2 * oy + r - 1, 2 * ox + t - 1);
          }
          y[((i * s.k + o) * oh + oy) * ow + ox] = acc;
        }
  return y;
}

std::vector<double> naive_backward_data(const ShapeK4& s, const std::vector<float>& dy,
                                        const std::vector<float>& w) {
  const int64_t oh = s.oh(), ow = s.ow();
  std::vector<double> dx(s.n * s.c * s.h * s.w, 0.0);
  for (int64_t i = 0; i < s.n; ++i)
    for (int64_t o = 0; o < s.k; ++o)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          const double g = dy[((i * s.k + o) * oh + oy) * ow + ox];
          for (int64_t c = 0; c < s.c; ++c)
            for (int r = 0; r < 4; ++r)
              for (int t = 0; t < 4; ++t) {
                const int64_t iy = 2 * oy + r - 1, ix = 2 * ox + t - 1;
                if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
                dx[((i * s.c + c) * s.h + iy) * s.w + ix] += g * w[((o * s.c + c) * 4 + r) * 4 + t];
              }
        }
  return dx;
}

std::vector<double> naive_backward_weights(const ShapeK4& s, const std::vector<float>& dy,
                                           const std::vector<float>& x) {
  const int64_t oh = s.oh(), ow = s.ow();
  std::vector<double> dw(s.k * s.c * 16, 0.0);
  for (int64_t i = 0; i < s.n; ++i)
    for (int64_t o = 0; o < s.k; ++o)
      for (int64_t c = 0; c < s.c; ++c) {
        const float* xc = &x[(i * s.c + c) * s.h * s.w];
        for (int r = 0; r < 4; ++r)
          for (int t = 0; t < 4; ++t) {
            double acc = 0.0;
            for (int64_t oy = 0; oy < oh; ++oy)
              for (int64_t ox = 0; ox < ow; ++ox)
                acc += dy[((i * s.k + o) * oh + oy) * ow + ox] *
                       at(xc, s.h, s.w, 2 * oy + r - 1, 2 * ox + t - 1);
            dw[((o * s.c + c) * 4 + r) * 4 + t] += acc;
          }
      }
  return dw;
}

// ---- the error bound's bracket: the transforms with absolute values ------------------------

const double kBT[5][5] = {{2, -1, -2, 1, 0}, {0, 2, 1, -1, 0}, {0, -2, 3, -1, 0},
                          {0, -1, 0, 1, 0},  {0, 2, -1, -2, 1}};
const double kG[5][2] = {{.5, 0}, {.5, .5}, {1. / 6, -1. / 6}, {1. / 6, 1. / 3}, {0, 1}};
const double kAT[4][5] = {{1, 1, 1, 1, 0}, {0, 1, -1, 2, 0}, {0, 1, 1, 4, 0}, {0, 1, -1, 8, 1}};
const auto kBTm = [](int a, int l) { return kBT[a][l]; };
const auto kGm = [](int a, int l) { return kG[a][l]; };
const auto kGtm = [](int a, int l) { return kG[l][a]; };
const auto kATm = [](int a, int l) { return kAT[a][l]; };
const auto kAm = [](int a, int l) { return kAT[l][a]; };

// |B^T| |d| |B| of the 5x5 tile d[r][s] = plane[y0 + 2 r][x0 + 2 s] (step 2: a stride phase;
// 0 outside the plane), or with step 1 (dy's tiles of backward data).
void abs_input_tile(const float* plane, int64_t h, int64_t w, int64_t y0, int64_t x0, int step,
                    double* out) {
  double d[25];
  for (int r = 0; r < 5; ++r)
    for (int t = 0; t < 5; ++t) d[r * 5 + t] = std::fabs(at(plane, h, w, y0 + step * r, x0 + step * t));
  abs_sandwich<5, 5>(kBTm, d, out);
}

// |G| |g| |G|^T of the 2x2 kernel g[ay][ax] = w[o][i][y0 + ystep ay][x0 + xstep ax].
void abs_filter(const float* wk, int y0, int ystep, int x0, int xstep, double* out) {
  double g[4];
  for (int ay = 0; ay < 2; ++ay)
    for (int ax = 0; ax < 2; ++ax) g[ay * 2 + ax] = std::fabs(wk[(y0 + ystep * ay) * 4 + x0 + xstep * ax]);
  abs_sandwich<5, 2>(kGm, g, out);
}

// sum over channels and phases of |A^T| ((|G| |g| |G|^T) . (|B^T| |d| |B|)) |A| for every output
// of the forward pass. *tile_max (if given): the largest entry over whole tiles, outputs past
// the edge included (those are computed too, then dropped).
std::vector<double> bracket_forward(const ShapeK4& s, const std::vector<float>& x,
                                    const std::vector<float>& w, double* tile_max = nullptr) {
  if (tile_max) *tile_max = 0.0;
  const int64_t oh = s.oh(), ow = s.ow(), ty = (oh + 3) / 4, tx = (ow + 3) / 4;
  std::vector<double> U(s.k * s.c * 4 * 25), V(s.c * 4 * 25), y(s.n * s.k * oh * ow);
  for (int64_t o = 0; o < s.k; ++o)
    for (int64_t c = 0; c < s.c; ++c)
      for (int b = 0; b < 4; ++b)
        abs_filter(&w[(o * s.c + c) * 16], b / 2, 2, b % 2, 2, &U[((o * s.c + c) * 4 + b) * 25]);
  for (int64_t im = 0; im < s.n; ++im)
    for (int64_t a = 0; a < ty; ++a)
      for (int64_t bb = 0; bb < tx; ++bb) {
        for (int64_t c = 0; c < s.c; ++c)
          for (int b = 0; b < 4; ++b)
            abs_input_tile(&x[(im * s.c + c) * s.h * s.w], s.h, s.w, 8 * a + b / 2 - 1,
                           8 * bb + b % 2 - 1, 2, &V[(c * 4 + b) * 25]);
        for (int64_t o = 0; o < s.k; ++o) {
          double S[25] = {}, Y[16];
          for (int64_t cb = 0; cb < 4 * s.c; ++cb)
            for (int e = 0; e < 25; ++e) S[e] += U[(o * 4 * s.c + cb) * 25 + e] * V[cb * 25 + e];
          abs_sandwich<4, 5>(kATm, S, Y);
          if (tile_max) *tile_max = std::max(*tile_max, *std::max_element(Y, Y + 16));
          for (int r = 0; r < 4; ++r)
            for (int t = 0; t < 4; ++t)
              if (4 * a + r < oh && 4 * bb + t < ow)
                y[((im * s.k + o) * oh + 4 * a + r) * ow + 4 * bb + t] = Y[r * 4 + t];
        }
      }
  return y;
}

// The same for backward data, phase by phase: dx[c][2u + py][2v + px] from the 5x5 tiles of dy
// (padded by 1) at (4 ty + py - 1, 4 tx + px - 1) and the kernels w[o][c][3 - 2ay - py][3 - 2ax - px].
std::vector<double> bracket_data(const ShapeK4& s, const std::vector<float>& dy,
                                 const std::vector<float>& w, double* tile_max = nullptr) {
  if (tile_max) *tile_max = 0.0;
  const int64_t oh = s.oh(), ow = s.ow(), ty = (oh + 3) / 4, tx = (ow + 3) / 4;
  std::vector<double> U(s.k * s.c * 4 * 25), V(s.k * 4 * 25), dx(s.n * s.c * s.h * s.w);
  for (int64_t o = 0; o < s.k; ++o)
    for (int64_t c = 0; c < s.c; ++c)
      for (int p = 0; p < 4; ++p)
        abs_filter(&w[(o * s.c + c) * 16], 3 - p / 2, -2, 3 - p % 2, -2, &U[((c * s.k + o) * 4 + p) * 25]);
  for (int64_t im = 0; im < s.n; ++im)
    for (int64_t a = 0; a < ty; ++a)
      for (int64_t bb = 0; bb < tx; ++bb) {
        for (int64_t o = 0; o < s.k; ++o)
          for (int p = 0; p < 4; ++p)
            abs_input_tile(&dy[(im * s.k + o) * oh * ow], oh, ow, 4 * a + p / 2 - 1,
                           4 * bb + p % 2 - 1, 1, &V[(o * 4 + p) * 25]);
        for (int64_t c = 0; c < s.c; ++c)
          for (int p = 0; p < 4; ++p) {
            double S[25] = {}, Y[16];
            for (int64_t o = 0; o < s.k; ++o)
              for (int e = 0; e < 25; ++e)
                S[e] += U[((c * s.k + o) * 4 + p) * 25 + e] * V[(o * 4 + p) * 25 + e];
            abs_sandwich<4, 5>(kATm, S, Y);
            if (tile_max) *tile_max = std::max(*tile_max, *std::max_element(Y, Y + 16));
            for (int r = 0; r < 4; ++r)
              for (int t = 0; t < 4; ++t) {
                const int64_t iy = 2 * (4 * a + r) + p / 2, ix = 2 * (4 * bb + t) + p % 2;
                if (iy < s.h && ix < s.w) dx[((im * s.c + c) * s.h + iy) * s.w + ix] = Y[r * 4 + t];
              }
          }
      }
  return dx;
}

// sum over tiles of |G|^T ((|A| |dY| |A|^T) . (|B^T| |d| |B|)) |G| for every weight.
std::vector<double> bracket_weights(const ShapeK4& s, const std::vector<float>& dy,
                                    const std::vector<float>& x) {
  const int64_t oh = s.oh(), ow = s.ow(), ty = (oh + 3) / 4, tx = (ow + 3) / 4;
  std::vector<double> S(s.k * s.c * 4 * 25, 0.0), V(s.c * 4 * 25), D(s.k * 25), dw(s.k * s.c * 16);
  for (int64_t im = 0; im < s.n; ++im)
    for (int64_t a = 0; a < ty; ++a)
      for (int64_t bb = 0; bb < tx; ++bb) {
        for (int64_t c = 0; c < s.c; ++c)
          for (int b = 0; b < 4; ++b)
            abs_input_tile(&x[(im * s.c + c) * s.h * s.w], s.h, s.w, 8 * a + b / 2 - 1,
                           8 * bb + b % 2 - 1, 2, &V[(c * 4 + b) * 25]);
        for (int64_t o = 0; o < s.k; ++o) {
          double t16[16];
          for (int r = 0; r < 4; ++r)
            for (int t = 0; t < 4; ++t)
              t16[r * 4 + t] = std::fabs(at(&dy[(im * s.k + o) * oh * ow], oh, ow, 4 * a + r, 4 * bb + t));
          abs_sandwich<5, 4>(kAm, t16, &D[o * 25]);
        }
        for (int64_t o = 0; o < s.k; ++o)
          for (int64_t cb = 0; cb < 4 * s.c; ++cb)
            for (int e = 0; e < 25; ++e) S[(o * 4 * s.c + cb) * 25 + e] += D[o * 25 + e] * V[cb * 25 + e];
      }
  for (int64_t o = 0; o < s.k; ++o)
    for (int64_t c = 0; c < s.c; ++c)
      for (int b = 0; b < 4; ++b) {
        double g[4];
        abs_sandwich<2, 5>(kGtm, &S[((o * s.c + c) * 4 + b) * 25], g);
        for (int ay = 0; ay < 2; ++ay)
          for (int ax = 0; ax < 2; ++ax)
            dw[((o * s.c + c) * 4 + 2 * ay + b / 2) * 4 + 2 * ax + b % 2] = g[ay * 2 + ax];
      }
  return dw;
}

using Results = pt::KernelResults;
const pt::CpuKernels kK4s2{"k4s2", cpu::conv4x4s2_workspace_floats, cpu::conv4x4s2_forward,
                           cpu::conv4x4s2_backward_data, cpu::conv4x4s2_backward_weights};

// The three kernels on one shape's data, at `threads` threads.
Results run_kernels(const ShapeK4& s, const std::vector<float>& x, const std::vector<float>& w,
                    const std::vector<float>& b, const std::vector<float>& dy, int threads,
                    Act act = {}) {
  return pt::run_kernels(kK4s2, ConvShape{geom_of(s), s.n, s.k}, x, w, b, dy, threads, act);
}

}  // namespace

// Integer data: all three passes equal the naive convolution exactly, at 1 and 2 threads.
TEST(ConvK4s2, ExactOnIntegerDataAtEveryShape) {
  for (const ShapeK4& s : kShapes) {
    SCOPED_TRACE(s.name);
    Rng rng(17);
    // Sparser data for more channels and tiles, so that every sum of absolute values (the
    // bracket, which bounds every partial sum: every column of A^T has an entry 1) stays below
    // 2^24: then float arithmetic is exact. The weight gradient's partial sums (before
    // G^T . G) are bounded by 36x its bracket: every row of G has an entry >= 1/6.
    double density = 1.0, largest = 0.0;
    std::vector<float> x, w, b, dy;
    for (int attempt = 0; attempt < 12; ++attempt, density /= 2) {
      x = sparse_ints(s.n * s.c * s.h * s.w, density, 1.f, rng);
      w = sparse_ints(s.k * s.c * 16, density, 36.f, rng);
      b = sparse_ints(s.k, 1.0, 3.f, rng);
      dy = sparse_ints(s.n * s.k * s.oh() * s.ow(), density, 1.f, rng);
      double fmax, dmax;
      bracket_forward(s, x, w, &fmax);
      bracket_data(s, dy, w, &dmax);
      largest = std::max({fmax + 3, dmax, 36 * max_of(bracket_weights(s, dy, x))});
      if (largest < 0x1p24) break;
    }
    ASSERT_LT(largest, 0x1p24) << "no exact test data found";
    const std::vector<double> yref = naive_forward(s, x, w, b);
    const std::vector<double> dxref = naive_backward_data(s, dy, w);
    const std::vector<double> dwref = naive_backward_weights(s, dy, x);
    for (int threads : {1, 2}) {
      const Results r = run_kernels(s, x, w, b, dy, threads);
      const std::string at = " at " + std::to_string(threads) + " threads";
      expect_exact(r.y, yref, "forward" + at);
      expect_exact(r.dx, dxref, "backward data" + at);
      expect_exact(r.dw, dwref, "backward weights" + at);
    }
  }
}

// Real data: every element within the header's bound of the naive result in double; all three
// passes bit-identical at 1, 2 and 3 threads.
TEST(ConvK4s2, WithinTheRoundingBoundAtEveryShape) {
  for (const ShapeK4& s : kShapes) {
    SCOPED_TRACE(s.name);
    Rng rng(23);
    const int64_t tiles = s.n * ((s.oh() + 3) / 4) * ((s.ow() + 3) / 4);
    const std::vector<float> x = uniform(s.n * s.c * s.h * s.w, 1.f, rng);
    const std::vector<float> w = uniform(s.k * s.c * 16, 1.f / std::sqrt(16.f * s.c), rng);
    const std::vector<float> b = uniform(s.k, 1.f, rng);
    const std::vector<float> dy = uniform(s.n * s.k * s.oh() * s.ow(), 1.f, rng);
    const std::vector<double> yref = naive_forward(s, x, w, b);
    const std::vector<double> dxref = naive_backward_data(s, dy, w);
    const std::vector<double> dwref = naive_backward_weights(s, dy, x);
    std::vector<double> bf = bracket_forward(s, x, w);
    for (size_t i = 0; i < bf.size(); ++i) bf[i] += std::fabs(b[(i / (s.oh() * s.ow())) % s.k]);
    const std::vector<double> bd = bracket_data(s, dy, w);
    const std::vector<double> bw = bracket_weights(s, dy, x);
    const Results r1 = run_kernels(s, x, w, b, dy, 1);
    for (int threads : {1, 2, 3}) {
      const Results r = threads == 1 ? r1 : run_kernels(s, x, w, b, dy, threads);
      const std::string at = " at " + std::to_string(threads) + " threads";
      const double ef = expect_within_bound(r.y, yref, bf, gamma_m(4 * s.c + 20), "forward" + at);
      const double ed = expect_within_bound(r.dx, dxref, bd, gamma_m(s.k + 20), "backward data" + at);
      const double ew = expect_within_bound(r.dw, dwref, bw, gamma_m(tiles + 20), "backward weights" + at);
      RecordProperty(std::string(s.name) + at + ": error / bound (fwd, data, weights)",
                     std::to_string(ef) + " " + std::to_string(ed) + " " + std::to_string(ew));
      EXPECT_EQ(r.y, r1.y) << "forward, " << threads << " vs 1 threads";
      EXPECT_EQ(r.dx, r1.dx) << "backward data, " << threads << " vs 1 threads";
      EXPECT_EQ(r.dw, r1.dw) << "backward weights, " << threads << " vs 1 threads";
    }
  }
}

// An activation fused into the forward kernel's output write gives exactly the unfused output
// with the activation applied after it.
TEST(ConvK4s2, FusedActivationEqualsTheActivationAfter) {
  for (const ShapeK4& s : kShapes) {
    SCOPED_TRACE(s.name);
    Rng rng(29);
    const std::vector<float> x = uniform(s.n * s.c * s.h * s.w, 1.f, rng);
    const std::vector<float> w = uniform(s.k * s.c * 16, 0.3f, rng);
    const std::vector<float> b = uniform(s.k, 0.5f, rng);
    const std::vector<float> dy = uniform(s.n * s.k * s.oh() * s.ow(), 1.f, rng);
    const std::vector<float> plain = run_kernels(s, x, w, b, dy, 2).y;
    int negatives = 0;
    for (float v : plain) negatives += v < 0.f;
    ASSERT_GT(negatives, 0) << "the data should exercise the activation's negative side";
    for (const Act act : {Act{FusedAct::ReLU, 0.f}, Act{FusedAct::LeakyReLU, 0.2f}}) {
      const std::vector<float> fused = run_kernels(s, x, w, b, dy, 2, act).y;
      ASSERT_EQ(fused.size(), plain.size());
      for (size_t i = 0; i < plain.size(); ++i) {
        const float want = plain[i] > 0.f ? plain[i] : act.slope * plain[i];
        ASSERT_EQ(fused[i], want) << fused_act_name(act.kind) << ", element " << i;
      }
    }
  }
}

// The derivative of the activation before the convolution, folded into backward data's output
// write (Layer::fold_input_activation): exactly dx times act'(a), a = the activation's output.
TEST(ConvK4s2, FoldedInputActivationEqualsTheMaskAfter) {
  for (const ShapeK4& s : kShapes) {
    SCOPED_TRACE(s.name);
    Rng rng(37);
    const ConvGeom g = geom_of(s);
    const std::vector<float> a = uniform(s.n * s.c * s.h * s.w, 1.f, rng);  // the input x
    const std::vector<float> w = uniform(s.k * s.c * 16, 0.3f, rng);
    const std::vector<float> dy = uniform(s.n * s.k * s.oh() * s.ow(), 1.f, rng);
    std::vector<float> ws(cpu::conv4x4s2_workspace_floats(g, s.n, s.k, 2));
    std::vector<float> plain(a.size()), folded(a.size());
    ConvBwd d = ConvBwd::data(ConvShape{g, s.n, s.k}, w.data(), dy.data(), plain.data());
    cpu::conv4x4s2_backward_data(d, ws.data(), CpuExec{2});
    for (const Act act : {Act{FusedAct::ReLU, 0.f}, Act{FusedAct::LeakyReLU, 0.2f}}) {
      d.dx = folded.data();
      d.dx_src = a.data();
      d.dx_act = act;
      cpu::conv4x4s2_backward_data(d, ws.data(), CpuExec{2});
      for (size_t i = 0; i < a.size(); ++i)
        ASSERT_EQ(folded[i], a[i] > 0.f ? plain[i] : act.slope * plain[i])
            << fused_act_name(act.kind) << ", element " << i;
    }
  }
}

// The DCGAN discriminator's pattern through Sequential, fused (each LeakyReLU in the layer
// before it, its derivative folded into the next convolution's Winograd backward data) and not:
// the same numbers.
TEST(ConvK4s2, SequentialWithFoldedActivationsGivesTheSameNumbers) {
  auto build = [](bool fuse) {
    Sequential m;
    m.emplace<Conv2d>(16, 16, 4, 2, 1, false);
    m.emplace<LeakyReLU>(0.2f);
    m.emplace<Conv2d>(16, 32, 4, 2, 1, false);
    m.emplace<ReLU>();
    m.emplace<Conv2d>(32, 16, 4, 2, 1, false);
    m.set_fusion(fuse);
    Rng init(3);
    m.reset_parameters(init);
    return m;
  };
  Sequential a = build(false), b = build(true);
  Context ca(2, 7), cb(2, 7);
  Rng r(11);
  const Tensor x = pt::random_tensor(Shape{3, 16, 16, 16}, r);
  const Tensor dy = pt::random_tensor(Shape{3, 16, 2, 2}, r);
  const Tensor ya = a.forward(ca, x).clone();
  pt::expect_close(b.forward(cb, x), ya, 0, 0, "output");
  a.backward(ca, dy, true);
  b.backward(cb, dy, true);
  pt::expect_close(b.input_grad(), a.input_grad(), 0, 0, "input gradient");
  pt::expect_close(b.parameters().grads(), a.parameters().grads(), 0, 0, "parameter gradients");
  EXPECT_EQ(dynamic_cast<Conv2d&>(b.layer(2)).folded_input_activation().kind, FusedAct::LeakyReLU);
  EXPECT_EQ(conv_algo_for(conv_geom("t", 16, 16, 16, 4, 4, 2, 2, 1, 1), 3, 32, 2), ConvAlgo::Winograd);
}

// The bracket's amplification over the direct sum's sum |g||d| (4 per phase channel for
// |g| = |d| = 1) is as stated in the header: kappa_i kappa_j with kappa = (10, 8, 10, 20).
TEST(ConvK4s2, BoundAmplificationIsAsStated) {
  double ones[25], w[4] = {1, 1, 1, 1}, U[25], V[25], S[25], Y[16];
  std::fill(ones, ones + 25, 1.0);
  abs_sandwich<5, 2>(kGm, w, U);
  abs_sandwich<5, 5>(kBTm, ones, V);
  for (int e = 0; e < 25; ++e) S[e] = U[e] * V[e];
  abs_sandwich<4, 5>(kATm, S, Y);
  const double kappa[4] = {10, 8, 10, 20};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_DOUBLE_EQ(Y[i * 4 + j], kappa[i] * kappa[j]);
}

// Conv2d and ConvTranspose2d on the Winograd path: gradients against central differences.
TEST(ConvK4s2, LayerGradientsMatchFiniteDifferences) {
  Context ctx(1, 31);
  // Affine in every input, so a large step has no truncation error and divides the rounding
  // (amplified by the transforms: see the bound test) by the step (as test_conv3x3.cpp).
  pt::GradCheckOptions opt;
  opt.eps = 0.25;
  struct Cfg { int64_t n, c, h, w, k; bool bias; };
  for (const Cfg& f : {Cfg{2, 3, 8, 6, 4, true}, Cfg{1, 2, 2, 4, 3, false}, Cfg{2, 17, 4, 4, 2, true}}) {
    Conv2d conv(f.c, f.k, 4, 2, 1, f.bias);
    conv.set_algo(ConvAlgo::Winograd);
    conv.reset_parameters(ctx.rng());
    SCOPED_TRACE(conv.describe());
    pt::check_layer_gradients(ctx, conv, pt::random_tensor(Shape{f.n, f.c, f.h, f.w}, ctx.rng()), opt);
    // The transposed layer whose forward is this convolution's backward data.
    ConvTranspose2d ct(f.k, f.c, 4, 2, 1, f.bias);
    ct.set_algo(ConvAlgo::Winograd);
    ct.reset_parameters(ctx.rng());
    SCOPED_TRACE(ct.describe());
    pt::check_layer_gradients(ctx, ct, pt::random_tensor(Shape{f.n, f.k, f.h / 2, f.w / 2}, ctx.rng()), opt);
  }
}

// The last shape above is large enough in tiles that the kernels take its images in two chunks
// (every pass: the weight gradient sums over both): its workspace is smaller than one chunk of
// all 18 images (25 points x tiles x (4 x 16 + 16) floats, channels rounded up to 16).
TEST(ConvK4s2, LargeBatchesGoInChunks) {
  const ShapeK4& s = kShapes[std::size(kShapes) - 1];
  const int64_t tiles = s.n * (s.oh() / 4) * (s.ow() / 4);
  EXPECT_LT(cpu::conv4x4s2_workspace_floats(geom_of(s), s.n, s.k, 1),
            static_cast<size_t>(25 * tiles * (4 * 16 + 16)));
}

TEST(ConvK4s2, RejectsOtherGeometries) {
  EXPECT_TRUE(conv4x4s2_applies(conv_geom("t", 2, 8, 6, 4, 4, 2, 2, 1, 1)));
  EXPECT_FALSE(conv4x4s2_applies(conv_geom("t", 2, 7, 8, 4, 4, 2, 2, 1, 1)));  // odd height
  EXPECT_FALSE(conv4x4s2_applies(conv_geom("t", 2, 8, 8, 4, 4, 2, 2, 0, 0)));  // padding 0
  EXPECT_FALSE(conv4x4s2_applies(conv_geom("t", 2, 8, 8, 4, 4, 1, 1, 1, 1)));  // stride 1
  EXPECT_FALSE(conv4x4s2_applies(conv_geom("t", 2, 8, 8, 3, 3, 2, 2, 1, 1)));  // 3x3
  Context ctx(1);
  Conv2d conv(2, 3, 4, 2, 0);  // padding 0: neither Winograd applies
  Tensor x(Shape{1, 2, 8, 8}), y(conv.output_shape(x.shape()));
  conv.set_algo(ConvAlgo::Winograd);
  pt::expect_error_mentions([&] { conv.forward(ctx, x, y); }, {"winograd", "stride"});
}

// The GPU's bf16 direct kernels run a 4x4 stride-2 padding-1 convolution as 2x2 kernels over the
// input's space-to-depth phases (forward, backward-weights) and its backward-data as four 2x2
// convolutions of dy, one per output phase (ops/conv/direct_taps.h). That index algebra, run
// here in double on the host exactly as the kernels index, against the 4x4 stride-2 sums
// themselves, on odd channel counts and a non-square input: no GPU needed. Every weight and
// every dx element is reached exactly once.
TEST(ConvK4s2, GpuDirectPhaseIndexingMatchesTheStridedSums) {
  using direct::Taps;
  const int n = 2, c = 3, h = 6, w = 10, k = 5, oh = h / 2, ow = w / 2;
  Rng rng(41);
  auto fill = [&](size_t size) {
    std::vector<double> v(size);
    for (double& e : v) e = rng.uniform(-1.f, 1.f);
    return v;
  };
  const std::vector<double> x = fill(size_t(n) * c * h * w), wt = fill(size_t(k) * c * 16),
                            dy = fill(size_t(n) * k * oh * ow);
  auto X = [&](int i, int ci, int iy, int ix) {
    return iy < 0 || iy >= h || ix < 0 || ix >= w ? 0.0
                                                  : x[((size_t(i) * c + ci) * h + iy) * w + ix];
  };
  auto DY = [&](int i, int ko, int oy, int ox) {
    return oy < 0 || oy >= oh || ox < 0 || ox >= ow
               ? 0.0
               : dy[((size_t(i) * k + ko) * oh + oy) * ow + ox];
  };
  // The strided sums: y, dx, dw of the 4x4 stride-2 padding-1 convolution.
  std::vector<double> y(size_t(n) * k * oh * ow), dx(x.size()), dw(wt.size());
  for (int i = 0; i < n; ++i)
    for (int ko = 0; ko < k; ++ko)
      for (int oy = 0; oy < oh; ++oy)
        for (int ox = 0; ox < ow; ++ox)
          for (int ci = 0; ci < c; ++ci)
            for (int r = 0; r < 4; ++r)
              for (int q = 0; q < 4; ++q) {
                const int iy = 2 * oy - 1 + r, ix = 2 * ox - 1 + q;
                const size_t wi = (size_t(ko) * c + ci) * 16 + r * 4 + q;
                y[((size_t(i) * k + ko) * oh + oy) * ow + ox] += wt[wi] * X(i, ci, iy, ix);
                dw[wi] += DY(i, ko, oy, ox) * X(i, ci, iy, ix);
                if (iy >= 0 && iy < h && ix >= 0 && ix < w)
                  dx[((size_t(i) * c + ci) * h + iy) * w + ix] += wt[wi] * DY(i, ko, oy, ox);
              }
  // The phases xs, as space_to_depth_k makes them.
  const int cc = 4 * c, hs = int(direct::s2d_rows(h)), ws = int(direct::s2d_cols(w));
  ASSERT_EQ(ws % 2, 0);
  std::vector<double> xs(size_t(n) * cc * hs * ws);
  for (int i = 0; i < n; ++i)
    for (int p = 0; p < cc; ++p)
      for (int u = 0; u < hs; ++u)
        for (int v = 0; v < ws; ++v) {
          int iy, ix;
          const int ci = direct::s2d_source(p, u, v, &iy, &ix);
          xs[((size_t(i) * cc + p) * hs + u) * ws + v] = X(i, ci, iy, ix);
        }
  auto XS = [&](int i, int p, int u, int v) {
    return xs[((size_t(i) * cc + p) * hs + u) * ws + v];
  };
  std::vector<int> w_seen(wt.size(), 0);
  for (int ko = 0; ko < k; ++ko)
    for (int p = 0; p < cc; ++p)
      for (int tap = 0; tap < 4; ++tap) ++w_seen[direct::w_index(Taps::S2d, ko, p, tap, c, 0)];
  for (size_t j = 0; j < w_seen.size(); ++j) ASSERT_EQ(w_seen[j], 1) << "weight " << j;
  double y_err = 0, dw_err = 0, dx_err = 0;
  // forward: the unpadded 2x2 convolution of xs
  for (int i = 0; i < n; ++i)
    for (int ko = 0; ko < k; ++ko)
      for (int oy = 0; oy < oh; ++oy)
        for (int ox = 0; ox < ow; ++ox) {
          double s = 0;
          for (int p = 0; p < cc; ++p)
            for (int tap = 0; tap < 4; ++tap)
              s += wt[direct::w_index(Taps::S2d, ko, p, tap, c, 0)] *
                   XS(i, p, oy + tap / 2, ox + tap % 2);
          y_err = std::max(y_err, std::abs(s - y[((size_t(i) * k + ko) * oh + oy) * ow + ox]));
        }
  // backward-weights: the 2x2 kernel's gradient over xs, put in w's layout
  for (int ko = 0; ko < k; ++ko)
    for (int p = 0; p < cc; ++p)
      for (int tap = 0; tap < 4; ++tap) {
        double s = 0;
        for (int i = 0; i < n; ++i)
          for (int oy = 0; oy < oh; ++oy)
            for (int ox = 0; ox < ow; ++ox)
              s += DY(i, ko, oy, ox) * XS(i, p, oy + tap / 2, ox + tap % 2);
        dw_err = std::max(dw_err, std::abs(s - dw[direct::w_index(Taps::S2d, ko, p, tap, c, 0)]));
      }
  // backward-data: four 2x2 convolutions of dy, one per output phase
  std::vector<int> dx_seen(dx.size(), 0);
  for (int phase = 0; phase < 4; ++phase) {
    const int pr = phase >> 1, pq = phase & 1;
    for (int i = 0; i < n; ++i)
      for (int ci = 0; ci < c; ++ci)
        for (int u = 0; u < oh; ++u)
          for (int v = 0; v < ow; ++v) {
            double s = 0;
            for (int ko = 0; ko < k; ++ko)
              for (int tap = 0; tap < 4; ++tap)
                s += wt[direct::w_index(Taps::Phase, ko, ci, tap, c, phase)] *
                     DY(i, ko, direct::phase_window_start(u, pr) + tap / 2,
                        direct::phase_window_start(v, pq) + tap % 2);
            const size_t o = ((size_t(i) * c + ci) * h + 2 * u + pr) * w + 2 * v + pq;
            ++dx_seen[o];
            dx_err = std::max(dx_err, std::abs(s - dx[o]));
          }
  }
  for (size_t j = 0; j < dx_seen.size(); ++j) ASSERT_EQ(dx_seen[j], 1) << "dx element " << j;
  // the same products in another order: double rounding only
  EXPECT_LT(y_err, 1e-12);
  EXPECT_LT(dw_err, 1e-12);
  EXPECT_LT(dx_err, 1e-12);
}
