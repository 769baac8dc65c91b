// The host allocator: aligned_alloc/free, and mmap/munmap for large blocks.
#include "core/allocator.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace pdnn {

namespace {

// Large blocks are mapped from the system directly, 2 MiB aligned, with transparent huge pages
// advised (madvise: THP's setting on Debian and on the lent GPU hosts). Why: on the virtual
// machines pdnn runs on, the first touch of each 4 KiB page costs microseconds. Measured on
// the H100 host (16 cores, 2026-11-28, scratch test writing 3.7 GB once): 1.6 GB/s on one
// thread with 4 KiB pages, 5.7 GB/s with huge pages; 11 vs 22 GB/s on 8 threads; 35 GB/s on 16
// with huge pages (0.2 vs 0.5 GB/s on one core of the 2-core CI-like machine). W4 at 1344 px
// spent 106 s setting up, most of it writing ~59 GB of fresh host memory (the 3.7 G-parameter
// weights, their flat copy, gradients, optimizer state). Fresh mapped pages are zero, so
// Tensor::zeros need not write them (fresh_is_zero), and a block that is never touched (the
// host gradients of parameters that move to a GPU) costs nothing.
// Under AddressSanitizer every block comes from aligned_alloc, which it watches (it does not
// watch mapped memory).
#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kLarge = SIZE_MAX;
#else
constexpr size_t kLarge = size_t{8} << 20;
#endif
constexpr size_t kHuge = size_t{2} << 20;

size_t rounded_size(size_t bytes) { return bytes == 0 ? 64 : (bytes + 63) / 64 * 64; }
size_t mapped_size(size_t rounded) { return (rounded + kHuge - 1) / kHuge * kHuge; }

void* map_large(size_t rounded) {
  const size_t len = mapped_size(rounded);
  // One huge page more than needed, then the unaligned head and the tail given back.
  void* raw = mmap(nullptr, len + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  PDNN_CHECK(raw != MAP_FAILED, "out of host memory allocating %zu bytes (mmap: %s)", rounded,
             std::strerror(errno));
  const uintptr_t a = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (a + kHuge - 1) / kHuge * kHuge;
  if (aligned > a) munmap(raw, aligned - a);
  const uintptr_t end = a + len + kHuge;
  if (end > aligned + len) munmap(reinterpret_cast<void*>(aligned + len), end - (aligned + len));
#ifdef MADV_HUGEPAGE
  madvise(reinterpret_cast<void*>(aligned), len, MADV_HUGEPAGE);  // advice: fine to be refused
#endif
  return reinterpret_cast<void*>(aligned);
}

class HostAllocator final : public Allocator {
 public:
  Device device() const override { return Device::CPU; }
  const char* name() const override { return "host"; }
  void* allocate(size_t bytes) override {
    const size_t rounded = rounded_size(bytes);
    if (rounded >= kLarge) return map_large(rounded);
    void* p = std::aligned_alloc(64, rounded);
    PDNN_CHECK(p != nullptr, "out of host memory allocating %zu bytes", rounded);
    return p;
  }
  void deallocate(void* p, size_t bytes) noexcept override {
    const size_t rounded = rounded_size(bytes);
    if (rounded >= kLarge)
      munmap(p, mapped_size(rounded));
    else
      std::free(p);
  }
  bool fresh_is_zero(size_t bytes) const override { return rounded_size(bytes) >= kLarge; }
};

}  // namespace

const std::shared_ptr<Allocator>& host_allocator() {
  static const std::shared_ptr<Allocator> a = std::make_shared<HostAllocator>();
  return a;
}

}  // namespace pdnn
