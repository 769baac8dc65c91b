// fill / zero / counter_add on the GPU (see basic.h).
#include "cuda/launch.h"
#include "ops/basic.h"

namespace pdnn {
namespace cuda {

namespace {
__global__ void fill_kernel(int64_t n, float v, float* y) {
  PDNN_GRID_LOOP(i, n) y[i] = v;
}
__global__ void counter_add_kernel(int64_t add, int64_t* counter) { *counter += add; }
}  // namespace

void fill(int64_t n, float v, float* y, CudaExec e) {
  if (n <= 0) return;
  fill_kernel<<<blocks_for(n, tpb(e)), tpb(e), 0, stream_of(e)>>>(n, v, y);
  PDNN_CUDA_LAUNCH_CHECK("fill");
}

void zero_bytes(size_t bytes, void* p, CudaExec e) {
  if (bytes > 0) PDNN_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_of(e)));
}

void counter_add(int64_t add, int64_t* counter, CudaExec e) {
  counter_add_kernel<<<1, 1, 0, stream_of(e)>>>(add, counter);
  PDNN_CUDA_LAUNCH_CHECK("counter_add");
}

}  // namespace cuda
}  // namespace pdnn
