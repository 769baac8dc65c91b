// im2col/col2im over raw pointers (see im2col.h). Row by row, with the valid range of output
// columns computed once per kernel offset so the inner loops carry no bounds checks; stride 1
// rows are plain copies.
#include "ops/im2col.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/parallel.h"

namespace pdnn {

ConvGeom conv_geom(const char* op, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw,
                   int64_t sh, int64_t sw, int64_t ph, int64_t pw) {
  PDNN_CHECK(c > 0 && h > 0 && w > 0, "%s: input (C,H,W) = (%lld,%lld,%lld) must be positive", op,
             (long long)c, (long long)h, (long long)w);
  PDNN_CHECK(kh > 0 && kw > 0 && sh > 0 && sw > 0 && ph >= 0 && pw >= 0,
             "%s: kernel %lldx%lld, stride %lldx%lld, padding %lldx%lld: kernel and stride must be "
             "positive, padding >= 0", op, (long long)kh, (long long)kw, (long long)sh,
             (long long)sw, (long long)ph, (long long)pw);
  PDNN_CHECK(h + 2 * ph >= kh && w + 2 * pw >= kw,
             "%s: kernel %lldx%lld larger than the padded input %lldx%lld (input %lldx%lld, "
             "padding %lldx%lld)", op, (long long)kh, (long long)kw, (long long)(h + 2 * ph),
             (long long)(w + 2 * pw), (long long)h, (long long)w, (long long)ph, (long long)pw);
  ConvGeom g{c, h, w, kh, kw, sh, sw, ph, pw, 0, 0};
  g.oh = (h + 2 * ph - kh) / sh + 1;
  g.ow = (w + 2 * pw - kw) / sw + 1;
  return g;
}

void nchw_to_cnhw(int64_t n, int64_t c, int64_t p, const float* x, float* y) {
#pragma omp parallel for schedule(static) if (PDNN_PAR(n * c * p))
  for (int64_t ci = 0; ci < c; ++ci)
    for (int64_t ni = 0; ni < n; ++ni)
      std::memcpy(y + (ci * n + ni) * p, x + (ni * c + ci) * p, sizeof(float) * p);
}

void cnhw_to_nchw(int64_t n, int64_t c, int64_t p, const float* x, float* y) {
#pragma omp parallel for schedule(static) if (PDNN_PAR(n * c * p))
  for (int64_t ni = 0; ni < n; ++ni)
    for (int64_t ci = 0; ci < c; ++ci)
      std::memcpy(y + (ni * c + ci) * p, x + (ci * n + ni) * p, sizeof(float) * p);
}

namespace {

// Output columns ox whose input column ox*s - p + k lies in [0, w): [lo, hi).
inline void valid_range(int64_t k, int64_t s, int64_t p, int64_t w, int64_t out, int64_t* lo,
                        int64_t* hi) {
  // ox*s >= p - k  and  ox*s <= w - 1 + p - k
  const int64_t a = p - k;
  *lo = a <= 0 ? 0 : (a + s - 1) / s;
  const int64_t b = w - 1 + p - k;
  *hi = b < 0 ? 0 : std::min(out, b / s + 1);
  if (*lo > *hi) *lo = *hi;
}

}  // namespace

namespace cpu {

void im2col(const ConvGeom& g, const float* x_img, float* cols, int64_t ld) {
  for (int64_t ci = 0; ci < g.c; ++ci) {
    const float* xc = x_img + ci * g.h * g.w;
    for (int64_t ki = 0; ki < g.kh; ++ki) {
      int64_t ylo, yhi;
      valid_range(ki, g.sh, g.ph, g.h, g.oh, &ylo, &yhi);
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        float* row = cols + ((ci * g.kh + ki) * g.kw + kj) * ld;
        int64_t xlo, xhi;
        valid_range(kj, g.sw, g.pw, g.w, g.ow, &xlo, &xhi);
        std::memset(row, 0, sizeof(float) * ylo * g.ow);
        for (int64_t oy = ylo; oy < yhi; ++oy) {
          float* r = row + oy * g.ow;
          const float* xr = xc + (oy * g.sh - g.ph + ki) * g.w - g.pw + kj;
          std::fill(r, r + xlo, 0.f);
          if (g.sw == 1) {
            std::memcpy(r + xlo, xr + xlo, sizeof(float) * (xhi - xlo));
          } else {
            for (int64_t ox = xlo; ox < xhi; ++ox) r[ox] = xr[ox * g.sw];
          }
          std::fill(r + xhi, r + g.ow, 0.f);
        }
        std::memset(row + yhi * g.ow, 0, sizeof(float) * (g.oh - yhi) * g.ow);
      }
    }
  }
}

void col2im(const ConvGeom& g, const float* cols, float* x_img, int64_t ld) {
  std::memset(x_img, 0, sizeof(float) * g.image_size());
  for (int64_t ci = 0; ci < g.c; ++ci) {
    float* xc = x_img + ci * g.h * g.w;
    for (int64_t ki = 0; ki < g.kh; ++ki) {
      int64_t ylo, yhi;
      valid_range(ki, g.sh, g.ph, g.h, g.oh, &ylo, &yhi);
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        const float* row = cols + ((ci * g.kh + ki) * g.kw + kj) * ld;
        int64_t xlo, xhi;
        valid_range(kj, g.sw, g.pw, g.w, g.ow, &xlo, &xhi);
        for (int64_t oy = ylo; oy < yhi; ++oy) {
          const float* r = row + oy * g.ow;
          float* xr = xc + (oy * g.sh - g.ph + ki) * g.w - g.pw + kj;
          if (g.sw == 1) {
            for (int64_t ox = xlo; ox < xhi; ++ox) xr[ox] += r[ox];
          } else {
            for (int64_t ox = xlo; ox < xhi; ++ox) xr[ox * g.sw] += r[ox];
          }
        }
      }
    }
  }
}

}  // namespace cpu
}  // namespace pdnn
