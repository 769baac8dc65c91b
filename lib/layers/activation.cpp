// Elementwise activations: shape checks and CPU kernels (see activation.h).
#include "layers/activation.h"

#include <cmath>

#include "core/error.h"
#include "core/parallel.h"

namespace pdnn {

namespace cpu {

void relu_forward(float* y, const float* x, int64_t n) {
#pragma omp parallel for if(PDNN_PAR(n)) schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

void relu_backward(float* dx, const float* x, const float* dy, int64_t n) {
#pragma omp parallel for if(PDNN_PAR(n)) schedule(static)
  for (int64_t i = 0; i < n; ++i) dx[i] = x[i] > 0.f ? dy[i] : 0.f;
}

void leaky_relu_forward(float* y, const float* x, int64_t n, float slope) {
#pragma omp parallel for if(PDNN_PAR(n)) schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : slope * x[i];
}

void leaky_relu_backward(float* dx, const float* x, const float* dy, int64_t n, float slope) {
#pragma omp parallel for if(PDNN_PAR(n)) schedule(static)
  for (int64_t i = 0; i < n; ++i) dx[i] = x[i] > 0.f ? dy[i] : slope * dy[i];
}

void sigmoid_forward(float* y, const float* x, int64_t n) {
  // exp(-x) overflows to inf for x < -88, giving y = 0: the correct limit, no NaN.
#pragma omp parallel for if(PDNN_PAR(n / 8)) schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = 1.f / (1.f + std::exp(-x[i]));
}

void sigmoid_backward(float* dx, const float* y, const float* dy, int64_t n) {
#pragma omp parallel for if(PDNN_PAR(n)) schedule(static)
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * y[i] * (1.f - y[i]);
}

void tanh_forward(float* y, const float* x, int64_t n) {
  // tanh costs ~10x a multiply-add, so the serial threshold is lower than for cheap loops.
#pragma omp parallel for if(PDNN_PAR(n / 8)) schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
}

void tanh_backward(float* dx, const float* y, const float* dy, int64_t n) {
#pragma omp parallel for if(PDNN_PAR(n)) schedule(static)
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * (1.f - y[i] * y[i]);
}

}  // namespace cpu

void Elementwise::forward(Context& ctx, const Tensor& x, Tensor& y) {
  (void)ctx;
  const std::string op = kind() + " forward";
  check_same_shape(op.c_str(), y.shape(), x.shape());
  forward_kernel(y.data(), x.data(), x.numel());
}

void Elementwise::backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                           Tensor* dx) {
  (void)ctx;
  if (!dx) return;  // no parameters: nothing else to do
  const std::string op = kind() + " backward";
  check_same_shape(op.c_str(), dy.shape(), x.shape());
  check_same_shape(op.c_str(), y.shape(), x.shape());
  check_same_shape(op.c_str(), dx->shape(), x.shape());
  backward_kernel(dx->data(), x.data(), y.data(), dy.data(), x.numel());
}

void ReLU::forward_kernel(float* y, const float* x, int64_t n) const { cpu::relu_forward(y, x, n); }
void ReLU::backward_kernel(float* dx, const float* x, const float* y, const float* dy,
                           int64_t n) const {
  (void)y;
  cpu::relu_backward(dx, x, dy, n);
}

LeakyReLU::LeakyReLU(float slope) : slope_(slope) {
  PDNN_CHECK(std::isfinite(slope), "LeakyReLU: slope %g is not finite", slope);
}
std::string LeakyReLU::describe() const { return strprintf("LeakyReLU(%g)", slope_); }
void LeakyReLU::forward_kernel(float* y, const float* x, int64_t n) const {
  cpu::leaky_relu_forward(y, x, n, slope_);
}
void LeakyReLU::backward_kernel(float* dx, const float* x, const float* y, const float* dy,
                                int64_t n) const {
  (void)y;
  cpu::leaky_relu_backward(dx, x, dy, n, slope_);
}

void Sigmoid::forward_kernel(float* y, const float* x, int64_t n) const {
  cpu::sigmoid_forward(y, x, n);
}
void Sigmoid::backward_kernel(float* dx, const float* x, const float* y, const float* dy,
                              int64_t n) const {
  (void)x;
  cpu::sigmoid_backward(dx, y, dy, n);
}

void Tanh::forward_kernel(float* y, const float* x, int64_t n) const { cpu::tanh_forward(y, x, n); }
void Tanh::backward_kernel(float* dx, const float* x, const float* y, const float* dy,
                           int64_t n) const {
  (void)x;
  cpu::tanh_backward(dx, y, dy, n);
}

}  // namespace pdnn
