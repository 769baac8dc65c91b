// Device-side helpers shared by the .cu kernels: grid-stride loops, the splitmix64 counter RNG
// (bit-identical to core/rng.h), block reductions in a fixed order (deterministic sums).
// Included by .cu files only.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/exec.h"
#include "cuda/check.h"

namespace pdnn {
namespace cuda {

constexpr int kThreads = 256;

// Whether p allows vector accesses of `bytes` (16: float4, 8: four bf16); nullptr does. The
// kernels that take vector paths where it holds (casts, max pooling, the bias gradient, the
// optimizers' checks) ask this one question.
inline bool aligned(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

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
// Threads per block of a grid-stride kernel: the caller's choice, else `dflt`.
inline int tpb(CudaExec e, int dflt = kThreads) { return e.threads > 0 ? e.threads : dflt; }

// Division by a divisor fixed for a launch, as a multiply-high, an add and a shift (the
// Granlund-Montgomery method PyTorch's IntDivider uses): a 32-bit '/' is about 20 integer
// instructions, and index-heavy kernels (im2col, col2im) were bound by them. Exact for
// numerators below 2^31.
struct FastDiv {
  uint32_t d = 1, m = 0, s = 0;
  FastDiv() = default;
  __host__ __device__ explicit FastDiv(uint32_t divisor) : d(divisor) {
    for (s = 0; s < 32; ++s)
      if ((1ull << s) >= d) break;
    m = static_cast<uint32_t>(((1ull << 32) * ((1ull << s) - d)) / d + 1);
  }
  __device__ __forceinline__ uint32_t div(uint32_t n) const { return (__umulhi(n, m) + n) >> s; }
};

// A 2-D launch: x over `len` elements of a row (up to 64 blocks of kThreads, looped beyond),
// y over `rows` rows (up to 65535, looped beyond).
inline dim3 grid2d(int64_t len, int64_t rows, int threads = kThreads) {
  const int64_t bx = (len + threads - 1) / threads;
  return dim3(static_cast<unsigned>(bx < 1 ? 1 : bx > 64 ? 64 : bx),
              static_cast<unsigned>(rows < 1 ? 1 : rows > 65535 ? 65535 : rows));
}

}  // namespace cuda
}  // namespace pdnn
