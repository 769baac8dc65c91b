// CudaGraph over cudaStreamBeginCapture / cudaGraphInstantiate / cudaGraphLaunch.
#include "core/cuda_graph.h"

#include <cuda_runtime.h>

#include "cuda/check.h"

namespace pdnn {

CudaGraph::~CudaGraph() { reset(); }

void CudaGraph::reset() {
  if (exec_) cudaGraphExecDestroy(exec_);
  exec_ = nullptr;
}

void CudaGraph::begin_capture(CUstream_st* stream) {
  // Thread-local mode: a cudaMalloc (or other unsafe call) from this thread during capture
  // fails instead of silently escaping the graph.
  PDNN_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
}

void CudaGraph::end_capture(CUstream_st* stream) {
  cudaGraph_t g = nullptr;
  PDNN_CUDA_CHECK(cudaStreamEndCapture(stream, &g));
  reset();
  const cudaError_t e = cudaGraphInstantiate(&exec_, g, 0);
  cudaGraphDestroy(g);
  PDNN_CUDA_CHECK(e);
}

void CudaGraph::abort_capture(CUstream_st* stream) noexcept {
  cudaStreamCaptureStatus st;
  if (cudaStreamIsCapturing(stream, &st) == cudaSuccess && st != cudaStreamCaptureStatusNone) {
    cudaGraph_t g = nullptr;
    cudaStreamEndCapture(stream, &g);
    if (g) cudaGraphDestroy(g);
  }
  cudaGetLastError();
}

void CudaGraph::launch(CUstream_st* stream) {
  PDNN_CUDA_CHECK(cudaGraphLaunch(exec_, stream));
}

}  // namespace pdnn
