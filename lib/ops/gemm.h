// GEMM: C = alpha * op(A) op(B) + beta * C, row-major, through cblas_sgemm.
// A is M x K (or K x M when trans_a), B is K x N (or N x K when trans_b), C is M x N.
#pragma once
#include <cstdint>

namespace pdnn {
namespace cpu {

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
          const float* A, const float* B, float beta, float* C);

}  // namespace cpu
}  // namespace pdnn
