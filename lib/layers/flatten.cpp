// Flatten: shape logic and the copy kernel (see flatten.h).
#include "layers/flatten.h"

#include <cstring>

#include "core/error.h"

namespace pdnn {

namespace cpu {
void copy(float* y, const float* x, int64_t n) {
  if (n > 0) std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
}
}  // namespace cpu

Shape Flatten::output_shape(const Shape& in) const {
  PDNN_CHECK(in.rank() >= 2, "Flatten: input %s needs a batch dimension and at least one more",
             in.str().c_str());
  return Shape{in.n(), in.per_sample()};
}

void Flatten::forward(Context& ctx, const Tensor& x, Tensor& y) {
  (void)ctx;
  check_same_shape("Flatten forward: y vs expected", y.shape(), output_shape(x.shape()));
  cpu::copy(y.data(), x.data(), x.numel());
}

void Flatten::backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                       Tensor* dx) {
  (void)ctx;
  if (!dx) return;
  check_same_shape("Flatten backward: dy vs y", dy.shape(), y.shape());
  check_same_shape("Flatten backward: dx vs x", dx->shape(), x.shape());
  cpu::copy(dx->data(), dy.data(), dy.numel());
}

}  // namespace pdnn
