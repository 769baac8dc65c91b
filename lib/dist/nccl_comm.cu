// NcclComm (nccl_comm.h): NCCL through dlopen, its stream and the events that join it to the
// compute stream. nccl.h is used for its types only; every function comes from dlsym.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include "core/error.h"
#include "cuda/check.h"
#include "dist/nccl_comm.h"

#if PDNN_HAVE_NCCL
#include <nccl.h>
#endif

namespace pdnn {

#if PDNN_HAVE_NCCL

struct NcclComm::Api {
  void* lib = nullptr;
  ncclResult_t (*get_version)(int*) = nullptr;
  ncclResult_t (*get_unique_id)(ncclUniqueId*) = nullptr;
  ncclResult_t (*comm_init_rank)(ncclComm_t*, int, ncclUniqueId, int) = nullptr;
  ncclResult_t (*all_reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                             cudaStream_t) = nullptr;
  ncclResult_t (*comm_destroy)(ncclComm_t) = nullptr;
  ncclResult_t (*comm_abort)(ncclComm_t) = nullptr;
  const char* (*error_string)(ncclResult_t) = nullptr;

  // No dlclose: NCCL's helper threads and thread-local destructors outlive ncclCommDestroy, and
  // with the library unloaded under them a rank crashed at exit (SIGSEGV at an unmapped
  // address, after all its work had passed, on a pair of H200s). RTLD_NODELETE below says so to
  // the loader as well.
  void check(ncclResult_t r, const char* what) const {
    if (r != ncclSuccess)
      PDNN_FAIL("NCCL: %s failed: %s (set NCCL_DEBUG=WARN for NCCL's own account)", what,
                error_string ? error_string(r) : "?");
  }
};

namespace {

// Where libnccl.so.2 is looked for: PDNN_NCCL_LIBRARY, the loader's path (LD_LIBRARY_PATH:
// the GPU bundle's env.sh adds the host's CUDA lib64), then the CUDA toolkit's own folders.
void* open_nccl(std::string* tried) {
  std::vector<std::string> names;
  if (const char* p = std::getenv("PDNN_NCCL_LIBRARY")) names.push_back(p);
  names.insert(names.end(), {"libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2",
                             "/usr/local/cuda/targets/x86_64-linux/lib/libnccl.so.2",
                             "/usr/local/cuda/lib/libnccl.so.2"});
  for (const std::string& n : names) {
    if (void* h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE)) return h;
    *tried += (tried->empty() ? "" : ", ") + n;
  }
  return nullptr;
}

template <class F>
void load(void* lib, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  PDNN_CHECK(f != nullptr, "NCCL: the loaded libnccl has no %s (NCCL 2.x needed)", name);
}

}  // namespace

NcclComm::NcclComm(int rank, int size, const std::function<void(void*, size_t)>& bcast)
    : api_(std::make_unique<Api>()) {
  std::string tried;
  api_->lib = open_nccl(&tried);
  PDNN_CHECK(api_->lib != nullptr,
             "--distributed on the GPU needs NCCL: libnccl.so.2 not found (tried %s; set "
             "PDNN_NCCL_LIBRARY=/path/to/libnccl.so.2, or add its folder to LD_LIBRARY_PATH)",
             tried.c_str());
  load(api_->lib, "ncclGetVersion", api_->get_version);
  load(api_->lib, "ncclGetUniqueId", api_->get_unique_id);
  load(api_->lib, "ncclCommInitRank", api_->comm_init_rank);
  load(api_->lib, "ncclAllReduce", api_->all_reduce);
  load(api_->lib, "ncclCommDestroy", api_->comm_destroy);
  load(api_->lib, "ncclCommAbort", api_->comm_abort);
  load(api_->lib, "ncclGetErrorString", api_->error_string);
  // NVLink multicast (NVLS) reserves GPU memory for buffers a single-node data-parallel run
  // gains nothing measurable from, and the lent multi-GPU hosts forbid it: off unless the
  // user asks for it.
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  ncclUniqueId id{};
  if (rank == 0) api_->check(api_->get_unique_id(&id), "ncclGetUniqueId");
  bcast(&id, sizeof id);
  ncclComm_t c = nullptr;
  api_->check(api_->comm_init_rank(&c, size, id, rank), "ncclCommInitRank");
  comm_ = c;
  int lo = 0, hi = 0;
  PDNN_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  cudaStream_t s = nullptr;
  PDNN_CUDA_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, hi));
  stream_ = s;
  cudaEvent_t e = nullptr;
  PDNN_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  done_ = e;
}

NcclComm::~NcclComm() {
  if (comm_) api_->comm_destroy(static_cast<ncclComm_t>(comm_));
  for (CUevent_st* e : events_) cudaEventDestroy(e);
  if (done_) cudaEventDestroy(done_);
  if (stream_) cudaStreamDestroy(stream_);
}

std::string NcclComm::version() const {
  int v = 0;
  api_->get_version(&v);
  // NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
  return strprintf("NCCL %d.%d.%d", v / 10000, (v % 10000) / 100, v % 100);
}

void NcclComm::sum(float* v, int64_t n, CUstream_st* stream) {
  api_->check(api_->all_reduce(v, v, static_cast<size_t>(n), ncclFloat32, ncclSum,
                               static_cast<ncclComm_t>(comm_), stream),
              "ncclAllReduce");
}

void NcclComm::sum_after(float* v, int64_t n, CUstream_st* compute) {
  if (next_event_ == events_.size()) {
    cudaEvent_t e = nullptr;
    PDNN_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    events_.push_back(e);
  }
  CUevent_st* e = events_[next_event_++];
  // Event record and wait are legal inside a CUDA graph capture (they become the graph's
  // edges between the two streams), so an overlapped step is still one graph.
  PDNN_CUDA_CHECK(cudaEventRecord(e, compute));
  PDNN_CUDA_CHECK(cudaStreamWaitEvent(stream_, e, 0));
  sum(v, n, stream_);
}

void NcclComm::join(CUstream_st* compute) {
  if (next_event_ == 0) return;
  PDNN_CUDA_CHECK(cudaEventRecord(done_, stream_));
  PDNN_CUDA_CHECK(cudaStreamWaitEvent(compute, done_, 0));
  next_event_ = 0;
}

void NcclComm::abort() noexcept {
  if (comm_) api_->comm_abort(static_cast<ncclComm_t>(comm_));
  comm_ = nullptr;
}

#else  // CUDA build whose toolkit has no nccl.h

struct NcclComm::Api {};
NcclComm::NcclComm(int, int, const std::function<void(void*, size_t)>&) {
  PDNN_FAIL("--distributed on the GPU needs NCCL: this pdnn was built without nccl.h (install "
            "NCCL's development files and rebuild)");
}
NcclComm::~NcclComm() = default;
std::string NcclComm::version() const { return ""; }
void NcclComm::sum(float*, int64_t, CUstream_st*) {}
void NcclComm::sum_after(float*, int64_t, CUstream_st*) {}
void NcclComm::join(CUstream_st*) {}
void NcclComm::abort() noexcept {}

#endif

}  // namespace pdnn
