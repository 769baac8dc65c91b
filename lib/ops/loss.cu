// Loss kernels and metric accumulators on the GPU (see loss.h). Reductions are single blocks or
// one block per chunk, summed in double in a fixed tree order (deterministic); the accumulators
// are updated by one thread, so a step never reads back. bf16 logits or probabilities (mixed
// precision) are read as float; the losses, probabilities and sums stay fp32, the gradients
// are written in bf16 (rounded once): the kernels are templates over those two types.
#include <cmath>

#include "cuda/launch.h"
#include "ops/kit/round.h"
#include "ops/loss.h"

namespace pdnn {
namespace cuda {

namespace {
using kit::from_f32;
using kit::to_f32;

// One thread per row (K is small: 10 digits, 6 classes).
template <class Z>
__global__ void sce_f(int64_t n, int64_t k, const Z* z, const int32_t* labels, float* probs,
                      float* row_loss) {
  PDNN_GRID_LOOP(i, n) {
    const Z* zi = z + i * k;
    float* pi = probs + i * k;
    float m = to_f32(zi[0]);
    for (int64_t j = 1; j < k; ++j) m = to_f32(zi[j]) > m ? to_f32(zi[j]) : m;
    double sum = 0.0;
    for (int64_t j = 0; j < k; ++j) {
      pi[j] = expf(to_f32(zi[j]) - m);
      sum += pi[j];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t j = 0; j < k; ++j) pi[j] *= inv;
    const int32_t l = labels[i];
    row_loss[i] = (l >= 0 && l < k)
                      ? static_cast<float>(log(sum) - (static_cast<double>(to_f32(zi[l])) - m))
                      : NAN;  // a bad label makes the run stop as diverged
  }
}

template <class D>
__global__ void sce_b(int64_t n, int64_t k, float scale, const float* probs,
                      const int32_t* labels, D* dz) {
  PDNN_GRID_LOOP(t, n * k) {
    const int64_t i = t / k, j = t % k;
    dz[t] = from_f32<D>(probs[t] * scale - (labels[i] == j ? scale : 0.f));
  }
}

template <class Z>
__global__ void metrics_k(int64_t n, int64_t k, const Z* z, const int32_t* labels,
                          const float* row_loss, double* acc) {
  __shared__ double sh[kThreads];
  double loss = 0.0, correct = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    loss += row_loss[i];
    int64_t best = 0;
    for (int64_t j = 1; j < k; ++j)
      if (to_f32(z[i * k + j]) > to_f32(z[i * k + best])) best = j;
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

template <class Z>
__global__ void bce_f(int64_t n, const Z* p, const float* t, float* parts) {
  chunk_sum(n, parts, [=](int64_t i) {
    const double pi = to_f32(p[i]);
    const double lp = fmax(log(pi), -100.0);
    const double lq = fmax(log1p(-pi), -100.0);
    return -(t[i] * lp + (1.0 - t[i]) * lq);
  });
}

template <class Z>
__global__ void bce_b(int64_t n, float scale, const Z* p, const float* t, Z* dp) {
  PDNN_GRID_LOOP(i, n) {
    const float pi = to_f32(p[i]);
    dp[i] = from_f32<Z>(scale * (pi - t[i]) / fmaxf((1.f - pi) * pi, 1e-12f));
  }
}

template <class Z>
__global__ void bcel_f(int64_t n, const Z* z, const float* t, float* parts) {
  chunk_sum(n, parts, [=](int64_t i) {
    const double zi = to_f32(z[i]);
    return fmax(zi, 0.0) - zi * t[i] + log1p(exp(-fabs(zi)));
  });
}

template <class Z>
__global__ void bcel_b(int64_t n, float scale, const Z* z, const float* t, Z* dz) {
  PDNN_GRID_LOOP(i, n) {
    const float zi = to_f32(z[i]);
    const float e = expf(-fabsf(zi));
    const float s = zi >= 0.f ? 1.f / (1.f + e) : e / (1.f + e);
    dz[i] = from_f32<Z>(scale * (s - t[i]));
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

template <class Z>
void softmax_cross_entropy_forward(int64_t n, int64_t k, const Z* z, const int32_t* labels,
                                   float* probs, float* row_loss, CudaExec e) {
  sce_f<<<blocks_for(n, 128), 128, 0, stream_of(e)>>>(n, k, z, labels, probs, row_loss);
  PDNN_CUDA_LAUNCH_CHECK("softmax_cross_entropy_forward");
}

template <class Z>
void softmax_cross_entropy_backward(int64_t n, int64_t k, float scale, const float* probs,
                                    const int32_t* labels, Z* dz, CudaExec e) {
  sce_b<<<blocks_for(n * k, tpb(e)), tpb(e), 0, stream_of(e)>>>(n, k, scale, probs, labels, dz);
  PDNN_CUDA_LAUNCH_CHECK("softmax_cross_entropy_backward");
}

template <class Z>
void classifier_metrics(int64_t n, int64_t k, const Z* z, const int32_t* labels,
                        const float* row_loss, double* acc, CudaExec e) {
  metrics_k<<<1, kThreads, 0, stream_of(e)>>>(n, k, z, labels, row_loss, acc);
  PDNN_CUDA_LAUNCH_CHECK("classifier_metrics");
}

template <class Z>
void binary_cross_entropy_forward(int64_t n, const Z* p, const float* t, float* parts,
                                  CudaExec e) {
  bce_f<<<static_cast<unsigned>(loss_chunks(n)), kThreads, 0, stream_of(e)>>>(n, p, t, parts);
  PDNN_CUDA_LAUNCH_CHECK("binary_cross_entropy_forward");
}

template <class Z>
void binary_cross_entropy_backward(int64_t n, float scale, const Z* p, const float* t, Z* dp,
                                   CudaExec e) {
  bce_b<<<blocks_for(n, tpb(e)), tpb(e), 0, stream_of(e)>>>(n, scale, p, t, dp);
  PDNN_CUDA_LAUNCH_CHECK("binary_cross_entropy_backward");
}

template <class Z>
void bce_with_logits_forward(int64_t n, const Z* z, const float* t, float* parts, CudaExec e) {
  bcel_f<<<static_cast<unsigned>(loss_chunks(n)), kThreads, 0, stream_of(e)>>>(n, z, t, parts);
  PDNN_CUDA_LAUNCH_CHECK("bce_with_logits_forward");
}

template <class Z>
void bce_with_logits_backward(int64_t n, float scale, const Z* z, const float* t, Z* dz,
                              CudaExec e) {
  bcel_b<<<blocks_for(n, tpb(e)), tpb(e), 0, stream_of(e)>>>(n, scale, z, t, dz);
  PDNN_CUDA_LAUNCH_CHECK("bce_with_logits_backward");
}

// Both precisions' entry points (loss.h).
#define PDNN_INSTANTIATE(Z)                                                                   \
  template void softmax_cross_entropy_forward(int64_t, int64_t, const Z*, const int32_t*,     \
                                              float*, float*, CudaExec);                      \
  template void softmax_cross_entropy_backward(int64_t, int64_t, float, const float*,         \
                                               const int32_t*, Z*, CudaExec);                 \
  template void classifier_metrics(int64_t, int64_t, const Z*, const int32_t*, const float*,  \
                                   double*, CudaExec);                                        \
  template void binary_cross_entropy_forward(int64_t, const Z*, const float*, float*,         \
                                             CudaExec);                                       \
  template void binary_cross_entropy_backward(int64_t, float, const Z*, const float*, Z*,     \
                                              CudaExec);                                      \
  template void bce_with_logits_forward(int64_t, const Z*, const float*, float*, CudaExec);   \
  template void bce_with_logits_backward(int64_t, float, const Z*, const float*, Z*, CudaExec);
PDNN_INSTANTIATE(float)
PDNN_INSTANTIATE(bf16)
#undef PDNN_INSTANTIATE

void sum_into(int64_t n, float scale, const float* x, double* acc, CudaExec e) {
  sum_into_k<<<1, kThreads, 0, stream_of(e)>>>(n, scale, x, acc);
  PDNN_CUDA_LAUNCH_CHECK("sum_into");
}

}  // namespace cuda
}  // namespace pdnn
