// Fully connected layer math (PyTorch's Linear): x (n,in), w (out,in), b (out) ->
//   forward:  y (n,out) = act(x w^T + b)                 (b may be nullptr; act fused or none)
//   backward: g = act'(y) dy; dw += g^T x; db += sum over n of g (in row order: a fixed
//             summation order); dx = g w   (db, dx may be nullptr)
// ws: n*out floats of scratch for g when there is an activation (else unused, may be null).
// dw_zero: dw holds zeros (the model's zero_grad just ran): the product is written into it
// (the GEMM's beta 0), the same sums without reading dw: W4's 1024 x 100352 dw is 411 MB.
#pragma once
#include <cstdint>

#include "core/context.h"
#include "core/exec.h"
#include "core/tensor.h"
#include "ops/activation.h"

namespace pdnn {

namespace cpu {
void dense_forward(int64_t n, int64_t in, int64_t out, const float* x, const float* w,
                   const float* b, float* y, Act act, CpuExec e);
void dense_backward(int64_t n, int64_t in, int64_t out, const float* x, const float* w,
                    const float* dy, const float* y, float* dw, float* db, float* dx, Act act,
                    float* ws, bool dw_zero, CpuExec e);
}  // namespace cpu

namespace cuda {
// Batches of at most kDenseSmallRows rows run one fused kernel (dot products, bias and
// activation; cuBLAS picks a 50 us kernel for W2's 8 x 1960 x 100 product), larger ones cuBLAS.
constexpr int64_t kDenseSmallRows = 16;
void dense_forward(int64_t n, int64_t in, int64_t out, const float* x, const float* w,
                   const float* b, float* y, Act act, CudaExec e);
void dense_backward(int64_t n, int64_t in, int64_t out, const float* x, const float* w,
                    const float* dy, const float* y, float* dw, float* db, float* dx, Act act,
                    float* ws, bool dw_zero, CudaExec e);
// bf16 x, w, y, dy, dx; fp32 b, dw, db (mixed precision): cuBLAS's bf16 GEMM with fp32 sums.
// Forward: the product into ws (n*out floats), then y = act(ws + b) rounded once. Backward:
// g = act'(y) dy rounded to bf16 into ws (n*out bf16) when there is an activation; dw += g^T x
// in fp32 (the GEMM's beta); db += row sums in fp32 (rows in order); dx = g w rounded once.
void dense_forward(int64_t n, int64_t in, int64_t out, const bf16* x, const bf16* w,
                   const float* b, bf16* y, Act act, float* ws, CudaExec e);
void dense_backward(int64_t n, int64_t in, int64_t out, const bf16* x, const bf16* w,
                    const bf16* dy, const bf16* y, float* dw, float* db, bf16* dx, Act act,
                    float* ws, bool dw_zero, CudaExec e);
}  // namespace cuda

namespace ops {
// x: (n, in) or any shape with n rows of `in` values; b, db empty when there is no bias; y (the
// forward's output) is read in backward only with an activation. x, w, y, dy, dx bfloat16 with
// b, dw, db float32: the GPU's bf16 twins (the CPU refuses them).
void dense_forward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y,
                   Act act = {});
void dense_backward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& dy,
                    const Tensor& y, Tensor& dw, Tensor& db, Tensor* dx, Act act = {},
                    bool dw_zero = false);
}  // namespace ops

}  // namespace pdnn
