// Tensor storage and the copy path.
#include "core/tensor.h"

#include <cstdlib>
#include <cstring>

#include "core/context.h"
#include "core/error.h"

namespace pdnn {

Storage::Storage(size_t n_floats, Device dev) : n_(n_floats), dev_(dev) {
  PDNN_CHECK(dev == Device::CPU, "tensor: the CUDA backend is not built into this pdnn");
  size_t bytes = ((n_floats * sizeof(float) + 63) / 64) * 64;
  if (bytes == 0) bytes = 64;
  data_ = static_cast<float*>(std::aligned_alloc(64, bytes));
  PDNN_CHECK(data_ != nullptr, "tensor: out of memory allocating %zu bytes", bytes);
}

Storage::~Storage() { std::free(data_); }

Tensor::Tensor(const Shape& shape, Device dev)
    : storage_(std::make_shared<Storage>(static_cast<size_t>(shape.numel()), dev)), shape_(shape) {}

Tensor Tensor::zeros(const Shape& shape, Device dev) {
  Tensor t(shape, dev);
  t.zero();
  return t;
}

float* Tensor::data() {
  PDNN_CHECK(storage_ != nullptr, "tensor: data() of an empty tensor");
  return storage_->data();
}
const float* Tensor::data() const {
  PDNN_CHECK(storage_ != nullptr, "tensor: data() of an empty tensor");
  return storage_->data();
}

Tensor Tensor::reshape(const Shape& s) const {
  PDNN_CHECK(s.numel() == numel(), "reshape: %s has %lld elements, %s needs %lld",
             shape_.str().c_str(), static_cast<long long>(numel()), s.str().c_str(),
             static_cast<long long>(s.numel()));
  Tensor t = *this;
  t.shape_ = s;
  return t;
}

void Tensor::resize(const Shape& s) {
  if (!storage_ || storage_->capacity() < static_cast<size_t>(s.numel())) {
    Device dev = device();
    storage_ = std::make_shared<Storage>(static_cast<size_t>(s.numel()), dev);
  }
  shape_ = s;
}

Tensor Tensor::to(Device dev, Context& ctx) const {
  PDNN_CHECK(storage_ != nullptr, "tensor.to: empty tensor");
  Tensor t(shape_, dev);
  const size_t bytes = static_cast<size_t>(numel()) * sizeof(float);
  std::memcpy(t.data(), data(), bytes);
  if (dev != device()) ctx.count_transfer(bytes);
  return t;
}

Tensor Tensor::clone() const {
  Tensor t(shape_, device());
  if (numel() > 0) std::memcpy(t.data(), data(), static_cast<size_t>(numel()) * sizeof(float));
  return t;
}

void Tensor::fill(float v) {
  float* p = data();
  const int64_t n = numel();
  for (int64_t i = 0; i < n; ++i) p[i] = v;
}

void check_same_shape(const char* op, const Shape& a, const Shape& b) {
  PDNN_CHECK(a == b, "%s: shape %s vs %s", op, a.str().c_str(), b.str().c_str());
}

}  // namespace pdnn
