// Flatten: shape logic; the data move with copy_into (see flatten.h).
#include "layers/flatten.h"

#include "core/error.h"

namespace pdnn {

Shape Flatten::output_shape(const Shape& in) const {
  PDNN_CHECK(in.rank() >= 2, "Flatten: input %s needs a batch dimension and at least one more",
             in.str().c_str());
  return Shape{in.n(), in.per_sample()};
}

void Flatten::forward(Context& ctx, const Tensor& x, Tensor& y) {
  check_same_shape("Flatten forward: y vs expected", y.shape(), output_shape(x.shape()));
  Tensor view = y.reshape(x.shape());
  copy_into(view, x, ctx);
}

void Flatten::backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                       Tensor* dx) {
  if (!dx) return;
  check_same_shape("Flatten backward: dy vs y", dy.shape(), y.shape());
  check_same_shape("Flatten backward: dx vs x", dx->shape(), x.shape());
  copy_into(*dx, dy.reshape(x.shape()), ctx);
}

}  // namespace pdnn
