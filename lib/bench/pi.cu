// W1 pi on the GPU (see pi.h). Bound by the divider: fp64 division is a reciprocal estimate and
// Newton steps (a dozen double FMAs); fp32 uses the fast single-precision path.
#include "bench/pi.h"
#include "cuda/launch.h"

namespace pdnn {
namespace cuda {

namespace {

constexpr int kPiThreads = 256;

template <class T>
__global__ void pi_partials(int64_t n, double* partials) {
  __shared__ T sh[kPiThreads];
  const T h = T(1) / static_cast<T>(n);
  T s = 0;
  // Interior points 1 .. n-1.
  for (int64_t i = 1 + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const T x = static_cast<T>(i) * h;
    s += T(4) / (T(1) + x * x);
  }
  const T b = block_sum(s, sh);
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
