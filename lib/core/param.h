// Param (a named tensor and its gradient) and ParamSet: all of a model's parameters in one flat
// allocation and all their gradients in another (llm.c's layout), each layer's tensors rebound
// as views into them. So an optimizer is one fused kernel over the flat buffer, zero_grad one
// fill, a checkpoint one copy, and a future all-reduce one call.
#pragma once
#include <string>
#include <vector>

#include "core/context.h"
#include "core/tensor.h"

namespace pdnn {

// A trainable tensor with its gradient, named for checkpoints and summaries ("weight", "bias").
// Buffers (BatchNorm's running statistics) use the same type with grad == nullptr.
struct Param {
  std::string name;
  Tensor* value;
  Tensor* grad;
};

class ParamSet {
 public:
  ParamSet() = default;
  ParamSet(const ParamSet&) = delete;
  ParamSet& operator=(const ParamSet&) = delete;
  ParamSet(ParamSet&&) = default;
  ParamSet& operator=(ParamSet&&) = default;

  // Gathers the params' current values (host tensors) into one fresh host buffer and zeroed
  // gradients into another, and rebinds every Param's value and grad to views of them. Params
  // must have a value and a gradient of the same shape.
  void build(std::vector<Param> params);
  // Moves the flat buffers to `dev` (values copied, gradients zeroed) and rebinds the views.
  void to(Device dev, Context& ctx);
  bool built() const { return built_; }

  const std::vector<Param>& params() const { return params_; }
  Tensor& values() { return values_; }
  Tensor& grads() { return grads_; }
  int64_t numel() const { return values_.empty() ? 0 : values_.numel(); }
  Device device() const { return values_.device(); }
  // Element offset of params()[i] in the flat buffers: each starts on a 64-byte boundary (the
  // gaps hold zeros, which every optimizer leaves at zero).
  int64_t offset(size_t i) const { return offsets_.at(i); }

 private:
  std::vector<Param> params_;
  std::vector<int64_t> offsets_;
  Tensor values_, grads_;
  bool built_ = false;
};

}  // namespace pdnn
