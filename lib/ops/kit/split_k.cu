// The fixed-order split-K sum (split_k.h): one thread per element of dw (grid-stride), the
// splits added left to right from 0; the bias row sums by block 0. And the choice of the split.
#include "ops/kit/split_k.h"

#include <algorithm>

#include "cuda/launch.h"

namespace pdnn {
namespace kit {

namespace {
__global__ void sum_splits_k(int splits, int M, int N, const float* __restrict__ part,
                             const float* __restrict__ bias_part, float* __restrict__ dw,
                             float* __restrict__ db) {
  const int64_t mn = static_cast<int64_t>(M) * N;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < mn;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float s = 0.f;
    for (int z = 0; z < splits; ++z) s += part[z * mn + i];
    dw[i] += s;
  }
  if (db && blockIdx.x == 0)
    for (int m = threadIdx.x; m < M; m += blockDim.x) {
      float s = 0.f;
      for (int z = 0; z < splits; ++z) s += bias_part[static_cast<int64_t>(z) * M + m];
      db[m] += s;
    }
}
}  // namespace

int device_sms() {
  int dev = 0, sms = 0;
  PDNN_CUDA_CHECK(cudaGetDevice(&dev));
  PDNN_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms;
}

KSplit split_k(int64_t tiles, int64_t K, int bk) { return split_k_for(tiles, K, bk, device_sms()); }

void sum_splits(int splits, int M, int N, const float* part, const float* bias_part, float* dw,
                float* db, CudaExec e, const char* what) {
  const int64_t mn = static_cast<int64_t>(M) * N;
  sum_splits_k<<<cuda::blocks_for(mn, 256), 256, 0, cuda::stream_of(e)>>>(splits, M, N, part,
                                                                          bias_part, dw, db);
  (void)what;
  PDNN_CUDA_LAUNCH_CHECK(what);
}

}  // namespace kit
}  // namespace pdnn
