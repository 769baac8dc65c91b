// Dropout on the GPU (see dropout.h): the same counter-based draw as the CPU (splitmix64, 53-bit
// uniform compared in double), so the masks are bit-identical. The draw's start is read from
// device memory, so a CUDA graph replays with a fresh mask each step. bf16 x, y, dy, dx (the
// mask stays float32): the product in fp32, rounded once.
#include "cuda/launch.h"
#include "ops/dropout.h"
#include "ops/kit/round.h"

namespace pdnn {
namespace cuda {

namespace {
template <class E>
__global__ void dropout_f(int64_t n, float p, uint64_t seed, const int64_t* base, uint64_t skip,
                          const E* x, E* y, float* mask) {
  const uint64_t b = static_cast<uint64_t>(*base) + skip;
  const float scale = 1.f / (1.f - p);
  const double pd = p;
  PDNN_GRID_LOOP(i, n) {
    const bool keep = rng_to_unit(rng_at(seed, b + static_cast<uint64_t>(i) + 1)) >= pd;
    const float m = keep ? scale : 0.f;
    mask[i] = m;
    y[i] = kit::from_f32<E>(kit::to_f32(x[i]) * m);
  }
}
template <class E>
__global__ void dropout_b(int64_t n, const E* dy, const float* mask, E* dx) {
  PDNN_GRID_LOOP(i, n) dx[i] = kit::from_f32<E>(kit::to_f32(dy[i]) * mask[i]);
}

}  // namespace

template <class T>
void dropout_forward(int64_t n, float p, uint64_t seed, const int64_t* base, uint64_t skip,
                     const T* x, T* y, float* mask, CudaExec e) {
  if (n <= 0) return;
  dropout_f<<<blocks_for(n, tpb(e)), tpb(e), 0, stream_of(e)>>>(n, p, seed, base, skip, x, y,
                                                                mask);
  PDNN_CUDA_LAUNCH_CHECK("dropout_forward");
}
template <class T>
void dropout_backward(int64_t n, const T* dy, const float* mask, T* dx, CudaExec e) {
  if (n <= 0) return;
  dropout_b<<<blocks_for(n, tpb(e)), tpb(e), 0, stream_of(e)>>>(n, dy, mask, dx);
  PDNN_CUDA_LAUNCH_CHECK("dropout_backward");
}

// Both precisions' entry points (dropout.h).
#define PDNN_INSTANTIATE(T)                                                                 \
  template void dropout_forward(int64_t, float, uint64_t, const int64_t*, uint64_t, const T*, \
                                T*, float*, CudaExec);                                      \
  template void dropout_backward(int64_t, const T*, const float*, T*, CudaExec);
PDNN_INSTANTIATE(float)
PDNN_INSTANTIATE(bf16)
#undef PDNN_INSTANTIATE

}  // namespace cuda
}  // namespace pdnn
