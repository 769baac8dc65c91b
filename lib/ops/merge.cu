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

template <class T>
__global__ void add_k(int64_t n, const T* a, const T* b, T* y) {
  PDNN_GRID_LOOP(i, n) y[i] = from_f32<T>(to_f32(a[i]) + to_f32(b[i]));
}

}  // namespace

// Each image's c * plane elements are one contiguous run in src and in dst: one device-to-device
// copy an image, the CPU twin's per-image memcpy. One 2-D copy of the n rows moved the U-Net's
// cat1 (512 x 512, batch 4: rows of 67 MB) at 2.8 TB/s, 67% of the 1-D copy rate
// bench_conv_gpu measures (4.2 TB/s on an H200); these 1-D copies made the step 0.25-0.28 ms
// shorter (results/bench/concat1d-h200). A CUDA graph captures each as a node.
template <class T>
void channel_copy(int64_t n, int64_t c, int64_t plane, const T* src, int64_t src_c,
                  int64_t src_at, T* dst, int64_t dst_c, int64_t dst_at, CudaExec e) {
  const size_t row = static_cast<size_t>(c * plane) * sizeof(T);
  for (int64_t i = 0; i < n; ++i)
    PDNN_CUDA_CHECK(cudaMemcpyAsync(dst + (i * dst_c + dst_at) * plane, src + (i * src_c + src_at) * plane,
                                    row, cudaMemcpyDeviceToDevice, stream_of(e)));
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
