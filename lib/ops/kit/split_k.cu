// The fixed-order split-K sum (split_k.h: the order), and the choice of the split. Floor: the
// partial sums' bytes once at the copy rate (W4's six weight gradients in bf16: ~170 MB, ~40 us
// on an H200).
#include "ops/kit/split_k.h"

#include <algorithm>
#include <climits>

#include "core/error.h"
#include "cuda/launch.h"

namespace pdnn {
namespace kit {

namespace {
constexpr int kSumThreads = 256;

// Block: E = kSumThreads / G consecutive elements x G groups; thread (group, element) sums its
// group's splits, a warp reading E consecutive floats of 32 / E splits (E = 8 at G = 32: one
// 32-byte sector each) or 32 of one; then group 0 adds the groups' sums in order from shared
// memory. Blocks past dw_blocks do db's sums (bias_part, M long) the same way.
__global__ void __launch_bounds__(kSumThreads)
    sum_splits_k(int splits, int64_t mn, int M, int g_w, int g_b, int64_t dw_blocks,
                 const float* __restrict__ part, const float* __restrict__ bias_part,
                 float* __restrict__ dw, float* __restrict__ db) {
  __shared__ float sums[kSumThreads];
  const bool bias = blockIdx.x >= dw_blocks;
  const int G = bias ? g_b : g_w, E = kSumThreads / G;
  const int64_t len = bias ? M : mn;
  const float* p = bias ? bias_part : part;
  float* out = bias ? db : dw;
  const int e = threadIdx.x % E, grp = threadIdx.x / E;
  const int64_t i = (bias ? blockIdx.x - dw_blocks : blockIdx.x) * static_cast<int64_t>(E) + e;
  const SplitGroup r = split_group(splits, G, grp);
  float s = 0.f;
  if (i < len) {
#pragma unroll 8
    for (int z = r.first; z < r.last; ++z) s += p[static_cast<int64_t>(z) * len + i];
  }
  sums[threadIdx.x] = s;
  __syncthreads();
  if (grp == 0 && i < len) {
    float t = 0.f;
    for (int k = 0; k < G; ++k) t += sums[k * E + e];
    out[i] += t;
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
  const int g_w = sum_split_groups(splits, mn), g_b = sum_split_groups(splits, M);
  const int64_t dw_blocks = (mn + kSumThreads / g_w - 1) / (kSumThreads / g_w);
  const int64_t blocks = dw_blocks + (db ? (M + kSumThreads / g_b - 1) / (kSumThreads / g_b) : 0);
  if (blocks == 0) return;
  PDNN_CHECK(blocks <= INT_MAX, "%s: the split sum's %lld elements are too many for one grid", what,
             static_cast<long long>(mn));
  sum_splits_k<<<static_cast<unsigned>(blocks), kSumThreads, 0, cuda::stream_of(e)>>>(
      splits, mn, M, g_w, g_b, dw_blocks, part, bias_part, dw, db);
  PDNN_CUDA_LAUNCH_CHECK(what);
}

}  // namespace kit
}  // namespace pdnn
