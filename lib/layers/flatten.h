// Flatten: x (N, d1, ..., dk) -> y (N, d1*...*dk); backward: dx = dy reshaped.
// The data are copied into y (the contract gives every layer its own output buffer); the copy
// is one memcpy (or device copy), small beside the Dense layer that follows. Dense also takes 4-D input
// directly, so a model may skip Flatten altogether.
#pragma once
#include <cstdint>
#include <string>

#include "layers/layer.h"

namespace pdnn {


class Flatten : public Layer {
 public:
  std::string kind() const override { return "Flatten"; }
  Shape output_shape(const Shape& in) const override;
  void forward(Context& ctx, const Tensor& x, Tensor& y) override;
  void backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;
  // Nothing: dx is dy reshaped.
  BackwardNeeds backward_needs(const Shape& in, const PlanFor& p) const override {
    (void)in;
    (void)p;
    return {false, false, 0, true, 0};
  }
};

}  // namespace pdnn
