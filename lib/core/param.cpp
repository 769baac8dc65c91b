// ParamSet: gathering parameters into flat buffers and moving them between devices.
#include "core/param.h"

#include <cstring>

#include "core/cuda_state.h"
#include "core/error.h"

namespace pdnn {

namespace {
constexpr int64_t kAlign = 16;  // floats: 64 bytes
}

void ParamSet::build(std::vector<Param> params) {
  offsets_.clear();
  int64_t n = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const Param& p = params[i];
    PDNN_CHECK(p.value && p.grad && !p.value->empty(), "parameters: %s has no value or gradient",
               p.name.c_str());
    PDNN_CHECK(p.value->dtype() == DType::F32 && p.value->device() == Device::CPU,
               "parameters: %s is %s on %s; they are gathered as float32 on the host",
               p.name.c_str(), dtype_name(p.value->dtype()), device_name(p.value->device()));
    check_same_shape("parameters: gradient vs value", p.grad->shape(), p.value->shape());
    offsets_.push_back(n);
    n += (p.value->numel() + kAlign - 1) / kAlign * kAlign;
  }
  // Gathered on the host (zeros in the gaps), then moved in one copy.
  values_ = Tensor::zeros(Shape{n > 0 ? n : 1});
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& v = *params[i].value;
    std::memcpy(values_.data() + offsets_[i], v.data(), v.nbytes());
  }
  grads_ = Tensor::zeros(values_.shape());
  params_ = std::move(params);
  for (size_t i = 0; i < params_.size(); ++i) {
    const Shape s = params_[i].value->shape();
    *params_[i].value = values_.slice(offsets_[i], s);
    *params_[i].grad = grads_.slice(offsets_[i], s);
  }
  built_ = true;
}

void ParamSet::to(Device dev, Context& ctx) {
  PDNN_CHECK(built_, "parameters: to() before build()");
  if (dev == device()) return;
  {
    MemoryRole role(ctx, "the parameters (one flat buffer)");
    values_ = values_.to(dev, ctx);
  }
  MemoryRole role(ctx, "the parameters' gradients (one flat buffer)");
  if (dev == Device::CPU) {
    grads_ = Tensor::zeros(values_.shape());
  } else {  // zeroed where they live: no host buffer of zeros to copy (14.8 GB at W4's 1344 px)
    grads_ = Tensor::empty(values_.shape(), DType::F32, dev, ctx);
    cuda_zero(grads_.raw_data(), grads_.nbytes(), ctx.cuda().stream());
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    const Shape s = params_[i].value->shape();
    *params_[i].value = values_.slice(offsets_[i], s);
    *params_[i].grad = grads_.slice(offsets_[i], s);
  }
}

}  // namespace pdnn
