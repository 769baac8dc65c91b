// Casts float32 <-> bfloat16 on the GPU (cast.h): the rounding of ops/kit/round.h
// (cvt.rn.bf16.f32). Memory bound: 6 bytes an element; no tiling pays. Where both pointers
// allow it (x 16-byte and y 8-byte aligned, or the reverse for to_f32: the parameter buffer
// and its copy always do), a thread moves 4 elements with one load and one store each; the
// last n % 4 go one a thread in the same launch. Else one element a thread.
// ncu on an H200 (W5's bf16 step), the parameter copies of G (3.58M) and D (2.77M): one element
// a thread 12.2 and 10.0 us (~1.7 TB/s), 4 a thread 7.3 and 6.3 (results/bench/w5-s17-h200).
#include <algorithm>
#include <cstdint>

#include "cuda/launch.h"
#include "ops/cast.h"
#include "ops/kit/round.h"

namespace pdnn {
namespace cuda {

namespace {
__global__ void to_bf16_k(int64_t n, const float* __restrict__ x, bf16* __restrict__ y) {
  PDNN_GRID_LOOP(i, n) y[i] = kit::from_f32<bf16>(x[i]);
}
__global__ void to_f32_k(int64_t n, const bf16* __restrict__ x, float* __restrict__ y) {
  PDNN_GRID_LOOP(i, n) y[i] = kit::to_f32(x[i]);
}

// n4 = n / 4 groups of 4, then the n % 4 left.
__global__ void to_bf16_x4_k(int64_t n, const float4* __restrict__ x, uint2* __restrict__ y) {
  const int64_t n4 = n / 4;
  PDNN_GRID_LOOP(i, n4) {
    const float4 v = x[i];
    y[i] = make_uint2(kit::bf16x2_bits(v.x, v.y), kit::bf16x2_bits(v.z, v.w));
  }
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < n - 4 * n4)
    reinterpret_cast<bf16*>(y)[4 * n4 + t] =
        kit::from_f32<bf16>(reinterpret_cast<const float*>(x)[4 * n4 + t]);
}
__global__ void to_f32_x4_k(int64_t n, const uint2* __restrict__ x, float4* __restrict__ y) {
  const int64_t n4 = n / 4;
  PDNN_GRID_LOOP(i, n4) {
    const uint2 v = x[i];
    y[i] = make_float4(kit::bf16_float(static_cast<uint16_t>(v.x)),
                       kit::bf16_float(static_cast<uint16_t>(v.x >> 16)),
                       kit::bf16_float(static_cast<uint16_t>(v.y)),
                       kit::bf16_float(static_cast<uint16_t>(v.y >> 16)));
  }
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < n - 4 * n4)
    reinterpret_cast<float*>(y)[4 * n4 + t] =
        kit::to_f32(reinterpret_cast<const bf16*>(x)[4 * n4 + t]);
}
}  // namespace

bool cast_takes_x4(const void* f32, const void* b16) { return aligned(f32, 16) && aligned(b16, 8); }

void cast_to_bf16(int64_t n, const float* x, bf16* y, CudaExec e, CastWidth width) {
  if (n <= 0) return;
  if (width == CastWidth::X4 || (width == CastWidth::Auto && cast_takes_x4(x, y))) {
    PDNN_CHECK(cast_takes_x4(x, y), "cast_to_bf16: 4 wide needs x 16-byte and y 8-byte aligned");
    to_bf16_x4_k<<<blocks_for(std::max<int64_t>(n / 4, 1), tpb(e)), tpb(e), 0, stream_of(e)>>>(
        n, reinterpret_cast<const float4*>(x), reinterpret_cast<uint2*>(y));
  } else {
    to_bf16_k<<<blocks_for(n, tpb(e)), tpb(e), 0, stream_of(e)>>>(n, x, y);
  }
  PDNN_CUDA_LAUNCH_CHECK("cast_to_bf16");
}

void cast_to_bf16(int64_t n, const float* x, bf16* y, CudaExec e) {
  cast_to_bf16(n, x, y, e, CastWidth::Auto);
}

void cast_to_f32(int64_t n, const bf16* x, float* y, CudaExec e, CastWidth width) {
  if (n <= 0) return;
  if (width == CastWidth::X4 || (width == CastWidth::Auto && cast_takes_x4(y, x))) {
    PDNN_CHECK(cast_takes_x4(y, x), "cast_to_f32: 4 wide needs x 8-byte and y 16-byte aligned");
    to_f32_x4_k<<<blocks_for(std::max<int64_t>(n / 4, 1), tpb(e)), tpb(e), 0, stream_of(e)>>>(
        n, reinterpret_cast<const uint2*>(x), reinterpret_cast<float4*>(y));
  } else {
    to_f32_k<<<blocks_for(n, tpb(e)), tpb(e), 0, stream_of(e)>>>(n, x, y);
  }
  PDNN_CUDA_LAUNCH_CHECK("cast_to_f32");
}

void cast_to_f32(int64_t n, const bf16* x, float* y, CudaExec e) {
  cast_to_f32(n, x, y, e, CastWidth::Auto);
}

}  // namespace cuda
}  // namespace pdnn
