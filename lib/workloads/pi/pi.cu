// W1 pi on the GPU (see pi.h). Bound by the divider: an fp64 reciprocal is an estimate and
// Newton steps (a dozen double FMAs).
#include "workloads/pi/pi.h"
#include "cuda/launch.h"

namespace pdnn {
namespace cuda {

namespace {

constexpr int kPiThreads = 256;

// 4 / d as 4 * (1 / d): the same correctly rounded value (scaling by 4 is exact), but the
// reciprocal is a shorter sequence than a full division (measured 0.24 -> see results/pi).
__device__ __forceinline__ double four_over(double d) { return 4.0 * __drcp_rn(d); }
__device__ __forceinline__ float four_over(float d) { return 4.0f * __frcp_rn(d); }

template <class T>
__global__ void pi_partials(int64_t n, double* partials) {
  __shared__ T sh[kPiThreads];
  const T h = T(1) / static_cast<T>(n);
  // Four independent sums per thread, so the divider's latency overlaps.
  T s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  int64_t i = 1 + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const T x0 = static_cast<T>(i) * h, x1 = static_cast<T>(i + stride) * h;
    const T x2 = static_cast<T>(i + 2 * stride) * h, x3 = static_cast<T>(i + 3 * stride) * h;
    s0 += four_over(T(1) + x0 * x0);
    s1 += four_over(T(1) + x1 * x1);
    s2 += four_over(T(1) + x2 * x2);
    s3 += four_over(T(1) + x3 * x3);
  }
  for (; i < n; i += stride) {  // interior points 1 .. n-1
    const T x = static_cast<T>(i) * h;
    s0 += four_over(T(1) + x * x);
  }
  const T b = block_sum((s0 + s1) + (s2 + s3), sh);
  if (threadIdx.x == 0) partials[blockIdx.x] = static_cast<double>(b);
}

template <class T>
__global__ void pi_finish(int64_t n, int blocks, double* partials) {
  __shared__ T sh[kPiThreads];
  T s = 0;
  for (int i = threadIdx.x; i < blocks; i += blockDim.x) s += static_cast<T>(partials[i]);
  const T b = block_sum(s, sh);
  if (threadIdx.x == 0) {
    const T h = T(1) / static_cast<T>(n);
    partials[0] = static_cast<double>((b + T(0.5) * (T(4) + T(2))) * h);  // f(0) = 4, f(1) = 2
  }
}

}  // namespace

double pi_trapezoid(int64_t n, bool fp32, double* partials, CudaExec e) {
  PDNN_CHECK(n >= 1, "pi: n = %lld intervals, need at least 1", static_cast<long long>(n));
  if (fp32) {
    pi_partials<float><<<kPiBlocks, kPiThreads, 0, stream_of(e)>>>(n, partials);
    pi_finish<float><<<1, kPiThreads, 0, stream_of(e)>>>(n, kPiBlocks, partials);
  } else {
    pi_partials<double><<<kPiBlocks, kPiThreads, 0, stream_of(e)>>>(n, partials);
    pi_finish<double><<<1, kPiThreads, 0, stream_of(e)>>>(n, kPiBlocks, partials);
  }
  PDNN_CUDA_LAUNCH_CHECK("pi");
  double r = 0.0;
  PDNN_CUDA_CHECK(cudaMemcpyAsync(&r, partials, sizeof r, cudaMemcpyDeviceToHost, stream_of(e)));
  PDNN_CUDA_CHECK(cudaStreamSynchronize(stream_of(e)));
  return r;
}

}  // namespace cuda
}  // namespace pdnn
