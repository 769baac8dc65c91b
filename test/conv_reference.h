// A convolution's three passes in double precision, with the per-element sums of absolute terms
// that bound fp32 and TF32 rounding, shared by the GPU convolution tests (test_conv_gpu.cpp,
// test_conv_gpu_passes.cpp).
//
// Tolerances are the rounding bounds of a dot product of K terms whose absolute products sum to
// S (computed with the reference, per element): fp32, |err| <= (K + 2) u S with u = 2^-24 (one
// rounding per multiply-add, one for the bias, one for LeakyReLU's slope); TF32, each input is
// first rounded to a 10-bit mantissa (relative 2^-11), so each product is off by up to 2^-10
// relative before the fp32 sums: |err| <= (2^-10 + (K + 2) 2^-23) S.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/context.h"
#include "core/cuda_state.h"
#include "core/tensor.h"
#include "ops/activation.h"
#include "ops/conv/conv_args.h"
#include "ops/conv/im2col.h"
#include "ops/kit/round.h"

namespace pdnn {
namespace testing {

inline double conv_act_d(double z, Act a) {
  if (a.kind == FusedAct::None || z > 0) return z;
  return a.kind == FusedAct::ReLU ? 0.0 : a.slope * z;
}

// y = act(conv(x, w) + b); with g = act'(y_f) dy (the mask read off the float forward output
// y_f, as the kernels read it): dx = conv^T(g, w), dw = conv_w(x, g), db = sums of g. bf16: g
// rounded to bf16 where the kernels round it (LeakyReLU's slope * dy: a bf16 operand).
struct ConvReference {
  std::vector<double> y, y_abs, dx, dx_abs, dw, dw_abs, db, db_abs;
};

inline ConvReference conv_reference(const ConvGeom& g, int64_t n, int64_t k, const Tensor& x,
                                    const Tensor& w, const Tensor* b, const Tensor& y_f,
                                    const Tensor& dy, Act act, bool is_bf16 = false) {
  ConvReference r;
  const int64_t P = g.oh * g.ow;
  r.y.assign(n * k * P, 0);
  r.y_abs.assign(n * k * P, 0);
  r.dx.assign(n * g.c * g.h * g.w, 0);
  r.dx_abs.assign(r.dx.size(), 0);
  r.dw.assign(k * g.col_rows(), 0);
  r.dw_abs.assign(r.dw.size(), 0);
  r.db.assign(k, 0);
  r.db_abs.assign(k, 0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < k; ++o)
      for (int64_t oy = 0; oy < g.oh; ++oy)
        for (int64_t ox = 0; ox < g.ow; ++ox) {
          const int64_t yi = (i * k + o) * P + oy * g.ow + ox;
          const float yv = y_f[yi];
          double gd = dy[yi];
          if (act.kind != FusedAct::None && !(yv > 0.f)) {
            const float gf = act.kind == FusedAct::ReLU ? 0.f : act.slope * dy[yi];
            gd = is_bf16 ? double(kit::round_bf16(gf)) : double(gf);
          }
          double s = b ? double((*b)[o]) : 0.0, sa = b ? std::fabs(double((*b)[o])) : 0.0;
          r.db[o] += gd;
          r.db_abs[o] += std::fabs(gd);
          for (int64_t ci = 0; ci < g.c; ++ci)
            for (int64_t ky = 0; ky < g.kh; ++ky)
              for (int64_t kx = 0; kx < g.kw; ++kx) {
                const int64_t iy = oy * g.sh - g.ph + ky, ix = ox * g.sw - g.pw + kx;
                if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
                const int64_t xi = ((i * g.c + ci) * g.h + iy) * g.w + ix;
                const int64_t wi = ((o * g.c + ci) * g.kh + ky) * g.kw + kx;
                const double p = double(x[xi]) * double(w[wi]);
                s += p;
                sa += std::fabs(p);
                r.dx[xi] += gd * double(w[wi]);
                r.dx_abs[xi] += std::fabs(gd * double(w[wi]));
                r.dw[wi] += gd * double(x[xi]);
                r.dw_abs[wi] += std::fabs(gd * double(x[xi]));
              }
          r.y[yi] = conv_act_d(s, act);
          r.y_abs[yi] = sa;
        }
  return r;
}

// The GPU's convolution algorithms a test runs: pdnn's own (the same in fp32, TF32 and bf16;
// direct on 3x3 stride-1 shapes) and cuDNN where it is found (optional, opened at run time).
inline std::vector<ConvAlgo> gpu_conv_algos(Context& ctx) {
  std::vector<ConvAlgo> a = {ConvAlgo::Im2col, ConvAlgo::Implicit, ConvAlgo::Direct};
  if (ctx.cuda().cudnn() != nullptr) a.push_back(ConvAlgo::Cudnn);
  return a;
}

// A ConvTranspose2d (out_ch output channels) of convolution g, from the reference r of g with
// x := the layer's dy and dy := its input (conv_reference(g, n, k, dy, w, nullptr, x, x, {})):
// its output y = r.dx (+ b, when given), and its bias gradient, the sums of dy per channel.
struct TransposedReference {
  std::vector<double> y, y_abs, db, db_abs;
};
inline TransposedReference transposed_reference(const ConvReference& r, const ConvGeom& g,
                                                int64_t n, int64_t out_ch, const Tensor* b,
                                                const Tensor& dy) {
  TransposedReference t{r.dx, r.dx_abs, std::vector<double>(out_ch, 0.0),
                        std::vector<double>(out_ch, 0.0)};
  const int64_t plane = g.h * g.w;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < out_ch; ++o)
      for (int64_t p = 0; p < plane; ++p) {
        const int64_t e = (i * out_ch + o) * plane + p;
        if (b) {
          t.y[e] += (*b)[o];
          t.y_abs[e] += std::fabs(double((*b)[o]));
        }
        t.db[o] += dy[e];
        t.db_abs[o] += std::fabs(double(dy[e]));
      }
  return t;
}

// |got - (base + ref)| <= rel * (S + |base|) for every element, rel the bound of a K-term dot
// product (above); counts the elements outside and reports the first.
inline void expect_conv_within(const Tensor& got, const std::vector<double>& ref,
                               const std::vector<double>& abs_sum, const Tensor* base,
                               double terms, bool tf32, const std::string& what) {
  ASSERT_EQ(static_cast<size_t>(got.numel()), ref.size()) << what;
  const double u = std::ldexp(1.0, -24);
  const double rel = tf32 ? std::ldexp(1.0, -10) + (terms + 2) * 2 * u : (terms + 2) * u;
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double want = ref[i] + (base ? double((*base)[i]) : 0.0);
    const double bound = rel * (abs_sum[i] + (base ? std::fabs(double((*base)[i])) : 0.0)) + 1e-30;
    const double g = got[i];
    if (!(std::fabs(g - want) <= bound)) {
      if (first < 0) first = i;
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.numel() << " elements outside the "
                    << (tf32 ? "TF32" : "fp32") << " bound; first at " << first << ": got "
                    << (first >= 0 ? got[first] : 0.f) << ", want "
                    << (first >= 0 ? ref[first] + (base ? double((*base)[first]) : 0.0) : 0.0);
}

}  // namespace testing
}  // namespace pdnn
