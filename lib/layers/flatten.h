// Flatten: x (N, d1, ..., dk) -> y (N, d1*...*dk); backward: dx = dy reshaped.
// The data are copied into y (the contract gives every layer its own output buffer); the copy
// is one memcpy, small beside the Dense layer that follows. Dense also takes 4-D input
// directly, so a model may skip Flatten altogether.
#pragma once
#include <cstdint>
#include <string>

#include "layers/layer.h"

namespace pdnn {

namespace cpu {
// y[i] = x[i], n elements (the buffers must not overlap).
void copy(float* y, const float* x, int64_t n);
}  // namespace cpu

class Flatten : public Layer {
 public:
  std::string kind() const override { return "Flatten"; }
  Shape output_shape(const Shape& in) const override;
  void forward(Context& ctx, const Tensor& x, Tensor& y) override;
  void backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;
};

}  // namespace pdnn
