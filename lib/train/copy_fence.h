// CopyFence: lets the host refill a batch buffer as soon as the GPU has copied out of it.
#pragma once
#include "core/context.h"
#include "core/cuda_state.h"

namespace pdnn {

// Copies out of host memory are asynchronous (from pinned memory): before the host may refill
// a batch buffer, the copies queued from it must have run. record() marks the stream after the
// copies (on the context's stream, or on the stream they were queued on: the step shell's copy
// stream); wait() (or the destructor, on an error path) waits for that mark only, not for the
// work queued after it.
class CopyFence {
 public:
  CopyFence() = default;
  CopyFence(const CopyFence&) = delete;
  CopyFence& operator=(const CopyFence&) = delete;
  ~CopyFence() {
    try {
      wait();
    } catch (...) {  // already unwinding from the error that matters
    }
  }
  void record(Context& ctx) { record(ctx.cuda().stream()); }
  void record(CUstream_st* stream) { event_ = cuda_event_record(stream); }
  void wait() {
    if (!event_) return;
    CUevent_st* e = event_;
    event_ = nullptr;
    cuda_event_wait(e);
  }

 private:
  CUevent_st* event_ = nullptr;
};

}  // namespace pdnn
