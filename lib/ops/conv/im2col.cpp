// im2col/col2im over raw pointers (see im2col.h). Row by row, with the valid range of output
// columns computed once per kernel offset so the inner loops carry no bounds checks; stride 1
// rows are plain copies.
#include "ops/conv/im2col.h"

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

// Rows of a column matrix are short (one output row, often 8-30 floats, or none): inline
// vectorised loops, not a memcpy/memset call per row.
__attribute__((optimize("no-tree-loop-distribute-patterns"))) inline void copy_row(
    float* __restrict dst, const float* __restrict src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
}

__attribute__((optimize("no-tree-loop-distribute-patterns"))) inline void fill_zero(float* dst,
                                                                                 int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = 0.f;
}

// Output rows [ylo, yhi) and columns [xlo, xhi) whose input pixel for kernel offset (ki, kj)
// lies inside the image; the rest read padding.
struct Window {
  int64_t ylo, yhi, xlo, xhi;
};
inline Window valid_window(const ConvGeom& g, int64_t ki, int64_t kj) {
  Window v;
  valid_range(ki, g.sh, g.ph, g.h, g.oh, &v.ylo, &v.yhi);
  valid_range(kj, g.sw, g.pw, g.w, g.ow, &v.xlo, &v.xhi);
  return v;
}

}  // namespace

namespace cpu {

// Loops run kernel offset (ki, kj) outermost so the valid ranges are computed once per offset,
// not once per row: with tiny outputs (1x1 in DCGAN's last layers) that bookkeeping dominated.
void im2col(const ConvGeom& g, const float* x_img, float* cols, int64_t ld) {
  if (whole_image_window(g)) {
    for (int64_t r = 0; r < g.col_rows(); ++r) cols[r * ld] = x_img[r];
    return;
  }
  for (int64_t ki = 0; ki < g.kh; ++ki)
    for (int64_t kj = 0; kj < g.kw; ++kj) {
      const Window v = valid_window(g, ki, kj);
      for (int64_t ci = 0; ci < g.c; ++ci) {
        float* row = cols + ((ci * g.kh + ki) * g.kw + kj) * ld;
        const float* xc = x_img + ci * g.h * g.w;
        fill_zero(row, v.ylo * g.ow);
        for (int64_t oy = v.ylo; oy < v.yhi; ++oy) {
          float* r = row + oy * g.ow;
          const float* xr = xc + (oy * g.sh - g.ph + ki) * g.w - g.pw + kj;
          fill_zero(r, v.xlo);
          if (g.sw == 1) {
            copy_row(r + v.xlo, xr + v.xlo, v.xhi - v.xlo);
          } else {
            for (int64_t ox = v.xlo; ox < v.xhi; ++ox) r[ox] = xr[ox * g.sw];
          }
          fill_zero(r + v.xhi, g.ow - v.xhi);
        }
        fill_zero(row + v.yhi * g.ow, (g.oh - v.yhi) * g.ow);
      }
    }
}

void col2im(const ConvGeom& g, const float* cols, float* x_img, int64_t ld) {
  if (whole_image_window(g)) {
    for (int64_t r = 0; r < g.col_rows(); ++r) x_img[r] = cols[r * ld];
    return;
  }
  fill_zero(x_img, g.image_size());
  for (int64_t ki = 0; ki < g.kh; ++ki)
    for (int64_t kj = 0; kj < g.kw; ++kj) {
      const Window v = valid_window(g, ki, kj);
      for (int64_t ci = 0; ci < g.c; ++ci) {
        const float* row = cols + ((ci * g.kh + ki) * g.kw + kj) * ld;
        float* xc = x_img + ci * g.h * g.w;
        for (int64_t oy = v.ylo; oy < v.yhi; ++oy) {
          const float* r = row + oy * g.ow;
          float* xr = xc + (oy * g.sh - g.ph + ki) * g.w - g.pw + kj;
          if (g.sw == 1) {
            for (int64_t ox = v.xlo; ox < v.xhi; ++ox) xr[ox] += r[ox];
          } else {
            for (int64_t ox = v.xlo; ox < v.xhi; ++ox) xr[ox * g.sw] += r[ox];
          }
        }
      }
    }
}

void im2col_batch(const ConvGeom& g, int64_t n, const float* x, float* cols, CpuExec e) {
  const int64_t p = g.col_cols();
  parallel_for(e, n, PDNN_PAR(n * g.col_size()),
               [=](int64_t i) { im2col(g, x + i * g.image_size(), cols + i * p, n * p); });
}

void col2im_batch(const ConvGeom& g, int64_t n, const float* cols, float* x, CpuExec e) {
  const int64_t p = g.col_cols();
  parallel_for(e, n, PDNN_PAR(n * g.col_size()),
               [=](int64_t i) { col2im(g, cols + i * p, x + i * g.image_size(), n * p); });
}

void nchw_to_cnhw(int64_t n, int64_t c, int64_t p, const float* x, float* y, CpuExec e) {
  parallel_for(e, c, PDNN_PAR(n * c * p), [=](int64_t ci) {
    for (int64_t ni = 0; ni < n; ++ni)
      std::memcpy(y + (ci * n + ni) * p, x + (ni * c + ci) * p, sizeof(float) * p);
  });
}

void cnhw_to_nchw(int64_t n, int64_t c, int64_t p, const float* x, float* y, CpuExec e) {
  parallel_for(e, n, PDNN_PAR(n * c * p), [=](int64_t ni) {
    for (int64_t ci = 0; ci < c; ++ci)
      std::memcpy(y + (ni * c + ci) * p, x + (ci * n + ni) * p, sizeof(float) * p);
  });
}

}  // namespace cpu
}  // namespace pdnn
