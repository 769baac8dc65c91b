// Tensor: a shape, an element type and a view into Storage that lives on one device. NCHW for
// images. Views (reshape, slice) share the storage. Memory comes from the allocator of the
// tensor's device (host: 64-byte aligned; CUDA: the context's caching allocator), and data only
// crosses devices through to() and copy_into(), which count what they move in the Context.
#pragma once
#include <cstddef>
#include <memory>

#include "core/allocator.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/shape.h"

namespace pdnn {

class Context;

// Raw owned memory from one allocator; move-only.
class Storage {
 public:
  Storage(size_t bytes, std::shared_ptr<Allocator> alloc);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return alloc_->device(); }
  const std::shared_ptr<Allocator>& allocator() const { return alloc_; }

 private:
  std::shared_ptr<Allocator> alloc_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

class Tensor {
 public:
  Tensor() = default;
  // Host tensors; contents undefined.
  explicit Tensor(const Shape& shape, DType dtype = DType::F32);
  // From a given allocator (pinned host memory, a device's): contents undefined.
  Tensor(const Shape& shape, DType dtype, std::shared_ptr<Allocator> alloc);
  static Tensor zeros(const Shape& shape, DType dtype = DType::F32);  // host
  // On `dev`, from ctx's allocator for it (pdnn::Error when ctx has no such device).
  static Tensor empty(const Shape& shape, DType dtype, Device dev, Context& ctx);

  const Shape& shape() const { return shape_; }
  int64_t shape(int i) const { return shape_[i]; }
  int64_t numel() const { return shape_.numel(); }
  int rank() const { return shape_.rank(); }
  DType dtype() const { return dtype_; }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  // The device of the storage; CPU for an empty tensor.
  Device device() const { return storage_ ? storage_->device() : Device::CPU; }
  bool is_cuda() const { return device() == Device::CUDA; }
  bool empty() const { return !storage_ || numel() == 0; }
  // Null for an empty tensor.
  const std::shared_ptr<Allocator>& allocator() const;

  // Typed pointers; throw pdnn::Error when T does not match dtype(). On a CUDA tensor these are
  // device pointers, for kernels only.
  template <class T = float> T* data() { return static_cast<T*>(typed_data(dtype_of<T>())); }
  template <class T = float> const T* data() const {
    return static_cast<const T*>(const_cast<Tensor*>(this)->typed_data(dtype_of<T>()));
  }
  void* raw_data();
  const void* raw_data() const { return const_cast<Tensor*>(this)->raw_data(); }

  // A view with another shape over the same elements (numel must agree).
  Tensor reshape(const Shape& s) const;
  // A view of s.numel() elements starting `offset` elements into this tensor's elements.
  Tensor slice(int64_t offset, const Shape& s) const;
  // Make the tensor hold `s`, keeping its device, type and allocator, reusing its storage when
  // it is big enough (buffers are grow-only, so a training loop allocates once). An empty
  // tensor becomes a host float32 one. Contents undefined afterwards.
  void resize(const Shape& s);
  // Same, on `dev` with type `dtype`: new storage from ctx when the device or type differs.
  void resize(const Shape& s, DType dtype, Device dev, Context& ctx);
  // Deep copy onto `dev`; with copy_into, the only path by which data crosses devices.
  // Counts the bytes moved in ctx; waits for the copy when it lands on the host.
  Tensor to(Device dev, Context& ctx) const;
  Tensor clone(Context& ctx) const { return to(device(), ctx); }
  // Host-only conveniences for tests and small host-side code (pdnn::Error on a CUDA tensor).
  Tensor clone() const;
  void fill(float v);
  void zero() { fill(0.f); }
  float& operator[](int64_t i) { return host_f32()[i]; }
  float operator[](int64_t i) const { return const_cast<Tensor*>(this)->host_f32()[i]; }

  // True when both views start at the same element of the same storage.
  bool same_data(const Tensor& o) const {
    return storage_ == o.storage_ && offset_ == o.offset_;
  }

 private:
  void* typed_data(DType want);
  float* host_f32();
  size_t capacity_elems() const;  // elements from offset_ to the storage's end

  std::shared_ptr<Storage> storage_;
  Shape shape_;
  DType dtype_ = DType::F32;
  size_t offset_ = 0;  // in elements
};

// dst = src, elementwise, across or within devices: dst keeps its storage (it must already
// have src's shape and type), so copying a batch into a device buffer allocates nothing.
// Counted in ctx when it crosses devices. Asynchronous on the context's stream unless it lands
// on the host, where it waits.
void copy_into(Tensor& dst, const Tensor& src, Context& ctx);

// Throws pdnn::Error "<op>: shape A vs B" unless a == b.
void check_same_shape(const char* op, const Shape& a, const Shape& b);
// Throws unless every tensor is on `dev`, naming the op and the first one that is not.
void check_device(const char* op, Device dev, std::initializer_list<const Tensor*> ts);

}  // namespace pdnn
