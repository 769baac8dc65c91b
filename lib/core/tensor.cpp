// Tensor storage, views and the copy path.
#include "core/tensor.h"

#include <cstring>

#include "core/context.h"
#include "core/error.h"
#include "core/cuda_state.h"

namespace pdnn {

Storage::Storage(size_t bytes, std::shared_ptr<Allocator> alloc)
    : alloc_(std::move(alloc)), bytes_(bytes) {
  PDNN_CHECK(alloc_ != nullptr, "storage: no allocator");
  data_ = alloc_->allocate(bytes);
}

Storage::~Storage() { alloc_->deallocate(data_, bytes_); }

namespace {

// Storage for `s` elements of `t`; an allocation failure names the tensor it was for.
std::shared_ptr<Storage> make_storage(const Shape& s, DType t, std::shared_ptr<Allocator> a) {
  const int64_t n = s.numel();
  PDNN_CHECK(n >= 0, "tensor: negative size %s", s.str().c_str());
  size_t bytes = 0;
  PDNN_CHECK(!__builtin_mul_overflow(static_cast<size_t>(n), dtype_size(t), &bytes),
             "tensor %s %s: size overflows", s.str().c_str(), dtype_name(t));
  const char* dev = a ? device_name(a->device()) : "?";
  try {
    return std::make_shared<Storage>(bytes, std::move(a));
  } catch (const Error& e) {
    PDNN_FAIL("tensor %s %s (%.1f MiB) on %s: %s", s.str().c_str(), dtype_name(t),
              static_cast<double>(bytes) / (1024.0 * 1024.0), dev, e.what());
  }
}

}  // namespace

Tensor::Tensor(const Shape& shape, DType dtype) : Tensor(shape, dtype, host_allocator()) {}

Tensor::Tensor(const Shape& shape, DType dtype, std::shared_ptr<Allocator> alloc)
    : storage_(make_storage(shape, dtype, std::move(alloc))), shape_(shape), dtype_(dtype) {}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  Tensor t(shape, dtype);
  // Large host blocks arrive zero (allocator.h): writing them would only touch their pages.
  if (t.nbytes() > 0 && !t.allocator()->fresh_is_zero(t.storage_->bytes()))
    std::memset(t.raw_data(), 0, t.nbytes());
  return t;
}

namespace {
// An allocation that fails under a memory role (core/context.h: MemoryRole) says what it was for.
[[noreturn]] void fail_with_role(const Context& ctx, const Error& e) {
  const std::string role = ctx.memory_role();
  if (role.empty()) throw;
  PDNN_FAIL("%s: %s", role.c_str(), e.what());
}
}  // namespace

Tensor Tensor::empty(const Shape& shape, DType dtype, Device dev, Context& ctx) {
  try {
    return Tensor(shape, dtype, ctx.allocator(dev));
  } catch (const Error& e) {
    fail_with_role(ctx, e);
  }
}

const std::shared_ptr<Allocator>& Tensor::allocator() const {
  static const std::shared_ptr<Allocator> none;
  return storage_ ? storage_->allocator() : none;
}

void* Tensor::raw_data() {
  PDNN_CHECK(storage_ != nullptr, "tensor: data of an empty tensor");
  return static_cast<char*>(storage_->data()) + offset_ * dtype_size(dtype_);
}

void* Tensor::typed_data(DType want) {
  PDNN_CHECK(want == dtype_, "tensor %s: asked for %s data, it holds %s", shape_.str().c_str(),
             dtype_name(want), dtype_name(dtype_));
  return raw_data();
}

float* Tensor::host_f32() {
  PDNN_CHECK(device() == Device::CPU,
             "tensor %s is on %s: element access and fill() are for host tensors (copy it with "
             "to(Device::CPU, ctx), or use ops::fill)",
             shape_.str().c_str(), device_name(device()));
  return data<float>();
}

size_t Tensor::capacity_elems() const {
  return storage_ ? storage_->bytes() / dtype_size(dtype_) - offset_ : 0;
}

Tensor Tensor::reshape(const Shape& s) const {
  PDNN_CHECK(s.numel() == numel(), "reshape: %s has %lld elements, %s needs %lld",
             shape_.str().c_str(), static_cast<long long>(numel()), s.str().c_str(),
             static_cast<long long>(s.numel()));
  Tensor t = *this;
  t.shape_ = s;
  return t;
}

Tensor Tensor::slice(int64_t offset, const Shape& s) const {
  PDNN_CHECK(offset >= 0 && offset + s.numel() <= numel(),
             "slice: elements [%lld, %lld) outside a tensor of %lld", static_cast<long long>(offset),
             static_cast<long long>(offset + s.numel()), static_cast<long long>(numel()));
  Tensor t = *this;
  t.shape_ = s;
  t.offset_ = offset_ + static_cast<size_t>(offset);
  return t;
}

void Tensor::resize(const Shape& s) {
  if (!storage_) {
    *this = Tensor(s, dtype_);
    return;
  }
  if (capacity_elems() < static_cast<size_t>(s.numel())) {
    std::shared_ptr<Allocator> a = storage_->allocator();
    storage_.reset();  // give the old block back before taking a bigger one
    storage_ = make_storage(s, dtype_, std::move(a));
    offset_ = 0;
  }
  shape_ = s;
}

void Tensor::resize(const Shape& s, DType dtype, Device dev, Context& ctx) {
  if (storage_ && (dtype != dtype_ || dev != device())) storage_.reset();
  try {
    if (!storage_) {
      *this = Tensor(s, dtype, ctx.allocator(dev));
      return;
    }
    resize(s);
  } catch (const Error& e) {
    fail_with_role(ctx, e);
  }
}

Tensor Tensor::to(Device dev, Context& ctx) const {
  PDNN_CHECK(storage_ != nullptr, "tensor.to: empty tensor");
  Tensor t = empty(shape_, dtype_, dev, ctx);
  copy_into(t, *this, ctx);
  return t;
}

Tensor Tensor::clone() const {
  PDNN_CHECK(device() == Device::CPU, "tensor.clone(): %s is on %s; use clone(ctx)",
             shape_.str().c_str(), device_name(device()));
  Tensor t(shape_, dtype_);
  if (nbytes() > 0) std::memcpy(t.raw_data(), raw_data(), nbytes());
  return t;
}

void Tensor::fill(float v) {
  float* p = host_f32();
  const int64_t n = numel();
  for (int64_t i = 0; i < n; ++i) p[i] = v;
}

void copy_into(Tensor& dst, const Tensor& src, Context& ctx) {
  PDNN_CHECK(dst.shape() == src.shape() && dst.dtype() == src.dtype(),
             "copy_into: destination %s %s, source %s %s", dst.shape().str().c_str(),
             dtype_name(dst.dtype()), src.shape().str().c_str(), dtype_name(src.dtype()));
  const size_t bytes = src.nbytes();
  if (bytes == 0) return;
  const Device dd = dst.device(), sd = src.device();
  if (dd == Device::CPU && sd == Device::CPU) {
    std::memcpy(dst.raw_data(), src.raw_data(), bytes);
    return;
  }
  // A host destination is read by the caller right after: wait for the copy.
  cuda_copy(dst.raw_data(), dd, src.raw_data(), sd, bytes, ctx.cuda().stream(),
            dd == Device::CPU);
  ctx.count_transfer(dd, sd, bytes);
}

void check_same_shape(const char* op, const Shape& a, const Shape& b) {
  PDNN_CHECK(a == b, "%s: shape %s vs %s", op, a.str().c_str(), b.str().c_str());
}

void check_device(const char* op, Device dev, std::initializer_list<const Tensor*> ts) {
  int i = 0;
  for (const Tensor* t : ts) {
    PDNN_CHECK(t->device() == dev, "%s: tensor %d %s is on %s, expected %s", op, i,
               t->shape().str().c_str(), device_name(t->device()), device_name(dev));
    ++i;
  }
}

}  // namespace pdnn
