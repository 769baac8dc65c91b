// A CUDA graph of work captured from a context's stream, replayed with one launch (the whole
// training step: forward, loss, backward, update). No CUDA header needed to include this; a
// build without CUDA gets stand-ins that fail loudly.
#pragma once
#include "core/exec.h"

struct CUgraphExec_st;

namespace pdnn {

class CudaGraph {
 public:
  CudaGraph() = default;
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  // Starts recording the stream's work instead of running it. A cudaMalloc on this thread
  // while recording is an error (the caching allocator must be warm: run the work once first).
  void begin_capture(CUstream_st* stream);
  // Stops recording and makes the graph launchable (replacing any earlier one).
  void end_capture(CUstream_st* stream);
  // Abandons a capture after an error (so the stream works again).
  void abort_capture(CUstream_st* stream) noexcept;
  void launch(CUstream_st* stream);
  bool ready() const { return exec_ != nullptr; }
  void reset();

 private:
  CUgraphExec_st* exec_ = nullptr;
};

}  // namespace pdnn
