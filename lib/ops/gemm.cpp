// GEMM through OpenBLAS. Called from inside an OpenMP region it runs single-threaded (the
// OpenMP build of OpenBLAS checks omp_in_parallel), so per-image parallel loops may call it.
#include "ops/gemm.h"

#include <cblas.h>

namespace pdnn {
namespace cpu {

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
          const float* A, const float* B, float beta, float* C, CpuExec) {
  if (M == 0 || N == 0) return;
  const int lda = static_cast<int>(trans_a ? M : K);
  const int ldb = static_cast<int>(trans_b ? K : N);
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), alpha, A, lda, B, ldb, beta,
              C, static_cast<int>(N));
}

}  // namespace cpu
}  // namespace pdnn
