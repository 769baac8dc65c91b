// cuda_delay (core/cuda_state.h): a one-thread kernel that holds the stream for a while.
#include "core/cuda_state.h"
#include "cuda/check.h"

namespace pdnn {

namespace {
// Spins on the GPU's nanosecond clock until `ns` have passed since it started.
__global__ void delay_k(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}
}  // namespace

void cuda_delay(CUstream_st* stream, int microseconds) {
  delay_k<<<1, 1, 0, stream>>>(static_cast<unsigned long long>(microseconds) * 1000ull);
  PDNN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace pdnn
