// CUDA and cuBLAS checks for .cu/.cpp files of CUDA builds: every runtime call and every launch
// is checked, and a failure becomes a pdnn::Error with file:line, the call and CUDA's own
// error string. Launch helpers: block counts for grid-stride loops.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/error.h"

namespace pdnn {
const char* cublas_status_name(cublasStatus_t s);
}  // namespace pdnn

#define PDNN_CUDA_CHECK(expr)                                                                  \
  do {                                                                                         \
    const cudaError_t pdnn_e_ = (expr);                                                        \
    if (pdnn_e_ != cudaSuccess)                                                                \
      ::pdnn::throw_error(__FILE__, __LINE__,                                                  \
                          ::pdnn::strprintf("CUDA error %s (%s) in %s", cudaGetErrorString(pdnn_e_), \
                                            cudaGetErrorName(pdnn_e_), #expr));                \
  } while (0)

// After a kernel launch: a bad configuration shows up here; faults inside the kernel surface at
// the next synchronising call, which is checked too.
#define PDNN_CUDA_LAUNCH_CHECK(name) PDNN_CUDA_CHECK(cudaGetLastError())

#define PDNN_CUBLAS_CHECK(expr)                                                               \
  do {                                                                                        \
    const cublasStatus_t pdnn_s_ = (expr);                                                    \
    if (pdnn_s_ != CUBLAS_STATUS_SUCCESS)                                                     \
      ::pdnn::throw_error(__FILE__, __LINE__,                                                 \
                          ::pdnn::strprintf("cuBLAS error %s in %s",                          \
                                            ::pdnn::cublas_status_name(pdnn_s_), #expr));     \
  } while (0)

namespace pdnn {
namespace cuda {

// Blocks of `threads` for a grid-stride loop over n elements: enough to fill the GPU several
// times over, capped so huge tensors loop instead of launching millions of blocks.
inline unsigned blocks_for(int64_t n, int threads = 256) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : b > 65535 * 8 ? 65535 * 8 : b);
}

}  // namespace cuda
}  // namespace pdnn
