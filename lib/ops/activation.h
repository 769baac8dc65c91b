// Elementwise activations: ReLU, LeakyReLU, Sigmoid, Tanh; n elements each.
//   relu:       y = max(x, 0);              dx = x > 0 ? dy : 0   (the gradient at 0 is 0, as PyTorch)
//   leaky_relu: y = x > 0 ? x : slope x;    dx = x > 0 ? dy : slope dy
//   sigmoid:    y = 1 / (1 + exp(-x));      dx = dy y (1 - y)     (from y: cheaper than exp again)
//   tanh:       y = tanh(x);                dx = dy (1 - y^2)
// Kernels may run in place (y == x in forward, dx == dy in backward).
// bfloat16 tensors (mixed precision) have GPU kernels: computed in fp32 from the bf16 inputs,
// rounded once to bf16 where written; the CPU refuses them (no bf16 path).
#pragma once
#include <cstdint>

#include "core/context.h"
#include "core/exec.h"
#include "core/tensor.h"

namespace pdnn {

// An activation fused into the op before it (a convolution's output write, BatchNorm's
// normalisation): y = act(z), one pass over memory instead of two each way. Backward reads the
// derivative off y (y > 0 iff z > 0, exact since slope >= 0).
enum class FusedAct : uint8_t { None, ReLU, LeakyReLU };
struct Act {
  FusedAct kind = FusedAct::None;
  float slope = 0.f;  // LeakyReLU's
};
const char* fused_act_name(FusedAct a);

namespace cpu {
void relu_forward(int64_t n, const float* x, float* y, CpuExec e);
void relu_backward(int64_t n, const float* x, const float* dy, float* dx, CpuExec e);
void leaky_relu_forward(int64_t n, float slope, const float* x, float* y, CpuExec e);
void leaky_relu_backward(int64_t n, float slope, const float* x, const float* dy, float* dx,
                         CpuExec e);
void sigmoid_forward(int64_t n, const float* x, float* y, CpuExec e);
void sigmoid_backward(int64_t n, const float* y, const float* dy, float* dx, CpuExec e);
void tanh_forward(int64_t n, const float* x, float* y, CpuExec e);
void tanh_backward(int64_t n, const float* y, const float* dy, float* dx, CpuExec e);
}  // namespace cpu

// The GPU twins are templates over the tensors' type T, float or bf16 (both instantiated in
// activation.cu): one declaration for both precisions.
namespace cuda {
template <class T>
void relu_forward(int64_t n, const T* x, T* y, CudaExec e);
template <class T>
void relu_backward(int64_t n, const T* x, const T* dy, T* dx, CudaExec e);
template <class T>
void leaky_relu_forward(int64_t n, float slope, const T* x, T* y, CudaExec e);
template <class T>
void leaky_relu_backward(int64_t n, float slope, const T* x, const T* dy, T* dx, CudaExec e);
template <class T>
void sigmoid_forward(int64_t n, const T* x, T* y, CudaExec e);
template <class T>
void sigmoid_backward(int64_t n, const T* y, const T* dy, T* dx, CudaExec e);
template <class T>
void tanh_forward(int64_t n, const T* x, T* y, CudaExec e);
template <class T>
void tanh_backward(int64_t n, const T* y, const T* dy, T* dx, CudaExec e);
}  // namespace cuda

// Tensor ops: shapes must agree, all tensors on one device and of one type (float32, or
// bfloat16 on the GPU).
namespace ops {
void relu_forward(Context& ctx, const Tensor& x, Tensor& y);
void relu_backward(Context& ctx, const Tensor& x, const Tensor& dy, Tensor& dx);
void leaky_relu_forward(Context& ctx, float slope, const Tensor& x, Tensor& y);
void leaky_relu_backward(Context& ctx, float slope, const Tensor& x, const Tensor& dy, Tensor& dx);
void sigmoid_forward(Context& ctx, const Tensor& x, Tensor& y);
void sigmoid_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx);
void tanh_forward(Context& ctx, const Tensor& x, Tensor& y);
void tanh_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx);
}  // namespace ops

}  // namespace pdnn
