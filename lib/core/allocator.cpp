// The host allocator: aligned_alloc/free.
#include "core/allocator.h"

#include <cstdlib>

#include "core/error.h"

namespace pdnn {

namespace {

class HostAllocator final : public Allocator {
 public:
  Device device() const override { return Device::CPU; }
  const char* name() const override { return "host"; }
  void* allocate(size_t bytes) override {
    size_t rounded = ((bytes + 63) / 64) * 64;
    if (rounded == 0) rounded = 64;
    void* p = std::aligned_alloc(64, rounded);
    PDNN_CHECK(p != nullptr, "out of host memory allocating %zu bytes", rounded);
    return p;
  }
  void deallocate(void* p, size_t) noexcept override { std::free(p); }
};

}  // namespace

const std::shared_ptr<Allocator>& host_allocator() {
  static const std::shared_ptr<Allocator> a = std::make_shared<HostAllocator>();
  return a;
}

}  // namespace pdnn
