// Loss kernels and metric accumulators on the GPU (see loss.h). Reductions are single blocks or
// one block per chunk, summed in double in a fixed tree order (deterministic); the accumulators
// are updated by one thread, so a step never reads back. bf16 logits or probabilities (mixed
// precision) are read as float; the losses, probabilities and sums stay fp32, the gradients
// are written in bf16 (rounded once): the kernels are templates over those two types.
#include <cmath>

#include "cuda/launch.h"
#include "ops/dice_formula.h"
#include "ops/kit/round.h"
#include "ops/loss.h"
#include "ops/loss_formula.h"

namespace pdnn {
namespace cuda {

namespace {
using kit::from_f32;
using kit::to_f32;

// pi = softmax(zi) over the row; returns the sum of exp(z - m) (in double) and sets *m.
template <class Z>
__device__ __forceinline__ double softmax_row(int64_t k, int64_t plane, const Z* zi, float* pi,
                                              float* m_out) {
  float m = to_f32(zi[0]);
  for (int64_t j = 1; j < k; ++j) m = to_f32(zi[j * plane]) > m ? to_f32(zi[j * plane]) : m;
  double sum = 0.0;
  for (int64_t j = 0; j < k; ++j) {
    pi[j * plane] = expf(to_f32(zi[j * plane]) - m);
    sum += pi[j * plane];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < k; ++j) pi[j * plane] *= inv;
  *m_out = m;
  return sum;
}

// One thread per row (K is small: 10 digits, 6 classes, a few segmentation classes); the
// threads of a warp read neighbouring pixels of a map.
template <class Z>
__global__ void sce_f(int64_t rows, int64_t k, int64_t plane, const Z* z, const int32_t* labels,
                      float* probs, float* row_loss) {
  PDNN_GRID_LOOP(i, rows) {
    const int64_t at = row_start(i, k, plane);
    const Z* zi = z + at;
    float m;
    const double sum = softmax_row(k, plane, zi, probs + at, &m);
    const int32_t l = labels[i];
    const double zl = (l >= 0 && l < k) ? to_f32(zi[l * plane]) : 0.0;
    row_loss[i] = (l >= 0 && l < k) ? static_cast<float>(log(sum) - (zl - m))
                                    : NAN;  // a bad label makes the run stop as diverged
  }
}

template <class D>
__global__ void sce_b(int64_t n, int64_t k, int64_t plane, float scale, const float* probs,
                      const int32_t* labels, D* dz) {
  PDNN_GRID_LOOP(t, n * k * plane) {
    const int64_t i = t / (k * plane), j = t / plane % k, p = t % plane;
    dz[t] = from_f32<D>(probs[t] * scale - (labels[i * plane + p] == j ? scale : 0.f));
  }
}

// Block c: the loss and correct count of rows [c kLossChunk, (c+1) kLossChunk), tree-summed.
template <class Z>
__global__ void metrics_parts_k(int64_t rows, int64_t k, int64_t plane, const Z* z,
                                const int32_t* labels, const float* row_loss, double* parts) {
  __shared__ double sh[kThreads];
  const int64_t c = blockIdx.x, lo = c * kLossChunk, hi = min(rows, lo + kLossChunk);
  double loss = 0.0, correct = 0.0;
  for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
    loss += row_loss[i];
    correct += argmax_is(k, plane, z + row_start(i, k, plane), labels[i]) ? 1.0 : 0.0;
  }
  const double l = block_sum(loss, sh);
  __syncthreads();
  const double cc = block_sum(correct, sh);
  if (threadIdx.x == 0) {
    parts[2 * c] = l;
    parts[2 * c + 1] = cc;
  }
}

// One thread: the chunks' sums in order (a few hundred for a 512x512 batch of 4).
__global__ void metrics_finish_k(int64_t chunks, int64_t rows, const double* parts, double* acc) {
  metrics_finish(chunks, rows, parts, acc);
}

__global__ void softmax_k(int64_t rows, int64_t k, int64_t plane, const float* z, float* probs) {
  PDNN_GRID_LOOP(i, rows) {
    const int64_t at = row_start(i, k, plane);
    float m;
    softmax_row(k, plane, z + at, probs + at, &m);
  }
}

// Block (chunk, class): I, P, G over the chunk's pixels, in the block's fixed tree order.
__global__ void dice_parts_k(int64_t rows, int64_t k, int64_t plane, const float* probs,
                             const int32_t* labels, double* parts) {
  __shared__ double sh[kThreads];
  const int64_t c = blockIdx.x, cls = blockIdx.y;
  const int64_t lo = c * kLossChunk, hi = min(rows, lo + kLossChunk);
  double in = 0, p_sum = 0, g_sum = 0;
  for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
    const double p = probs[row_start(i, k, plane) + cls * plane];
    const bool g = labels[i] == cls;
    in += g ? p : 0.0;
    p_sum += p;
    g_sum += g ? 1.0 : 0.0;
  }
  double* out = parts + (c * k + cls) * 3;
  const double a = block_sum(in, sh);
  __syncthreads();
  const double b = block_sum(p_sum, sh);
  __syncthreads();
  const double g = block_sum(g_sum, sh);
  if (threadIdx.x == 0) {
    out[0] = a;
    out[1] = b;
    out[2] = g;
  }
}

// One thread: the chunks' sums in order per class, then the loss (as the CPU's dice_finish).
__global__ void dice_finish_k(int64_t chunks, int64_t k, float smooth, const double* parts,
                              double* stats, float* loss) {
  dice_totals(chunks, k, smooth, parts, stats, loss);
}

__global__ void dice_b(int64_t rows, int64_t k, int64_t plane, float smooth, float scale,
                       const float* probs, const int32_t* labels, const double* stats, float* dz,
                       bool add) {
  PDNN_GRID_LOOP(i, rows) {
    const int64_t at = row_start(i, k, plane);
    dice_pixel_backward(k, plane, smooth, scale, probs + at, labels[i], stats, dz + at, add);
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
void softmax_cross_entropy_forward(int64_t n, int64_t k, int64_t plane, const Z* z,
                                   const int32_t* labels, float* probs, float* row_loss,
                                   CudaExec e) {
  const int64_t rows = n * plane;
  sce_f<<<blocks_for(rows, 128), 128, 0, stream_of(e)>>>(rows, k, plane, z, labels, probs,
                                                          row_loss);
  PDNN_CUDA_LAUNCH_CHECK("softmax_cross_entropy_forward");
}

template <class Z>
void softmax_cross_entropy_backward(int64_t n, int64_t k, int64_t plane, float scale,
                                    const float* probs, const int32_t* labels, Z* dz,
                                    CudaExec e) {
  sce_b<<<blocks_for(n * k * plane, tpb(e)), tpb(e), 0, stream_of(e)>>>(n, k, plane, scale,
                                                                         probs, labels, dz);
  PDNN_CUDA_LAUNCH_CHECK("softmax_cross_entropy_backward");
}

template <class Z>
void classifier_metrics(int64_t n, int64_t k, int64_t plane, const Z* z,
                        const int32_t* labels, const float* row_loss, double* parts, double* acc,
                        CudaExec e) {
  const int64_t rows = n * plane, chunks = loss_chunks(rows);
  metrics_parts_k<<<static_cast<unsigned>(chunks), kThreads, 0, stream_of(e)>>>(
      rows, k, plane, z, labels, row_loss, parts);
  PDNN_CUDA_LAUNCH_CHECK("classifier_metrics (chunks)");
  metrics_finish_k<<<1, 1, 0, stream_of(e)>>>(chunks, rows, parts, acc);
  PDNN_CUDA_LAUNCH_CHECK("classifier_metrics");
}

void dice_forward(int64_t n, int64_t k, int64_t plane, const float* z, const int32_t* labels,
                  float* probs, double* parts, CudaExec e) {
  const int64_t rows = n * plane;
  softmax_k<<<blocks_for(rows, 128), 128, 0, stream_of(e)>>>(rows, k, plane, z, probs);
  PDNN_CUDA_LAUNCH_CHECK("dice_forward (softmax)");
  const dim3 grid(static_cast<unsigned>(loss_chunks(rows)), static_cast<unsigned>(k));
  dice_parts_k<<<grid, kThreads, 0, stream_of(e)>>>(rows, k, plane, probs, labels, parts);
  PDNN_CUDA_LAUNCH_CHECK("dice_forward (sums)");
}

void dice_finish(int64_t chunks, int64_t k, float smooth, const double* parts, double* stats,
                 float* loss, CudaExec e) {
  dice_finish_k<<<1, 1, 0, stream_of(e)>>>(chunks, k, smooth, parts, stats, loss);
  PDNN_CUDA_LAUNCH_CHECK("dice_finish");
}

void dice_backward(int64_t n, int64_t k, int64_t plane, float smooth, float scale,
                   const float* probs, const int32_t* labels, const double* stats, float* dz,
                   bool add, CudaExec e) {
  const int64_t rows = n * plane;
  dice_b<<<blocks_for(rows, 128), 128, 0, stream_of(e)>>>(rows, k, plane, smooth, scale, probs,
                                                          labels, stats, dz, add);
  PDNN_CUDA_LAUNCH_CHECK("dice_backward");
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
  template void softmax_cross_entropy_forward(int64_t, int64_t, int64_t, const Z*,            \
                                              const int32_t*, float*, float*, CudaExec);      \
  template void softmax_cross_entropy_backward(int64_t, int64_t, int64_t, float,              \
                                               const float*, const int32_t*, Z*, CudaExec);   \
  template void classifier_metrics(int64_t, int64_t, int64_t, const Z*, const int32_t*,       \
                                   const float*, double*, double*, CudaExec);                 \
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
