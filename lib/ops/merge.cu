// Concat's channel copies and elementwise sums on the GPU (merge.h).
#include "cuda/launch.h"
#include "ops/merge.h"

namespace pdnn {
namespace cuda {

namespace {

// One thread per element of the n x (c * plane) block copied.
__global__ void channel_copy_k(int64_t n, int64_t len, int64_t plane, const float* src,
                               int64_t src_c, int64_t src_at, float* dst, int64_t dst_c,
                               int64_t dst_at) {
  PDNN_GRID_LOOP(t, n * len) {
    const int64_t i = t / len, r = t % len;
    dst[(i * dst_c + dst_at) * plane + r] = src[(i * src_c + src_at) * plane + r];
  }
}

__global__ void add_k(int64_t n, const float* a, const float* b, float* y) {
  PDNN_GRID_LOOP(i, n) y[i] = a[i] + b[i];
}

}  // namespace

void channel_copy(int64_t n, int64_t c, int64_t plane, const float* src, int64_t src_c,
                  int64_t src_at, float* dst, int64_t dst_c, int64_t dst_at, CudaExec e) {
  const int64_t len = c * plane;
  channel_copy_k<<<blocks_for(n * len, tpb(e)), tpb(e), 0, stream_of(e)>>>(
      n, len, plane, src, src_c, src_at, dst, dst_c, dst_at);
  PDNN_CUDA_LAUNCH_CHECK("channel_copy");
}

void add(int64_t n, const float* a, const float* b, float* y, CudaExec e) {
  add_k<<<blocks_for(n, tpb(e)), tpb(e), 0, stream_of(e)>>>(n, a, b, y);
  PDNN_CUDA_LAUNCH_CHECK("add");
}

}  // namespace cuda
}  // namespace pdnn
