// GEMM: C = alpha * op(A) op(B) + beta * C, row-major, in fp32: OpenBLAS's cblas_sgemm on the
// CPU, cuBLAS on the GPU (fp32, or TF32 tensor cores when the context asks for them). On the GPU
// also with bfloat16 A and B (mixed precision): the products on the tensor cores, summed in
// fp32 (cublasGemmEx, CUBLAS_COMPUTE_32F), into an fp32 C (beta accumulates: the parameter
// gradients) or a bf16 C (rounded once, to nearest even).
// A is M x K (or K x M when trans_a), B is K x N (or N x K when trans_b), C is M x N; each
// matrix densely packed (leading dimension = its row length).
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "core/exec.h"

namespace pdnn {

namespace cpu {
// Threads: e.threads (see gemm.cpp for how OpenBLAS is told); inside an OpenMP region it runs on
// the calling thread alone.
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
          const float* A, const float* B, float beta, float* C, CpuExec e);
// The same on blocks of larger row-major matrices: lda, ldb, ldc are the distances between
// rows of A, B and C as stored (A's stored rows are op(A)'s columns when trans_a).
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
          const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
          int64_t ldc, CpuExec e);
}  // namespace cpu

namespace cuda {
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
          const float* A, const float* B, float beta, float* C, CudaExec e);
// bf16 operands, fp32 sums (see above). C bf16 with beta != 0 reads C as bf16.
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
          const bf16* A, const bf16* B, float beta, float* C, CudaExec e);
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
          const bf16* A, const bf16* B, float beta, bf16* C, CudaExec e);
// count products C_i = alpha op(A_i) op(B_i) + beta C_i, A_i = A + i*stride_a, ... (cuBLAS's
// strided batched GEMM).
void gemm_strided_batched(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                          float alpha, const float* A, int64_t stride_a, const float* B,
                          int64_t stride_b, float beta, float* C, int64_t stride_c,
                          int64_t count, CudaExec e);
}  // namespace cuda

}  // namespace pdnn
