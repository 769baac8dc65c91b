// GEMM on the GPU through cuBLAS, and the dense layer's math (see gemm.h, dense.h).
// cuBLAS is column-major: a row-major C (M x N) = op(A) op(B) is the column-major
// C^T (N x M) = op(B)^T op(A)^T, i.e. cublasSgemm with the operands swapped.
#include <type_traits>

#include "cuda/launch.h"
#include "ops/dense.h"
#include "ops/gemm.h"

namespace pdnn {
namespace cuda {

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
          const float* A, const float* B, float beta, float* C, CudaExec e) {
  if (M == 0 || N == 0) return;
  const int lda = static_cast<int>(trans_a ? M : K), ldb = static_cast<int>(trans_b ? K : N);
  PDNN_CUBLAS_CHECK(cublasSgemm(e.blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(N),
                                static_cast<int>(M), static_cast<int>(K), &alpha, B, ldb, A, lda,
                                &beta, C, static_cast<int>(N)));
}

void gemm_strided_batched(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                          float alpha, const float* A, int64_t stride_a, const float* B,
                          int64_t stride_b, float beta, float* C, int64_t stride_c,
                          int64_t count, CudaExec e) {
  if (M == 0 || N == 0 || count == 0) return;
  const int lda = static_cast<int>(trans_a ? M : K), ldb = static_cast<int>(trans_b ? K : N);
  PDNN_CUBLAS_CHECK(cublasSgemmStridedBatched(
      e.blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
      static_cast<int>(N), static_cast<int>(M), static_cast<int>(K), &alpha, B, ldb, stride_b, A,
      lda, stride_a, &beta, C, static_cast<int>(N), stride_c, static_cast<int>(count)));
}

namespace {

__device__ __forceinline__ float apply(float z, Act a) {
  if (a.kind == FusedAct::None) return z;
  return z > 0.f ? z : (a.kind == FusedAct::ReLU ? 0.f : a.slope * z);
}

// y (n, out) = act(y + b) after a GEMM with beta 0.
__global__ void rows_bias_act(int n, int out, const float* __restrict__ b, Act act,
                              float* __restrict__ y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n * out; i += gridDim.x * blockDim.x)
    y[i] = apply(y[i] + (b ? b[i % out] : 0.f), act);
}

// g = act'(y) dy.
__global__ void act_mask(int total, const float* __restrict__ y, const float* __restrict__ dy,
                         Act act, float* __restrict__ g) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x)
    g[i] = y[i] > 0.f ? dy[i] : (act.kind == FusedAct::ReLU ? 0.f : act.slope * dy[i]);
}

// db[o] += sum over rows of g[i][o], rows in order (the CPU's order: bit-identical).
__global__ void rows_bias_backward(int n, int out, const float* __restrict__ g,
                                   float* __restrict__ db) {
  for (int o = blockIdx.x * blockDim.x + threadIdx.x; o < out; o += gridDim.x * blockDim.x) {
    float s = db[o];
    for (int i = 0; i < n; ++i) s += g[i * out + o];
    db[o] = s;
  }
}

// dW (out, in) += g^T (out x n) x (n x in) for batches of at most kDenseSmallKRows rows and
// large weights: a long, thin product cuBLAS runs at 1-3 TFLOP/s (54 us for W3's
// 128 x 9216 x 128). Block (bx, o): 64 lanes of 4 consecutive weights of row o, the batch split
// over 4 groups of threads (rows i = grp, grp+4, ...), whose partial sums are added in group
// order: deterministic.
constexpr int kDenseSmallKRows = 512;
constexpr int64_t kDenseSmallKMinWeights = 65536;  // below this cuBLAS is as fast
__global__ void dense_dw_small(int n, int in, int out, const float* __restrict__ g,
                               const float* __restrict__ x, float* __restrict__ dw) {
  __shared__ float4 part[4][64];
  const int o = blockIdx.y, lane = threadIdx.x & 63, grp = threadIdx.x >> 6;
  const int per_row = in / 4, kv = blockIdx.x * 64 + lane;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  if (kv < per_row) {
    const float4* x4 = reinterpret_cast<const float4*>(x);
#pragma unroll 4
    for (int i = grp; i < n; i += 4) {
      const float gi = g[i * out + o];
      const float4 xv = x4[static_cast<int64_t>(i) * per_row + kv];
      acc.x += gi * xv.x;
      acc.y += gi * xv.y;
      acc.z += gi * xv.z;
      acc.w += gi * xv.w;
    }
  }
  part[grp][lane] = acc;
  __syncthreads();
  if (grp == 0 && kv < per_row) {
    float4* d = reinterpret_cast<float4*>(dw + static_cast<int64_t>(o) * in) + kv;
    float4 cur = *d;
    for (int q = 0; q < 4; ++q) {
      cur.x += part[q][lane].x;
      cur.y += part[q][lane].y;
      cur.z += part[q][lane].z;
      cur.w += part[q][lane].w;
    }
    *d = cur;
  }
}

// Small batches: one block per output feature o reads its weight row once and forms the dot
// products with all n <= kDenseSmallRows rows of x (held in registers), reduced across the
// block in a fixed order, then bias and activation.
constexpr int kDenseThreads = 256;
__global__ void dense_small(int n, int in, int out, const float* __restrict__ x,
                            const float* __restrict__ w, const float* __restrict__ b, Act act,
                            float* __restrict__ y) {
  constexpr int R = static_cast<int>(kDenseSmallRows);
  __shared__ float part[R][kDenseThreads / 32];
  const int o = blockIdx.x;
  const float* wr = w + static_cast<int64_t>(o) * in;
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.f;
  for (int k = threadIdx.x; k < in; k += blockDim.x) {
    const float wk = wr[k];
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (r < n) acc[r] += x[r * in + k] * wk;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    float v = acc[r];
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    if (lane == 0) part[r][warp] = v;
  }
  __syncthreads();
  if (threadIdx.x < n) {
    float s = 0.f;
    for (int wp = 0; wp < kDenseThreads / 32; ++wp) s += part[threadIdx.x][wp];
    y[threadIdx.x * out + o] = apply(s + (b ? b[o] : 0.f), act);
  }
}

}  // namespace

void dense_forward(int64_t n, int64_t in, int64_t out, const float* x, const float* w,
                   const float* b, float* y, Act act, CudaExec e) {
  if (n <= 0 || out <= 0) return;
  if (n <= kDenseSmallRows) {
    dense_small<<<static_cast<unsigned>(out), kDenseThreads, 0, stream_of(e)>>>(
        static_cast<int>(n), static_cast<int>(in), static_cast<int>(out), x, w, b, act, y);
    PDNN_CUDA_LAUNCH_CHECK("dense_forward (small batch)");
    return;
  }
  gemm(false, true, n, out, in, 1.f, x, w, 0.f, y, e);
  if (b || act.kind != FusedAct::None) {
    rows_bias_act<<<blocks_for(n * out, tpb(e)), tpb(e), 0, stream_of(e)>>>(
        static_cast<int>(n), static_cast<int>(out), b, act, y);
    PDNN_CUDA_LAUNCH_CHECK("dense bias/activation");
  }
}

void dense_backward(int64_t n, int64_t in, int64_t out, const float* x, const float* w,
                    const float* dy, const float* y, float* dw, float* db, float* dx, Act act,
                    float* ws, CudaExec e) {
  if (act.kind != FusedAct::None) {
    act_mask<<<blocks_for(n * out, tpb(e)), tpb(e), 0, stream_of(e)>>>(static_cast<int>(n * out), y, dy,
                                                                act, ws);
    PDNN_CUDA_LAUNCH_CHECK("dense activation backward");
    dy = ws;
  }
  if (n <= kDenseSmallKRows && in % 4 == 0 && out * in >= kDenseSmallKMinWeights) {
    const dim3 grid(static_cast<unsigned>((in / 4 + 63) / 64), static_cast<unsigned>(out));
    dense_dw_small<<<grid, 256, 0, stream_of(e)>>>(static_cast<int>(n), static_cast<int>(in),
                                                    static_cast<int>(out), dy, x, dw);
    PDNN_CUDA_LAUNCH_CHECK("dense weight gradient (small batch)");
  } else {
    gemm(true, false, out, in, n, 1.f, dy, x, 1.f, dw, e);
  }
  if (db) {
    rows_bias_backward<<<blocks_for(out, 64), 64, 0, stream_of(e)>>>(static_cast<int>(n),
                                                                     static_cast<int>(out), dy, db);
    PDNN_CUDA_LAUNCH_CHECK("dense bias backward");
  }
  if (dx) gemm(false, false, n, in, out, 1.f, dy, w, 0.f, dx, e);
}

}  // namespace cuda
}  // namespace pdnn
