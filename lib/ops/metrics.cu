// On-device metric accumulators on the GPU (see metrics.h): one block each, fixed-order sums.
#include "cuda/launch.h"
#include "ops/metrics.h"

namespace pdnn {
namespace cuda {

namespace {
__global__ void prob_mean_k(int64_t n, const float* p, double* acc) {
  __shared__ double sh[kThreads];
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += p[i];
  const double t = block_sum(s, sh);
  if (threadIdx.x == 0) {
    const double m = n > 0 ? t / static_cast<double>(n) : 0.0;
    acc[0] += m;
    acc[1] = fmax(acc[1], fmin(m, 1.0 - m));
  }
}

__global__ void append_row_k(int64_t k, int64_t rows, const double* acc, double* history,
                             int64_t* row) {
  const int64_t r = *row;
  if (r >= 0 && r < rows)
    for (int64_t j = threadIdx.x; j < k; j += blockDim.x) history[r * k + j] = acc[j];
  __syncthreads();
  if (threadIdx.x == 0) *row = r + 1;
}
}  // namespace

void prob_mean_into(int64_t n, const float* p, double* acc, CudaExec e) {
  prob_mean_k<<<1, kThreads, 0, stream_of(e)>>>(n, p, acc);
  PDNN_CUDA_LAUNCH_CHECK("prob_mean_into");
}

void append_row(int64_t k, int64_t rows, const double* acc, double* history, int64_t* row,
                CudaExec e) {
  append_row_k<<<1, 32, 0, stream_of(e)>>>(k, rows, acc, history, row);
  PDNN_CUDA_LAUNCH_CHECK("append_row");
}

}  // namespace cuda
}  // namespace pdnn
