// Dropout: shape logic; the kernels are in ops/dropout.
#include "layers/dropout.h"

#include "core/error.h"
#include "ops/dropout.h"

namespace pdnn {


Dropout::Dropout(float p) : p_(p) {
  PDNN_CHECK(p >= 0.f && p < 1.f, "Dropout: p = %g must be in [0, 1)", p);
}

std::string Dropout::describe() const { return strprintf("Dropout(%g)", p_); }

void Dropout::forward(Context& ctx, const Tensor& x, Tensor& y) {
  check_same_shape("Dropout forward: y vs x", y.shape(), x.shape());
  last_ = x.shape();
  masked_ = training_;
  if (!training_) {
    copy_into(y, x, ctx);
    return;
  }
  mask_.resize(x.shape(), DType::F32, x.device(), ctx);
  ops::dropout_forward(ctx, p_, x, y, mask_);
}

void Dropout::backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                       Tensor* dx) {
  (void)y;
  if (!dx) return;
  check_same_shape("Dropout backward: x vs last forward's input", x.shape(), last_);
  check_same_shape("Dropout backward: dy vs x", dy.shape(), x.shape());
  check_same_shape("Dropout backward: dx vs x", dx->shape(), x.shape());
  if (masked_)
    ops::dropout_backward(ctx, dy, mask_, *dx);
  else
    copy_into(*dx, dy, ctx);
}

}  // namespace pdnn
