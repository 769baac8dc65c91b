// Fully connected layer math (PyTorch's Linear): x (n,in), w (out,in), b (out) ->
//   forward:  y (n,out) = x w^T + b                      (b may be nullptr)
//   backward: dw += dy^T x; db += sum over n of dy (in row order: a fixed summation order);
//             dx = dy w   (db, dx may be nullptr)
#pragma once
#include <cstdint>

#include "core/context.h"
#include "core/exec.h"
#include "core/tensor.h"

namespace pdnn {

namespace cpu {
void dense_forward(int64_t n, int64_t in, int64_t out, const float* x, const float* w,
                   const float* b, float* y, CpuExec e);
void dense_backward(int64_t n, int64_t in, int64_t out, const float* x, const float* w,
                    const float* dy, float* dw, float* db, float* dx, CpuExec e);
}  // namespace cpu

namespace cuda {
void dense_forward(int64_t n, int64_t in, int64_t out, const float* x, const float* w,
                   const float* b, float* y, CudaExec e);
void dense_backward(int64_t n, int64_t in, int64_t out, const float* x, const float* w,
                    const float* dy, float* dw, float* db, float* dx, CudaExec e);
}  // namespace cuda

namespace ops {
// x: (n, in) or any shape with n rows of `in` values; b, db empty when there is no bias.
void dense_forward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y);
void dense_backward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dw,
                    Tensor& db, Tensor* dx);
}  // namespace ops

}  // namespace pdnn
