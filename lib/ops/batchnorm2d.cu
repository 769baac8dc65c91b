// BatchNorm (+ fused ReLU/LeakyReLU) on the GPU (see batchnorm2d.h). Training forward and the
// backward are one block per channel: the block reduces its channel in double (fixed tree
// order: deterministic), then normalises (forward) or writes dx (backward) in the same kernel,
// so the statistics never leave the chip. The block's threads take the channel's N*H*W
// elements in turn across the images' planes: a loop over images with the threads over one
// plane left all but 16 of 512 threads idle at 4x4 (the DCGAN's last layers) and ran 64 steps
// in a row; where H*W is a multiple of 4 each access is of 4 elements (kit/vec.h), so that a
// thread has 4x the bytes in flight (a few large planes over few channels, G.10's 64 channels
// of 32x32, stay latency-bound otherwise). Evaluation forward is elementwise. bf16 x, y, dy, dx
// (mixed precision; the statistics, gamma, beta and their gradients float32): the kernels read
// them as float, sum in double as in fp32, and round once where they write y or dx.
#include "cuda/launch.h"
#include "ops/batchnorm2d.h"
#include "ops/kit/round.h"
#include "ops/kit/vec.h"

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

// f(k) for the V consecutive elements k..k+V-1 of channel ch, V at a time (V = 4: one vector
// access each, where H*W is a multiple of 4; else 1). Thread t takes the channel's accesses
// j = t, t + blockDim.x, ... in (image, position) order, so consecutive threads read
// consecutive positions of a plane and a block's loads cover several planes at once when they
// are small. `hwd` divides by H*W / V (FastDiv: j < N*H*W < 2^31, checked at launch). Unrolled
// so that a thread's loads of four turns are in flight together: one at a time, the loop is a
// chain of load latencies (~0.5 us each), which is what these kernels cost at W5's sizes.
template <int V, class F>
__device__ __forceinline__ void channel_loop(const BnGeom& g, const FastDiv& hwd, int64_t ch, F f) {
  const uint32_t per_plane = static_cast<uint32_t>(g.hw / V);
  const uint32_t total = static_cast<uint32_t>(g.n) * per_plane;
#pragma unroll 4
  for (uint32_t j = threadIdx.x; j < total; j += blockDim.x) {
    const uint32_t i = hwd.div(j);
    f((static_cast<int64_t>(i) * g.c + ch) * g.hw + static_cast<int64_t>(j - i * per_plane) * V);
  }
}

template <int V, class E>
__global__ void bn_train_f(BnGeom g, const E* x, const float* gamma, const float* beta,
                           float* rmean, float* rvar, float* mean, float* invstd, E* y) {
  __shared__ double sh[kBnThreads];
  __shared__ float coef[2];
  const int64_t ch = blockIdx.x, m = g.n * g.hw;
  const FastDiv hwd(static_cast<uint32_t>(g.hw / V));
  double s = 0.0;
  channel_loop<V>(g, hwd, ch, [&](int64_t k) {
    float v[V];
    kit::load<V>(x + k, v);
    for (int e = 0; e < V; ++e) s += v[e];
  });
  const double mu = block_sum(s, sh) / static_cast<double>(m);
  __syncthreads();
  double ss = 0.0;
  channel_loop<V>(g, hwd, ch, [&](int64_t k) {
    float v[V];
    kit::load<V>(x + k, v);
    for (int e = 0; e < V; ++e) {
      const double d = v[e] - mu;
      ss += d * d;
    }
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
  channel_loop<V>(g, hwd, ch, [&](int64_t k) {
    float v[V];
    kit::load<V>(x + k, v);
    for (int e = 0; e < V; ++e) v[e] = act(v[e] * scale + shift, g.act, g.slope);
    kit::store<V>(y + k, v);
  });
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

template <int V, class E>
__global__ void bn_b(BnGeom g, bool batch_stats, const E* x, const E* y, const E* dy,
                     const float* mean, const float* invstd, const float* gamma, float* dgamma,
                     float* dbeta, E* dx) {
  __shared__ double sh[kBnThreads];
  const int64_t ch = blockIdx.x, m = g.n * g.hw;
  const FastDiv hwd(static_cast<uint32_t>(g.hw / V));
  const bool fused = g.act != FusedAct::None;
  const float lo = g.act == FusedAct::ReLU ? 0.f : g.slope;
  const double mu = mean[ch], is = invstd[ch];
  // The gradient at the BatchNorm's output: dy through the fused activation's derivative.
  auto grads = [&](int64_t k, float (&gj)[V]) {
    kit::load<V>(dy + k, gj);
    if (fused) {
      float yv[V];
      kit::load<V>(y + k, yv);
      for (int e = 0; e < V; ++e) gj[e] = yv[e] > 0.f ? gj[e] : lo * gj[e];
    }
  };
  double s1 = 0.0, s2 = 0.0;
  channel_loop<V>(g, hwd, ch, [&](int64_t k) {
    float gj[V], xv[V];
    grads(k, gj);
    kit::load<V>(x + k, xv);
    for (int e = 0; e < V; ++e) {
      s1 += gj[e];
      s2 += gj[e] * ((xv[e] - mu) * is);
    }
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
  channel_loop<V>(g, hwd, ch, [&](int64_t k) {
    float gj[V], xv[V];
    grads(k, gj);
    kit::load<V>(x + k, xv);
    for (int e = 0; e < V; ++e) xv[e] = gs * (gj[e] - a - (xv[e] - muf) * isf * b);
    kit::store<V>(dx + k, xv);
  });
}

// 4 elements an access where every plane starts on a multiple of 4 (the tensors' bases are
// the allocator's 512-byte blocks, or a memory plan's buffer at multiples of 128 elements),
// else 1. The tests run both (test_backends.cpp).
int bn_vector(const BnGeom& g) { return g.hw % 4 == 0 ? 4 : 1; }

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
  if (bn_vector(g) == 4)
    bn_train_f<4><<<static_cast<unsigned>(g.c), kBnThreads, 0, stream_of(e)>>>(
        g, x, gamma, beta, running_mean, running_var, mean, invstd, y);
  else
    bn_train_f<1><<<static_cast<unsigned>(g.c), kBnThreads, 0, stream_of(e)>>>(
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
  if (bn_vector(g) == 4)
    bn_b<4><<<static_cast<unsigned>(g.c), kBnThreads, 0, stream_of(e)>>>(
        g, batch_stats, x, y, dy, mean, invstd, gamma, dgamma, dbeta, dx);
  else
    bn_b<1><<<static_cast<unsigned>(g.c), kBnThreads, 0, stream_of(e)>>>(
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
