// On-device metric accumulators on the GPU (see metrics.h): one block each with fixed-order
// sums, and the confusion counts (integer atomics).
#include <algorithm>

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

// Grid-stride over the pixels; a block's counts in shared memory (`shared`: k*k of them fit),
// added to the total once per block. Integer atomics: the totals do not depend on the order.
__global__ void confusion_k(int64_t n, int64_t k, int64_t plane, const float* z,
                            const int32_t* labels, unsigned long long* counts, bool shared) {
  extern __shared__ unsigned long long local[];
  if (shared) {
    for (int64_t c = threadIdx.x; c < k * k; c += blockDim.x) local[c] = 0;
    __syncthreads();
  }
  PDNN_GRID_LOOP(i, n * plane) {
    const int32_t t = labels[i];
    if (t < 0 || t >= k) continue;
    const float* zi = z + (i / plane) * k * plane + i % plane;
    int64_t best = 0;
    for (int64_t j = 1; j < k; ++j)
      if (zi[j * plane] > zi[best * plane]) best = j;
    atomicAdd(shared ? &local[t * k + best] : &counts[t * k + best], 1ull);
  }
  if (!shared) return;
  __syncthreads();
  for (int64_t c = threadIdx.x; c < k * k; c += blockDim.x)
    if (local[c] != 0) atomicAdd(&counts[c], local[c]);
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

void segmentation_confusion(int64_t n, int64_t k, int64_t plane, const float* z,
                            const int32_t* labels, int64_t* counts, CudaExec e) {
  static_assert(sizeof(int64_t) == sizeof(unsigned long long), "64-bit counts");
  const bool shared = k * k <= 1024;  // 8 KiB of counts a block
  const size_t bytes = shared ? static_cast<size_t>(k * k) * sizeof(unsigned long long) : 0;
  const unsigned blocks = std::min<unsigned>(blocks_for(n * plane, kThreads), 1024u);
  confusion_k<<<blocks, kThreads, bytes, stream_of(e)>>>(
      n, k, plane, z, labels, reinterpret_cast<unsigned long long*>(counts), shared);
  PDNN_CUDA_LAUNCH_CHECK("segmentation_confusion");
}

}  // namespace cuda
}  // namespace pdnn
