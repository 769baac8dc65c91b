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

inline cudaStream_t stream_of(CudaExec e) { return e.stream; }

// A 2-D launch: x over `len` elements of a row (up to 64 blocks of kThreads, looped beyond),
// y over `rows` rows (up to 65535, looped beyond).
inline dim3 grid2d(int64_t len, int64_t rows) {
  const int64_t bx = (len + kThreads - 1) / kThreads;
  return dim3(static_cast<unsigned>(bx < 1 ? 1 : bx > 64 ? 64 : bx),
              static_cast<unsigned>(rows < 1 ? 1 : rows > 65535 ? 65535 : rows));
}

}  // namespace cuda
}  // namespace pdnn
