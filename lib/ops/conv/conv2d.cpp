// Convolution through im2col + GEMM, per image in parallel or as one batched GEMM
// (see conv2d.h).
#include "ops/conv/conv2d.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "core/cuda_state.h"
#include "core/error.h"
#include "core/parallel.h"
#include "ops/activation.h"
#include "ops/conv/conv2d_algo.h"
#include "ops/conv/conv2d_direct.h"
#include "ops/conv/conv2d_gpu.h"
#include "ops/conv/conv2d_k4s2.h"
#include "ops/conv/conv2d_winograd.h"
#include "ops/dispatch.h"
#include "ops/gemm.h"

namespace pdnn {

namespace {

// 16 floats = one 64-byte line, so per-thread slots never share a cache line.
inline int64_t round_line(int64_t n) { return (n + 15) / 16 * 16; }

// Per-thread slot of the per-image path: columns, then partial dW, then partial db.
inline int64_t slot_floats(const ConvGeom& g, int64_t k) {
  return round_line(g.col_size()) + round_line(k * g.col_rows()) + round_line(k);
}

inline int threads_for(int threads, int64_t n) {
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, n)));
}

// Images [lo, hi) of thread t of nt: contiguous static chunks, so each thread's partial sums
// cover a fixed set of images in a fixed order (bit-identical runs at a given thread count).
inline void chunk(int64_t n, int t, int nt, int64_t* lo, int64_t* hi) {
  *lo = n * t / nt;
  *hi = n * (t + 1) / nt;
}

// Multiply-adds of a convolution GEMM over the batch: the work that decides whether a
// parallel region pays for its fork/join.
inline int64_t macs(const ConvGeom& g, int64_t n, int64_t k) { return n * k * g.col_size(); }

// Per-image GEMMs narrower than this many output pixels (columns, p = oh*ow) are
// matrix-vector-like and pay OpenBLAS's per-call overhead per image; below it one batched GEMM
// wins, at or above it images in parallel win, at 1 and at 2 threads alike. Measured with
// `build/bin/bench_conv 7 2` (forward + backward, median of 7 after 2 warm-up, then the
// median of 3 such runs started only when the shared 2-core EPYC was >= 85% idle; OpenBLAS
// 0.3.21 Haswell kernels), ms at 1 / 2 threads:
//     p  shape (batch)                                  per-image        batched
//   784  W2 Conv 1->10 k3 p1 28x28 (8), no dx          0.10 / 0.07      0.13 / 0.16
//   784  W2 Conv 1->10 k3 p1 28x28 (128), no dx        1.68 / 1.17      2.06 / 3.35
//   676  W3 Conv 1->32 k3 28x28 (128), no dx           3.60 / 1.83      5.89 / 4.24
//   576  W3 Conv 32->64 k3 26x26 (128)                 88.2 / 44.4     118.3 / 65.1
//   256  W5 Conv 64->128 k4 s2 p1 32x32 (64)          143.1 / 73.1     160.3 / 85.3
//   256  W5 ConvT 128->64 k4 s2 p1 16x16 (64)         150.0 / 75.9     164.1 / 88.9
//    64  W5 ConvT 256->128 k4 s2 p1 8x8 (64)          149.0 / 75-81    153-160 / 84.5
//    16  W5 ConvT 512->256 k4 s2 p1 4x4 (64)          182 / 112-120    140.6 / 74-76
//    16  W5 Conv 256->512 k4 s2 p1 8x8 (64)           205-232 / 149    137.1 / 70.4
//     1  W5 Conv 512->1 k4 4x4 (64)                   3.05 / 1.59      1.61 / 0.96
//     1  W5 ConvT 100->512 k4 1x1 (64), no dx        18.7 / 12.4       3.51 / 2.37
constexpr int64_t kBatchedBelowCols = 64;

// 3x3 stride-1 convolutions (every convolution of W2, W3, W4) skip im2col: Winograd F(4x4, 3x3)
// from kDirectMaxChannels + 1 input channels, the direct kernels below that, where Winograd
// transforms tiles of 1-4 channels padded to a whole vector and multiplies with an inner
// dimension of 1-4. Both need at least one whole 4x4 output tile (below that Winograd computes
// up to 16x the outputs it keeps; no workload has such a layer). Measured at 1 thread (thread
// CPU time, batch 64, 28x28 pad 1, 32 output channels, this Xeon; ms forward / backward
// weights, direct vs Winograd): 2 channels 0.71 / 0.98 vs 1.92 / 1.66; 4 channels 1.20 / 1.84
// vs 1.74 / 1.65; 8 channels 1.96 / 3.54 vs 1.95 / 1.87; 16 channels 3.87 / 7.48 vs
// 2.33 / 2.57. Against im2col per image (make bench-conv, rev e191161, results/bench/conv.csv,
// 1 thread, OpenBLAS SkylakeX, median ms forward / backward data / backward weights, machine
// shared): W3 conv2 (32 -> 64, batch 128) Winograd 13.3 / 16.7 / 16.3 vs 31.2 / 29.2 / 32.6;
// W4's 32..128-channel layers (batch 64) Winograd 2.4-5.5x faster in every pass; W4 conv1
// (3 -> 32 at 224) direct 95 / - / 188 vs 253 / - / 285; W2 (1 -> 10, batch 128) direct
// 0.7 / - / 0.7 vs 0.9 / - / 0.8; W3 conv1 (1 -> 32) direct 2.1 / - / 2.4 vs 2.4 / - / 1.7
// (its weight gradient reads 11 MB of dy for 50 MFLOP: memory-bound either way, and the two
// traded places between runs).
constexpr int64_t kDirectMaxChannels = 4;

// 4x4 stride-2 padding-1 convolutions (W5's, ops/conv/conv2d_k4s2.h) run as Winograd F(4x4, 2x2)
// over the stride phases from this many channels on each side; below it (W5's 3 -> 64 layer of
// D and its transpose in G) im2col. Measured with `bench_conv --filter W5` (batch 64, 1 thread,
// ms forward / backward data / backward weights, Winograd vs the better im2col way; OpenBLAS
// SkylakeX, this 2-core Xeon, shared): 3 -> 64 at 64x64: 26.5 / 48.7 / 23.0 vs 7.2 / 5.9 / 7.4
// (a 12-channel reduction wastes the GEMMs; 3 output channels fill 3 of 16 lanes); 64 -> 128
// at 32x32: 27.1 / 39.8 / 26.5 vs 48.8 / 41.0 / 46.9; 128 -> 256 at 16x16: 22.4 / 26.8 / 22.4 vs
// 43.9 / 45.3 / 44.4; 256 -> 512 at 8x8: 28.6 / 28.5 / 28.8 vs 39.3 / 36.2 / 36.6 (the first
// version of the kernels; later ones are faster). 16, where a vector of channels is full, is a
// guess between the measured 3 and 64: no workload has a layer in between.
constexpr int64_t kK4s2MinChannels = 16;

// One image's bias, serial (called inside the per-image parallel regions).
void bias_add_image(int64_t k, int64_t p, const float* b, float* y) {
  for (int64_t c = 0; c < k; ++c) {
    float* r = y + c * p;
    const float bc = b[c];
    for (int64_t q = 0; q < p; ++q) r[q] += bc;
  }
}

// Sum of n floats in a fixed order through 32 independent partial sums. A plain loop is one
// dependent add per element (not vectorised without -ffast-math): with it W3's conv1 backward
// (batch 128, 1 thread) took 3.1 ms instead of 2.0.
inline float row_sum(const float* r, int64_t n) {
  constexpr int kLanes = 32;
  float acc[kLanes] = {};
  int64_t q = 0;
  for (; q + kLanes <= n; q += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] += r[q + j];
  float s = 0.f;
  for (; q < n; ++q) s += r[q];
  for (int j = 0; j < kLanes; ++j) s += acc[j];
  return s;
}

void bias_sum_image(int64_t k, int64_t p, const float* dy, float* db) {
  for (int64_t c = 0; c < k; ++c) db[c] += row_sum(dy + c * p, p);
}

}  // namespace

const char* conv_algo_name(ConvAlgo a) {
  switch (a) {
    case ConvAlgo::Auto: return "auto";
    case ConvAlgo::PerImage: return "per-image";
    case ConvAlgo::Batched: return "batched";
    case ConvAlgo::Winograd: return "winograd";
    case ConvAlgo::Direct: return "direct";
    case ConvAlgo::Im2col: return "im2col";
    case ConvAlgo::Implicit: return "implicit";
    case ConvAlgo::Cudnn: return "cudnn";
  }
  return "?";
}

const char* conv_pass_name(ConvPass p) {
  switch (p) {
    case ConvPass::Forward: return "fwd";
    case ConvPass::BackwardData: return "bwd-data";
    case ConvPass::BackwardWeights: return "bwd-weights";
  }
  return "?";
}

bool parse_conv_algo(const std::string& name, ConvAlgo* a) {
  for (ConvAlgo c : {ConvAlgo::Auto, ConvAlgo::PerImage, ConvAlgo::Batched, ConvAlgo::Winograd,
                     ConvAlgo::Direct, ConvAlgo::Im2col, ConvAlgo::Implicit, ConvAlgo::Cudnn})
    if (name == conv_algo_name(c)) {
      *a = c;
      return true;
    }
  return false;
}

ConvAlgo conv_algo_for(const ConvGeom& g, int64_t n, int64_t k, int threads) {
  (void)n;
  (void)threads;
  if (conv3x3_applies(g) && g.oh >= 4 && g.ow >= 4)
    return g.c <= kDirectMaxChannels ? ConvAlgo::Direct : ConvAlgo::Winograd;
  if (conv4x4s2_applies(g) && g.c >= kK4s2MinChannels && k >= kK4s2MinChannels)
    return ConvAlgo::Winograd;
  return g.col_cols() < kBatchedBelowCols ? ConvAlgo::Batched : ConvAlgo::PerImage;
}

size_t conv_workspace_floats(const ConvGeom& g, int64_t n, int64_t k, ConvAlgo algo,
                             int threads) {
  if (algo == ConvAlgo::Auto) algo = conv_algo_for(g, n, k, threads);
  if (algo == ConvAlgo::Winograd && conv4x4s2_applies(g))
    return cpu::conv4x4s2_workspace_floats(g, n, k, threads);
  if (algo == ConvAlgo::Winograd) return cpu::conv3x3_winograd_workspace_floats(g, n, k, threads);
  if (algo == ConvAlgo::Direct) return cpu::conv3x3_direct_workspace_floats(g, n, k, threads);
  if (algo == ConvAlgo::Batched)
    return static_cast<size_t>(round_line(g.col_rows() * n * g.col_cols()) +
                               k * n * g.col_cols());
  return static_cast<size_t>(threads_for(threads, n) * slot_floats(g, k));
}

int64_t conv_act_chunk(const ConvGeom& g, int64_t n, int64_t k) {
  constexpr int64_t kMaskedFloats = int64_t{16} << 20;  // 64 MB of masked dy per chunk
  const int64_t per_image = std::max<int64_t>(1, k * g.col_cols());
  return std::max<int64_t>(1, std::min<int64_t>(n, kMaskedFloats / per_image));
}

size_t conv_backward_workspace_floats(const ConvGeom& g, int64_t n, int64_t k, ConvAlgo algo,
                                      Act act, int threads) {
  if (algo == ConvAlgo::Auto) algo = conv_algo_for(g, n, k, threads);
  if (act.kind == FusedAct::None) return conv_workspace_floats(g, n, k, algo, threads);
  const int64_t chunk = conv_act_chunk(g, n, k);
  return conv_workspace_floats(g, chunk, k, algo, threads) +
         static_cast<size_t>(chunk * k * g.col_cols());
}

namespace cpu {

void bias_add(int64_t n, int64_t k, int64_t p, const float* b, float* y, CpuExec e) {
  parallel_for(e, n, PDNN_PAR(n * k * p),
               [=](int64_t i) { bias_add_image(k, p, b, y + i * k * p); });
}

void bias_backward(int64_t n, int64_t k, int64_t p, const float* dy, float* db, CpuExec e) {
  parallel_for(e, k, PDNN_PAR(n * k * p), [=](int64_t c) {
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) s += row_sum(dy + (i * k + c) * p, p);
    db[c] += static_cast<float>(s);
  });
}

namespace {

void forward_per_image(const ConvFwd& a, float* ws, CpuExec e) {
  const ConvGeom& g = a.g;
  const int64_t n = a.n, k = a.k;
  const int64_t rows = g.col_rows(), p = g.col_cols(), slot = slot_floats(g, k);
  const int nt_req = threads_for(e.threads, n);
#pragma omp parallel num_threads(nt_req) if (nt_req > 1 && PDNN_PAR(macs(g, n, k)))
  {
    observe_team();
    const int t = omp_get_thread_num();
    int64_t lo, hi;
    chunk(n, t, omp_get_num_threads(), &lo, &hi);
    float* cols = ws + t * slot;
    for (int64_t i = lo; i < hi; ++i) {
      float* yi = a.y + i * k * p;
      im2col(g, a.x + i * g.image_size(), cols);
      gemm(false, false, k, p, rows, 1.f, a.w, cols, 0.f, yi, CpuExec{1});
      if (a.b) bias_add_image(k, p, a.b, yi);
    }
  }
}

void backward_per_image(const ConvBwd& a, float* ws, CpuExec e) {
  const ConvGeom& g = a.g;
  const int64_t n = a.n, k = a.k;
  const int64_t rows = g.col_rows(), p = g.col_cols(), slot = slot_floats(g, k);
  const int64_t dw_off = round_line(g.col_size()), db_off = dw_off + round_line(k * rows);
  const int nt_req = threads_for(e.threads, n);
  // Partial dW kept transposed, (rows, k), when rows > k: OpenBLAS runs the product ~8% faster
  // with the longer side first (W3 conv2: 25.3 vs 27.3 ms per 128 images, thread CPU time).
  const bool dw_t = rows > k;
  int nt_used = 1;
#pragma omp parallel num_threads(nt_req) if (nt_req > 1 && PDNN_PAR(macs(g, n, k)))
  {
    observe_team();
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    if (t == 0) nt_used = nt;
    int64_t lo, hi;
    chunk(n, t, nt, &lo, &hi);
    float* cols = ws + t * slot;
    float* pdw = cols + dw_off;
    float* pdb = cols + db_off;
    if (a.dw) std::memset(pdw, 0, sizeof(float) * k * rows);
    if (a.db) std::memset(pdb, 0, sizeof(float) * k);
    for (int64_t i = lo; i < hi; ++i) {
      const float* dyi = a.dy + i * k * p;
      if (a.dw) {
        im2col(g, a.x + i * g.image_size(), cols);
        if (dw_t)
          gemm(false, true, rows, k, p, 1.f, cols, dyi, 1.f, pdw, CpuExec{1});
        else
          gemm(false, true, k, rows, p, 1.f, dyi, cols, 1.f, pdw, CpuExec{1});
      }
      if (a.db) bias_sum_image(k, p, dyi, pdb);
      if (a.dx) {
        gemm(true, false, rows, p, k, 1.f, a.w, dyi, 0.f, cols, CpuExec{1});
        col2im(g, cols, a.dx + i * g.image_size());
      }
    }
  }
  // Partials summed in thread order: the same order on every run at this thread count.
  for (int t = 0; t < nt_used; ++t) {
    const float* pdw = ws + t * slot + dw_off;
    const float* pdb = ws + t * slot + db_off;
    if (a.dw && dw_t) {
      for (int64_t c = 0; c < k; ++c)
        for (int64_t r = 0; r < rows; ++r) a.dw[c * rows + r] += pdw[r * k + c];
    } else if (a.dw) {
      for (int64_t j = 0; j < k * rows; ++j) a.dw[j] += pdw[j];
    }
    if (a.db)
      for (int64_t j = 0; j < k; ++j) a.db[j] += pdb[j];
  }
}

void forward_batched(const ConvFwd& a, float* ws, CpuExec e) {
  const ConvGeom& g = a.g;
  const int64_t n = a.n, k = a.k;
  const int64_t rows = g.col_rows(), p = g.col_cols();
  if (whole_image_window(g)) {
    // x (n, rows) is the batch's column matrix already, transposed: y (n, k) = x w^T, no copies.
    // W5's D.11 (512 -> 1 on 4x4), forward + backward: 5.6 -> 0.2 ms; G.0 (its transpose from
    // 100 x 1x1 to 512 x 4x4): 6.3 -> 2.5 ms (bench_conv --mode layers, 1 thread).
    gemm(false, true, n, k, rows, 1.f, a.x, a.w, 0.f, a.y, e);
    if (a.b) bias_add(n, k, 1, a.b, a.y, e);
    return;
  }
  float* cols = ws;
  float* tmp = ws + round_line(rows * n * p);  // y as (k, n*p)
  im2col_batch(g, n, a.x, cols, e);
  gemm(false, false, k, n * p, rows, 1.f, a.w, cols, 0.f, tmp, e);
  cnhw_to_nchw(n, k, p, tmp, a.y, e);
  if (a.b) bias_add(n, k, p, a.b, a.y, e);
}

void backward_batched(const ConvBwd& a, float* ws, CpuExec e) {
  const ConvGeom& g = a.g;
  const int64_t n = a.n, k = a.k;
  const int64_t rows = g.col_rows(), p = g.col_cols();
  float* cols = ws;
  float* dyt = ws + round_line(rows * n * p);  // dy as (k, n*p)
  if (a.db) bias_backward(n, k, p, a.dy, a.db, e);
  if (!a.dw && !a.dx) return;
  if (whole_image_window(g)) {  // as forward_batched: dy is (n, k), x and dx (n, rows)
    if (a.dw) gemm(true, false, k, rows, n, 1.f, a.dy, a.x, 1.f, a.dw, e);
    if (a.dx) gemm(false, false, n, rows, k, 1.f, a.dy, a.w, 0.f, a.dx, e);
    return;
  }
  nchw_to_cnhw(n, k, p, a.dy, dyt, e);
  if (a.dw) {
    im2col_batch(g, n, a.x, cols, e);
    gemm(false, true, k, rows, n * p, 1.f, dyt, cols, 1.f, a.dw, e);
  }
  if (a.dx) {
    gemm(true, false, rows, n * p, k, 1.f, a.w, dyt, 0.f, cols, e);
    col2im_batch(g, n, cols, a.dx, e);
  }
}

}  // namespace

void conv2d_forward(const ConvFwd& a, float* ws, CpuExec e) {
  const ConvGeom& g = a.g;
  const int64_t n = a.n, k = a.k;
  ConvAlgo algo = a.algo;
  if (algo == ConvAlgo::Auto) algo = conv_algo_for(g, n, k, e.threads);
  // The 3x3 kernels apply the activation in their output write (slopes in [0, 1], where it is
  // a max); im2col's paths in one more pass over y.
  const Act act = a.act;
  const bool in_kernel = act.kind == FusedAct::ReLU ||
                         (act.kind == FusedAct::LeakyReLU && act.slope >= 0.f && act.slope <= 1.f);
  ConvFwd fused = a;
  fused.act = in_kernel ? act : Act{};
  if (algo == ConvAlgo::Winograd && conv4x4s2_applies(g))
    conv4x4s2_forward(fused, ws, e);
  else if (algo == ConvAlgo::Winograd)
    conv3x3_winograd_forward(fused, ws, e);
  else if (algo == ConvAlgo::Direct)
    conv3x3_direct_forward(fused, ws, e);
  else if (algo == ConvAlgo::Batched)
    forward_batched(a, ws, e);
  else
    forward_per_image(a, ws, e);
  if (in_kernel && (algo == ConvAlgo::Winograd || algo == ConvAlgo::Direct)) return;
  const int64_t total = n * k * g.col_cols();
  if (act.kind == FusedAct::ReLU) relu_forward(total, a.y, a.y, e);
  if (act.kind == FusedAct::LeakyReLU) leaky_relu_forward(total, act.slope, a.y, a.y, e);
}

namespace {

// The backward of the convolution itself (a.act is not read: dy is with respect to its output),
// by algorithm; dx through the input's activation dx_act (see conv2d.h).
void backward_by_algo(const ConvBwd& a, ConvAlgo algo, float* ws, CpuExec e) {
  const ConvGeom& g = a.g;
  const int64_t n = a.n, k = a.k;
  if (algo == ConvAlgo::Winograd && conv4x4s2_applies(g)) {
    if (a.db) bias_backward(n, k, g.col_cols(), a.dy, a.db, e);
    if (a.dw) conv4x4s2_backward_weights(a, ws, e);
    if (a.dx) conv4x4s2_backward_data(a, ws, e);
    return;
  }
  if (algo == ConvAlgo::Winograd) {
    if (a.db) bias_backward(n, k, g.col_cols(), a.dy, a.db, e);
    if (a.dw) conv3x3_winograd_backward_weights(a, ws, e);
    if (a.dx) conv3x3_winograd_backward_data(a, ws, e);
  } else if (algo == ConvAlgo::Direct) {
    if (a.db) bias_backward(n, k, g.col_cols(), a.dy, a.db, e);
    if (a.dw) conv3x3_direct_backward_weights(a, ws, e);
    if (a.dx) conv3x3_direct_backward_data(a, ws, e);
  } else if (algo == ConvAlgo::Batched) {
    backward_batched(a, ws, e);
  } else {
    backward_per_image(a, ws, e);
  }
  if (a.dx && a.dx_act.kind != FusedAct::None) {  // in place, as the activation layer's backward
    const int64_t total = n * g.image_size();
    if (a.dx_act.kind == FusedAct::ReLU)
      relu_backward(total, a.dx_src, a.dx, a.dx, e);
    else
      leaky_relu_backward(total, a.dx_act.slope, a.dx_src, a.dx, a.dx, e);
  }
}

}  // namespace

void conv2d_backward(const ConvBwd& a, float* ws, CpuExec e) {
  const ConvGeom& g = a.g;
  const int64_t n = a.n, k = a.k;
  ConvAlgo algo = a.algo;
  if (algo == ConvAlgo::Auto) algo = conv_algo_for(g, n, k, e.threads);
  if (a.act.kind == FusedAct::None) {
    backward_by_algo(a, algo, ws, e);
    return;
  }
  // dy through the activation into the workspace's tail, a chunk of images at a time
  // (conv_act_chunk); the gradients accumulate over the chunks, dx is written per image.
  const int64_t chunk = conv_act_chunk(g, n, k);
  const int64_t per_y = k * g.col_cols(), per_x = g.image_size();
  float* masked = ws + conv_workspace_floats(g, chunk, k, algo, e.threads);
  for (int64_t i0 = 0; i0 < n; i0 += chunk) {
    const int64_t m = std::min(chunk, n - i0);
    if (a.act.kind == FusedAct::ReLU)
      relu_backward(m * per_y, a.y + i0 * per_y, a.dy + i0 * per_y, masked, e);
    else
      leaky_relu_backward(m * per_y, a.act.slope, a.y + i0 * per_y, a.dy + i0 * per_y, masked, e);
    ConvBwd c = a;  // the chunk's images, dy through the activation
    c.n = m;
    c.x = a.x ? a.x + i0 * per_x : nullptr;
    c.dy = masked;
    c.y = nullptr;
    c.act = Act{};
    c.dx = a.dx ? a.dx + i0 * per_x : nullptr;
    c.dx_src = a.dx_src ? a.dx_src + i0 * per_x : nullptr;
    backward_by_algo(c, algo, ws, e);
  }
}

}  // namespace cpu

int64_t cuda_conv_chunk(const ConvGeom& g, int64_t n, int64_t k) {
  constexpr int64_t kBudget = int64_t{64} << 20;  // floats: 256 MB of columns + product
  const int64_t per_image = (g.col_rows() + k) * g.col_cols();
  return std::max<int64_t>(1, std::min<int64_t>(n, kBudget / std::max<int64_t>(1, per_image)));
}

size_t cuda_conv_workspace_floats(const ConvGeom& g, int64_t n, int64_t k) {
  const int64_t c = cuda_conv_chunk(g, n, k);
  // columns, the product, then 32 doubles per output channel for the bias gradient's partial
  // sums (conv2d.cu).
  return static_cast<size_t>(cuda_conv_product_offset(g, c) + k * c * g.col_cols() + 2 +
                             2 * 32 * k);
}

namespace ops {

namespace {
template <class E = float>
const E* ptr(const Tensor* t) {
  return t ? t->data<E>() : nullptr;
}
template <class E = float>
E* ptr(Tensor* t) {
  return t ? t->data<E>() : nullptr;
}

// E: the activations' and weights' type; the bias and parameter gradients are float.
template <class E>
ConvFwdOf<E, float> ptrs_of(const ConvFwdTensors& t) {
  return ConvFwdOf<E, float>::of(t, ptr<E>(t.x), ptr<E>(t.w), ptr(t.b), ptr<E>(t.y), t.act,
                                 t.algo);
}
// Field by field in declaration order (conv_args.h); act' of dx_act is read off x.
template <class E>
ConvBwdOf<E, float> ptrs_of(const ConvBwdTensors& t) {
  return {t,         ptr<E>(t.x), ptr<E>(t.w), ptr<E>(t.dy), ptr<E>(t.y),
          ptr(t.dw), ptr(t.db),   ptr<E>(t.dx), t.act,       t.algo,
          nullptr,   t.dx ? t.dx_act : Act{},   t.dx ? ptr<E>(t.x) : nullptr};
}
}  // namespace

ConvFwd conv_ptrs(const ConvFwdTensors& t) { return ptrs_of<float>(t); }
ConvBwd conv_ptrs(const ConvBwdTensors& t) { return ptrs_of<float>(t); }
ConvFwdBf16 conv_ptrs_bf16(const ConvFwdTensors& t) { return ptrs_of<bf16>(t); }
ConvBwdBf16 conv_ptrs_bf16(const ConvBwdTensors& t) { return ptrs_of<bf16>(t); }

namespace {

// bf16 convolutions: x, w, y, dy, dx bfloat16 (those given), b, dw, db float32; else all float32.
// Refused otherwise in one line naming the tensor; the CPU has no bf16 path.
bool conv_is_bf16(const char* op, std::initializer_list<const Tensor*> acts,
                  std::initializer_list<const Tensor*> params) {
  const bool is_bf16 = (*acts.begin())->dtype() == DType::BF16;
  const DType want = is_bf16 ? DType::BF16 : DType::F32;
  int i = 0;
  for (const Tensor* a : acts) {
    PDNN_CHECK(!a || a->dtype() == want, "%s: operand %d is %s, x is %s (one type for x, w, y, "
               "dy, dx)", op, i, dtype_name(a->dtype()), dtype_name(want));
    ++i;
  }
  for (const Tensor* p : params)
    PDNN_CHECK(!p || p->dtype() == DType::F32,
               "%s: the bias and the parameter gradients are float32, not %s", op,
               dtype_name(p->dtype()));
  return is_bf16;
}

#if PDNN_HAVE_CUDA
// The workspace a GPU algorithm needs for a pass (floats): pdnn's own by conv2d_gpu_ws.h's
// arithmetic for this device, cuDNN's by its pick.
size_t gpu_workspace_floats(Context& ctx, ConvPass pass, ConvAlgo a, const ConvGeom& g, int64_t n,
                            int64_t k, Act act, bool is_bf16) {
  const DType dtype = is_bf16 ? DType::BF16 : DType::F32;
  if (a == ConvAlgo::Cudnn)
    return cuda::conv2d_cudnn_workspace_floats(pass, g, n, k, act, ctx.cuda_exec(), dtype);
  return gpu_conv_own_ws_floats(pass, a, g, n, k, act, dtype, ctx.cuda().info().sm_count);
}
#endif

// The CPU ignores the GPU's algorithms (a layer forced to one runs the CPU's rule).
ConvAlgo cpu_algo(ConvAlgo a) {
  return a == ConvAlgo::Im2col || a == ConvAlgo::Implicit || a == ConvAlgo::Cudnn ? ConvAlgo::Auto
                                                                                  : a;
}

#if PDNN_HAVE_CUDA
template <class E>
void gpu_forward(Context& ctx, const ConvFwdTensors& t) {
  const ConvGeom& g = t.g;
  const int64_t n = t.n, k = t.k;
  constexpr bool kBf16 = std::is_same<E, bf16>::value;
  auto ws_of = [&](ConvAlgo a) {
    return gpu_workspace_floats(ctx, ConvPass::Forward, a, g, n, k, t.act, kBf16);
  };
  // The im2col path keeps the batch's columns for backward when the batch is one chunk; any
  // other algorithm gives the buffer back (the chooser's timing of im2col filled it), so
  // backward never reads columns of an earlier batch and an uncapped step does not hold
  // columns it does not use (the U-Net at 1024: up to 4.75 GiB a layer).
  auto run = [&](ConvAlgo a, bool) {
    float* ws = ctx.workspace(Device::CUDA, ws_of(a));
    ConvFwdOf<E, float> c = ptrs_of<E>(t);
    c.algo = a;
    if (Tensor* saved = t.saved_cols) {
      if (a == ConvAlgo::Im2col && cuda_conv_kept_columns(g, n, k)) {
        saved->resize(Shape{g.col_rows() * n * g.col_cols()}, dtype_of<E>(), Device::CUDA, ctx);
        c.saved_cols = saved->data<E>();
      } else {
        *saved = Tensor();
      }
    }
    cuda::conv2d_forward(c, ws, ctx.cuda_exec());
  };
  run(gpu_conv_choose(ctx, ConvPass::Forward, g, n, k, t.act, dtype_of<E>(), t.algo, ws_of, run),
      false);
}

template <class E>
void gpu_backward(Context& ctx, const ConvBwdTensors& t) {
  const ConvGeom& g = t.g;
  const int64_t n = t.n, k = t.k;
  constexpr bool kBf16 = std::is_same<E, bf16>::value;
  const Tensor* saved_cols = t.saved_cols;
  const E* keep = nullptr;
  if (saved_cols && saved_cols->dtype() == dtype_of<E>() &&
      saved_cols->numel() >= g.col_rows() * n * g.col_cols() && saved_cols->numel() > 0 &&
      cuda_conv_kept_columns(g, n, k))
    keep = saved_cols->data<E>();
  // The choices first, then the passes: when both backward passes chose one algorithm, one call
  // runs them and shares the work they have in common (im2col: dy's permutation; implicit GEMM
  // and cuDNN: dy through the activation).
  auto ws_w = [&](ConvAlgo a) {
    return gpu_workspace_floats(ctx, ConvPass::BackwardWeights, a, g, n, k, t.act, kBf16);
  };
  auto ws_d = [&](ConvAlgo a) {
    return gpu_workspace_floats(ctx, ConvPass::BackwardData, a, g, n, k, t.act, kBf16);
  };
  // One call of the backward; while timing, the gradients accumulate into scratch, not dw, db.
  Tensor scratch_w, scratch_b;
  auto pass = [&](ConvAlgo a, size_t ws_floats, bool want_w, bool want_x, bool timing) {
    ConvBwdOf<E, float> c = ptrs_of<E>(t);
    c.algo = a;
    c.dw = want_w ? ptr(t.dw) : nullptr;
    c.db = want_w ? ptr(t.db) : nullptr;
    if (timing && want_w) {
      if (t.dw && scratch_w.empty()) scratch_w = Tensor::empty(t.dw->shape(), DType::F32, Device::CUDA, ctx);
      if (t.db && scratch_b.empty()) scratch_b = Tensor::empty(t.db->shape(), DType::F32, Device::CUDA, ctx);
      c.dw = t.dw ? scratch_w.data() : nullptr;
      c.db = t.db ? scratch_b.data() : nullptr;
    }
    c.x = want_w ? ptr<E>(t.x) : nullptr;
    c.dx = want_x ? ptr<E>(t.dx) : nullptr;
    c.dx_src = want_x ? ptr<E>(t.x) : nullptr;
    c.dx_act = want_x ? t.dx_act : Act{};
    c.saved_cols = a == ConvAlgo::Im2col && want_w ? keep : nullptr;
    float* ws = ctx.workspace(Device::CUDA, ws_floats);
    cuda::conv2d_backward(c, ws, ctx.cuda_exec());
  };
  const bool want_w = t.dw || t.db;
  ConvAlgo aw = ConvAlgo::Auto, ad = ConvAlgo::Auto;
  if (want_w)
    aw = gpu_conv_choose(ctx, ConvPass::BackwardWeights, g, n, k, t.act, dtype_of<E>(), t.algo,
                         ws_w,
                         [&](ConvAlgo a, bool timing) { pass(a, ws_w(a), true, false, timing); });
  if (t.dx)
    ad = gpu_conv_choose(ctx, ConvPass::BackwardData, g, n, k, t.act, dtype_of<E>(), t.algo,
                         ws_d,
                         [&](ConvAlgo a, bool timing) { pass(a, ws_d(a), false, true, timing); });
  if (want_w && t.dx && aw == ad) {
    pass(aw, std::max(ws_w(aw), ws_d(ad)), true, true, false);
    return;
  }
  if (want_w) pass(aw, ws_w(aw), true, false, false);
  if (t.dx) pass(ad, ws_d(ad), false, true, false);
}
#endif

}  // namespace

void conv2d_forward(Context& ctx, const ConvFwdTensors& t) {
  const ConvGeom& g = t.g;
  const int64_t n = t.n, k = t.k;
  PDNN_CHECK(t.x && t.w && t.y, "conv2d_forward: x, w and y are required");
  const Tensor &x = *t.x, &w = *t.w, &y = *t.y;
  const Tensor* b = t.b;
  PDNN_CHECK(x.numel() == n * g.image_size() && w.numel() == k * g.col_rows() &&
                 y.numel() == n * k * g.col_cols() && (!b || b->numel() == k),
             "conv2d_forward: x %s, w %s, y %s do not fit the geometry", x.shape().str().c_str(),
             w.shape().str().c_str(), y.shape().str().c_str());
  const Device d = op_device("conv2d_forward", {&x, &w, b, &y});
  const bool is_bf16 = conv_is_bf16("conv2d_forward", {&x, &w, &y}, {b});
  if (is_bf16 && d != Device::CUDA) fail_bf16_on_cpu("conv2d_forward");
  if (d == Device::CUDA) {
#if PDNN_HAVE_CUDA
    if (is_bf16)
      gpu_forward<bf16>(ctx, t);
    else
      gpu_forward<float>(ctx, t);
    return;
#else
    fail_no_cuda("conv2d_forward");
#endif
  }
  ConvFwd a = conv_ptrs(t);
  a.algo = cpu_algo(t.algo);
  float* ws = ctx.workspace(d, conv_workspace_floats(g, n, k, a.algo, ctx.threads()));
  cpu::conv2d_forward(a, ws, ctx.cpu_exec());
}

void conv2d_backward(Context& ctx, const ConvBwdTensors& t) {
  const ConvGeom& g = t.g;
  const int64_t n = t.n, k = t.k;
  PDNN_CHECK(t.w && t.dy, "conv2d_backward: w and dy are required");
  const Tensor *x = t.x, *y = t.y;
  const Tensor &w = *t.w, &dy = *t.dy;
  const Tensor *dw = t.dw, *db = t.db, *dx = t.dx;
  PDNN_CHECK((!x || x->numel() == n * g.image_size()) && w.numel() == k * g.col_rows() &&
                 dy.numel() == n * k * g.col_cols() && (!dw || dw->numel() == w.numel()) &&
                 (!db || db->numel() == k) && (!dx || dx->numel() == n * g.image_size()),
             "conv2d_backward: w %s, dy %s do not fit the geometry", w.shape().str().c_str(),
             dy.shape().str().c_str());
  PDNN_CHECK(!dw || x, "conv2d_backward: the weight gradient needs x");
  PDNN_CHECK(t.dx_act.kind == FusedAct::None || x,
             "conv2d_backward: dx through the input's activation needs x");
  PDNN_CHECK(t.act.kind == FusedAct::None || (y && y->numel() == dy.numel()),
             "conv2d_backward: a fused activation needs the forward's output y");
  const Device d = op_device("conv2d_backward", {x, &w, &dy, y, dw, db, dx});
  const bool is_bf16 = conv_is_bf16("conv2d_backward", {&w, &dy, x, y, dx}, {dw, db});
  if (is_bf16 && d != Device::CUDA) fail_bf16_on_cpu("conv2d_backward");
  if (d == Device::CUDA) {
#if PDNN_HAVE_CUDA
    if (is_bf16)
      gpu_backward<bf16>(ctx, t);
    else
      gpu_backward<float>(ctx, t);
    return;
#else
    fail_no_cuda("conv2d_backward");
#endif
  }
  ConvBwd a = conv_ptrs(t);
  a.algo = cpu_algo(t.algo);
  float* ws = ctx.workspace(d, conv_backward_workspace_floats(g, n, k, a.algo, t.act, ctx.threads()));
  cpu::conv2d_backward(a, ws, ctx.cpu_exec());
}

void bias_add(Context& ctx, int64_t n, int64_t k, int64_t p, const Tensor& b, Tensor& y) {
  PDNN_CHECK(b.numel() == k && y.numel() == n * k * p, "bias_add: b %s, y %s",
             b.shape().str().c_str(), y.shape().str().c_str());
  const Device d = op_device("bias_add", {&b, &y});
  // b stays float32 (data<float> refuses anything else)
  PDNN_DISPATCH_TYPED(ctx, d, y.dtype(), bias_add, n, k, p, b.data(), y.data<E>());
}

void bias_backward(Context& ctx, int64_t n, int64_t k, int64_t p, const Tensor& dy, Tensor& db) {
  PDNN_CHECK(db.numel() == k && dy.numel() == n * k * p, "bias_backward: dy %s, db %s",
             dy.shape().str().c_str(), db.shape().str().c_str());
  const Device d = op_device("bias_backward", {&dy, &db});
  PDNN_DISPATCH_TYPED(ctx, d, dy.dtype(), bias_backward, n, k, p, dy.data<E>(), db.data());
}

}  // namespace ops
}  // namespace pdnn
