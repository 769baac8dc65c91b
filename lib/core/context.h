// Context: everything that would otherwise be global. Thread count (this context's alone: each
// region and BLAS call is handed it in a CpuExec), the device the run computes on with its
// stream, handles and allocators, the seeded RNG (and its mirror on the device), grow-only
// workspaces, transfer counters, an optional per-layer profiler (core/profile_hook.h) and a
// test's fault hook (core/fault_hook.h). Passed explicitly to every op and layer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/device.h"
#include "core/exec.h"
#include "core/precision.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "core/tuning.h"

namespace pdnn {

class FaultHook;
class ProfileHook;
class CudaState;

// Bytes and copies that crossed between host and device (Tensor::to, copy_into).
struct TransferStats {
  uint64_t h2d_bytes = 0, d2h_bytes = 0, h2d_copies = 0, d2h_copies = 0;
};

class Context {
 public:
  // threads <= 0: all cores (omp_get_num_procs). dev == CUDA opens GPU `gpu` (a
  // data-parallel rank's local rank; 0 otherwise) and throws pdnn::Error at once, in one line,
  // when the build has no CUDA or there is no such device.
  explicit Context(int threads = 0, uint64_t seed = 0, Device dev = Device::CPU, int gpu = 0);
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context();

  int threads() const { return threads_; }
  // Threads of this context's CPU work (cpu_exec()); n <= 0: all cores.
  void set_threads(int n);
  // The device this run computes on (where models and batches are put).
  Device device() const { return device_; }
  Rng& rng() { return rng_; }

  // The arithmetic the run asked for (core/precision.h; fp32 by default). On a GPU, TF32 also
  // sets cuBLAS's math mode and CudaExec::tf32; bf16 is a tensor's type (the ops dispatch on
  // it), so the context carries the choice for Sequential, which casts at its edges.
  Precision precision() const { return precision_; }
  void set_precision(Precision p);
  // --conv-transforms: fp32 convolutions on the GPU may use cuDNN's FFT and Winograd
  // algorithms, as PyTorch's fp32 does (off: sums only, the stricter rounding; TF32 and bf16
  // keep their own rules whatever this says: ops/conv/conv2d_cudnn.cu).
  bool conv_transforms() const { return conv_transforms_; }
  void set_conv_transforms(bool on) { conv_transforms_ = on; }

  CpuExec cpu_exec() const { return CpuExec{threads_}; }
  CudaExec cuda_exec() const;
  // The GPU state; pdnn::Error when this context has none.
  CudaState& cuda() const;
  bool has_cuda() const { return cuda_ != nullptr; }

  // Memory for tensors on `dev` (CUDA: the caching allocator).
  std::shared_ptr<Allocator> allocator(Device dev) const;
  // Host memory for data on its way to device(): pinned when that is a GPU.
  std::shared_ptr<Allocator> staging_allocator() const;

  // Scratch memory on `dev` (im2col columns etc.), valid until the next call for that device.
  // Grows only, so a training loop allocates once; size it before capturing a CUDA graph.
  // Past the limit set for the device (a memory plan's workspace budget) it throws pdnn::Error
  // instead of growing: the GPU convolutions' choice then leaves that algorithm out.
  float* workspace(Device dev, size_t n_floats);
  float* workspace(size_t n_floats) { return workspace(Device::CPU, n_floats); }
  size_t workspace_size(Device dev = Device::CPU) const;
  // 0: no limit.
  void set_workspace_limit(Device dev, size_t n_floats) { ws_limit_[dev == Device::CPU ? 0 : 1] = n_floats; }
  size_t workspace_limit(Device dev) const { return ws_limit_[dev == Device::CPU ? 0 : 1]; }
  // The most floats asked of workspace(dev) outside a timing (WorkspaceTiming below): what the
  // work itself needs, where a timing of candidates asks more (the GPU convolutions' chooser
  // runs every algorithm the free memory holds, and the workspace only grows).
  size_t workspace_needed(Device dev) const { return ws_needed_[dev == Device::CPU ? 0 : 1]; }
  // Gives back what the workspace holds beyond workspace_needed(dev): a new block of that size,
  // the allocator's cached blocks given back to the system first (Allocator::trim: its peaks
  // start again) so that the old block does not serve it (its address changes; a CUDA graph
  // that held the old one is captured again). Returns the bytes given back (0 when it held no
  // more).
  size_t fit_workspace(Device dev);

  // What memory allocated now is for ("activation of layer 3 (Conv2d...)", the innermost
  // first, "..., in" the outer ones; empty: not said): an allocation that fails says so
  // (Tensor::empty, Tensor::resize, Tensor::to). Set through MemoryRole.
  std::string memory_role() const;

  // GPU work of the ops called from now on goes to `stream` (nullptr: the context's own). For
  // ops without cuBLAS (an optimizer's update beside the compute stream, ordered by events).
  void set_work_stream(CUstream_st* stream) { work_stream_ = stream; }

  void count_transfer(Device dst, Device src, size_t bytes);
  const TransferStats& transfers() const { return transfers_; }
  uint64_t bytes_moved() const { return transfers_.h2d_bytes + transfers_.d2h_bytes; }
  // The device allocator's counters (zeros without CUDA).
  AllocStats device_alloc_stats() const;

  // The RNG position on the device, (1) int64, for kernels that draw counter-based random
  // numbers inside a CUDA graph (dropout). Uploaded from rng() when the host has moved it
  // (seeding, resume). An op whose kernel draws n values from it then adds n to it with a
  // kernel (ops::counter_add) and calls mirror_rng_advance(n), so host and device stay equal.
  Tensor& device_rng_counter();
  // Moves rng() and the known device position by n (the device's own kernel did the rest; also
  // the host side of a replayed CUDA graph).
  void mirror_rng_advance(uint64_t n);
  // Sets rng()'s position and what the device copy is known to hold, without a copy: for
  // undoing the host side of a CUDA graph capture, whose kernels did not run.
  void rewind_rng(uint64_t counter);

  // Waits for all work queued on the device (no-op on the CPU).
  void synchronize();

  // The per-layer profiler, when one is attached (not owned); nullptr when profiling is off.
  ProfileHook* profile_hook() const { return profile_hook_; }
  void set_profile_hook(ProfileHook* p) { profile_hook_ = p; }

  // The test's fault injection (core/fault_hook.h), when one is installed (not owned).
  FaultHook* fault_hook() const { return fault_hook_; }
  void set_fault_hook(FaultHook* f) { fault_hook_ = f; }

  // Per-shape algorithm choices of the ops that pick one by timing (GPU convolutions), with
  // the policy (--conv-algo) and the cache file that keeps them across runs.
  Tuning& tuning() { return tuning_; }

 private:
  int threads_ = 1;
  Precision precision_ = Precision::Fp32;
  bool conv_transforms_ = false;
  Device device_;
  Rng rng_;
  std::unique_ptr<CudaState, void (*)(CudaState*)> cuda_;
  Tensor ws_[2];  // per device: grow-only scratch
  size_t ws_limit_[2] = {0, 0};
  size_t ws_needed_[2] = {0, 0};
  int timing_ = 0;  // WorkspaceTiming scopes open
  friend class WorkspaceTiming;
  std::vector<std::function<std::string()>> roles_;  // outermost first
  CUstream_st* work_stream_ = nullptr;
  friend class MemoryRole;
  TransferStats transfers_;
  Tensor rng_dev_;                  // (1) int64 on the GPU
  uint64_t rng_dev_counter_ = 0;    // what rng_dev_ holds
  uint64_t rng_dev_seed_ = 0;       // the seed it was uploaded for
  bool rng_dev_valid_ = false;
  ProfileHook* profile_hook_ = nullptr;
  FaultHook* fault_hook_ = nullptr;
  Tuning tuning_;
};

// While one is open, what the context's workspace is asked for does not count as needed
// (Context::workspace_needed): the timing of candidates that may not be chosen.
class WorkspaceTiming {
 public:
  explicit WorkspaceTiming(Context& ctx) : ctx_(ctx) { ++ctx_.timing_; }
  ~WorkspaceTiming() { --ctx_.timing_; }
  WorkspaceTiming(const WorkspaceTiming&) = delete;
  WorkspaceTiming& operator=(const WorkspaceTiming&) = delete;

 private:
  Context& ctx_;
};

// Names what the allocations made while it lives are for (Context::memory_role); nests: "the
// shared workspace, in layer 2 (Conv2d(...)) backward". The name is made only when an
// allocation fails (a step's every layer sets one).
class MemoryRole {
 public:
  MemoryRole(Context& ctx, std::string role) : ctx_(ctx) {
    ctx.roles_.push_back([r = std::move(role)] { return r; });
  }
  MemoryRole(Context& ctx, std::function<std::string()> role) : ctx_(ctx) {
    ctx.roles_.push_back(std::move(role));
  }
  ~MemoryRole() { ctx_.roles_.pop_back(); }
  MemoryRole(const MemoryRole&) = delete;
  MemoryRole& operator=(const MemoryRole&) = delete;

 private:
  Context& ctx_;
};

// Which OpenBLAS kernel set and threading the process runs (for logs and results files).
const char* blas_core_name();
const char* blas_config();

}  // namespace pdnn
