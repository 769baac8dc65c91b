// Layers of several inputs, the joints of a graph model (model/model.h):
//   Concat: x_0 (N,C_0,...), x_1 (N,C_1,...), ... -> y (N, C_0+C_1+..., ...) along the channel
//           axis (a U-Net's skip connections; the rest of the shapes equal);
//           backward: dx_j = dy's channels of x_j (=);
//   Add:    x_0, x_1, ... of one shape -> y = x_0 + x_1 + ... (summed in input order; a
//           residual connection); backward: dx_j = dy (=).
// Neither has parameters or reads its inputs or output in backward; both run as layers of one
// input too (the identity).
#pragma once
#include <string>
#include <vector>

#include "layers/layer.h"

namespace pdnn {

class MergeLayer : public Layer {
 public:
  // The output shape for these input shapes; pdnn::Error naming the shapes on a mismatch.
  virtual Shape merged_shape(const std::vector<Shape>& in) const = 0;
  // y: sized to merged_shape() of the inputs' shapes, on their device.
  virtual void forward_all(Context& ctx, const std::vector<const Tensor*>& xs, Tensor& y) = 0;
  // The gradient w.r.t. each input of the last forward (=), each sized as that input; nullptr:
  // not wanted.
  virtual void backward_all(Context& ctx, const Tensor& dy, const std::vector<Tensor*>& dxs) = 0;

  Shape output_shape(const Shape& in) const override { return merged_shape({in}); }
  void forward(Context& ctx, const Tensor& x, Tensor& y) override { forward_all(ctx, {&x}, y); }
  void backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;
  BackwardNeeds backward_needs(const Shape& in, const PlanFor& p) const override;
};

class Concat : public MergeLayer {
 public:
  std::string kind() const override { return "Concat"; }
  Shape merged_shape(const std::vector<Shape>& in) const override;
  void forward_all(Context& ctx, const std::vector<const Tensor*>& xs, Tensor& y) override;
  void backward_all(Context& ctx, const Tensor& dy, const std::vector<Tensor*>& dxs) override;

 private:
  std::vector<int64_t> channels_;  // of each input in the last forward
};

class Add : public MergeLayer {
 public:
  std::string kind() const override { return "Add"; }
  Shape merged_shape(const std::vector<Shape>& in) const override;
  void forward_all(Context& ctx, const std::vector<const Tensor*>& xs, Tensor& y) override;
  void backward_all(Context& ctx, const Tensor& dy, const std::vector<Tensor*>& dxs) override;
  double flops(const Shape& in) const override;  // one add per element per extra input

 private:
  size_t inputs_ = 0;  // in the last forward
};

}  // namespace pdnn
