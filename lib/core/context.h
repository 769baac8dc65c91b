// Context: everything that would otherwise be global. Thread count (one pool: OpenMP and
// OpenBLAS set together), device, seeded RNG, a grow-only workspace, a transfer counter and
// an optional per-layer profiler. Passed explicitly to every op and layer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/device.h"
#include "core/rng.h"

namespace pdnn {

class Profiler;

class Context {
 public:
  // threads <= 0: all cores (omp_get_num_procs).
  explicit Context(int threads = 0, uint64_t seed = 0, Device dev = Device::CPU);
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int threads() const { return threads_; }
  // Sets OpenMP's and OpenBLAS's thread counts to n together.
  void set_threads(int n);
  Device device() const { return device_; }
  Rng& rng() { return rng_; }

  // Scratch memory (im2col columns etc.), 64-byte aligned, valid until the next call.
  // Grows only, so its pages fault once.
  float* workspace(size_t n_floats);
  size_t workspace_size() const { return ws_n_; }

  void count_transfer(size_t bytes) { bytes_moved_ += bytes; }
  uint64_t bytes_moved() const { return bytes_moved_; }

  // The profiler, when one is attached (not owned); nullptr when profiling is off.
  Profiler* profiler() const { return profiler_; }
  void set_profiler(Profiler* p) { profiler_ = p; }

  ~Context();

 private:
  int threads_ = 1;
  Device device_;
  Rng rng_;
  float* ws_ = nullptr;
  size_t ws_n_ = 0;
  uint64_t bytes_moved_ = 0;
  Profiler* profiler_ = nullptr;
};

// Which OpenBLAS kernel set and threading the process runs (for logs and results files).
const char* blas_core_name();
const char* blas_config();

}  // namespace pdnn
