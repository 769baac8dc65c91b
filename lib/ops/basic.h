// The simplest ops: fill a float tensor, zero any tensor, add to a device-side counter.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/context.h"
#include "core/exec.h"
#include "core/tensor.h"

namespace pdnn {

namespace cpu {
void fill(int64_t n, float v, float* y, CpuExec e);
void zero_bytes(size_t bytes, void* p, CpuExec e);
// *counter += add (one int64: a step count or an RNG position that a CUDA graph must see move).
void counter_add(int64_t add, int64_t* counter, CpuExec e);
}  // namespace cpu

namespace cuda {
void fill(int64_t n, float v, float* y, CudaExec e);
void zero_bytes(size_t bytes, void* p, CudaExec e);
void counter_add(int64_t add, int64_t* counter, CudaExec e);
}  // namespace cuda

namespace ops {
void fill(Context& ctx, Tensor& t, float v);  // float32
void zero(Context& ctx, Tensor& t);           // any type
void counter_add(Context& ctx, Tensor& counter, int64_t add);  // (1) int64
}  // namespace ops

}  // namespace pdnn
