// Convolution on the GPU (see conv_gemm.h): per chunk of images, batched im2col, one cuBLAS
// GEMM over all their pixels, then the product permuted back to NCHW with the bias and the
// fused activation applied in the same pass. Backward: dy permuted to (k, n*p) with the
// activation's derivative applied in that pass; the bias gradient as row sums of that
// (contiguous) matrix; dW += dY' cols^T (the forward's columns when it kept them);
// dcols = W^T dY', col2im as a gather. Index arithmetic is 32-bit, planes from blockIdx.y.
#include <algorithm>

#include "cuda/launch.h"
#include "ops/conv_gemm.h"
#include "ops/gemm.h"
#include "ops/im2col.h"

namespace pdnn {
namespace cuda {

namespace {

__device__ __forceinline__ float apply(float z, Act a) {
  if (a.kind == FusedAct::None) return z;
  return z > 0.f ? z : (a.kind == FusedAct::ReLU ? 0.f : a.slope * z);
}
__device__ __forceinline__ float derive(float y, float dy, Act a) {
  if (a.kind == FusedAct::None) return dy;
  return y > 0.f ? dy : (a.kind == FusedAct::ReLU ? 0.f : a.slope * dy);
}

// y (n, k, p) = act(tmp (k, n, p) permuted + b[k]); grid.y over the n*k planes of y.
__global__ void to_ncp_bias_act(int n, int k, int p, const float* __restrict__ tmp,
                                const float* __restrict__ b, Act act, float* __restrict__ y) {
  for (int plane = blockIdx.y; plane < n * k; plane += gridDim.y) {
    const int i = plane / k, c = plane - i * k;
    const float bc = b ? b[c] : 0.f;
    const float* src = tmp + (static_cast<int64_t>(c) * n + i) * p;
    float* dst = y + static_cast<int64_t>(plane) * p;
    for (int q = blockIdx.x * blockDim.x + threadIdx.x; q < p; q += gridDim.x * blockDim.x)
      dst[q] = apply(src[q] + bc, act);
  }
}

// dyt (k, n, p) = act'(y) * dy (n, k, p), permuted.
__global__ void to_cnp_act(int n, int k, int p, const float* __restrict__ dy,
                           const float* __restrict__ y, Act act, float* __restrict__ dyt) {
  for (int plane = blockIdx.y; plane < n * k; plane += gridDim.y) {
    const int i = plane / k, c = plane - i * k;
    const float* src = dy + static_cast<int64_t>(plane) * p;
    const float* ys = y ? y + static_cast<int64_t>(plane) * p : nullptr;
    float* dst = dyt + (static_cast<int64_t>(c) * n + i) * p;
    for (int q = blockIdx.x * blockDim.x + threadIdx.x; q < p; q += gridDim.x * blockDim.x)
      dst[q] = ys ? derive(ys[q], src[q], act) : src[q];
  }
}

__global__ void bias_add_k(int n, int k, int p, const float* __restrict__ b, float* __restrict__ y) {
  for (int plane = blockIdx.y; plane < n * k; plane += gridDim.y) {
    const float bc = b[plane % k];
    float* dst = y + static_cast<int64_t>(plane) * p;
    for (int q = blockIdx.x * blockDim.x + threadIdx.x; q < p; q += gridDim.x * blockDim.x)
      dst[q] += bc;
  }
}

constexpr int kSumThreads = 512;

// db[c] += sum of dy over its n planes of p values (one block per channel, double).
__global__ void bias_backward_k(int n, int k, int p, const float* __restrict__ dy,
                                float* __restrict__ db) {
  __shared__ double sh[kSumThreads];
  const int c = blockIdx.x;
  double s = 0.0;
  for (int i = 0; i < n; ++i) {
    const float* plane = dy + (static_cast<int64_t>(i) * k + c) * p;
    for (int q = threadIdx.x; q < p; q += blockDim.x) s += plane[q];
  }
  const double t = block_sum(s, sh);
  if (threadIdx.x == 0) db[c] += static_cast<float>(t);
}

// db[c] += sum of row c of m (rows of len contiguous values).
__global__ void row_sums_k(int len, const float* __restrict__ m, float* __restrict__ db) {
  __shared__ double sh[kSumThreads];
  const float* row = m + static_cast<int64_t>(blockIdx.x) * len;
  double s = 0.0;
  for (int q = threadIdx.x; q < len; q += blockDim.x) s += row[q];
  const double t = block_sum(s, sh);
  if (threadIdx.x == 0) db[blockIdx.x] += static_cast<float>(t);
}

}  // namespace

void bias_add(int64_t n, int64_t k, int64_t p, const float* b, float* y, CudaExec e) {
  if (n * k * p <= 0) return;
  bias_add_k<<<grid2d(p, n * k), kThreads, 0, stream_of(e)>>>(
      static_cast<int>(n), static_cast<int>(k), static_cast<int>(p), b, y);
  PDNN_CUDA_LAUNCH_CHECK("bias_add");
}

void bias_backward(int64_t n, int64_t k, int64_t p, const float* dy, float* db, CudaExec e) {
  if (k <= 0) return;
  bias_backward_k<<<static_cast<unsigned>(k), kSumThreads, 0, stream_of(e)>>>(
      static_cast<int>(n), static_cast<int>(k), static_cast<int>(p), dy, db);
  PDNN_CUDA_LAUNCH_CHECK("bias_backward");
}

void conv2d_forward(const ConvGeom& g, int64_t n, int64_t k, const float* x, const float* w,
                    const float* b, float* y, Act act, ConvAlgo, float* saved_cols, float* ws,
                    CudaExec e) {
  const int64_t rows = g.col_rows(), p = g.col_cols(), chunk = cuda_conv_chunk(g, n, k);
  float* tmp = ws + cuda_conv_product_offset(g, chunk);
  for (int64_t i0 = 0; i0 < n; i0 += chunk) {
    const int64_t c = std::min(chunk, n - i0);
    float* cols = saved_cols && c == n ? saved_cols : ws;
    im2col_batch(g, c, x + i0 * g.image_size(), cols, e);
    gemm(false, false, k, c * p, rows, 1.f, w, cols, 0.f, tmp, e);
    to_ncp_bias_act<<<grid2d(p, c * k), kThreads, 0, stream_of(e)>>>(
        static_cast<int>(c), static_cast<int>(k), static_cast<int>(p), tmp, b, act,
        y + i0 * k * p);
    PDNN_CUDA_LAUNCH_CHECK("conv2d_forward output");
  }
}

void conv2d_backward(const ConvGeom& g, int64_t n, int64_t k, const float* x, const float* w,
                     const float* dy, const float* y, float* dw, float* db, float* dx, Act act,
                     ConvAlgo, const float* saved_cols, float* ws, CudaExec e) {
  const int64_t rows = g.col_rows(), p = g.col_cols(), chunk = cuda_conv_chunk(g, n, k);
  float* cols = ws;
  float* dyt = ws + cuda_conv_product_offset(g, chunk);  // dy of the chunk as (k, c*p)
  for (int64_t i0 = 0; i0 < n; i0 += chunk) {
    const int64_t c = std::min(chunk, n - i0);
    to_cnp_act<<<grid2d(p, c * k), kThreads, 0, stream_of(e)>>>(
        static_cast<int>(c), static_cast<int>(k), static_cast<int>(p), dy + i0 * k * p,
        act.kind == FusedAct::None ? nullptr : y + i0 * k * p, act, dyt);
    PDNN_CUDA_LAUNCH_CHECK("conv2d_backward dy");
    if (db) {
      row_sums_k<<<static_cast<unsigned>(k), kSumThreads, 0, stream_of(e)>>>(
          static_cast<int>(c * p), dyt, db);
      PDNN_CUDA_LAUNCH_CHECK("conv2d_backward bias");
    }
    if (dw) {
      const float* xc = saved_cols && c == n ? saved_cols : cols;
      if (xc == cols) im2col_batch(g, c, x + i0 * g.image_size(), cols, e);
      gemm(false, true, k, rows, c * p, 1.f, dyt, xc, 1.f, dw, e);
    }
    if (dx) {
      gemm(true, false, rows, c * p, k, 1.f, w, dyt, 0.f, cols, e);
      col2im_batch(g, c, cols, dx + i0 * g.image_size(), e);
    }
  }
}

}  // namespace cuda
}  // namespace pdnn
