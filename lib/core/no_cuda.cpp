// What a build without CUDA answers when asked for the GPU: one clear line, never a crash.
// (CUDA builds get the real functions from lib/cuda/.)
#if !PDNN_HAVE_CUDA
#include <string>

#include "core/error.h"
#include "core/cuda_state.h"
#include "core/cuda_graph.h"

namespace pdnn {

bool cuda_usable(std::string* why) {
  if (why)
    *why = "this pdnn was built without CUDA (no nvcc was found when it was configured; "
           "install the CUDA toolkit and rebuild, or configure with -DPDNN_CUDA=ON to require it)";
  return false;
}

int cuda_device_count() { return 0; }

void cuda_copy(void*, Device, const void*, Device, size_t, CUstream_st*, bool) {
  PDNN_FAIL("copy to or from a GPU: this pdnn was built without CUDA");
}

void cuda_zero(void*, size_t, CUstream_st*) {
  PDNN_FAIL("zeroing GPU memory: this pdnn was built without CUDA");
}

CUevent_st* cuda_event_record(CUstream_st*) {
  PDNN_FAIL("GPU timing: this pdnn was built without CUDA");
}

double cuda_event_elapsed_ms(CUevent_st*, CUevent_st*) {
  PDNN_FAIL("GPU timing: this pdnn was built without CUDA");
}

void cuda_event_wait(CUevent_st*) { PDNN_FAIL("GPU events: this pdnn was built without CUDA"); }

bool cuda_stream_capturing(CUstream_st*) { return false; }
void cuda_delay(CUstream_st*, int) {}
std::string cudnn_status() { return "cuDNN: not used (this pdnn was built without CUDA)"; }

CUstream_st* cuda_stream_create() { PDNN_FAIL("GPU streams: this pdnn was built without CUDA"); }
void cuda_stream_destroy(CUstream_st*) {}
CUevent_st* cuda_event_create() { PDNN_FAIL("GPU events: this pdnn was built without CUDA"); }
void cuda_event_destroy(CUevent_st*) {}
void cuda_event_record_on(CUevent_st*, CUstream_st*) {
  PDNN_FAIL("GPU events: this pdnn was built without CUDA");
}
void cuda_stream_wait_event(CUstream_st*, CUevent_st*) {
  PDNN_FAIL("GPU events: this pdnn was built without CUDA");
}
void cuda_launch_host_func(CUstream_st*, void (*)(void*), void*) {
  PDNN_FAIL("GPU streams: this pdnn was built without CUDA");
}

// A CPU build never makes a CudaState (Context refuses Device::CUDA first); these exist so code
// that asks a context for its GPU links, and fail loudly if ever reached.
std::string CudaDeviceInfo::str() const { return "no GPU (built without CUDA)"; }
CudaState::CudaState(int) { PDNN_FAIL("GPU: this pdnn was built without CUDA"); }
CudaState::~CudaState() = default;
void CudaState::set_tf32(bool) { PDNN_FAIL("GPU: this pdnn was built without CUDA"); }
void CudaState::synchronize() { PDNN_FAIL("GPU: this pdnn was built without CUDA"); }
size_t CudaState::free_memory() const { PDNN_FAIL("GPU: this pdnn was built without CUDA"); }
size_t CudaState::context_bytes(bool) { return 0; }
size_t CudaState::cublas_workspace_bytes() { return 0; }
void* CudaState::cudnn() { return nullptr; }

CudaGraph::~CudaGraph() = default;
void CudaGraph::reset() {}
void CudaGraph::begin_capture(CUstream_st*) { PDNN_FAIL("CUDA graphs: this pdnn was built without CUDA"); }
void CudaGraph::end_capture(CUstream_st*) { PDNN_FAIL("CUDA graphs: this pdnn was built without CUDA"); }
void CudaGraph::abort_capture(CUstream_st*) noexcept {}
void CudaGraph::launch(CUstream_st*) { PDNN_FAIL("CUDA graphs: this pdnn was built without CUDA"); }

}  // namespace pdnn
#endif
