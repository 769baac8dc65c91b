// Elementwise activation layers: shape checks, then the ops (see activation.h).
#include "layers/activation.h"

#include <cmath>

#include "core/error.h"
#include "ops/activation.h"

namespace pdnn {

void Elementwise::forward(Context& ctx, const Tensor& x, Tensor& y) {
  const std::string op = kind() + " forward";
  check_same_shape(op.c_str(), y.shape(), x.shape());
  forward_op(ctx, x, y);
}

void Elementwise::backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                           Tensor* dx) {
  if (!dx) return;  // no parameters: nothing else to do
  const std::string op = kind() + " backward";
  check_same_shape(op.c_str(), dy.shape(), x.shape());
  check_same_shape(op.c_str(), y.shape(), x.shape());
  check_same_shape(op.c_str(), dx->shape(), x.shape());
  backward_op(ctx, x, y, dy, *dx);
}

void ReLU::forward_op(Context& ctx, const Tensor& x, Tensor& y) const {
  ops::relu_forward(ctx, x, y);
}
void ReLU::backward_op(Context& ctx, const Tensor& x, const Tensor&, const Tensor& dy,
                       Tensor& dx) const {
  ops::relu_backward(ctx, x, dy, dx);
}

LeakyReLU::LeakyReLU(float slope) : slope_(slope) {
  PDNN_CHECK(std::isfinite(slope), "LeakyReLU: slope %g is not finite", slope);
}
std::string LeakyReLU::describe() const { return strprintf("LeakyReLU(%g)", slope_); }
void LeakyReLU::forward_op(Context& ctx, const Tensor& x, Tensor& y) const {
  ops::leaky_relu_forward(ctx, slope_, x, y);
}
void LeakyReLU::backward_op(Context& ctx, const Tensor& x, const Tensor&, const Tensor& dy,
                            Tensor& dx) const {
  ops::leaky_relu_backward(ctx, slope_, x, dy, dx);
}

void Sigmoid::forward_op(Context& ctx, const Tensor& x, Tensor& y) const {
  ops::sigmoid_forward(ctx, x, y);
}
void Sigmoid::backward_op(Context& ctx, const Tensor&, const Tensor& y, const Tensor& dy,
                          Tensor& dx) const {
  ops::sigmoid_backward(ctx, y, dy, dx);
}

void Tanh::forward_op(Context& ctx, const Tensor& x, Tensor& y) const {
  ops::tanh_forward(ctx, x, y);
}
void Tanh::backward_op(Context& ctx, const Tensor&, const Tensor& y, const Tensor& dy,
                       Tensor& dx) const {
  ops::tanh_backward(ctx, y, dy, dx);
}

}  // namespace pdnn
