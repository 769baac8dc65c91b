// im2col / col2im over a batch, and the (n,c,p) <-> (c,n,p) permutes, on the GPU (see
// im2col.h). One thread per output element; col2im is a gather (one thread per input pixel
// sums the column entries that read it, in the CPU's (ki, kj) order: bit-identical), so there
// are no atomics.
#include "cuda/launch.h"
#include "ops/im2col.h"

namespace pdnn {
namespace cuda {

namespace {

__global__ void im2col_k(ConvGeom g, int64_t n, int64_t total, const float* x, float* cols) {
  const int64_t p = g.oh * g.ow, ld = n * p;
  PDNN_GRID_LOOP(t, total) {
    const int64_t col = t % ld, r = t / ld;
    const int64_t i = col / p, q = col % p, oy = q / g.ow, ox = q % g.ow;
    const int64_t kj = r % g.kw, ki = (r / g.kw) % g.kh, ci = r / (g.kw * g.kh);
    const int64_t yy = oy * g.sh - g.ph + ki, xx = ox * g.sw - g.pw + kj;
    cols[t] = (yy >= 0 && yy < g.h && xx >= 0 && xx < g.w)
                  ? x[((i * g.c + ci) * g.h + yy) * g.w + xx]
                  : 0.f;
  }
}

__global__ void col2im_k(ConvGeom g, int64_t n, int64_t total, const float* cols, float* x) {
  const int64_t p = g.oh * g.ow, ld = n * p;
  PDNN_GRID_LOOP(t, total) {
    const int64_t xx = t % g.w, yy = (t / g.w) % g.h, ci = (t / (g.w * g.h)) % g.c,
                  i = t / (g.w * g.h * g.c);
    float s = 0.f;
    for (int64_t ki = 0; ki < g.kh; ++ki) {
      const int64_t ny = yy + g.ph - ki;
      if (ny < 0 || ny % g.sh != 0 || ny / g.sh >= g.oh) continue;
      const int64_t oy = ny / g.sh;
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        const int64_t nx = xx + g.pw - kj;
        if (nx < 0 || nx % g.sw != 0 || nx / g.sw >= g.ow) continue;
        const int64_t ox = nx / g.sw;
        s += cols[((ci * g.kh + ki) * g.kw + kj) * ld + i * p + oy * g.ow + ox];
      }
    }
    x[t] = s;
  }
}

// y (c, n, p) from x (n, c, p) and back.
__global__ void to_cnp(int64_t n, int64_t c, int64_t p, const float* x, float* y) {
  PDNN_GRID_LOOP(t, n * c * p) {
    const int64_t q = t % p, ni = (t / p) % n, ci = t / (p * n);
    y[t] = x[(ni * c + ci) * p + q];
  }
}
__global__ void to_ncp(int64_t n, int64_t c, int64_t p, const float* x, float* y) {
  PDNN_GRID_LOOP(t, n * c * p) {
    const int64_t q = t % p, ci = (t / p) % c, ni = t / (p * c);
    y[t] = x[(ci * n + ni) * p + q];
  }
}

}  // namespace

void im2col_batch(const ConvGeom& g, int64_t n, const float* x, float* cols, CudaExec e) {
  const int64_t total = g.col_rows() * n * g.col_cols();
  if (total <= 0) return;
  im2col_k<<<blocks_for(total), kThreads, 0, stream_of(e)>>>(g, n, total, x, cols);
  PDNN_CUDA_LAUNCH_CHECK("im2col_batch");
}

void col2im_batch(const ConvGeom& g, int64_t n, const float* cols, float* x, CudaExec e) {
  const int64_t total = n * g.image_size();
  if (total <= 0) return;
  col2im_k<<<blocks_for(total), kThreads, 0, stream_of(e)>>>(g, n, total, cols, x);
  PDNN_CUDA_LAUNCH_CHECK("col2im_batch");
}

void nchw_to_cnhw(int64_t n, int64_t c, int64_t p, const float* x, float* y, CudaExec e) {
  if (n * c * p <= 0) return;
  to_cnp<<<blocks_for(n * c * p), kThreads, 0, stream_of(e)>>>(n, c, p, x, y);
  PDNN_CUDA_LAUNCH_CHECK("nchw_to_cnhw");
}

void cnhw_to_nchw(int64_t n, int64_t c, int64_t p, const float* x, float* y, CudaExec e) {
  if (n * c * p <= 0) return;
  to_ncp<<<blocks_for(n * c * p), kThreads, 0, stream_of(e)>>>(n, c, p, x, y);
  PDNN_CUDA_LAUNCH_CHECK("cnhw_to_nchw");
}

}  // namespace cuda
}  // namespace pdnn
