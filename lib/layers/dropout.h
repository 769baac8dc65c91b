// Dropout(p): x (any shape) -> y (same shape); backward: dx = (no parameters).
// Training: element i is kept iff u_i >= p, u_i = Rng::to_unit(Rng::at(seed, base + i + 1)) with
// base the context RNG's position, which then moves by numel (ops/dropout.h): counter-based, so
// the mask is the same at any thread count and on either device, and each forward draws a fresh
// one. Kept values are scaled by 1/(1-p) (inverted dropout, as
// PyTorch), so evaluation is the identity. Backward reuses the last forward's mask.
#pragma once
#include <cstdint>
#include <string>

#include "layers/layer.h"

namespace pdnn {


class Dropout : public Layer {
 public:
  explicit Dropout(float p = 0.5f);
  std::string kind() const override { return "Dropout"; }
  std::string describe() const override;
  Shape output_shape(const Shape& in) const override { return in; }
  void forward(Context& ctx, const Tensor& x, Tensor& y) override;
  void backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;
  double flops(const Shape& in) const override { return static_cast<double>(in.numel()); }
  float p() const { return p_; }
  float fusable_dropout() const override { return p_; }
  // Only its mask (float32 in bf16 too); forward again with the same RNG position draws the
  // same one.
  BackwardNeeds backward_needs(const Shape& in, const PlanFor& p) const override {
    (void)p;
    return {false, false, training_ ? in.numel() * static_cast<int64_t>(sizeof(float)) : 0, true, 0};
  }
  // The last training forward's mask (0 or 1/(1-p) per element, on x's device), for tests.
  const Tensor& mask() const { return mask_; }

 private:
  float p_;
  Tensor mask_;              // float32 on x's device, grow-only
  bool masked_ = false;      // whether the last forward applied a mask (training mode)
  Shape last_;               // input shape of the last forward
};

}  // namespace pdnn
