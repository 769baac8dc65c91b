// The CUDA memory allocators, and the only file that calls cudaMalloc/cudaFree (and their
// page-locked host twins).
//
// CachingAllocator (after PyTorch's): freed blocks are kept, keyed by size, and handed out
// again for requests of about the same size, so after the first step of a training loop no
// cudaMalloc or cudaFree happens (cudaMalloc costs 10s-100s of microseconds and synchronises
// the device; and a CUDA graph needs the same addresses every step). One stream per context:
// a block freed while a kernel still uses it is only handed to work queued later on that same
// stream, which runs after it. Out of memory: the cache is released and the allocation retried
// once; then a pdnn::Error says how much was asked for and what is free. A cap
// (--gpu-memory-limit) counts as the device's size: the cache is released before going past
// it, then the allocation fails the same way, naming the cap.
#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <unordered_map>

#include "cuda/allocator.h"
#include "cuda/check.h"

namespace pdnn {

namespace {

constexpr size_t kRound = kDeviceBlockBytes;  // every block a multiple of this (cudaMalloc's: 256)
// Uncapped, a cached block is reused for a request up to 1/8 + 1 MiB smaller: a training loop
// asks the same sizes every step, so its blocks match; a looser bound (2x, as before) let the
// U-Net's buffers kept all step take the larger blocks the algorithms' timing freed, and hold
// 2.3 GiB (1024 px) to 4.8 GiB (2048 px) more than they asked on an H200.
constexpr size_t kSlack = size_t{1} << 20;

class CachingAllocator final : public Allocator {
 public:
  explicit CachingAllocator(int device) : device_(device) {}
  ~CachingAllocator() override {
    cudaSetDevice(device_);
    for (auto& [p, b] : blocks_) cudaFree(p);
  }
  Device device() const override { return Device::CUDA; }
  const char* name() const override { return "cuda-caching"; }

  void* allocate(size_t bytes) override {
    const size_t size = ((bytes > 0 ? bytes : 1) + kRound - 1) / kRound * kRound;
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.allocs;
    // Under a cap a cached block is handed out only at the size asked: a memory plan counts
    // what each buffer asks, and a larger block would hold the difference outside every count
    // (a plan that moves the optimizer state to the host leaves its blocks, 118 MiB each for
    // the U-Net, in the cache for smaller buffers to take). Other cached blocks are given back
    // when the cap is reached, below.
    const size_t most = limit_ > 0 ? size : size + size / 8 + kSlack;
    auto it = free_.lower_bound(size);
    if (it != free_.end() && it->first <= most) {
      void* p = it->second;
      stats_.in_use += it->first;
      hand_out(p, bytes);
      free_.erase(it);
      return p;
    }
    if (limit_ > 0 && stats_.reserved + size > limit_) {
      release_cached();
      if (stats_.reserved + size > limit_)
        PDNN_FAIL("out of GPU memory under --gpu-memory-limit %.1f MiB: asked for %.1f MiB, pdnn "
                  "holds %.1f MiB, %.1f MiB of it in use (see --memory-plan for what the step "
                  "needs; raise the limit, or lower --batch or --size)",
                  limit_ / 1048576.0, size / 1048576.0, stats_.reserved / 1048576.0,
                  stats_.in_use / 1048576.0);
    }
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, size);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear it, give the cache back, try once more
      release_cached();
      e = cudaMalloc(&p, size);
    }
    if (e != cudaSuccess) {
      cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      PDNN_FAIL("out of GPU memory (%s): asked for %.1f MiB; %.1f MiB free of %.1f MiB, pdnn "
                "holds %.1f MiB (--memory-plan shows what a training step needs; "
                "--gpu-memory-limit plans a step under a cap; or try a smaller --batch or --size)",
                cudaGetErrorString(e), size / 1048576.0, free_b / 1048576.0, total_b / 1048576.0,
                stats_.reserved / 1048576.0);
    }
    ++stats_.sys_allocs;
    blocks_[p].size = size;
    stats_.reserved += size;
    stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
    stats_.in_use += size;
    hand_out(p, bytes);
    return p;
  }

  void deallocate(void* p, size_t) noexcept override {
    if (!p) return;
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = blocks_.find(p);
    if (it == blocks_.end()) return;  // not ours: never happens, and never worth a crash
    ++stats_.frees;
    stats_.in_use -= it->second.size;
    stats_.in_use_asked -= it->second.asked;
    it->second.asked = 0;
    free_.emplace(it->second.size, p);
  }

  AllocStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  void set_limit(size_t bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    limit_ = bytes;
  }
  void trim() override {
    std::lock_guard<std::mutex> lock(mu_);
    release_cached();
    stats_.peak_in_use = stats_.in_use;
    stats_.peak_in_use_asked = stats_.in_use_asked;
    stats_.peak_reserved = stats_.reserved;
  }

 private:
  // p (in_use already counts its block) goes to a caller who asked for `bytes`.
  void hand_out(void* p, size_t bytes) {
    blocks_[p].asked = bytes;
    stats_.in_use_asked += bytes;
    if (stats_.in_use > stats_.peak_in_use) {
      stats_.peak_in_use = stats_.in_use;
      stats_.peak_in_use_asked = stats_.in_use_asked;
    }
  }
  // Every cached (free) block back to the driver. Waits for the device first: a cached block
  // may still be in use by queued work.
  void release_cached() {
    cudaDeviceSynchronize();
    for (auto& [size, p] : free_) {
      cudaFree(p);
      blocks_.erase(p);
      stats_.reserved -= size;
      ++stats_.sys_frees;
    }
    free_.clear();
  }

  int device_;
  mutable std::mutex mu_;
  std::multimap<size_t, void*> free_;         // cached blocks by size
  // Every block we hold, in use or cached: its size, and the bytes its caller asked (0 cached).
  struct Block {
    size_t size = 0, asked = 0;
  };
  std::unordered_map<void*, Block> blocks_;
  AllocStats stats_;
  size_t limit_ = 0;  // cap on reserved bytes (0: none)
};

// Page-locked host memory for batches on their way to the GPU (an asynchronous copy needs it).
// Batch buffers live for the whole run, so there is no cache.
class PinnedAllocator final : public Allocator {
 public:
  Device device() const override { return Device::CPU; }
  const char* name() const override { return "pinned"; }
  void* allocate(size_t bytes) override {
    void* p = nullptr;
    const cudaError_t e = cudaMallocHost(&p, bytes > 0 ? bytes : 64);
    if (e != cudaSuccess) {
      cudaGetLastError();
      PDNN_FAIL("out of page-locked host memory: asked for %.1f MiB (%s)", bytes / 1048576.0,
                cudaGetErrorString(e));
    }
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.allocs;
    ++stats_.sys_allocs;
    stats_.in_use += bytes;
    stats_.in_use_asked += bytes;
    stats_.reserved += bytes;
    if (stats_.in_use > stats_.peak_in_use) stats_.peak_in_use = stats_.peak_in_use_asked = stats_.in_use;
    return p;
  }
  void deallocate(void* p, size_t bytes) noexcept override {
    if (!p) return;
    cudaFreeHost(p);
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.frees;
    ++stats_.sys_frees;
    stats_.in_use -= bytes;
    stats_.in_use_asked -= bytes;
    stats_.reserved -= bytes;
  }
  AllocStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  mutable std::mutex mu_;
  AllocStats stats_;
};

}  // namespace

std::shared_ptr<Allocator> make_cuda_caching_allocator(int device) {
  return std::make_shared<CachingAllocator>(device);
}

std::shared_ptr<Allocator> make_cuda_pinned_allocator() {
  return std::make_shared<PinnedAllocator>();
}

}  // namespace pdnn
