// Dense (fully connected), PyTorch's Linear: x (N,in) or (N,C,H,W) with C*H*W = in -> y (N,out),
// y = x W^T + b with W (out,in), b (out). Backward: dW += dy^T x, db += sum_N dy, dx = dy W.
// The constructor zero-fills the parameters; reset_parameters(rng) draws PyTorch's default
// (U(+-1/sqrt(in)) for W, then b), so initial weights come only from a seeded Rng.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "layers/layer.h"

namespace pdnn {


class Dense : public Layer {
 public:
  Dense(int64_t in_features, int64_t out_features, bool bias = true);
  std::string kind() const override { return "Dense"; }
  std::string describe() const override;
  Shape output_shape(const Shape& in) const override;
  void forward(Context& ctx, const Tensor& x, Tensor& y) override;
  void backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;
  std::vector<Param> params() override;
  double flops(const Shape& in) const override;
  // x for the weight gradient, y with a fused activation (dy through it in the workspace). In
  // bf16 the forward's product is float32 in the workspace too (ops/dense.cpp), activation or
  // not, and backward's act'(y) dy takes half of that. One way to run it (cuBLAS), so the
  // least workspace is the most.
  BackwardNeeds backward_needs(const Shape& in, const PlanFor& p) const override {
    const bool fused = act_.kind != FusedAct::None;
    const int64_t product = in.n() * out_ * static_cast<int64_t>(sizeof(float));
    return {true, fused, 0, false, p.act == DType::BF16 || fused ? product : 0};
  }
  // A following ReLU/LeakyReLU applied in the output write (see Layer::fuse_activation).
  bool fuse_activation(const Act& a) override;
  void reset_parameters(Rng& rng) override;
  void set_bf16_params(const std::vector<Tensor>& copies) override;

  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }
  Tensor& weight() { return w_; }
  Tensor& bias() { return b_; }  // empty when constructed with bias = false

 private:
  int64_t in_, out_;
  bool has_bias_;
  Tensor w_, dw_, b_, db_;
  Tensor w16_;  // the weight's bf16 copy (set_bf16_params), read when x is bf16
  Act act_;
};

}  // namespace pdnn
