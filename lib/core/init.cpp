// Weight initialisation (see init.h for the draw order).
#include "core/init.h"

#include <cmath>

#include "core/error.h"

namespace pdnn {
namespace init {

Fans fans(const Shape& w) {
  PDNN_CHECK(w.rank() >= 2, "init: weight shape %s needs rank >= 2", w.str().c_str());
  int64_t field = 1;
  for (int i = 2; i < w.rank(); ++i) field *= w[i];
  return {w[1] * field, w[0] * field};
}

void uniform(Tensor& t, float lo, float hi, Rng& rng) { rng.fill_uniform(t.data(), t.numel(), lo, hi); }

void normal(Tensor& t, float mean, float stddev, Rng& rng) {
  rng.fill_normal(t.data(), t.numel(), mean, stddev);
}

void constant(Tensor& t, float v) { t.fill(v); }

void he_uniform(Tensor& w, Rng& rng) {
  const float b = static_cast<float>(std::sqrt(6.0 / fans(w.shape()).in));
  uniform(w, -b, b, rng);
}
void he_normal(Tensor& w, Rng& rng) {
  normal(w, 0.f, static_cast<float>(std::sqrt(2.0 / fans(w.shape()).in)), rng);
}
void glorot_uniform(Tensor& w, Rng& rng) {
  const Fans f = fans(w.shape());
  const float b = static_cast<float>(std::sqrt(6.0 / static_cast<double>(f.in + f.out)));
  uniform(w, -b, b, rng);
}
void glorot_normal(Tensor& w, Rng& rng) {
  const Fans f = fans(w.shape());
  normal(w, 0.f, static_cast<float>(std::sqrt(2.0 / static_cast<double>(f.in + f.out))), rng);
}

void torch_default(Tensor& w, Tensor* bias, Rng& rng) {
  const float b = static_cast<float>(1.0 / std::sqrt(static_cast<double>(fans(w.shape()).in)));
  uniform(w, -b, b, rng);
  if (bias) uniform(*bias, -b, b, rng);
}

}  // namespace init
}  // namespace pdnn
