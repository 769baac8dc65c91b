// Concat's channel copies and elementwise sums on the GPU (merge.h), templates over the
// tensors' type: float, or bf16 (copied as it is; the sum computed in fp32 and rounded once).
#include "cuda/launch.h"
#include "ops/kit/round.h"
#include "ops/merge.h"

namespace pdnn {
namespace cuda {

namespace {
using kit::from_f32;
using kit::to_f32;

// One thread per element of the n x (c * plane) block copied.
template <class T>
__global__ void channel_copy_k(int64_t n, int64_t len, int64_t plane, const T* src,
                               int64_t src_c, int64_t src_at, T* dst, int64_t dst_c,
                               int64_t dst_at) {
  PDNN_GRID_LOOP(t, n * len) {
    const int64_t i = t / len, r = t % len;
    dst[(i * dst_c + dst_at) * plane + r] = src[(i * src_c + src_at) * plane + r];
  }
}

template <class T>
__global__ void add_k(int64_t n, const T* a, const T* b, T* y) {
  PDNN_GRID_LOOP(i, n) y[i] = from_f32<T>(to_f32(a[i]) + to_f32(b[i]));
}

}  // namespace

template <class T>
void channel_copy(int64_t n, int64_t c, int64_t plane, const T* src, int64_t src_c,
                  int64_t src_at, T* dst, int64_t dst_c, int64_t dst_at, CudaExec e) {
  const int64_t len = c * plane;
  channel_copy_k<<<blocks_for(n * len, tpb(e)), tpb(e), 0, stream_of(e)>>>(
      n, len, plane, src, src_c, src_at, dst, dst_c, dst_at);
  PDNN_CUDA_LAUNCH_CHECK("channel_copy");
}

template <class T>
void add(int64_t n, const T* a, const T* b, T* y, CudaExec e) {
  add_k<<<blocks_for(n, tpb(e)), tpb(e), 0, stream_of(e)>>>(n, a, b, y);
  PDNN_CUDA_LAUNCH_CHECK("add");
}

#define PDNN_INSTANTIATE(T)                                                                  \
  template void channel_copy(int64_t, int64_t, int64_t, const T*, int64_t, int64_t, T*,      \
                             int64_t, int64_t, CudaExec);                                    \
  template void add(int64_t, const T*, const T*, T*, CudaExec);
PDNN_INSTANTIATE(float)
PDNN_INSTANTIATE(bf16)
#undef PDNN_INSTANTIATE

}  // namespace cuda
}  // namespace pdnn
