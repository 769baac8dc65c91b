// Inverted dropout with a counter-based mask: element i of a forward that starts at RNG
// position `base` is kept iff Rng::to_unit(Rng::at(seed, base + skip + i + 1)) >= p, and kept
// values are scaled by 1/(1-p). The mask depends only on (seed, base, skip, i): the same at any
// thread count and on either device, so CPU and GPU masks are identical. skip is 0 except in
// data-parallel training, where a rank holding rows r0.. of the global batch skips the values
// of the rows before its own (Rng::plan_rows), so its mask is the single-process mask's rows.
#pragma once
#include <cstdint>

#include "core/context.h"
#include "core/exec.h"
#include "core/tensor.h"

namespace pdnn {

namespace cpu {
// base: where the draw starts (read, not changed; on the GPU it lives in device memory so a
// CUDA graph sees it move). mask[i] = 1/(1-p) if kept else 0; y = x * mask.
void dropout_forward(int64_t n, float p, uint64_t seed, const int64_t* base, uint64_t skip,
                     const float* x, float* y, float* mask, CpuExec e);
// dx = dy * mask.
void dropout_backward(int64_t n, const float* dy, const float* mask, float* dx, CpuExec e);
}  // namespace cpu

// T: x's, y's, dy's and dx's type, float or bf16 (the mask float32: 1/(1-p) is no bf16 value
// in general), both instantiated in dropout.cu.
namespace cuda {
template <class T>
void dropout_forward(int64_t n, float p, uint64_t seed, const int64_t* base, uint64_t skip,
                     const T* x, T* y, float* mask, CudaExec e);
template <class T>
void dropout_backward(int64_t n, const T* dy, const float* mask, T* dx, CudaExec e);
}  // namespace cuda

namespace ops {
// Draws n = x.numel() values from the context's RNG (ctx.rng() on the CPU, its device copy on
// the GPU, both advanced by n; under a row shard by the global batch's count, Rng::plan_rows).
// mask: float32, x's shape. x, y (dy, dx): float32, or bfloat16 on the GPU.
void dropout_forward(Context& ctx, float p, const Tensor& x, Tensor& y, Tensor& mask);
void dropout_backward(Context& ctx, const Tensor& dy, const Tensor& mask, Tensor& dx);
}  // namespace ops

}  // namespace pdnn
