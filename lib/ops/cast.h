// Casts between float32 and bfloat16, and the bf16 copy of the weights (mixed precision,
// core/precision.h: the master weights stay float32; the convolutions and dense layers read a
// bf16 copy of them, refreshed after each optimizer update).
//   to bf16:   y = round to nearest even (ops/kit/round.h's bf16_bits, the host twin bit for bit
//              the device's cvt.rn.bf16.f32; overflow to infinity, NaN stays NaN)
//   to fp32:   exact (a bf16 is the high half of a float)
// The CPU twin exists so that host code and tests round exactly as the GPU; the CPU runs no
// bf16 arithmetic.
#pragma once
#include <cstdint>

#include "core/context.h"
#include "core/exec.h"
#include "core/tensor.h"

namespace pdnn {

namespace cpu {
void cast_to_bf16(int64_t n, const float* x, bf16* y, CpuExec e);
void cast_to_f32(int64_t n, const bf16* x, float* y, CpuExec e);
}  // namespace cpu

namespace cuda {
// One grid-stride loop each: 6 bytes an element, at the copy rate; 4 elements a thread where
// the pointers allow it (cast_takes_x4: the float32 side 16-byte, the bf16 side 8-byte
// aligned), else one.
void cast_to_bf16(int64_t n, const float* x, bf16* y, CudaExec e);
void cast_to_f32(int64_t n, const bf16* x, float* y, CudaExec e);
// The same with the width forced, for the tests (X4 on pointers that do not allow it is
// refused).
enum class CastWidth { Auto, One, X4 };
bool cast_takes_x4(const void* f32, const void* b16);
void cast_to_bf16(int64_t n, const float* x, bf16* y, CudaExec e, CastWidth width);
void cast_to_f32(int64_t n, const bf16* x, float* y, CudaExec e, CastWidth width);
}  // namespace cuda

namespace ops {
// y = x converted to y's type: float32 -> bfloat16 or bfloat16 -> float32 (same element count,
// same device; anything else is refused naming both types).
void cast(Context& ctx, const Tensor& x, Tensor& y);
// The bf16 copy of a flat parameter buffer (ParamSet::values(), float32): `copy` becomes a
// bfloat16 tensor of its shape on its device (allocated once, grow-only) and is rewritten in one
// kernel. Each parameter's bf16 view starts at ParamSet::offset(i) of the copy, as its float32
// view does of the buffer (64-byte aligned there, 32 bytes here: enough for 16-byte loads).
void refresh_bf16_copy(Context& ctx, const Tensor& values, Tensor& copy);
}  // namespace ops

}  // namespace pdnn
