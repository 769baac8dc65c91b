// The execution argument every kernel takes last: threads on the CPU, a stream on the GPU.
// CUstream_st is CUDA's opaque stream type (cudaStream_t == CUstream_st*), declared here so
// CPU headers stay free of CUDA headers.
#pragma once
struct CUstream_st;
namespace pdnn {
struct CpuExec { int threads = 1; };
struct CudaExec { CUstream_st* stream = nullptr; };
}  // namespace pdnn
