// GEMM through OpenBLAS. Called from inside an OpenMP region it runs single-threaded (the
// OpenMP build of OpenBLAS checks omp_in_parallel), so per-image parallel loops may call it.
#include "ops/gemm.h"

#include <cblas.h>
#include <omp.h>

#include "core/parallel.h"

namespace pdnn {
namespace cpu {

namespace {
// OpenBLAS's OpenMP build sizes its team from the calling thread's omp_get_max_threads() at
// each call. That is this thread's own setting (OpenMP's nthreads-var belongs to the task, not
// the process): set to the exec's threads for the call and put back after, so no other
// region or Context sees it. Inside a region OpenBLAS runs on the calling thread anyway.
class BlasThreads {
 public:
  explicit BlasThreads(CpuExec e) : saved_(omp_in_parallel() ? 0 : omp_get_max_threads()) {
    if (saved_ == 0) return;
    omp_set_num_threads(e.threads);
    // The team OpenBLAS will form, for test_threads (its own regions are out of our reach).
    if (TeamObserver f = detail::team_observer.load(std::memory_order_relaxed))
      f(omp_get_max_threads());
  }
  ~BlasThreads() {
    if (saved_ != 0) omp_set_num_threads(saved_);
  }
  BlasThreads(const BlasThreads&) = delete;
  BlasThreads& operator=(const BlasThreads&) = delete;

 private:
  int saved_;
};
}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
          const float* A, const float* B, float beta, float* C, CpuExec e) {
  gemm(trans_a, trans_b, M, N, K, alpha, A, trans_a ? M : K, B, trans_b ? K : N, beta, C, N, e);
}

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
          const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
          int64_t ldc, CpuExec e) {
  if (M == 0 || N == 0) return;
  const BlasThreads scope(e);
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), alpha, A,
              static_cast<int>(lda), B, static_cast<int>(ldb), beta, C, static_cast<int>(ldc));
}

}  // namespace cpu
}  // namespace pdnn
