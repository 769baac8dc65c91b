// Elementwise activations: CPU kernels and the dispatch (see activation.h).
#include "ops/activation.h"

#include <algorithm>
#include <cmath>

#include "core/parallel.h"
#include "ops/dispatch.h"
#include "ops/simd_tanh.h"

namespace pdnn {

const char* fused_act_name(FusedAct a) {
  return a == FusedAct::ReLU ? "ReLU" : a == FusedAct::LeakyReLU ? "LeakyReLU" : "none";
}

namespace cpu {

void relu_forward(int64_t n, const float* x, float* y, CpuExec e) {
  parallel_for(e, n, PDNN_PAR(n), [=](int64_t i) { y[i] = x[i] > 0.f ? x[i] : 0.f; });
}

void relu_backward(int64_t n, const float* x, const float* dy, float* dx, CpuExec e) {
  parallel_for(e, n, PDNN_PAR(n), [=](int64_t i) { dx[i] = x[i] > 0.f ? dy[i] : 0.f; });
}

void leaky_relu_forward(int64_t n, float slope, const float* x, float* y, CpuExec e) {
  parallel_for(e, n, PDNN_PAR(n), [=](int64_t i) { y[i] = x[i] > 0.f ? x[i] : slope * x[i]; });
}

void leaky_relu_backward(int64_t n, float slope, const float* x, const float* dy, float* dx,
                         CpuExec e) {
  parallel_for(e, n, PDNN_PAR(n), [=](int64_t i) { dx[i] = x[i] > 0.f ? dy[i] : slope * dy[i]; });
}

void sigmoid_forward(int64_t n, const float* x, float* y, CpuExec e) {
  // exp(-x) overflows to inf for x < -88, giving y = 0: the correct limit, no NaN.
  parallel_for(e, n, PDNN_PAR(n / 8), [=](int64_t i) { y[i] = 1.f / (1.f + std::exp(-x[i])); });
}

void sigmoid_backward(int64_t n, const float* y, const float* dy, float* dx, CpuExec e) {
  parallel_for(e, n, PDNN_PAR(n), [=](int64_t i) { dx[i] = dy[i] * y[i] * (1.f - y[i]); });
}

void tanh_forward(int64_t n, const float* x, float* y, CpuExec e) {
  // Branch-free and vectorised (ops/simd_tanh.h, within 2 ulp): W5's Tanh (786,432 values)
  // took 4.0 ms a call with std::tanh, ~10x a multiply-add a value, hence the lower threshold.
  constexpr int64_t kBlock = 4096;
  parallel_for(e, (n + kBlock - 1) / kBlock, PDNN_PAR(n / 8), [=](int64_t blk) PDNN_INLINE {
    const int64_t hi = std::min(n, (blk + 1) * kBlock);
#pragma omp simd
    for (int64_t i = blk * kBlock; i < hi; ++i) y[i] = simd_tanh(x[i]);
  });
}

void tanh_backward(int64_t n, const float* y, const float* dy, float* dx, CpuExec e) {
  parallel_for(e, n, PDNN_PAR(n), [=](int64_t i) { dx[i] = dy[i] * (1.f - y[i] * y[i]); });
}

}  // namespace cpu

namespace ops {

namespace {
Device check2(const char* op, const Tensor& a, const Tensor& b) {
  check_same_shape(op, a.shape(), b.shape());
  check_same_dtype(op, {&a, &b});
  return op_device(op, {&a, &b});
}
Device check3(const char* op, const Tensor& a, const Tensor& b, const Tensor& c) {
  check_same_shape(op, a.shape(), b.shape());
  check_same_shape(op, a.shape(), c.shape());
  check_same_dtype(op, {&a, &b, &c});
  return op_device(op, {&a, &b, &c});
}
}  // namespace

void relu_forward(Context& ctx, const Tensor& x, Tensor& y) {
  const Device d = check2("relu_forward", x, y);
  PDNN_DISPATCH_TYPED(ctx, d, x.dtype(), relu_forward, x.numel(), x.data<E>(), y.data<E>());
}
void relu_backward(Context& ctx, const Tensor& x, const Tensor& dy, Tensor& dx) {
  const Device d = check3("relu_backward", x, dy, dx);
  PDNN_DISPATCH_TYPED(ctx, d, x.dtype(), relu_backward, x.numel(), x.data<E>(), dy.data<E>(),
                      dx.data<E>());
}
void leaky_relu_forward(Context& ctx, float slope, const Tensor& x, Tensor& y) {
  const Device d = check2("leaky_relu_forward", x, y);
  PDNN_DISPATCH_TYPED(ctx, d, x.dtype(), leaky_relu_forward, x.numel(), slope, x.data<E>(),
                      y.data<E>());
}
void leaky_relu_backward(Context& ctx, float slope, const Tensor& x, const Tensor& dy,
                         Tensor& dx) {
  const Device d = check3("leaky_relu_backward", x, dy, dx);
  PDNN_DISPATCH_TYPED(ctx, d, x.dtype(), leaky_relu_backward, x.numel(), slope, x.data<E>(),
                      dy.data<E>(), dx.data<E>());
}
void sigmoid_forward(Context& ctx, const Tensor& x, Tensor& y) {
  const Device d = check2("sigmoid_forward", x, y);
  PDNN_DISPATCH_TYPED(ctx, d, x.dtype(), sigmoid_forward, x.numel(), x.data<E>(), y.data<E>());
}
void sigmoid_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx) {
  const Device d = check3("sigmoid_backward", y, dy, dx);
  PDNN_DISPATCH_TYPED(ctx, d, y.dtype(), sigmoid_backward, y.numel(), y.data<E>(), dy.data<E>(),
                      dx.data<E>());
}
void tanh_forward(Context& ctx, const Tensor& x, Tensor& y) {
  const Device d = check2("tanh_forward", x, y);
  PDNN_DISPATCH_TYPED(ctx, d, x.dtype(), tanh_forward, x.numel(), x.data<E>(), y.data<E>());
}
void tanh_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx) {
  const Device d = check3("tanh_backward", y, dy, dx);
  PDNN_DISPATCH_TYPED(ctx, d, y.dtype(), tanh_backward, y.numel(), y.data<E>(), dy.data<E>(),
                      dx.data<E>());
}

}  // namespace ops
}  // namespace pdnn
