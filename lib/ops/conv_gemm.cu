// Convolution on the GPU (see conv_gemm.h): per chunk of images, batched im2col, one cuBLAS
// GEMM over all their pixels, then the product permuted back to NCHW with the bias added in
// the same pass. Backward runs the same scheme in reverse (dW += dY' cols^T; dcols = W^T dY',
// col2im as a gather).
#include <algorithm>

#include "cuda/launch.h"
#include "ops/conv_gemm.h"
#include "ops/gemm.h"

namespace pdnn {
namespace cuda {

namespace {

// y (n, k, p) = tmp (k, n, p) permuted, + b[k].
__global__ void to_ncp_bias(int64_t n, int64_t k, int64_t p, const float* tmp, const float* b,
                            float* y) {
  PDNN_GRID_LOOP(t, n * k * p) {
    const int64_t q = t % p, c = (t / p) % k, i = t / (p * k);
    y[t] = tmp[(c * n + i) * p + q] + (b ? b[c] : 0.f);
  }
}

__global__ void bias_add_k(int64_t total, int64_t k, int64_t p, const float* b, float* y) {
  PDNN_GRID_LOOP(t, total) y[t] += b[(t / p) % k];
}

// One block per channel: db[c] += sum over n, p of dy (in double, fixed order).
__global__ void bias_backward_k(int64_t n, int64_t k, int64_t p, const float* dy, float* db) {
  __shared__ double sh[kThreads];
  const int64_t c = blockIdx.x;
  double s = 0.0;
  for (int64_t j = threadIdx.x; j < n * p; j += blockDim.x) s += dy[((j / p) * k + c) * p + j % p];
  const double total = block_sum(s, sh);
  if (threadIdx.x == 0) db[c] += static_cast<float>(total);
}

}  // namespace

void bias_add(int64_t n, int64_t k, int64_t p, const float* b, float* y, CudaExec e) {
  const int64_t total = n * k * p;
  if (total <= 0) return;
  bias_add_k<<<blocks_for(total), kThreads, 0, stream_of(e)>>>(total, k, p, b, y);
  PDNN_CUDA_LAUNCH_CHECK("bias_add");
}

void bias_backward(int64_t n, int64_t k, int64_t p, const float* dy, float* db, CudaExec e) {
  if (k <= 0) return;
  bias_backward_k<<<static_cast<unsigned>(k), kThreads, 0, stream_of(e)>>>(n, k, p, dy, db);
  PDNN_CUDA_LAUNCH_CHECK("bias_backward");
}

void conv2d_forward(const ConvGeom& g, int64_t n, int64_t k, const float* x, const float* w,
                    const float* b, float* y, ConvAlgo, float* ws, CudaExec e) {
  const int64_t rows = g.col_rows(), p = g.col_cols(), chunk = cuda_conv_chunk(g, n, k);
  float* cols = ws;
  float* tmp = ws + cuda_conv_product_offset(g, chunk);
  for (int64_t i0 = 0; i0 < n; i0 += chunk) {
    const int64_t c = std::min(chunk, n - i0);
    im2col_batch(g, c, x + i0 * g.image_size(), cols, e);
    gemm(false, false, k, c * p, rows, 1.f, w, cols, 0.f, tmp, e);
    const int64_t total = c * k * p;
    to_ncp_bias<<<blocks_for(total), kThreads, 0, stream_of(e)>>>(c, k, p, tmp, b,
                                                                   y + i0 * k * p);
    PDNN_CUDA_LAUNCH_CHECK("conv2d_forward permute");
  }
}

void conv2d_backward(const ConvGeom& g, int64_t n, int64_t k, const float* x, const float* w,
                     const float* dy, float* dw, float* db, float* dx, ConvAlgo, float* ws,
                     CudaExec e) {
  const int64_t rows = g.col_rows(), p = g.col_cols(), chunk = cuda_conv_chunk(g, n, k);
  if (db) bias_backward(n, k, p, dy, db, e);
  if (!dw && !dx) return;
  float* cols = ws;
  float* dyt = ws + cuda_conv_product_offset(g, chunk);  // dy of the chunk as (k, c*p)
  for (int64_t i0 = 0; i0 < n; i0 += chunk) {
    const int64_t c = std::min(chunk, n - i0);
    nchw_to_cnhw(c, k, p, dy + i0 * k * p, dyt, e);
    if (dw) {
      im2col_batch(g, c, x + i0 * g.image_size(), cols, e);
      gemm(false, true, k, rows, c * p, 1.f, dyt, cols, 1.f, dw, e);
    }
    if (dx) {
      gemm(true, false, rows, c * p, k, 1.f, w, dyt, 0.f, cols, e);
      col2im_batch(g, c, cols, dx + i0 * g.image_size(), e);
    }
  }
}

}  // namespace cuda
}  // namespace pdnn
