// cuda_probe.h: asks the CUDA runtime, in CUDA builds only.
#include "bench/cuda_probe.h"

#ifdef PDNN_HAVE_CUDA
#include <cuda_runtime.h>

#include "core/error.h"
#endif

namespace pdnn {

std::string cuda_unavailable_reason() {
#ifndef PDNN_HAVE_CUDA
  return "this binary was built without CUDA (CMake found no nvcc, or PDNN_CUDA=OFF)";
#else
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) return std::string("no usable CUDA device: ") + cudaGetErrorString(err);
  if (count == 0) return "no CUDA device on this machine";
  return "";
#endif
}

std::string cuda_device_name() {
#ifdef PDNN_HAVE_CUDA
  if (!cuda_unavailable_reason().empty()) return "";
  int dev = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) return "";
  return strprintf("%s, %d SMs", prop.name, prop.multiProcessorCount);
#else
  return "";
#endif
}

}  // namespace pdnn
