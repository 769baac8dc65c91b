// Loss kernels and metric accumulators on the GPU (see loss.h). Reductions are single blocks or
// one block per chunk, summed in double in a fixed tree order (deterministic); the accumulators
// are updated by one thread, so a step never reads back.
#include <cmath>

#include "cuda/launch.h"
#include "ops/loss.h"

namespace pdnn {
namespace cuda {

namespace {

// One thread per row (K is small: 10 digits, 6 classes).
__global__ void sce_f(int64_t n, int64_t k, const float* z, const int32_t* labels, float* probs,
                      float* row_loss) {
  PDNN_GRID_LOOP(i, n) {
    const float* zi = z + i * k;
    float* pi = probs + i * k;
    float m = zi[0];
    for (int64_t j = 1; j < k; ++j) m = zi[j] > m ? zi[j] : m;
    double sum = 0.0;
    for (int64_t j = 0; j < k; ++j) {
      pi[j] = expf(zi[j] - m);
      sum += pi[j];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t j = 0; j < k; ++j) pi[j] *= inv;
    const int32_t l = labels[i];
    row_loss[i] = (l >= 0 && l < k)
                      ? static_cast<float>(log(sum) - (static_cast<double>(zi[l]) - m))
                      : NAN;  // a bad label makes the run stop as diverged
  }
}

__global__ void sce_b(int64_t n, int64_t k, float scale, const float* probs,
                      const int32_t* labels, float* dz) {
  PDNN_GRID_LOOP(t, n * k) {
    const int64_t i = t / k, j = t % k;
    dz[t] = probs[t] * scale - (labels[i] == j ? scale : 0.f);
  }
}

__global__ void metrics_k(int64_t n, int64_t k, const float* z, const int32_t* labels,
                          const float* row_loss, double* acc) {
  __shared__ double sh[kThreads];
  double loss = 0.0, correct = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    loss += row_loss[i];
    int64_t best = 0;
    for (int64_t j = 1; j < k; ++j)
      if (z[i * k + j] > z[i * k + best]) best = j;
    correct += best == labels[i] ? 1.0 : 0.0;
  }
  const double l = block_sum(loss, sh);
  __syncthreads();
  const double c = block_sum(correct, sh);
  if (threadIdx.x == 0) {
    acc[0] += l;
    acc[1] += c;
    acc[2] += static_cast<double>(n);
  }
}

// parts[chunk] = sum over the chunk of f(i), one block per chunk.
template <class F>
__device__ void chunk_sum(int64_t n, float* parts, F f) {
  __shared__ double sh[kThreads];
  const int64_t c = blockIdx.x, lo = c * kLossChunk, hi = min(n, lo + kLossChunk);
  double s = 0.0;
  for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) s += f(i);
  const double t = block_sum(s, sh);
  if (threadIdx.x == 0) parts[c] = static_cast<float>(t);
}

__global__ void bce_f(int64_t n, const float* p, const float* t, float* parts) {
  chunk_sum(n, parts, [=](int64_t i) {
    const double lp = fmax(log(static_cast<double>(p[i])), -100.0);
    const double lq = fmax(log1p(-static_cast<double>(p[i])), -100.0);
    return -(t[i] * lp + (1.0 - t[i]) * lq);
  });
}

__global__ void bce_b(int64_t n, float scale, const float* p, const float* t, float* dp) {
  PDNN_GRID_LOOP(i, n) dp[i] = scale * (p[i] - t[i]) / fmaxf((1.f - p[i]) * p[i], 1e-12f);
}

__global__ void bcel_f(int64_t n, const float* z, const float* t, float* parts) {
  chunk_sum(n, parts, [=](int64_t i) {
    const double zi = z[i];
    return fmax(zi, 0.0) - zi * t[i] + log1p(exp(-fabs(zi)));
  });
}

__global__ void bcel_b(int64_t n, float scale, const float* z, const float* t, float* dz) {
  PDNN_GRID_LOOP(i, n) {
    const float e = expf(-fabsf(z[i]));
    const float s = z[i] >= 0.f ? 1.f / (1.f + e) : e / (1.f + e);
    dz[i] = scale * (s - t[i]);
  }
}

__global__ void sum_into_k(int64_t n, float scale, const float* x, double* acc) {
  __shared__ double sh[kThreads];
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += x[i];
  const double t = block_sum(s, sh);
  if (threadIdx.x == 0) acc[0] += static_cast<double>(scale) * t;
}

}  // namespace

void softmax_cross_entropy_forward(int64_t n, int64_t k, const float* z, const int32_t* labels,
                                   float* probs, float* row_loss, CudaExec e) {
  sce_f<<<blocks_for(n, 128), 128, 0, stream_of(e)>>>(n, k, z, labels, probs, row_loss);
  PDNN_CUDA_LAUNCH_CHECK("softmax_cross_entropy_forward");
}

void softmax_cross_entropy_backward(int64_t n, int64_t k, float scale, const float* probs,
                                    const int32_t* labels, float* dz, CudaExec e) {
  sce_b<<<blocks_for(n * k, tpb(e)), tpb(e), 0, stream_of(e)>>>(n, k, scale, probs, labels, dz);
  PDNN_CUDA_LAUNCH_CHECK("softmax_cross_entropy_backward");
}

void classifier_metrics(int64_t n, int64_t k, const float* z, const int32_t* labels,
                        const float* row_loss, double* acc, CudaExec e) {
  metrics_k<<<1, kThreads, 0, stream_of(e)>>>(n, k, z, labels, row_loss, acc);
  PDNN_CUDA_LAUNCH_CHECK("classifier_metrics");
}

void binary_cross_entropy_forward(int64_t n, const float* p, const float* t, float* parts,
                                  CudaExec e) {
  bce_f<<<static_cast<unsigned>(loss_chunks(n)), kThreads, 0, stream_of(e)>>>(n, p, t, parts);
  PDNN_CUDA_LAUNCH_CHECK("binary_cross_entropy_forward");
}

void binary_cross_entropy_backward(int64_t n, float scale, const float* p, const float* t,
                                   float* dp, CudaExec e) {
  bce_b<<<blocks_for(n, tpb(e)), tpb(e), 0, stream_of(e)>>>(n, scale, p, t, dp);
  PDNN_CUDA_LAUNCH_CHECK("binary_cross_entropy_backward");
}

void bce_with_logits_forward(int64_t n, const float* z, const float* t, float* parts,
                             CudaExec e) {
  bcel_f<<<static_cast<unsigned>(loss_chunks(n)), kThreads, 0, stream_of(e)>>>(n, z, t, parts);
  PDNN_CUDA_LAUNCH_CHECK("bce_with_logits_forward");
}

void bce_with_logits_backward(int64_t n, float scale, const float* z, const float* t, float* dz,
                              CudaExec e) {
  bcel_b<<<blocks_for(n, tpb(e)), tpb(e), 0, stream_of(e)>>>(n, scale, z, t, dz);
  PDNN_CUDA_LAUNCH_CHECK("bce_with_logits_backward");
}

void sum_into(int64_t n, float scale, const float* x, double* acc, CudaExec e) {
  sum_into_k<<<1, kThreads, 0, stream_of(e)>>>(n, scale, x, acc);
  PDNN_CUDA_LAUNCH_CHECK("sum_into");
}

}  // namespace cuda
}  // namespace pdnn
