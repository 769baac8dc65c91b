// The CUDA side of a Context: the device, its stream, the cuBLAS handle, the caching and pinned
// allocators, the device's description. This header includes no CUDA header (CUDA's handle
// types are forward-declared), so CPU code may name these types; the definitions are compiled
// only in CUDA builds (PDNN_HAVE_CUDA), and a CPU build never constructs a CudaState.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "core/allocator.h"
#include "core/device.h"
#include "core/exec.h"

struct cublasContext;  // cublasHandle_t == cublasContext*
struct CUevent_st;     // cudaEvent_t == CUevent_st*

namespace pdnn {

// What the run header and CSV rows say about the GPU.
struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  size_t total_memory = 0;  // bytes
  int cc_major = 0, cc_minor = 0, sm_count = 0;
  int driver_version = 0, runtime_version = 0;  // e.g. 13000
  // "NVIDIA H100 80GB HBM3, 79.2 GiB, cc 9.0, 132 SMs, driver 13.0, runtime 13.0"
  std::string str() const;
};

// The multiprocessors of the GPU a description of GPU work made without one assumes (a memory
// plan made on the CPU: the convolutions' split weight gradients size their workspace by them):
// an H100 SXM's; an H200 has as many.
constexpr int kPlanGpuSms = 132;

class CudaState {
 public:
  // Opens device `index`; throws pdnn::Error saying why it cannot (no device, driver too old).
  explicit CudaState(int index = 0);
  ~CudaState();
  CudaState(const CudaState&) = delete;
  CudaState& operator=(const CudaState&) = delete;

  CUstream_st* stream() const { return stream_; }
  cublasContext* cublas() const { return cublas_; }
  // Device memory: the caching allocator (no cudaMalloc once a training loop has warmed up).
  const std::shared_ptr<Allocator>& allocator() const { return alloc_; }
  // Page-locked host memory, for batches copied to the device asynchronously.
  const std::shared_ptr<Allocator>& pinned() const { return pinned_; }
  const CudaDeviceInfo& info() const { return info_; }
  // TF32 tensor-core math for cuBLAS's fp32 GEMMs (off by default: plain fp32). Set through
  // Context::set_precision, which the kernels' CudaExec::tf32 follows too.
  void set_tf32(bool on);
  bool tf32() const { return tf32_; }
  void synchronize();
  // Bytes of device memory free right now (cudaMemGetInfo).
  size_t free_memory() const;
  // The device memory this process holds outside pdnn's allocator: the CUDA context (driver
  // state, kernel images), cuBLAS's and cuDNN's handles. Measured at the first call (the
  // device's used bytes less what the allocator holds), then the same; a memory plan counts
  // it. Kernel images load at their first launch (lazy loading), so the first call comes
  // after one warm-up launch of each kind the step uses if it is to see them; again = true
  // measures anew (what loaded since).
  size_t context_bytes(bool again = false);
  // cuBLAS's workspace (from the allocator, given once at start-up): kCublasWorkspaceBytes on a
  // CUDA build, 0 without one. A plan made on the CPU for a GPU (--plan-context) counts the
  // constant.
  static constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;
  static size_t cublas_workspace_bytes();
  // cuDNN on this stream (a cuda::CudnnContext: handle and per-shape picks), made at the first
  // call; nullptr when cuDNN is not found (lib/cuda/cudnn.h: opened at run time, optional).
  void* cudnn();
  void* cudnn_if_open() const { return cudnn_; }

 private:
  CudaDeviceInfo info_;
  CUstream_st* stream_ = nullptr;
  cublasContext* cublas_ = nullptr;
  void* cublas_ws_ = nullptr;  // cuBLAS's workspace, set once so graph capture never allocates
  void* cudnn_ = nullptr;
  bool cudnn_tried_ = false;
  std::shared_ptr<Allocator> alloc_, pinned_;
  bool tf32_ = false;
  size_t context_bytes_ = 0;
  bool context_measured_ = false;
};

// Whether this build has CUDA and a device is present; *why (when given) says why not in one
// line ("this pdnn was built without CUDA ...", "no CUDA device: ...").
bool cuda_usable(std::string* why = nullptr);
// The number of CUDA devices (0 without CUDA or a driver).
int cuda_device_count();

// The raw copy behind Tensor::to/copy_into: bytes from src (on src_dev) to dst (on dst_dev),
// on `stream`; waits for it when `wait`.
void cuda_copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes,
               CUstream_st* stream, bool wait);

// Sets `bytes` of device memory at dst to zero, on `stream` (no wait).
void cuda_zero(void* dst, size_t bytes, CUstream_st* stream);

// Timing with events on a stream (the profiler's time_mark/ms_since on the GPU).
CUevent_st* cuda_event_record(CUstream_st* stream);
// Milliseconds between two recorded events (waits for `end`); destroys both.
double cuda_event_elapsed_ms(CUevent_st* start, CUevent_st* end);
// Waits until the work queued before a recorded event has run (e.g. a copy out of a host
// buffer the caller wants to refill); destroys the event.
void cuda_event_wait(CUevent_st* event);
// Holds `stream` busy for about `microseconds` (a spinning one-thread kernel): timing a piece of
// work right after it measures the GPU's time alone, since the host queues the whole piece
// while the stream waits (otherwise a piece of many small launches is timed with the host's
// gaps between them, which a CUDA graph replay does not have).
void cuda_delay(CUstream_st* stream, int microseconds);
// Whether `stream` is being captured into a CUDA graph (work queued now is recorded, not run).
bool cuda_stream_capturing(CUstream_st* stream);
// "cuDNN 9.19.0 (path)" or "cuDNN: not found (...)", for run headers (cuDNN is optional,
// opened at run time).
std::string cudnn_status();

// Ordering work between two streams without the host waiting (a memory plan's copies beside
// its compute, Model::set_placements): a non-blocking stream on the current device, and
// reusable events without timing. Waits and records are capturable: a stream that waits on an
// event recorded on a captured stream joins the capture.
CUstream_st* cuda_stream_create();
void cuda_stream_destroy(CUstream_st* stream);
CUevent_st* cuda_event_create();
void cuda_event_destroy(CUevent_st* event);
// Records `event` on `stream` (it completes when the work queued there before it has run).
void cuda_event_record_on(CUevent_st* event, CUstream_st* stream);
// Work queued on `stream` from now on waits until `event` completes.
void cuda_stream_wait_event(CUstream_st* stream, CUevent_st* event);
// Queues fn(arg) on `stream`: a host thread of the driver runs it once the work queued before
// has run, and the stream's later work waits for it (cudaLaunchHostFunc; capturable: a host
// node of a CUDA graph). fn must not call CUDA and must not throw.
void cuda_launch_host_func(CUstream_st* stream, void (*fn)(void*), void* arg);

}  // namespace pdnn
