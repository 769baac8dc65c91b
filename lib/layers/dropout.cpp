// Dropout: counter-based mask, shape logic and CPU kernels (see dropout.h).
#include "layers/dropout.h"

#include <cmath>

#include "core/error.h"
#include "core/parallel.h"
#include "layers/flatten.h"

namespace pdnn {

namespace cpu {

void dropout_forward(float* y, float* mask, const float* x, int64_t n, float p, uint64_t seed,
                     uint64_t base) {
  const float scale = 1.f / (1.f - p);
  const double pd = p;
  // One hash per element (~10 integer ops): worth threads at a lower size than a plain loop.
#pragma omp parallel for if(PDNN_PAR(n / 4)) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = Rng::to_unit(Rng::at(seed, base + static_cast<uint64_t>(i) + 1)) >= pd;
    mask[i] = keep ? scale : 0.f;
    y[i] = x[i] * mask[i];
  }
}

void dropout_backward(float* dx, const float* dy, const float* mask, int64_t n) {
#pragma omp parallel for if(PDNN_PAR(n)) schedule(static)
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * mask[i];
}

}  // namespace cpu

Dropout::Dropout(float p) : p_(p) {
  PDNN_CHECK(p >= 0.f && p < 1.f, "Dropout: p = %g must be in [0, 1)", p);
}

std::string Dropout::describe() const { return strprintf("Dropout(%g)", p_); }

void Dropout::forward(Context& ctx, const Tensor& x, Tensor& y) {
  check_same_shape("Dropout forward: y vs x", y.shape(), x.shape());
  const int64_t n = x.numel();
  last_ = x.shape();
  masked_ = training_;
  if (!training_) {
    cpu::copy(y.data(), x.data(), n);
    return;
  }
  if (mask_.size() < static_cast<size_t>(n)) mask_.resize(static_cast<size_t>(n));
  const uint64_t base = ctx.rng().reserve(static_cast<uint64_t>(n));
  cpu::dropout_forward(y.data(), mask_.data(), x.data(), n, p_, ctx.rng().seed(), base);
}

void Dropout::backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                       Tensor* dx) {
  (void)ctx;
  (void)y;
  if (!dx) return;
  check_same_shape("Dropout backward: x vs last forward's input", x.shape(), last_);
  check_same_shape("Dropout backward: dy vs x", dy.shape(), x.shape());
  check_same_shape("Dropout backward: dx vs x", dx->shape(), x.shape());
  if (masked_)
    cpu::dropout_backward(dx->data(), dy.data(), mask_.data(), x.numel());
  else
    cpu::copy(dx->data(), dy.data(), x.numel());
}

}  // namespace pdnn
