// Kernels that run pieces of ops/kit/ on the GPU for test_kernel_kit.cpp (kernel_kit_probe.cu;
// CUDA builds only). Pointers are device pointers, n elements; each call runs on stream e and
// returns after queueing.
#pragma once
#include <cstdint>

#include "core/exec.h"

namespace pdnn {
namespace kit_probe {

// bits[i] = kit::tf32_bits(x[i]); bits[i] = kit::bf16_bits(x[i]) (in the low 16 bits);
// bits[i] = kit::bf16x2_bits(x[2i], x[2i+1]) for i < n/2.
void tf32_bits(int n, const float* x, uint32_t* bits, CudaExec e);
void bf16_bits(int n, const float* x, uint32_t* bits, CudaExec e);
void bf16x2_bits(int n, const float* x, uint32_t* bits, CudaExec e);

// One warp: c (16 x 8, row-major) = a (16 x K) b (K x 8), the operands rounded to TF32 or BF16
// as they land in shared memory, their fragments loaded by ldmatrix and multiplied by mma.sync.
//   TF32: a row-major (ldmatrix.x4), b stored n-major, b^T (8 x K) (ldmatrix.x2); K % 8 == 0.
//   BF16, kmajor false: as TF32 (x4, x2); kmajor true: a stored k-major, a^T (K x 16)
//     (ldmatrix.x4.trans), b k-major (K x 8) (ldmatrix.x2.trans); K % 16 == 0.
// a, b: the operands in the layout named (row-major in memory).
void tile_gemm_tf32(int K, const float* a, const float* bt, float* c, CudaExec e);
void tile_gemm_bf16(int K, bool kmajor, const float* a, const float* b, float* c, CudaExec e);

// ldmatrix.x1 (trans: .x1.trans) of one 8x8 matrix m of 16-bit elements (row-major, 64 values,
// each in the low half of m[i]): regs[lane] = the register lane receives.
void ldmatrix_x1(bool trans, const uint32_t* m, uint32_t* regs, CudaExec e);

// kit::window_max over every window of one plane (h x w, window k, stride s, oh x ow outputs):
// value[o], at[o].
void window_max(int h, int w, int k, int s, int oh, int ow, const float* x, float* value,
                int32_t* at, CudaExec e);

}  // namespace kit_probe
}  // namespace pdnn
