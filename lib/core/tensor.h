// Tensor: float32, NCHW, 64-byte-aligned host storage (so AVX loads never split a line),
// shared between views. reshape() is a view; to(Device, Context&) is the only copy path and
// counts the bytes it moves in the context.
#pragma once
#include <cstddef>
#include <memory>

#include "core/device.h"
#include "core/shape.h"

namespace pdnn {

class Context;

// Raw owned memory; move-only.
class Storage {
 public:
  Storage(size_t n_floats, Device dev);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  float* data() { return data_; }
  size_t capacity() const { return n_; }
  Device device() const { return dev_; }

 private:
  float* data_ = nullptr;
  size_t n_ = 0;
  Device dev_;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(const Shape& shape, Device dev = Device::CPU);  // contents undefined
  static Tensor zeros(const Shape& shape, Device dev = Device::CPU);

  const Shape& shape() const { return shape_; }
  int64_t shape(int i) const { return shape_[i]; }
  int64_t numel() const { return shape_.numel(); }
  int rank() const { return shape_.rank(); }
  Device device() const { return storage_ ? storage_->device() : Device::CPU; }
  bool empty() const { return !storage_ || numel() == 0; }

  float* data();
  const float* data() const;

  // A view with another shape over the same elements (numel must agree).
  Tensor reshape(const Shape& s) const;
  // Make the tensor hold `s`, reusing its storage when it is big enough (buffers are grow-only,
  // so a training loop allocates, and page-faults, once). Contents undefined afterwards.
  void resize(const Shape& s);
  // Deep copy onto `dev`; the only path by which data crosses devices. Counts bytes in ctx.
  Tensor to(Device dev, Context& ctx) const;
  Tensor clone() const;  // deep copy on the same device

  void fill(float v);
  void zero() { fill(0.f); }
  // Element access for tests and small host-side code (CPU only).
  float& operator[](int64_t i) { return data()[i]; }
  float operator[](int64_t i) const { return data()[i]; }

 private:
  std::shared_ptr<Storage> storage_;
  Shape shape_;
};

// Throws pdnn::Error "<op>: shape A vs B" unless a == b.
void check_same_shape(const char* op, const Shape& a, const Shape& b);

}  // namespace pdnn
