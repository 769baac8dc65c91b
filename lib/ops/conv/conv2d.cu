// Convolution on the GPU (see conv2d.h): per chunk of images, batched im2col, one cuBLAS
// GEMM over all their pixels, then the product permuted back to NCHW with the bias and the
// fused activation applied in the same pass. Backward: dy permuted to (k, n*p) with the
// activation's derivative applied in that pass; the bias gradient as row sums of that
// (contiguous) matrix; dW += dY' cols^T (the forward's columns when it kept them);
// dcols = W^T dY', col2im as a gather. Index arithmetic is 32-bit; the permutes are flat.
// bf16 tensors (ConvFwdBf16, ConvBwdBf16): the same passes with bf16 columns and dY', cuBLAS's
// bf16 GEMM with fp32 sums into an fp32 product (forward, dcols) or straight into the fp32 dW;
// the permutation back, the bias, the activation and col2im's sums in fp32, rounded once to
// bf16 where they are written. Memory floors per pass: the columns written and read once more
// (2 bytes an element in bf16), plus the product (4 bytes) and the output.
#include <algorithm>
#include <climits>
#include <type_traits>

#include "cuda/launch.h"
#include "ops/conv/conv2d.h"
#include "ops/conv/conv2d_3x3.h"
#include "ops/conv/conv2d_gpu.h"
#include "ops/conv/im2col.h"
#include "ops/gemm.h"
#include "ops/kit/act.h"
#include "ops/kit/round.h"
#include "ops/kit/vec.h"

namespace pdnn {
namespace cuda {

namespace {

using kit::act_apply;
using kit::from_f32;
using kit::to_f32;

// The permutes between the GEMM's (k, n, p) and the tensors' (n, k, p), flat: one thread a
// V-element access of the whole (n, k, p) (V = 4 where p % 4 == 0, so every plane starts
// 4-aligned; else 1), total = n*k*p < 2^31. A plane a grid row, as before, kept 4 (or 1) of a
// block's 256 threads busy on W5's 4x4 (1x1) planes: D.conv4's forward permute took 33 us, its
// backward one 25 us, for 1-2 MB. pv: p / V; div_pv, div_k divide by them. The counter is
// 64-bit (im2col.cu says why), the indices 32.
struct PermuteGeom {
  int n, k, pv, units;  // units = n*k*pv
  FastDiv div_pv, div_k;
};
PermuteGeom permute_geom(int64_t n, int64_t k, int64_t p, int v) {
  PDNN_CHECK(n * k * p < INT_MAX, "conv2d on the GPU: %lld x %lld x %lld values a chunk, past "
             "32-bit indexing", static_cast<long long>(n), static_cast<long long>(k),
             static_cast<long long>(p));
  const int pv = static_cast<int>(p / v);
  return {static_cast<int>(n), static_cast<int>(k), pv, static_cast<int>(n * k * pv),
          FastDiv(static_cast<uint32_t>(pv)), FastDiv(static_cast<uint32_t>(k))};
}

// y (n, k, p) = act(tmp (k, n, p) permuted + b[k]) (float tmp; a bf16 y rounded once).
template <int V, class E>
__global__ void to_ncp_bias_act(PermuteGeom pg, const float* __restrict__ tmp,
                                const float* __restrict__ b, Act act, E* __restrict__ y) {
  PDNN_GRID_LOOP(u64, pg.units) {
    const int u = static_cast<int>(u64);
    const int plane = static_cast<int>(pg.div_pv.div(u)), q = u - plane * pg.pv;
    const int i = static_cast<int>(pg.div_k.div(plane)), c = plane - i * pg.k;
    const float bc = b ? b[c] : 0.f;
    float v[V];
    kit::load<V>(tmp + ((static_cast<int64_t>(c) * pg.n + i) * pg.pv + q) * V, v);
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = act_apply(v[j] + bc, act);
    kit::store<V>(y + static_cast<int64_t>(u) * V, v);
  }
}

// dyt (k, n, p) = act'(y) * dy (n, k, p), permuted (bf16: the product in fp32, rounded once).
template <int V, class E>
__global__ void to_cnp_act(PermuteGeom pg, const E* __restrict__ dy, const E* __restrict__ y,
                           Act act, E* __restrict__ dyt) {
  PDNN_GRID_LOOP(u64, pg.units) {
    const int u = static_cast<int>(u64);
    const int plane = static_cast<int>(pg.div_pv.div(u)), q = u - plane * pg.pv;
    const int i = static_cast<int>(pg.div_k.div(plane)), c = plane - i * pg.k;
    float v[V];
    kit::load<V>(dy + static_cast<int64_t>(u) * V, v);
    if (y) {
      float yv[V];
      kit::load<V>(y + static_cast<int64_t>(u) * V, yv);
#pragma unroll
      for (int j = 0; j < V; ++j) v[j] = kit::grad_through_act(yv[j], v[j], act);
    }
    kit::store<V>(dyt + ((static_cast<int64_t>(c) * pg.n + i) * pg.pv + q) * V, v);
  }
}

// Launches K<4> where p % 4 == 0, else K<1>, over n*k*p/V threads.
template <class Launch>
void permute_launch(int64_t n, int64_t k, int64_t p, CudaExec e, Launch launch) {
  const int v = p % 4 == 0 ? 4 : 1;
  const PermuteGeom pg = permute_geom(n, k, p, v);
  const unsigned blocks = blocks_for(pg.units, tpb(e));
  if (v == 4)
    launch(std::integral_constant<int, 4>{}, pg, blocks);
  else
    launch(std::integral_constant<int, 1>{}, pg, blocks);
}

template <class E>
__global__ void bias_add_k(int n, int k, int p, const float* __restrict__ b, E* __restrict__ y) {
  for (int plane = blockIdx.y; plane < n * k; plane += gridDim.y) {
    const float bc = b[plane % k];
    E* dst = y + static_cast<int64_t>(plane) * p;
    for (int q = blockIdx.x * blockDim.x + threadIdx.x; q < p; q += gridDim.x * blockDim.x)
      dst[q] = from_f32<E>(to_f32(dst[q]) + bc);
  }
}

constexpr int kSumThreads = 512;

// db[c] += sum of dy over its n planes of p values (one block per channel, double).
template <class E>
__global__ void bias_backward_k(int n, int k, int p, const E* __restrict__ dy,
                                float* __restrict__ db) {
  __shared__ double sh[kSumThreads];
  const int c = blockIdx.x;
  double s = 0.0;
  for (int i = 0; i < n; ++i) {
    const E* plane = dy + (static_cast<int64_t>(i) * k + c) * p;
    for (int q = threadIdx.x; q < p; q += blockDim.x) s += to_f32(plane[q]);
  }
  const double t = block_sum(s, sh);
  if (threadIdx.x == 0) db[c] += static_cast<float>(t);
}

// The same sum with vector loads (kit::load4 / load8: 16 bytes an access, V elements: 4 floats,
// 8 bf16), four accesses in flight per thread, where every plane starts aligned to V elements
// (p a multiple of V, dy 16-byte aligned). One block of kBiasThreads per channel as above,
// double sums in a fixed order. Why: the scalar kernel keeps one 4-byte load a thread in
// flight, 2 KiB an SM, which latency bounds far below an SM's share of the bandwidth, and
// ConvTranspose2d and cuDNN's backward sum the U-Net's 64 channels of 1M values each (512 x 512,
// batch 4) this way on 64 SMs; this one keeps 64 KiB an SM in flight. Not timed alone; with it
// the U-Net's TF32 step (512, b4, graph) ran 36.42 ms against its twin's 38.06 on an H200
// (results/bench/unet-twin-h200-s14; it read through __ldg then, the same 16-byte accesses).
constexpr int kBiasThreads = 1024;
template <class E>
constexpr int kBiasV = 16 / static_cast<int>(sizeof(E));
template <class E>
__device__ __forceinline__ double sum_vec(const E* p) {
  float v[kBiasV<E>];
  if constexpr (kBiasV<E> == 4) kit::load4(p, v);
  else kit::load8(p, v);
  double s = 0.0;
#pragma unroll
  for (int j = 0; j < kBiasV<E>; ++j) s += v[j];
  return s;
}
template <class E>
__global__ void bias_backward_vec_k(int n, int k, int p, const E* __restrict__ dy,
                                    float* __restrict__ db) {
  __shared__ double sh[kBiasThreads];
  constexpr int V = kBiasV<E>;
  const int c = blockIdx.x, step = blockDim.x * V;
  double s = 0.0;
  for (int i = 0; i < n; ++i) {
    const E* plane = dy + (static_cast<int64_t>(i) * k + c) * p;
    int q = threadIdx.x * V;
    for (; q + 3 * step < p; q += 4 * step) {
      const double a = sum_vec(plane + q), b = sum_vec(plane + q + step),
                   d = sum_vec(plane + q + 2 * step), e = sum_vec(plane + q + 3 * step);
      s += a + b + d + e;
    }
    for (; q < p; q += step) s += sum_vec(plane + q);
  }
  const double t = block_sum(s, sh);
  if (threadIdx.x == 0) db[c] += static_cast<float>(t);
}

// Row sums of m (k rows of len contiguous values) in two deterministic passes: block (s, c)
// sums slice s of row c into part[c * kSlices + s]; then one block per row adds its slices in
// order to db[c]. (One block per row was too little parallelism: 60-80 us for W2/W3.)
constexpr int kSlices = 32;
template <class E>
__global__ void row_sums_part(int len, const E* __restrict__ m, double* __restrict__ part) {
  __shared__ double sh[kThreads];
  const int c = blockIdx.y, sl = blockIdx.x;
  const int per = (len + kSlices - 1) / kSlices, lo = sl * per, hi = min(len, lo + per);
  const E* row = m + static_cast<int64_t>(c) * len;
  double s = 0.0;
  for (int q = lo + threadIdx.x; q < hi; q += blockDim.x) s += to_f32(row[q]);
  const double t = block_sum(s, sh);
  if (threadIdx.x == 0) part[c * kSlices + sl] = t;
}
__global__ void row_sums_final(int k, const double* __restrict__ part, float* __restrict__ db) {
  for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < k; c += gridDim.x * blockDim.x) {
    double s = 0.0;
    for (int sl = 0; sl < kSlices; ++sl) s += part[c * kSlices + sl];
    db[c] += static_cast<float>(s);
  }
}

}  // namespace

namespace {
template <class E>
void bias_add_launch(int64_t n, int64_t k, int64_t p, const float* b, E* y, CudaExec e) {
  if (n * k * p <= 0) return;
  bias_add_k<<<grid2d(p, n * k, tpb(e)), tpb(e), 0, stream_of(e)>>>(
      static_cast<int>(n), static_cast<int>(k), static_cast<int>(p), b, y);
  PDNN_CUDA_LAUNCH_CHECK("bias_add");
}
template <class E>
void bias_backward_launch(int64_t n, int64_t k, int64_t p, const E* dy, float* db, CudaExec e) {
  if (k <= 0) return;
  if (p % kBiasV<E> == 0 && aligned(dy, 16))
    bias_backward_vec_k<<<static_cast<unsigned>(k), kBiasThreads, 0, stream_of(e)>>>(
        static_cast<int>(n), static_cast<int>(k), static_cast<int>(p), dy, db);
  else
    bias_backward_k<<<static_cast<unsigned>(k), kSumThreads, 0, stream_of(e)>>>(
        static_cast<int>(n), static_cast<int>(k), static_cast<int>(p), dy, db);
  PDNN_CUDA_LAUNCH_CHECK("bias_backward");
}
}  // namespace

void bias_add(int64_t n, int64_t k, int64_t p, const float* b, float* y, CudaExec e) {
  bias_add_launch(n, k, p, b, y, e);
}
void bias_add(int64_t n, int64_t k, int64_t p, const float* b, bf16* y, CudaExec e) {
  bias_add_launch(n, k, p, b, y, e);
}
void bias_backward(int64_t n, int64_t k, int64_t p, const float* dy, float* db, CudaExec e) {
  bias_backward_launch(n, k, p, dy, db, e);
}
void bias_backward(int64_t n, int64_t k, int64_t p, const bf16* dy, float* db, CudaExec e) {
  bias_backward_launch(n, k, p, dy, db, e);
}

namespace {

// E: float or bf16 (the columns in E, the product in fp32 at the product offset).
template <class E>
void im2col_forward(const ConvFwdOf<E, float>& a, float* ws, CudaExec e) {
  const ConvGeom& g = a.g;
  const int64_t n = a.n, k = a.k;
  const int64_t rows = g.col_rows(), p = g.col_cols(), chunk = cuda_conv_chunk(g, n, k);
  float* tmp = ws + cuda_conv_product_offset(g, chunk);
  for (int64_t i0 = 0; i0 < n; i0 += chunk) {
    const int64_t c = std::min(chunk, n - i0);
    const E* xc = a.x + i0 * g.image_size();
    if (whole_image_window(g)) {
      // The images are the columns already, transposed (c, rows), as on the CPU: no im2col.
      // W5's D.11 (512 -> 1 on 4x4) and G.0: im2col took 8.8 us a call, col2im 21 (H200).
      gemm(false, true, k, c, rows, 1.f, a.w, xc, 0.f, tmp, e);
    } else {
      E* cols = a.saved_cols && c == n ? a.saved_cols : reinterpret_cast<E*>(ws);
      im2col_batch(g, c, xc, cols, e);
      gemm(false, false, k, c * p, rows, 1.f, a.w, cols, 0.f, tmp, e);
    }
    E* yc = a.y + i0 * k * p;
    permute_launch(c, k, p, e, [&](auto v, const PermuteGeom& pg, unsigned blocks) {
      to_ncp_bias_act<decltype(v)::value><<<blocks, tpb(e), 0, stream_of(e)>>>(pg, tmp, a.b,
                                                                            a.act, yc);
    });
    PDNN_CUDA_LAUNCH_CHECK("conv2d_forward output");
  }
}

// The workspace as float: the columns (E) and later the fp32 dcols at 0, dy' (E) at the
// product offset, the bias's partial sums (double) past dy' counted in floats.
template <class E>
void im2col_backward(const ConvBwdOf<E, float>& a, float* ws, CudaExec e) {
  const ConvGeom& g = a.g;
  const int64_t n = a.n, k = a.k;
  const int64_t rows = g.col_rows(), p = g.col_cols(), chunk = cuda_conv_chunk(g, n, k);
  E* cols = reinterpret_cast<E*>(ws);
  float* dcols = ws;
  float* dyt_at = ws + cuda_conv_product_offset(g, chunk);
  E* dyt = reinterpret_cast<E*>(dyt_at);  // dy of the chunk as (k, c*p)
  for (int64_t i0 = 0; i0 < n; i0 += chunk) {
    const int64_t c = std::min(chunk, n - i0);
    const E* yc = a.act.kind == FusedAct::None ? nullptr : a.y + i0 * k * p;
    const E* dyc = a.dy + i0 * k * p;
    permute_launch(c, k, p, e, [&](auto v, const PermuteGeom& pg, unsigned blocks) {
      to_cnp_act<decltype(v)::value><<<blocks, tpb(e), 0, stream_of(e)>>>(pg, dyc, yc, a.act,
                                                                         dyt);
    });
    PDNN_CUDA_LAUNCH_CHECK("conv2d_backward dy");
    if (a.db) {
      double* part = reinterpret_cast<double*>(dyt_at + k * c * p + (k * c * p) % 2);
      row_sums_part<<<dim3(kSlices, static_cast<unsigned>(k)), kThreads, 0, stream_of(e)>>>(
          static_cast<int>(c * p), dyt, part);
      row_sums_final<<<blocks_for(k, 64), 64, 0, stream_of(e)>>>(static_cast<int>(k), part, a.db);
      PDNN_CUDA_LAUNCH_CHECK("conv2d_backward bias");
    }
    if (whole_image_window(g)) {  // as forward: x and dx are (c, rows), dyt (k, c)
      if (a.dw) gemm(false, false, k, rows, c, 1.f, dyt, a.x + i0 * g.image_size(), 1.f, a.dw, e);
      if (a.dx) gemm(true, false, c, rows, k, 1.f, dyt, a.w, 0.f, a.dx + i0 * g.image_size(), e);
      continue;
    }
    if (a.dw) {
      const E* xc = a.saved_cols && c == n ? a.saved_cols : cols;
      if (xc == cols) im2col_batch(g, c, a.x + i0 * g.image_size(), cols, e);
      gemm(false, true, k, rows, c * p, 1.f, dyt, xc, 1.f, a.dw, e);
    }
    if (a.dx) {
      gemm(true, false, rows, c * p, k, 1.f, a.w, dyt, 0.f, dcols, e);
      col2im_batch(g, c, dcols, a.dx + i0 * g.image_size(), e);
    }
  }
}

}  // namespace

namespace {
template <class E>
__global__ void act_grad_k(int64_t total, const E* __restrict__ y, const E* __restrict__ dy,
                           Act a, E* __restrict__ g) {
  PDNN_GRID_LOOP(i, total) {
    g[i] = from_f32<E>(kit::act_grad(to_f32(y[i]), to_f32(dy[i]), a));
  }
}

// wt[ci][ko][tap] = w[ko][ci][taps - 1 - tap]: the weights of the convolution whose forward is
// a stride-1 convolution's backward-data (both kernel axes flipped = the tap order reversed).
__global__ void flip_weights_k(int64_t total, int k, int c, int taps, const float* __restrict__ w,
                               float* __restrict__ wt) {
  PDNN_GRID_LOOP(i, total) {
    const int tap = static_cast<int>(i % taps);
    const int64_t rest = i / taps;
    const int ko = static_cast<int>(rest % k), ci = static_cast<int>(rest / k);
    wt[i] = w[(static_cast<int64_t>(ko) * c + ci) * taps + (taps - 1 - tap)];
  }
}

// A stride-1 backward-data is the forward convolution of dy (k channels at oh x ow) with the
// flipped weights and padding kh-1-ph: it runs on the forward kernel, whose gathers are the
// cheaper ones (measured on the H100, W4 conv2: 8.1 ms as a backward-data kernel, 3.9 ms as a
// forward).
void implicit_backward_data(const ConvBwd& a, float* ws, CudaExec e) {
  const ConvGeom& g = a.g;
  const int64_t n = a.n, k = a.k;
  if (!conv2d_implicit_data_as_forward(g)) {
    conv2d_implicit_backward_data(a, e);
    return;
  }
  const int64_t total = k * g.c * g.kh * g.kw;
  flip_weights_k<<<blocks_for(total), kThreads, 0, stream_of(e)>>>(
      total, static_cast<int>(k), static_cast<int>(g.c), static_cast<int>(g.kh * g.kw), a.w, ws);
  PDNN_CUDA_LAUNCH_CHECK("conv2d backward-data weight flip");
  const ConvShape flipped{conv_geom("conv2d backward-data", k, g.oh, g.ow, g.kh, g.kw, 1, 1,
                                     g.kh - 1 - g.ph, g.kw - 1 - g.pw),
                           n, g.c};
  const ConvFwd f = ConvFwd::of(flipped, a.dy, ws, nullptr, a.dx);
  conv2d_implicit_forward(f, e);
}
}  // namespace

void conv2d_act_grad(int64_t total, const float* y, const float* dy, Act act, float* g,
                     CudaExec e) {
  act_grad_k<<<blocks_for(total), kThreads, 0, stream_of(e)>>>(total, y, dy, act, g);
  PDNN_CUDA_LAUNCH_CHECK("conv2d backward activation");
}
void conv2d_act_grad(int64_t total, const bf16* y, const bf16* dy, Act act, bf16* g,
                     CudaExec e) {
  act_grad_k<<<blocks_for(total), kThreads, 0, stream_of(e)>>>(total, y, dy, act, g);
  PDNN_CUDA_LAUNCH_CHECK("conv2d backward activation (bf16)");
}

// The algorithm was chosen by the ops layer (conv2d_algo.h); Auto and the CPU's algorithms mean
// the im2col path.
void conv2d_forward(const ConvFwd& a, float* ws, CudaExec e) {
  if (a.algo == ConvAlgo::Direct && conv3x3_applies(a.g))
    conv2d_direct_forward(a, ws, e);
  else if (a.algo == ConvAlgo::Implicit)
    conv2d_implicit_forward(a, e);
  else if (a.algo == ConvAlgo::Cudnn)
    conv2d_cudnn_forward(a, ws, e);
  else
    im2col_forward(a, ws, e);
}

// bf16: the same algorithms (implicit on the register-staged kernel; direct for 4x4 stride-2
// padding-1 too).
void conv2d_forward(const ConvFwdBf16& a, float* ws, CudaExec e) {
  if (a.algo == ConvAlgo::Direct && direct_applies(a.g, DType::BF16))
    conv2d_direct_forward(a, ws, e);
  else if (a.algo == ConvAlgo::Implicit)
    conv2d_implicit_forward(a, e);
  else if (a.algo == ConvAlgo::Cudnn)
    conv2d_cudnn_forward(a, ws, e);
  else
    im2col_forward(a, ws, e);
}

namespace {
void backward_by_algo(const ConvBwd& a, float* ws, CudaExec e);
void backward_by_algo(const ConvBwdBf16& a, float* ws, CudaExec e);

template <class C>
void backward_checked(const C& a, float* ws, CudaExec e) {
  PDNN_CHECK(a.dx_act.kind == FusedAct::None || a.dx_src,
             "conv2d_backward: dx through the input's activation needs the input");
  C c = a;
  if (!c.dx) c.dx_act = Act{};
  backward_by_algo(c, ws, e);
}
}  // namespace

void conv2d_backward(const ConvBwd& a, float* ws, CudaExec e) { backward_checked(a, ws, e); }
void conv2d_backward(const ConvBwdBf16& a, float* ws, CudaExec e) { backward_checked(a, ws, e); }

namespace {
template <class E>
__global__ void act_grad_in_place_k(int64_t total, const E* __restrict__ src, E* dx, Act a) {
  PDNN_GRID_LOOP(i, total) {
    dx[i] = from_f32<E>(kit::act_grad(to_f32(src[i]), to_f32(dx[i]), a));
  }
}

// dx through act'(src), in place, for the algorithms that cannot do it in their output write
// (bf16: dx was rounded when written, and is rounded again here: the activation layer's own
// backward on a bf16 gradient would do the same).
template <class E>
void dx_through_act(const ConvGeom& g, int64_t n, const E* src, E* dx, Act a, CudaExec e) {
  if (a.kind == FusedAct::None) return;
  const int64_t total = n * g.image_size();
  act_grad_in_place_k<<<blocks_for(total), kThreads, 0, stream_of(e)>>>(total, src, dx, a);
  PDNN_CUDA_LAUNCH_CHECK("conv2d dx through the input's activation");
}

void backward_by_algo(const ConvBwd& a, float* ws, CudaExec e) {
  const ConvGeom& g = a.g;
  const int64_t n = a.n, k = a.k;
  if (a.algo == ConvAlgo::Cudnn) {
    conv2d_cudnn_backward(a, ws, e);
    if (a.dx) dx_through_act(g, n, a.dx_src, a.dx, a.dx_act, e);
    return;
  }
  const bool direct = a.algo == ConvAlgo::Direct && conv3x3_applies(g);
  if (a.algo != ConvAlgo::Implicit && !direct) {
    im2col_backward(a, ws, e);
    if (a.dx) dx_through_act(g, n, a.dx_src, a.dx, a.dx_act, e);
    return;
  }
  PDNN_CHECK(a.dw || !a.db, "conv2d_backward (%s): the bias gradient comes with dw",
             conv_algo_name(a.algo));
  if (!a.dx) {
    // The weight gradient alone reads each dy once: y beside it, through the activation there.
    if (a.dw && direct) conv2d_direct_backward_weights(a, ws, e);
    if (a.dw && !direct) conv2d_implicit_backward_weights(a, ws, e);
    return;
  }
  // Both passes: dy through the activation once, into the workspace, for both (backward-data
  // gathers each dy kh*kw times).
  ConvBwd m = a;
  const size_t masked = conv2d_act_grad_floats(g, n, k, a.act);
  if (masked) {
    conv2d_act_grad(n * k * g.oh * g.ow, a.y, a.dy, a.act, ws, e);
    m.dy = ws;
    ws += masked;
  }
  m.act = Act{};
  if (direct) {
    if (m.dw) conv2d_direct_backward_weights(m, ws, e);
    conv2d_direct_backward_data(m, ws, e);
    return;
  }
  if (m.dw) conv2d_implicit_backward_weights(m, ws, e);
  implicit_backward_data(m, ws, e);
  dx_through_act(g, n, m.dx_src, m.dx, m.dx_act, e);
}

// bf16: im2col, cuDNN, direct (4x4 stride-2 padding-1 too), or the register-staged implicit
// GEMM (every stride: no flipped-weights forward for stride 1; its forward kernel is the same
// kernel).
void backward_by_algo(const ConvBwdBf16& a, float* ws, CudaExec e) {
  const ConvGeom& g = a.g;
  const int64_t n = a.n, k = a.k;
  const bool direct = a.algo == ConvAlgo::Direct && direct_applies(g, DType::BF16);
  if (a.algo != ConvAlgo::Implicit && !direct) {
    if (a.algo == ConvAlgo::Cudnn)
      conv2d_cudnn_backward(a, ws, e);
    else
      im2col_backward(a, ws, e);
    if (a.dx) dx_through_act(g, n, a.dx_src, a.dx, a.dx_act, e);
    return;
  }
  PDNN_CHECK(a.dw || !a.db, "conv2d_backward (%s, bf16): the bias gradient comes with dw",
             conv_algo_name(a.algo));
  if (!a.dx) {
    // the weight gradient alone: y read beside dy, through the activation there
    if (a.dw && direct) conv2d_direct_backward_weights(a, ws, e);
    if (a.dw && !direct) conv2d_implicit_backward_weights(a, ws, e);
    return;
  }
  ConvBwdBf16 m = a;
  const size_t masked = conv2d_act_grad_floats(g, n, k, a.act);
  if (masked) {
    bf16* gm = reinterpret_cast<bf16*>(ws);
    conv2d_act_grad(n * k * g.oh * g.ow, a.y, a.dy, a.act, gm, e);
    m.dy = gm;
    ws += masked;
  }
  m.act = Act{};
  if (direct) {  // dx through the input's activation in the kernel's own output write
    if (m.dw) conv2d_direct_backward_weights(m, ws, e);
    conv2d_direct_backward_data(m, ws, e);
    return;
  }
  if (m.dw) conv2d_implicit_backward_weights(m, ws, e);
  conv2d_implicit_backward_data(m, e);
  dx_through_act(g, n, m.dx_src, m.dx, m.dx_act, e);
}
}  // namespace

}  // namespace cuda
}  // namespace pdnn
