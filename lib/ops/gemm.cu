// GEMM on the GPU through cuBLAS, and the dense layer's math (see gemm.h, dense.h).
// cuBLAS is column-major: a row-major C (M x N) = op(A) op(B) is the column-major
// C^T (N x M) = op(B)^T op(A)^T, i.e. cublasSgemm with the operands swapped.
#include "cuda/launch.h"
#include "ops/dense.h"
#include "ops/gemm.h"

namespace pdnn {
namespace cuda {

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
          const float* A, const float* B, float beta, float* C, CudaExec e) {
  if (M == 0 || N == 0) return;
  const int lda = static_cast<int>(trans_a ? M : K), ldb = static_cast<int>(trans_b ? K : N);
  PDNN_CUBLAS_CHECK(cublasSgemm(e.blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(N),
                                static_cast<int>(M), static_cast<int>(K), &alpha, B, ldb, A, lda,
                                &beta, C, static_cast<int>(N)));
}

void gemm_strided_batched(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                          float alpha, const float* A, int64_t stride_a, const float* B,
                          int64_t stride_b, float beta, float* C, int64_t stride_c,
                          int64_t count, CudaExec e) {
  if (M == 0 || N == 0 || count == 0) return;
  const int lda = static_cast<int>(trans_a ? M : K), ldb = static_cast<int>(trans_b ? K : N);
  PDNN_CUBLAS_CHECK(cublasSgemmStridedBatched(
      e.blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
      static_cast<int>(N), static_cast<int>(M), static_cast<int>(K), &alpha, B, ldb, stride_b, A,
      lda, stride_a, &beta, C, static_cast<int>(N), stride_c, static_cast<int>(count)));
}

namespace {
// y (n, out) = b broadcast over rows.
__global__ void rows_bias(int64_t n, int64_t out, const float* b, float* y) {
  PDNN_GRID_LOOP(i, n * out) y[i] = b[i % out];
}
// db[o] += sum over rows of dy[i][o], rows in order (the CPU's order: bit-identical).
__global__ void rows_bias_backward(int64_t n, int64_t out, const float* dy, float* db) {
  PDNN_GRID_LOOP(o, out) {
    float s = db[o];
    for (int64_t i = 0; i < n; ++i) s += dy[i * out + o];
    db[o] = s;
  }
}
}  // namespace

void dense_forward(int64_t n, int64_t in, int64_t out, const float* x, const float* w,
                   const float* b, float* y, CudaExec e) {
  float beta = 0.f;
  if (b) {
    rows_bias<<<blocks_for(n * out), kThreads, 0, stream_of(e)>>>(n, out, b, y);
    PDNN_CUDA_LAUNCH_CHECK("dense bias");
    beta = 1.f;
  }
  gemm(false, true, n, out, in, 1.f, x, w, beta, y, e);
}

void dense_backward(int64_t n, int64_t in, int64_t out, const float* x, const float* w,
                    const float* dy, float* dw, float* db, float* dx, CudaExec e) {
  gemm(true, false, out, in, n, 1.f, dy, x, 1.f, dw, e);
  if (db) {
    rows_bias_backward<<<blocks_for(out), kThreads, 0, stream_of(e)>>>(n, out, dy, db);
    PDNN_CUDA_LAUNCH_CHECK("dense bias backward");
  }
  if (dx) gemm(false, false, n, in, out, 1.f, dy, w, 0.f, dx, e);
}

}  // namespace cuda
}  // namespace pdnn
