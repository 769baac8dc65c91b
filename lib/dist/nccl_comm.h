// NcclComm: NCCL for one rank's GPU (CUDA builds only; private to lib/dist). libnccl.so.2 is
// loaded at run time (dlopen), so pdnn's binaries start on hosts without NCCL and only a
// distributed GPU run needs it. Includes no NCCL or CUDA header.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

struct CUstream_st;
struct CUevent_st;

namespace pdnn {

class NcclComm {
 public:
  // Opens the communicator of `size` ranks on the current GPU: rank 0 makes the unique id and
  // bcast (MPI_Bcast from rank 0 in the caller) carries its bytes to every rank; then
  // ncclCommInitRank. Throws pdnn::Error in one line when libnccl.so.2 cannot be loaded.
  NcclComm(int rank, int size, const std::function<void(void*, size_t)>& bcast);
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  std::string version() const;  // "NCCL 2.28.9"
  // v = sum over ranks, in place, on `stream` (asynchronous).
  void sum(float* v, int64_t n, CUstream_st* stream);
  // Overlap with compute (grad_sync.h): the sum runs on NCCL's own high-priority stream after
  // the work queued on `compute` so far (an event joins them), while `compute` goes on.
  void sum_after(float* v, int64_t n, CUstream_st* compute);
  // `compute` waits (on the device, the host does not block) for every sum_after so far.
  void join(CUstream_st* compute);
  // Ends the communicator without waiting for peers (a dead rank): ncclCommAbort.
  void abort() noexcept;

 private:
  struct Api;
  std::unique_ptr<Api> api_;
  void* comm_ = nullptr;        // ncclComm_t
  CUstream_st* stream_ = nullptr;
  std::vector<CUevent_st*> events_;  // one per sum_after of a step, reused
  size_t next_event_ = 0;
  CUevent_st* done_ = nullptr;
};

}  // namespace pdnn
