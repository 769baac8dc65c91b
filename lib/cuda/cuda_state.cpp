// CudaState: device, stream, cuBLAS handle, allocators; the copy and event helpers.
#include "core/cuda_state.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "core/error.h"
#include "cuda/allocator.h"
#include "cuda/check.h"
#include "cuda/cudnn.h"

namespace pdnn {

const char* cublas_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_(unknown)";
  }
}

namespace {
// cuBLAS's workspace, given to it once so that a captured CUDA graph never asks for memory.
constexpr size_t kCublasWorkspace = CudaState::kCublasWorkspaceBytes;

std::string version_str(int v) { return strprintf("%d.%d", v / 1000, (v % 1000) / 10); }
}  // namespace

std::string CudaDeviceInfo::str() const {
  return strprintf("%s, %.1f GiB, cc %d.%d, %d SMs, driver %s, runtime %s", name.c_str(),
                   total_memory / 1073741824.0, cc_major, cc_minor, sm_count,
                   version_str(driver_version).c_str(), version_str(runtime_version).c_str());
}

CudaState::CudaState(int index) {
  PDNN_CUDA_CHECK(cudaSetDevice(index));
  cudaDeviceProp prop;
  PDNN_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  info_.index = index;
  info_.name = prop.name;
  info_.total_memory = prop.totalGlobalMem;
  info_.cc_major = prop.major;
  info_.cc_minor = prop.minor;
  info_.sm_count = prop.multiProcessorCount;
  PDNN_CUDA_CHECK(cudaDriverGetVersion(&info_.driver_version));
  PDNN_CUDA_CHECK(cudaRuntimeGetVersion(&info_.runtime_version));
  PDNN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  alloc_ = make_cuda_caching_allocator(index);
  pinned_ = make_cuda_pinned_allocator();
  PDNN_CUBLAS_CHECK(cublasCreate(&cublas_));
  PDNN_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  cublas_ws_ = alloc_->allocate(kCublasWorkspace);
  PDNN_CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublas_ws_, kCublasWorkspace));
  set_tf32(false);
}

void* CudaState::cudnn() {
  if (!cudnn_tried_) {
    cudnn_tried_ = true;
#if PDNN_CUDNN_HEADER
    if (const cuda::CudnnApi* api = cuda::cudnn_api()) {
      auto* c = new cuda::CudnnContext;
      api->check(api->create(&c->handle), "cudnnCreate");
      api->check(api->set_stream(c->handle, stream_), "cudnnSetStream");
      cudnn_ = c;
    }
#endif
  }
  return cudnn_;
}

CudaState::~CudaState() {
#if PDNN_CUDNN_HEADER
  if (auto* c = static_cast<cuda::CudnnContext*>(cudnn_)) {
    cuda::cudnn_api()->destroy(c->handle);
    delete c;
  }
#endif
  cudaStreamSynchronize(stream_);
  if (cublas_) cublasDestroy(cublas_);
  if (cublas_ws_) alloc_->deallocate(cublas_ws_, kCublasWorkspace);
  if (stream_) cudaStreamDestroy(stream_);
}

void CudaState::set_tf32(bool on) {
  // CUBLAS_DEFAULT_MATH keeps fp32 GEMMs in full fp32; TF32 rounds the inputs to 10 mantissa
  // bits and runs them on the tensor cores (about 8x the fp32 rate on Hopper).
  PDNN_CUBLAS_CHECK(cublasSetMathMode(cublas_, on ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  tf32_ = on;
}

void CudaState::synchronize() { PDNN_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

size_t CudaState::free_memory() const {
  size_t free_b = 0, total_b = 0;
  PDNN_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return free_b;
}

size_t CudaState::cublas_workspace_bytes() { return kCublasWorkspace; }

size_t CudaState::context_bytes(bool again) {
  if (!context_measured_ || again) {
    PDNN_CUDA_CHECK(cudaDeviceSynchronize());
    size_t free_b = 0, total_b = 0;
    PDNN_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    const size_t used = total_b - free_b, ours = alloc_->stats().reserved;
    context_bytes_ = used > ours ? used - ours : 0;
    context_measured_ = true;
  }
  return context_bytes_;
}

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

bool cuda_usable(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (why) *why = strprintf("no usable CUDA device on this machine (%s)", cudaGetErrorString(e));
    return false;
  }
  if (n == 0) {
    if (why) *why = "no CUDA device on this machine";
    return false;
  }
  return true;
}

void cuda_copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes,
               CUstream_st* stream, bool wait) {
  (void)dst_dev;
  (void)src_dev;
  // Unified addressing tells the driver which side each pointer is on.
  PDNN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream));
  if (wait) PDNN_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void cuda_zero(void* dst, size_t bytes, CUstream_st* stream) {
  if (bytes > 0) PDNN_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, stream));
}

CUevent_st* cuda_event_record(CUstream_st* stream) {
  cudaEvent_t e;
  PDNN_CUDA_CHECK(cudaEventCreate(&e));
  PDNN_CUDA_CHECK(cudaEventRecord(e, stream));
  return e;
}

double cuda_event_elapsed_ms(CUevent_st* start, CUevent_st* end) {
  PDNN_CUDA_CHECK(cudaEventSynchronize(end));
  float ms = 0.f;
  PDNN_CUDA_CHECK(cudaEventElapsedTime(&ms, start, end));
  cudaEventDestroy(start);
  cudaEventDestroy(end);
  return ms;
}

void cuda_event_wait(CUevent_st* event) {
  const cudaError_t err = cudaEventSynchronize(event);
  cudaEventDestroy(event);
  PDNN_CUDA_CHECK(err);
}

std::string cudnn_status() { return cuda::cudnn_status(); }

bool cuda_stream_capturing(CUstream_st* stream) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  PDNN_CUDA_CHECK(cudaStreamIsCapturing(stream, &st));
  return st != cudaStreamCaptureStatusNone;
}

CUstream_st* cuda_stream_create() {
  cudaStream_t s = nullptr;
  PDNN_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return s;
}

void cuda_stream_destroy(CUstream_st* stream) {
  if (stream) cudaStreamDestroy(stream);
}

CUevent_st* cuda_event_create() {
  cudaEvent_t e = nullptr;
  PDNN_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

void cuda_event_destroy(CUevent_st* event) {
  if (event) cudaEventDestroy(event);
}

void cuda_event_record_on(CUevent_st* event, CUstream_st* stream) {
  PDNN_CUDA_CHECK(cudaEventRecord(event, stream));
}

void cuda_stream_wait_event(CUstream_st* stream, CUevent_st* event) {
  PDNN_CUDA_CHECK(cudaStreamWaitEvent(stream, event, 0));
}

void cuda_launch_host_func(CUstream_st* stream, void (*fn)(void*), void* arg) {
  PDNN_CUDA_CHECK(cudaLaunchHostFunc(stream, fn, arg));
}

}  // namespace pdnn
