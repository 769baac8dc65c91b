// BatchNorm (+ fused ReLU/LeakyReLU) on the GPU (see batchnorm2d.h). Training forward and the
// backward reduce each channel in double (fixed tree order: deterministic), then normalise
// (forward) or write dx (backward) in the same kernel, so the statistics never leave the chip.
// A channel is one block, or S = 2, 4, 8 blocks of a thread block cluster where the channels
// are few and long (W5's G.10: 64 channels of 64K elements, 56 -> 44 us forward + backward at
// S = 2 on an H200): each block sums its share, the blocks add the S partial sums from each
// other's shared memory in rank order (every block the same sum: deterministic), and each
// normalises its share. S comes from the shape alone (batchnorm2d_splits), so a model's
// numbers do not depend on the GPU it runs on. The threads take the channel's N*H*W elements
// in turn across the images' planes: a loop over images with the
// threads over one plane left all but 16 of 512 threads idle at 4x4 (the DCGAN's last layers)
// and ran 64 steps in a row; where H*W is a multiple of 4 each access is of 4 elements
// (kit/vec.h), so that a thread has 4x the bytes in flight. Evaluation forward is elementwise.
// bf16 x, y, dy, dx (mixed precision; the statistics, gamma, beta and their gradients
// float32): the kernels read them as float, sum in double as in fp32, and round once where
// they write y or dx.
#include <cooperative_groups.h>

#include <type_traits>

#include "cuda/launch.h"
#include "ops/batchnorm2d.h"
#include "ops/kit/round.h"
#include "ops/kit/vec.h"

namespace pdnn {
namespace cuda {

namespace {

namespace cg = cooperative_groups;

constexpr int kBnThreads = 512;
using kit::from_f32;
using kit::to_f32;

__device__ __forceinline__ float act(float z, FusedAct a, float slope) {
  if (a == FusedAct::None) return z;
  const float lo = a == FusedAct::ReLU ? 0.f : slope;
  return z > 0.f ? z : lo * z;
}

// f(k) for the V consecutive elements k..k+V-1 of channel ch, V at a time (V = 4: one vector
// access each, where H*W is a multiple of 4; else 1). Thread t of the channel's S blocks'
// (rank r: t = r * blockDim.x + threadIdx.x) takes the channel's accesses j = t, t + S *
// blockDim.x, ... in (image, position) order, so consecutive threads read consecutive
// positions of a plane and a block's loads cover several planes at once when they are small.
// `hwd` divides by H*W / V (FastDiv: j < N*H*W < 2^31, checked at launch). Unrolled so that a
// thread's loads of four turns are in flight together: one at a time, the loop is a chain of
// load latencies (~0.5 us each), which is what these kernels cost at W5's sizes.
template <int S, int V, class F>
__device__ __forceinline__ void channel_loop(const BnGeom& g, const FastDiv& hwd, int64_t ch,
                                             uint32_t rank, F f) {
  const uint32_t per_plane = static_cast<uint32_t>(g.hw / V);
  const uint32_t total = static_cast<uint32_t>(g.n) * per_plane;
#pragma unroll 4
  for (uint32_t j = rank * blockDim.x + threadIdx.x; j < total; j += S * blockDim.x) {
    const uint32_t i = hwd.div(j);
    f((static_cast<int64_t>(i) * g.c + ch) * g.hw + static_cast<int64_t>(j - i * per_plane) * V);
  }
}

// The channel's sums of v (N of them) over its S blocks, in every thread of each: the block's
// fixed-order tree sums, then (S > 1) the S blocks' in rank order, read from each block's
// shared memory. `sh`: kBnThreads doubles of scratch; `slot`: N doubles in shared memory.
template <int S, int N>
__device__ __forceinline__ void channel_sums(double (&v)[N], double* sh, double* slot) {
#pragma unroll
  for (int q = 0; q < N; ++q) {
    v[q] = block_sum(v[q], sh);
    __syncthreads();  // every thread has read sh[0] before the next sum writes sh
  }
  if constexpr (S > 1) {
    cg::cluster_group cl = cg::this_cluster();
    if (threadIdx.x == 0)
      for (int q = 0; q < N; ++q) slot[q] = v[q];
    cl.sync();  // every block's slot written
    for (int q = 0; q < N; ++q) v[q] = 0.0;
    for (unsigned r = 0; r < S; ++r) {
      const double* other = cl.map_shared_rank(slot, r);
      for (int q = 0; q < N; ++q) v[q] += other[q];
    }
    cl.sync();  // every block has read every slot before any rewrites its own or exits
  }
}

template <int S>
__device__ __forceinline__ uint32_t cluster_rank() {
  if constexpr (S > 1) return cg::this_cluster().block_rank();
  return 0;
}

template <int S, int V, class E>
__global__ void __launch_bounds__(kBnThreads)
    bn_train_f(BnGeom g, const E* x, const float* gamma, const float* beta, float* rmean,
               float* rvar, float* mean, float* invstd, E* y) {
  __shared__ double sh[kBnThreads];
  __shared__ double slot[1];
  __shared__ float coef[2];
  const int64_t ch = blockIdx.x / S, m = g.n * g.hw;
  const uint32_t rank = cluster_rank<S>();
  const FastDiv hwd(static_cast<uint32_t>(g.hw / V));
  double s[1] = {0.0};
  channel_loop<S, V>(g, hwd, ch, rank, [&](int64_t k) {
    float v[V];
    kit::load<V>(x + k, v);
    for (int e = 0; e < V; ++e) s[0] += v[e];
  });
  channel_sums<S>(s, sh, slot);
  const double mu = s[0] / static_cast<double>(m);
  double ss[1] = {0.0};
  channel_loop<S, V>(g, hwd, ch, rank, [&](int64_t k) {
    float v[V];
    kit::load<V>(x + k, v);
    for (int e = 0; e < V; ++e) {
      const double d = v[e] - mu;
      ss[0] += d * d;
    }
  });
  channel_sums<S>(ss, sh, slot);
  const double var_d = ss[0] / static_cast<double>(m);
  if (threadIdx.x == 0) {
    const float meanf = static_cast<float>(mu), varf = static_cast<float>(var_d);
    const float is = static_cast<float>(1.0 / sqrt(static_cast<double>(varf) + g.eps));
    if (rank == 0) {
      const double unbias = static_cast<double>(m) / static_cast<double>(m - 1);
      rmean[ch] = (1.f - g.momentum) * rmean[ch] + g.momentum * meanf;
      rvar[ch] = (1.f - g.momentum) * rvar[ch] + g.momentum * static_cast<float>(varf * unbias);
      mean[ch] = meanf;
      invstd[ch] = is;
    }
    const float scale = is * (gamma ? gamma[ch] : 1.f);
    coef[0] = scale;
    coef[1] = (beta ? beta[ch] : 0.f) - meanf * scale;
  }
  __syncthreads();
  const float scale = coef[0], shift = coef[1];
  channel_loop<S, V>(g, hwd, ch, rank, [&](int64_t k) {
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

template <int S, int V, class E>
__global__ void __launch_bounds__(kBnThreads)
    bn_b(BnGeom g, bool batch_stats, const E* x, const E* y, const E* dy, const float* mean,
         const float* invstd, const float* gamma, float* dgamma, float* dbeta, E* dx) {
  __shared__ double sh[kBnThreads];
  __shared__ double slot[2];
  const int64_t ch = blockIdx.x / S, m = g.n * g.hw;
  const uint32_t rank = cluster_rank<S>();
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
  double sums[2] = {0.0, 0.0};  // sum g, sum g xhat
  channel_loop<S, V>(g, hwd, ch, rank, [&](int64_t k) {
    float gj[V], xv[V];
    grads(k, gj);
    kit::load<V>(x + k, xv);
    for (int e = 0; e < V; ++e) {
      sums[0] += gj[e];
      sums[1] += gj[e] * ((xv[e] - mu) * is);
    }
  });
  channel_sums<S>(sums, sh, slot);
  const double sum_dy = sums[0], sum_dy_xhat = sums[1];
  if (threadIdx.x == 0 && rank == 0) {
    if (dgamma) dgamma[ch] += static_cast<float>(sum_dy_xhat);
    if (dbeta) dbeta[ch] += static_cast<float>(sum_dy);
  }
  if (!dx) return;
  const float gs = static_cast<float>((gamma ? gamma[ch] : 1.f) * is);
  const float a = batch_stats ? static_cast<float>(sum_dy / static_cast<double>(m)) : 0.f;
  const float b = batch_stats ? static_cast<float>(sum_dy_xhat / static_cast<double>(m)) : 0.f;
  const float muf = mean[ch], isf = invstd[ch];
  channel_loop<S, V>(g, hwd, ch, rank, [&](int64_t k) {
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

// Launches kernel<S, V> over c * S blocks of kBnThreads, S blocks a cluster.
template <int S, class K, class... Args>
void launch_split(K kernel, const BnGeom& g, cudaStream_t stream, Args... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(g.c * S));
  cfg.blockDim = dim3(kBnThreads);
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = S;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = S > 1 ? 1 : 0;
  PDNN_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, args...));
}

// pick(S, V)'s kernel for the shape's S (batchnorm2d_splits) and V (bn_vector), launched.
template <class Pick, class... Args>
void launch_bn(const BnGeom& g, cudaStream_t stream, Pick pick, Args... args) {
  auto with_splits = [&](auto s) {
    constexpr int S = decltype(s)::value;
    if (bn_vector(g) == 4)
      launch_split<S>(pick(s, std::integral_constant<int, 4>{}), g, stream, args...);
    else
      launch_split<S>(pick(s, std::integral_constant<int, 1>{}), g, stream, args...);
  };
  switch (batchnorm2d_splits(g)) {
    case 1: with_splits(std::integral_constant<int, 1>{}); break;
    case 2: with_splits(std::integral_constant<int, 2>{}); break;
    case 4: with_splits(std::integral_constant<int, 4>{}); break;
    default: with_splits(std::integral_constant<int, 8>{}); break;
  }
}

}  // namespace

// Blocks a channel, from the shape alone (not the GPU at hand: the sums' grouping, so the
// results, stay the same on every GPU): doubled while the channels fill fewer than two waves of a
// 132-SM GPU (H100, H200) and each block keeps 16 turns of its 512 threads or more; at most a
// portable cluster of 8. Set from bench_kernels on an H200 (e5df2c2, bf16, forward + backward
// us at 1, 2, 4, 8 blocks): G.10 (64 channels of 64 x 32x32) 56.5, 44.2, 44.0, 51.5, so 2 here;
// D.3 (128 of 64 x 16x16, 4 turns a block at 2) 26.4, 28.9, 39.8, 57.0, so 1; the 256- and
// 512-channel layers 1 (splitting them costs 2-7x). Below ~16 turns a block, a split's block
// saves less in loads than the cluster's two barriers a sum cost.
int batchnorm2d_splits(const BnGeom& g) {
  if (g.splits > 0) {
    PDNN_CHECK(g.splits == 1 || g.splits == 2 || g.splits == 4 || g.splits == 8,
               "BatchNorm on the GPU: %d blocks a channel (1, 2, 4 or 8)", g.splits);
    return g.splits;
  }
  constexpr int64_t kTwoWaves = 2 * 132;
  const int64_t accesses = g.n * g.hw / bn_vector(g);
  int s = 1;
  while (s < 8 && g.c * s < kTwoWaves && accesses / (2 * s) >= 16 * kBnThreads) s *= 2;
  return s;
}

template <class T>
void batchnorm2d_forward_train(const BnGeom& g, const T* x, const float* gamma,
                               const float* beta, float* running_mean, float* running_var,
                               float* mean, float* invstd, T* y, CudaExec e) {
  check_channel_size(g, "batchnorm2d_forward_train");
  launch_bn(g, stream_of(e),
            [](auto s, auto v) { return bn_train_f<decltype(s)::value, decltype(v)::value, T>; },
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
  launch_bn(g, stream_of(e),
            [](auto s, auto v) { return bn_b<decltype(s)::value, decltype(v)::value, T>; }, g,
            batch_stats, x, y, dy, mean, invstd, gamma, dgamma, dbeta, dx);
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
