// MaxPool2d(kernel, stride = kernel), no padding, kernels up to 16x16:
// x (N,C,H,W) -> y (N,C,OH,OW), OH = floor((H-k)/s)+1, OW likewise; backward: dx = (no params).
// Forward records, per output, where its maximum is inside its window (one byte; ties: the
// first in row-major window order wins, as PyTorch; a NaN propagates). Backward is then a
// straight pass: zero each dx plane and add dy at the recorded place (add, because windows
// overlap when stride < kernel). No search and no mask in backward: the blog's CuPy version
// spent 98.6% of the pool's backward time there. With set_keep_argmax(false) (a memory plan's
// choice) nothing is recorded: backward reads x and finds each maximum again, the same one.
// A Dropout(p) after it can be fused (the model does it) when windows do not overlap: in training y = pool(x) * mask with
// dropout's own draw (ops/maxpool2d.h), backward adds dy * mask at the argmax; in evaluation plain
// pooling.
#pragma once
#include <cstdint>
#include <string>

#include "layers/layer.h"
#include "ops/maxpool2d.h"

namespace pdnn {


class MaxPool2d : public Layer {
 public:
  // stride <= 0 means stride = kernel.
  explicit MaxPool2d(int kernel, int stride = 0);
  std::string kind() const override { return "MaxPool2d"; }
  std::string describe() const override;
  Shape output_shape(const Shape& in) const override;
  void forward(Context& ctx, const Tensor& x, Tensor& y) override;
  void backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;
  // One comparison per window element.
  double flops(const Shape& in) const override;
  bool fuse_dropout(float p) override;
  // The activation of the layer before, folded into backward (windows that do not overlap):
  // act'(y) . dy at the argmax, y the pool's output (ops/maxpool2d.h).
  bool fold_input_activation(const Act& a) override;
  // The one-byte argmax (or, without it, x) and a fused dropout's mask (the output y with a
  // folded activation); forward again rebuilds them.
  BackwardNeeds backward_needs(const Shape& in, const PlanFor& p) const override;
  // Whether forward records the argmax (true, the default) or backward finds it again in x.
  void set_keep_argmax(bool keep) override { keep_argmax_ = keep; }
  bool keeps_argmax() const { return keep_argmax_; }
  // The fused dropout's last training mask (0 or 1/(1-p) per output), for tests.
  const Tensor& dropout_mask() const { return mask_; }
  int kernel() const { return k_; }
  int stride() const { return s_; }

 private:
  Pool2d geometry(const Shape& in) const;
  int k_, s_;
  Tensor argmax_;  // uint8 window offsets, on x's device, grow-only, from the last forward
  bool keep_argmax_ = true;
  bool recorded_ = false;  // whether the last forward recorded argmax_
  Shape last_;     // input shape of the last forward
  float drop_p_ = -1.f;  // the fused dropout's p (negative: none)
  Tensor mask_;          // its last training forward's mask, float32, y's size, grow-only
  bool masked_ = false;  // whether the last forward applied the mask (training mode)
  Act in_act_;           // the activation folded into backward (kind None: none)
};

}  // namespace pdnn
