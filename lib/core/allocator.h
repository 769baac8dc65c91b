// Where Storage gets its memory. One allocator per kind of memory: aligned host memory (here),
// pinned host memory and the CUDA caching allocator (lib/cuda/allocator.cpp, the only file that
// calls cudaMalloc/cudaFree). Storage keeps a shared_ptr to its allocator, so memory is always
// returned to the allocator that gave it, even when the Context that made it is gone.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/device.h"

namespace pdnn {

// The GPU's caching allocator (cuda/allocator.cpp) hands out blocks of a multiple of this, an
// empty tensor one block: what a memory plan counts for a tensor of `bytes`.
constexpr int64_t kDeviceBlockBytes = 512;
constexpr int64_t device_block_bytes(int64_t bytes) {
  return ((bytes > 1 ? bytes : 1) + kDeviceBlockBytes - 1) / kDeviceBlockBytes * kDeviceBlockBytes;
}

// What an allocator has done, for tests and the run header ("after the first step no
// cudaMalloc happens").
struct AllocStats {
  uint64_t allocs = 0, frees = 0;           // allocate() / deallocate() calls
  uint64_t sys_allocs = 0, sys_frees = 0;   // calls into the system (cudaMalloc / cudaFree)
  size_t in_use = 0, peak_in_use = 0;       // bytes handed out now / at most
  // Of in_use, what the callers asked (a cached block handed out may be larger than asked);
  // at in_use's peak. Allocators without a cache: in_use's.
  size_t in_use_asked = 0, peak_in_use_asked = 0;
  size_t reserved = 0;                      // bytes held from the system (in use + cached)
  size_t peak_reserved = 0;                 // ... at most
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual Device device() const = 0;
  virtual const char* name() const = 0;
  // Never returns nullptr: throws pdnn::Error saying how much was asked for and why it failed.
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* p, size_t bytes) noexcept = 0;
  // Whether a block of `bytes` from allocate() always arrives filled with zeros (the host's
  // large blocks: fresh pages from the system), so that a zero tensor need not be written.
  virtual bool fresh_is_zero(size_t bytes) const { (void)bytes; return false; }
  virtual AllocStats stats() const { return {}; }
  // Caps the bytes this allocator holds from the system (--gpu-memory-limit; 0: no cap). An
  // allocation past it fails as running out of memory does, naming the cap. Allocators that
  // cannot cap ignore it.
  virtual void set_limit(size_t bytes) { (void)bytes; }
  // Gives cached (freed) blocks back to the system, so that what is held is what is in use
  // (a memory plan's buffers are then not served from blocks larger than asked), and starts
  // the peaks (AllocStats) again from what is held now. No-op for allocators without a cache.
  virtual void trim() {}
};

// 64-byte aligned host memory (AVX-512 loads never split a cache line). Blocks of 8 MiB and
// more come straight from the system, 2 MiB aligned and advised to use transparent huge pages,
// and are zero when they arrive (allocator.cpp says why). Stateless, shared.
const std::shared_ptr<Allocator>& host_allocator();

}  // namespace pdnn
