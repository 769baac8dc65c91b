// Elementwise activations: ReLU, LeakyReLU, Sigmoid, Tanh. They share one shape rule and one
// base class, so they live in one file pair rather than four near-identical ones.
// x (any shape) -> y (same shape); backward: dx = (no parameters).
// Sigmoid and Tanh differentiate from y (y(1-y), 1-y^2): cheaper than re-evaluating exp/tanh.
#pragma once
#include <cstdint>
#include <string>

#include "layers/layer.h"

namespace pdnn {


// Shape checks shared by the elementwise layers; subclasses supply the two ops
// (ops/activation.h, which also has the formulas).
class Elementwise : public Layer {
 public:
  Shape output_shape(const Shape& in) const override { return in; }
  void forward(Context& ctx, const Tensor& x, Tensor& y) override;
  void backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;
  double flops(const Shape& in) const override { return static_cast<double>(in.numel()); }
  // One of x or y (reads_output()), and one pass to make y again.
  BackwardNeeds backward_needs(const Shape& in, const PlanFor& p) const override {
    (void)in;
    (void)p;
    return {!reads_output(), reads_output(), 0, true, 0};
  }

 protected:
  // Whether backward differentiates from y (Sigmoid, Tanh) rather than from x.
  virtual bool reads_output() const { return false; }
  virtual void forward_op(Context& ctx, const Tensor& x, Tensor& y) const = 0;
  virtual void backward_op(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                           Tensor& dx) const = 0;
};

// y = max(x, 0); the gradient at exactly 0 is taken as 0 (PyTorch's choice).
class ReLU : public Elementwise {
 public:
  std::string kind() const override { return "ReLU"; }
  Act fusable_activation() const override { return {FusedAct::ReLU, 0.f}; }

 protected:
  void forward_op(Context& ctx, const Tensor& x, Tensor& y) const override;
  void backward_op(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                   Tensor& dx) const override;
};

// y = x for x > 0, slope * x otherwise.
class LeakyReLU : public Elementwise {
 public:
  explicit LeakyReLU(float slope = 0.01f);
  std::string kind() const override { return "LeakyReLU"; }
  std::string describe() const override;
  float slope() const { return slope_; }
  // Fusable when slope >= 0 (the derivative is then read off the output's sign).
  Act fusable_activation() const override {
    return slope_ >= 0.f ? Act{FusedAct::LeakyReLU, slope_} : Act{};
  }

 protected:
  void forward_op(Context& ctx, const Tensor& x, Tensor& y) const override;
  void backward_op(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                   Tensor& dx) const override;

 private:
  float slope_;
};

// y = 1 / (1 + exp(-x)); dx = dy * y * (1 - y).
// Under bf16 a model's last Sigmoid runs in float32 (Layer::fp32_under_bf16): in bf16, y rounds
// to 1 from x ~ 6.2 on (float32: ~16.6), where y (1 - y) and so every gradient through it is 0;
// a GAN's discriminator saturated there on fakes learns nothing from them (issue 32).
class Sigmoid : public Elementwise {
 public:
  std::string kind() const override { return "Sigmoid"; }
  bool fp32_under_bf16() const override { return true; }

 protected:
  bool reads_output() const override { return true; }
  void forward_op(Context& ctx, const Tensor& x, Tensor& y) const override;
  void backward_op(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                   Tensor& dx) const override;
};

// y = tanh(x); dx = dy * (1 - y^2).
class Tanh : public Elementwise {
 public:
  std::string kind() const override { return "Tanh"; }

 protected:
  bool reads_output() const override { return true; }
  void forward_op(Context& ctx, const Tensor& x, Tensor& y) const override;
  void backward_op(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                   Tensor& dx) const override;
};

}  // namespace pdnn
