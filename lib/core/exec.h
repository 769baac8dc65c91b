// The execution argument every kernel takes last: threads on the CPU; a stream (and the cuBLAS
// handle bound to it) on the GPU. CUstream_st and cublasContext are CUDA's opaque types
// (cudaStream_t == CUstream_st*, cublasHandle_t == cublasContext*), declared here so CPU
// headers stay free of CUDA headers.
#pragma once
#include <cstddef>

struct CUstream_st;
struct cublasContext;
namespace pdnn {
struct CpuExec { int threads = 1; };
// threads: threads per block for the grid-stride kernels (0: each kernel's default, chosen by
// measurement: apps/bench_kernels); reductions keep their own fixed block sizes. tf32: matrix
// products may round their inputs to TF32 and run on the tensor cores (--tf32; cuBLAS's handle
// is set the same way). transforms: fp32 convolutions may also use cuDNN's FFT and Winograd
// algorithms (--conv-transforms; TF32 always may, see ops/conv/conv2d_cudnn.cu).
struct CudaExec {
  CUstream_st* stream = nullptr;
  cublasContext* blas = nullptr;
  int threads = 0;
  bool tf32 = false;
  void* cudnn = nullptr;  // a cuda::CudnnContext, when cuDNN was opened (cuda/cudnn.h)
  // The shared workspace's limit (a memory plan's budget; 0: none): cuDNN picks its own
  // algorithms among those that fit it (ops/conv/conv2d_cudnn.cu).
  size_t workspace_limit_bytes = 0;
  bool transforms = false;
};
}  // namespace pdnn
