// PDNN_HD: a function both backends compile, the CPU's .cpp files with the host compiler and the
// CUDA kernels with nvcc (ops/kit/: the rounding twins, the fused activation, the argmax rule).
// In a .cpp file it is nothing, so these headers need no CUDA header.
#pragma once

#if defined(__CUDACC__)
#define PDNN_HD __host__ __device__ __forceinline__
#else
#define PDNN_HD inline
#endif
