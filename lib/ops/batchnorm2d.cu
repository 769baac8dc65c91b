// BatchNorm (+ fused ReLU/LeakyReLU) on the GPU (see batchnorm2d.h). Training forward and the
// backward are one block per channel: the block reduces its channel in double (fixed tree
// order: deterministic), then normalises (forward) or writes dx (backward) in the same kernel,
// so the statistics never leave the chip. The block's threads take the channel's N*H*W
// elements in turn across the images' planes: a loop over images with the threads over one
// plane left all but 16 of 512 threads idle at 4x4 (the DCGAN's last layers) and ran 64 steps
// in a row. Evaluation forward is elementwise. bf16 x, y, dy, dx
// (mixed precision; the statistics, gamma, beta and their gradients float32): the kernels read
// them as float, sum in double as in fp32, and round once where they write y or dx.
#include "cuda/launch.h"
#include "ops/batchnorm2d.h"
#include "ops/kit/round.h"

namespace pdnn {
namespace cuda {

namespace {

constexpr int kBnThreads = 512;
using kit::from_f32;
using kit::to_f32;

__device__ __forceinline__ float act(float z, FusedAct a, float slope) {
  if (a == FusedAct::None) return z;
  const float lo = a == FusedAct::ReLU ? 0.f : slope;
  return z > 0.f ? z : lo * z;
}

// for each element k of channel ch: body(k). Thread t takes the channel's elements j = t,
// t + blockDim.x, ... in (image, position) order, so consecutive threads read consecutive
// positions of a plane and a block's loads cover several planes at once when they are small.
// `hwd` divides by H*W (FastDiv: j < N*H*W < 2^31, checked at launch). Unrolled so that a
// thread's loads of four turns are in flight together: one at a time, the loop is a chain of
// load latencies (~0.5 us each), which is what these kernels cost at W5's sizes.
#define PDNN_BN_CHANNEL_LOOP(g, hwd, ch, k, body)                                  \
  _Pragma("unroll 4")                                                              \
  for (uint32_t j_ = threadIdx.x; j_ < static_cast<uint32_t>((g).n * (g).hw);      \
       j_ += blockDim.x) {                                                         \
    const uint32_t i_ = (hwd).div(j_);                                             \
    const int64_t k = (static_cast<int64_t>(i_) * (g).c + (ch)) * (g).hw +         \
                      static_cast<int64_t>(j_ - i_ * (hwd).d);                     \
    body;                                                                          \
  }

template <class E>
__global__ void bn_train_f(BnGeom g, const E* x, const float* gamma, const float* beta,
                           float* rmean, float* rvar, float* mean, float* invstd, E* y) {
  __shared__ double sh[kBnThreads];
  __shared__ float coef[2];
  const int64_t ch = blockIdx.x, m = g.n * g.hw;
  const FastDiv hwd(static_cast<uint32_t>(g.hw));
  double s = 0.0;
  PDNN_BN_CHANNEL_LOOP(g, hwd, ch, k, s += to_f32(x[k]));
  const double mu = block_sum(s, sh) / static_cast<double>(m);
  __syncthreads();
  double ss = 0.0;
  PDNN_BN_CHANNEL_LOOP(g, hwd, ch, k, {
    const double d = to_f32(x[k]) - mu;
    ss += d * d;
  });
  const double var_d = block_sum(ss, sh) / static_cast<double>(m);
  if (threadIdx.x == 0) {
    const float meanf = static_cast<float>(mu), varf = static_cast<float>(var_d);
    const double unbias = static_cast<double>(m) / static_cast<double>(m - 1);
    rmean[ch] = (1.f - g.momentum) * rmean[ch] + g.momentum * meanf;
    rvar[ch] = (1.f - g.momentum) * rvar[ch] + g.momentum * static_cast<float>(varf * unbias);
    const float is = static_cast<float>(1.0 / sqrt(static_cast<double>(varf) + g.eps));
    mean[ch] = meanf;
    invstd[ch] = is;
    const float scale = is * (gamma ? gamma[ch] : 1.f);
    coef[0] = scale;
    coef[1] = (beta ? beta[ch] : 0.f) - meanf * scale;
  }
  __syncthreads();
  const float scale = coef[0], shift = coef[1];
  PDNN_BN_CHANNEL_LOOP(g, hwd, ch, k,
                       y[k] = from_f32<E>(act(to_f32(x[k]) * scale + shift, g.act, g.slope)));
}

template <class E>
__global__ void bn_eval_f(BnGeom g, int64_t total, const E* x, const float* gamma,
                          const float* beta, const float* rmean, const float* rvar, float* mean,
                          float* invstd, E* y) {
  PDNN_GRID_LOOP(i, total) {
    const int64_t ch = (i / g.hw) % g.c;  // eval mode only: not the training path
    const float is = static_cast<float>(1.0 / sqrt(static_cast<double>(rvar[ch]) + g.eps));
    const float scale = is * (gamma ? gamma[ch] : 1.f);
    const float shift = (beta ? beta[ch] : 0.f) - rmean[ch] * scale;
    y[i] = from_f32<E>(act(to_f32(x[i]) * scale + shift, g.act, g.slope));
  }
  PDNN_GRID_LOOP(ch, g.c) {
    mean[ch] = rmean[ch];
    invstd[ch] = static_cast<float>(1.0 / sqrt(static_cast<double>(rvar[ch]) + g.eps));
  }
}

template <class E>
__global__ void bn_b(BnGeom g, bool batch_stats, const E* x, const E* y, const E* dy,
                     const float* mean, const float* invstd, const float* gamma, float* dgamma,
                     float* dbeta, E* dx) {
  __shared__ double sh[kBnThreads];
  const int64_t ch = blockIdx.x, m = g.n * g.hw;
  const FastDiv hwd(static_cast<uint32_t>(g.hw));
  const bool fused = g.act != FusedAct::None;
  const float lo = g.act == FusedAct::ReLU ? 0.f : g.slope;
  const double mu = mean[ch], is = invstd[ch];
  double s1 = 0.0, s2 = 0.0;
  PDNN_BN_CHANNEL_LOOP(g, hwd, ch, k, {
    const float dyk = to_f32(dy[k]);
    const float gj = fused ? (to_f32(y[k]) > 0.f ? dyk : lo * dyk) : dyk;
    s1 += gj;
    s2 += gj * ((to_f32(x[k]) - mu) * is);
  });
  const double sum_dy = block_sum(s1, sh);
  __syncthreads();
  const double sum_dy_xhat = block_sum(s2, sh);
  if (threadIdx.x == 0) {
    if (dgamma) dgamma[ch] += static_cast<float>(sum_dy_xhat);
    if (dbeta) dbeta[ch] += static_cast<float>(sum_dy);
  }
  if (!dx) return;
  const float gs = static_cast<float>((gamma ? gamma[ch] : 1.f) * is);
  const float a = batch_stats ? static_cast<float>(sum_dy / static_cast<double>(m)) : 0.f;
  const float b = batch_stats ? static_cast<float>(sum_dy_xhat / static_cast<double>(m)) : 0.f;
  const float muf = mean[ch], isf = invstd[ch];
  PDNN_BN_CHANNEL_LOOP(g, hwd, ch, k, {
    const float dyk = to_f32(dy[k]);
    const float gj = fused ? (to_f32(y[k]) > 0.f ? dyk : lo * dyk) : dyk;
    dx[k] = from_f32<E>(gs * (gj - a - (to_f32(x[k]) - muf) * isf * b));
  });
}

// The channel loop indexes a channel's N*H*W elements in 32 bits (FastDiv's numerators).
void check_channel_size(const BnGeom& g, const char* what) {
  PDNN_CHECK(g.n * g.hw < (int64_t{1} << 31),
             "%s on the GPU: a channel has N*H*W = %lld elements, past the 2^31 its kernel indexes",
             what, static_cast<long long>(g.n * g.hw));
}

}  // namespace

template <class T>
void batchnorm2d_forward_train(const BnGeom& g, const T* x, const float* gamma,
                               const float* beta, float* running_mean, float* running_var,
                               float* mean, float* invstd, T* y, CudaExec e) {
  check_channel_size(g, "batchnorm2d_forward_train");
  bn_train_f<<<static_cast<unsigned>(g.c), kBnThreads, 0, stream_of(e)>>>(
      g, x, gamma, beta, running_mean, running_var, mean, invstd, y);
  PDNN_CUDA_LAUNCH_CHECK("batchnorm2d_forward_train");
}

template <class T>
void batchnorm2d_forward_eval(const BnGeom& g, const T* x, const float* gamma,
                              const float* beta, const float* running_mean,
                              const float* running_var, float* mean, float* invstd, T* y,
                              CudaExec e) {
  const int64_t total = g.n * g.c * g.hw;
  bn_eval_f<<<blocks_for(total, tpb(e)), tpb(e), 0, stream_of(e)>>>(g, total, x, gamma, beta,
                                                              running_mean, running_var, mean,
                                                              invstd, y);
  PDNN_CUDA_LAUNCH_CHECK("batchnorm2d_forward_eval");
}

template <class T>
void batchnorm2d_backward(const BnGeom& g, bool batch_stats, const T* x, const T* y,
                          const T* dy, const float* mean, const float* invstd,
                          const float* gamma, float* dgamma, float* dbeta, T* dx, CudaExec e) {
  check_channel_size(g, "batchnorm2d_backward");
  bn_b<<<static_cast<unsigned>(g.c), kBnThreads, 0, stream_of(e)>>>(
      g, batch_stats, x, y, dy, mean, invstd, gamma, dgamma, dbeta, dx);
  PDNN_CUDA_LAUNCH_CHECK("batchnorm2d_backward");
}

// Both precisions' entry points (batchnorm2d.h).
#define PDNN_INSTANTIATE(T)                                                                \
  template void batchnorm2d_forward_train(const BnGeom&, const T*, const float*,           \
                                          const float*, float*, float*, float*, float*, T*, \
                                          CudaExec);                                       \
  template void batchnorm2d_forward_eval(const BnGeom&, const T*, const float*,            \
                                         const float*, const float*, const float*, float*, \
                                         float*, T*, CudaExec);                            \
  template void batchnorm2d_backward(const BnGeom&, bool, const T*, const T*, const T*,    \
                                     const float*, const float*, const float*, float*,     \
                                     float*, T*, CudaExec);
PDNN_INSTANTIATE(float)
PDNN_INSTANTIATE(bf16)
#undef PDNN_INSTANTIATE

}  // namespace cuda
}  // namespace pdnn
