// The ops of the graph model's merge layers (layers/merge.h) and of its gradient sums:
//   channel_copy: for each of n images, c channels of `plane` floats from src (src_c channels a
//     image, starting at channel src_at) to dst (dst_c channels, at dst_at): Concat's forward
//     (each input into its place in y) and backward (each input's part of dy out of it);
//   add: y = a + b elementwise (y may be a or b): Add's forward, and the sum of the gradients a
//     node's output gets from several readers.
// Data movement and one rounding per element: the GPU gives the CPU's numbers bit for bit.
#pragma once
#include <cstdint>

#include "core/context.h"
#include "core/exec.h"
#include "core/tensor.h"

namespace pdnn {

namespace cpu {
void channel_copy(int64_t n, int64_t c, int64_t plane, const float* src, int64_t src_c,
                  int64_t src_at, float* dst, int64_t dst_c, int64_t dst_at, CpuExec e);
void add(int64_t n, const float* a, const float* b, float* y, CpuExec e);
}  // namespace cpu

namespace cuda {
void channel_copy(int64_t n, int64_t c, int64_t plane, const float* src, int64_t src_c,
                  int64_t src_at, float* dst, int64_t dst_c, int64_t dst_at, CudaExec e);
void add(int64_t n, const float* a, const float* b, float* y, CudaExec e);
}  // namespace cuda

namespace ops {
// src and dst (N, C, ...) with the same N and the same elements per channel: channels
// [src_at, src_at + c) of src into channels [dst_at, dst_at + c) of dst.
void channel_copy(Context& ctx, const Tensor& src, int64_t src_at, Tensor& dst, int64_t dst_at,
                  int64_t c);
// y = a + b, all of one shape (y may be a or b).
void add(Context& ctx, const Tensor& a, const Tensor& b, Tensor& y);
}  // namespace ops

}  // namespace pdnn
