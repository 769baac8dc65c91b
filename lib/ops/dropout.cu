// Dropout on the GPU (see dropout.h): the same counter-based draw as the CPU (splitmix64, 53-bit
// uniform compared in double), so the masks are bit-identical. The draw's start is read from
// device memory, so a CUDA graph replays with a fresh mask each step.
#include "cuda/launch.h"
#include "ops/dropout.h"

namespace pdnn {
namespace cuda {

namespace {
__global__ void dropout_f(int64_t n, float p, uint64_t seed, const int64_t* base, uint64_t skip,
                          const float* x, float* y, float* mask) {
  const uint64_t b = static_cast<uint64_t>(*base) + skip;
  const float scale = 1.f / (1.f - p);
  const double pd = p;
  PDNN_GRID_LOOP(i, n) {
    const bool keep = rng_to_unit(rng_at(seed, b + static_cast<uint64_t>(i) + 1)) >= pd;
    const float m = keep ? scale : 0.f;
    mask[i] = m;
    y[i] = x[i] * m;
  }
}
__global__ void dropout_b(int64_t n, const float* dy, const float* mask, float* dx) {
  PDNN_GRID_LOOP(i, n) dx[i] = dy[i] * mask[i];
}
}  // namespace

void dropout_forward(int64_t n, float p, uint64_t seed, const int64_t* base, uint64_t skip,
                     const float* x, float* y, float* mask, CudaExec e) {
  if (n <= 0) return;
  dropout_f<<<blocks_for(n, tpb(e)), tpb(e), 0, stream_of(e)>>>(n, p, seed, base, skip, x, y,
                                                                mask);
  PDNN_CUDA_LAUNCH_CHECK("dropout_forward");
}

void dropout_backward(int64_t n, const float* dy, const float* mask, float* dx, CudaExec e) {
  if (n <= 0) return;
  dropout_b<<<blocks_for(n, tpb(e)), tpb(e), 0, stream_of(e)>>>(n, dy, mask, dx);
  PDNN_CUDA_LAUNCH_CHECK("dropout_backward");
}

}  // namespace cuda
}  // namespace pdnn
