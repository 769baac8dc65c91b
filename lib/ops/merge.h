// The ops of the graph model's merge layers (layers/merge.h) and of its gradient sums:
//   channel_copy: for each of n images, c channels of `plane` floats from src (src_c channels a
//     image, starting at channel src_at) to dst (dst_c channels, at dst_at): Concat's forward
//     (each input into its place in y) and backward (each input's part of dy out of it);
//   add: y = a + b elementwise (y may be a or b): Add's forward, and the sum of the gradients a
//     node's output gets from several readers.
// Data movement and one rounding per element: the GPU gives the CPU's numbers bit for bit. On the
// GPU the tensors may also be bfloat16 (mixed precision): the copies move bf16 elements as they
// are, add sums in fp32 and rounds once to bf16. The CPU refuses bf16 in one line.
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

// The GPU twins are templates over the tensors' type T, float or bf16 (both instantiated in
// merge.cu).
namespace cuda {
template <class T>
void channel_copy(int64_t n, int64_t c, int64_t plane, const T* src, int64_t src_c,
                  int64_t src_at, T* dst, int64_t dst_c, int64_t dst_at, CudaExec e);
template <class T>
void add(int64_t n, const T* a, const T* b, T* y, CudaExec e);
}  // namespace cuda

namespace ops {
// src and dst (N, C, ...) with the same N and the same elements per channel: channels
// [src_at, src_at + c) of src into channels [dst_at, dst_at + c) of dst (of one type).
void channel_copy(Context& ctx, const Tensor& src, int64_t src_at, Tensor& dst, int64_t dst_at,
                  int64_t c);
// y = a + b, all of one shape and type (y may be a or b).
void add(Context& ctx, const Tensor& a, const Tensor& b, Tensor& y);
}  // namespace ops

}  // namespace pdnn
