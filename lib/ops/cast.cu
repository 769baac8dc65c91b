// Casts float32 <-> bfloat16 on the GPU (cast.h): one grid-stride loop each, the rounding of
// ops/kit/round.h (cvt.rn.bf16.f32). Memory bound: 6 bytes an element; no tiling pays.
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
}  // namespace

void cast_to_bf16(int64_t n, const float* x, bf16* y, CudaExec e) {
  if (n <= 0) return;
  to_bf16_k<<<blocks_for(n, tpb(e)), tpb(e), 0, stream_of(e)>>>(n, x, y);
  PDNN_CUDA_LAUNCH_CHECK("cast_to_bf16");
}

void cast_to_f32(int64_t n, const bf16* x, float* y, CudaExec e) {
  if (n <= 0) return;
  to_f32_k<<<blocks_for(n, tpb(e)), tpb(e), 0, stream_of(e)>>>(n, x, y);
  PDNN_CUDA_LAUNCH_CHECK("cast_to_f32");
}

}  // namespace cuda
}  // namespace pdnn
