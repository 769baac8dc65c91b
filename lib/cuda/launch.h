// Device-side helpers shared by the .cu kernels: grid-stride loops, the splitmix64 counter RNG
// (bit-identical to core/rng.h), block reductions in a fixed order (deterministic sums).
// Included by .cu files only.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/exec.h"
#include "cuda/check.h"

namespace pdnn {
namespace cuda {

constexpr int kThreads = 256;

// for (i = global thread; i < n; i += grid size)
#define PDNN_GRID_LOOP(i, n)                                                            \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

// Rng::at and Rng::to_unit of core/rng.h, on the device.
__device__ __forceinline__ uint64_t rng_at(uint64_t seed, uint64_t i) {
  uint64_t z = seed + i * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
__device__ __forceinline__ double rng_to_unit(uint64_t v) {
  return static_cast<double>(v >> 11) * 0x1.0p-53;
}

// Sum of v over the block (blockDim.x a power of two <= 1024), in a fixed tree order; the
// result is valid in thread 0. `sh` holds blockDim.x values.
template <class T>
__device__ __forceinline__ T block_sum(T v, T* sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  return sh[0];
}

inline cudaStream_t stream_of(CudaExec e) { return reinterpret_cast<cudaStream_t>(e.stream); }

}  // namespace cuda
}  // namespace pdnn
