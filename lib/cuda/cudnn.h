// cuDNN, opened at run time (dlopen, as lib/dist opens NCCL) so that it is one more
// convolution algorithm to measure against, never a requirement: a build without cudnn.h, or a
// machine without libcudnn.so.9, works unchanged and says "cuDNN: not found". Only the legacy
// convolution entry points pdnn calls are resolved (lib/ops/conv/conv2d_cudnn.cu). The table is
// loaded once per process, like any shared library; the handles live in each CudaState.
#pragma once
#include <map>
#include <string>

#if __has_include(<cudnn.h>)
#include <cudnn.h>
#define PDNN_CUDNN_HEADER 1
#else
#define PDNN_CUDNN_HEADER 0
#endif

namespace pdnn {
namespace cuda {

#if PDNN_CUDNN_HEADER
struct CudnnApi {
  size_t version = 0;  // cudnnGetVersion(): 91900 for 9.19.0
  std::string path;    // what dlopen found
  decltype(&cudnnGetErrorString) error_string = nullptr;
  decltype(&cudnnCreate) create = nullptr;
  decltype(&cudnnDestroy) destroy = nullptr;
  decltype(&cudnnSetStream) set_stream = nullptr;
  decltype(&cudnnCreateTensorDescriptor) create_tensor = nullptr;
  decltype(&cudnnSetTensor4dDescriptor) set_tensor = nullptr;
  decltype(&cudnnDestroyTensorDescriptor) destroy_tensor = nullptr;
  decltype(&cudnnCreateFilterDescriptor) create_filter = nullptr;
  decltype(&cudnnSetFilter4dDescriptor) set_filter = nullptr;
  decltype(&cudnnDestroyFilterDescriptor) destroy_filter = nullptr;
  decltype(&cudnnCreateConvolutionDescriptor) create_conv = nullptr;
  decltype(&cudnnSetConvolution2dDescriptor) set_conv = nullptr;
  decltype(&cudnnSetConvolutionMathType) set_math = nullptr;
  decltype(&cudnnDestroyConvolutionDescriptor) destroy_conv = nullptr;
  // cuDNN's own timing of every algorithm for a shape (buffers of its own; once per shape)
  decltype(&cudnnFindConvolutionForwardAlgorithm) fwd_algos = nullptr;
  decltype(&cudnnFindConvolutionBackwardDataAlgorithm) bwd_data_algos = nullptr;
  decltype(&cudnnFindConvolutionBackwardFilterAlgorithm) bwd_filter_algos = nullptr;
  // ... in the caller's buffers and workspace (under a memory plan: nothing outside it)
  decltype(&cudnnFindConvolutionForwardAlgorithmEx) fwd_algos_ex = nullptr;
  decltype(&cudnnFindConvolutionBackwardDataAlgorithmEx) bwd_data_algos_ex = nullptr;
  decltype(&cudnnFindConvolutionBackwardFilterAlgorithmEx) bwd_filter_algos_ex = nullptr;
  // ... cuDNN's heuristic list, with each algorithm's workspace (nothing allocated or timed)
  decltype(&cudnnGetConvolutionForwardAlgorithm_v7) fwd_heuristics = nullptr;
  decltype(&cudnnGetConvolutionBackwardDataAlgorithm_v7) bwd_data_heuristics = nullptr;
  decltype(&cudnnGetConvolutionBackwardFilterAlgorithm_v7) bwd_filter_heuristics = nullptr;
  decltype(&cudnnGetConvolutionForwardWorkspaceSize) fwd_ws = nullptr;
  decltype(&cudnnGetConvolutionBackwardDataWorkspaceSize) bwd_data_ws = nullptr;
  decltype(&cudnnGetConvolutionBackwardFilterWorkspaceSize) bwd_filter_ws = nullptr;
  decltype(&cudnnConvolutionForward) forward = nullptr;
  decltype(&cudnnConvolutionBackwardData) backward_data = nullptr;
  decltype(&cudnnConvolutionBackwardFilter) backward_filter = nullptr;

  // Throws pdnn::Error naming the call and cuDNN's message unless s is success.
  void check(cudnnStatus_t s, const char* what) const;
};

// A context's cuDNN: its handle on the context's stream, and the algorithm picked per
// convolution shape and pass (the heuristic query costs about a millisecond of host time, so it
// runs once per shape; CudaExec::cudnn points here).
struct CudnnContext {
  cudnnHandle_t handle = nullptr;
  struct Pick {
    int algo = -1;
    int math = 0;    // cudnnMathType_t of the pick
    size_t ws = 0;   // workspace bytes
  };
  std::map<std::string, Pick> picks;
  // The most elements a tensor descriptor may hold (cuDNN's 4-d limit, 2^31 - 1): larger
  // batches run in slices of images (conv2d_cudnn.cu). Tests lower it to cover the slicing.
  int64_t max_tensor_elements = 2147483647;
  // Picks only FFT and Winograd where transforms are allowed (fp32 with --conv-transforms, TF32):
  // tests set it to run those algorithms whatever cuDNN's timing prefers.
  bool transforms_only = false;
};
#else
struct CudnnApi {};
#endif

// The entry points, loaded at the first call; nullptr when cuDNN is not there (*why, when
// given, says what was tried). PDNN_CUDNN_LIBRARY names a library file to try first.
const CudnnApi* cudnn_api(std::string* why = nullptr);

// "cuDNN 9.19.0 (libcudnn.so.9)", or "cuDNN: not found (...)": for run headers.
std::string cudnn_status();

}  // namespace cuda
}  // namespace pdnn
