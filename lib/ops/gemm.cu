// GEMM on the GPU through cuBLAS, and the dense layer's math (see gemm.h, dense.h).
// cuBLAS is column-major: a row-major C (M x N) = op(A) op(B) is the column-major
// C^T (N x M) = op(B)^T op(A)^T, i.e. cublasSgemm with the operands swapped.
#include <type_traits>

#include "cuda/launch.h"
#include "ops/dense.h"
#include "ops/gemm.h"
#include "ops/kit/act.h"
#include "ops/kit/round.h"

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

namespace {
// cublasGemmEx with bf16 A and B (the row-major product as its column-major transpose, as
// above), fp32 compute; c_type: CUDA_R_32F or CUDA_R_16BF.
void gemm_ex(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
             const bf16* A, const bf16* B, float beta, void* C, cudaDataType_t c_type,
             CudaExec e) {
  if (M == 0 || N == 0) return;
  const int lda = static_cast<int>(trans_a ? M : K), ldb = static_cast<int>(trans_b ? K : N);
  PDNN_CUBLAS_CHECK(cublasGemmEx(e.blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(N),
                                 static_cast<int>(M), static_cast<int>(K), &alpha, B, CUDA_R_16BF,
                                 ldb, A, CUDA_R_16BF, lda, &beta, C, c_type, static_cast<int>(N),
                                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}
}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
          const bf16* A, const bf16* B, float beta, float* C, CudaExec e) {
  gemm_ex(trans_a, trans_b, M, N, K, alpha, A, B, beta, C, CUDA_R_32F, e);
}
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
          const bf16* A, const bf16* B, float beta, bf16* C, CudaExec e) {
  gemm_ex(trans_a, trans_b, M, N, K, alpha, A, B, beta, C, CUDA_R_16BF, e);
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

using kit::act_apply;

// y (n, out) = act(y + b) after a GEMM with beta 0.
__global__ void rows_bias_act(int n, int out, const float* __restrict__ b, Act act,
                              float* __restrict__ y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n * out; i += gridDim.x * blockDim.x)
    y[i] = act_apply(y[i] + (b ? b[i % out] : 0.f), act);
}

// g = act'(y) dy.
__global__ void act_mask(int total, const float* __restrict__ y, const float* __restrict__ dy,
                         Act act, float* __restrict__ g) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x)
    g[i] = kit::act_grad(y[i], dy[i], act);
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

// C (T x N) (+)= A^T B with a small inner dimension J: C[t][k] = sum_j a(j, t) B[j][k], where
// a(j, t) = A[j * sa_j + t * sa_t] and B is J x N (N % 4 == 0, 16-byte rows). The dense layer's
// weight gradient (j: batch rows, t: output features, B = x) and input gradient (j: output
// features, t: batch rows, B = W) for batches up to kDenseSmallKRows: long, thin products that
// cuBLAS runs at 1-3 TFLOP/s (54 us each for W3's 128 x 9216 x 128). Block (bx, by): 64 lanes
// of 4 consecutive columns, kTileT rows of C (each B vector loaded once for all of them), the
// sum over j split over 4 groups of threads and added in group order: deterministic.
constexpr int kDenseSmallKRows = 512;
constexpr int64_t kDenseSmallKWeights = int64_t{4} << 20;
constexpr int kTileT = 16;
__global__ void small_k_gemm(int J, int T, int N, const float* __restrict__ A, int sa_j, int sa_t,
                             const float* __restrict__ B, float* __restrict__ C, bool accumulate) {
  __shared__ float4 part[4][64];
  const int lane = threadIdx.x & 63, grp = threadIdx.x >> 6;
  const int n4 = N / 4, kv = blockIdx.x * 64 + lane, t0 = blockIdx.y * kTileT;
  float4 acc[kTileT];
#pragma unroll
  for (int t = 0; t < kTileT; ++t) acc[t] = make_float4(0.f, 0.f, 0.f, 0.f);
  if (kv < n4) {
    const float4* B4 = reinterpret_cast<const float4*>(B);
    for (int j = grp; j < J; j += 4) {
      const float4 bv = B4[static_cast<int64_t>(j) * n4 + kv];
      const float* aj = A + static_cast<int64_t>(j) * sa_j;
#pragma unroll
      for (int t = 0; t < kTileT; ++t) {
        const float at = t0 + t < T ? aj[static_cast<int64_t>(t0 + t) * sa_t] : 0.f;
        acc[t].x += at * bv.x;
        acc[t].y += at * bv.y;
        acc[t].z += at * bv.z;
        acc[t].w += at * bv.w;
      }
    }
  }
#pragma unroll
  for (int t = 0; t < kTileT; ++t) {
    part[grp][lane] = acc[t];
    __syncthreads();
    if (grp == 0 && kv < n4 && t0 + t < T) {
      float4* c = reinterpret_cast<float4*>(C + static_cast<int64_t>(t0 + t) * N) + kv;
      float4 v = accumulate ? *c : make_float4(0.f, 0.f, 0.f, 0.f);
      for (int q = 0; q < 4; ++q) {
        v.x += part[q][lane].x;
        v.y += part[q][lane].y;
        v.z += part[q][lane].z;
        v.w += part[q][lane].w;
      }
      *c = v;
    }
    __syncthreads();
  }
}

void small_k_gemm_launch(int J, int T, int N, const float* A, int sa_j, int sa_t, const float* B,
                         float* C, bool accumulate, CudaExec e) {
  const dim3 grid(static_cast<unsigned>((N / 4 + 63) / 64), static_cast<unsigned>((T + kTileT - 1) / kTileT));
  small_k_gemm<<<grid, 256, 0, stream_of(e)>>>(J, T, N, A, sa_j, sa_t, B, C, accumulate);
  PDNN_CUDA_LAUNCH_CHECK("dense small-batch product");
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
    y[threadIdx.x * out + o] = act_apply(s + (b ? b[o] : 0.f), act);
  }
}

// bf16 dense layer: y (bf16) = act(tmp + b) from the fp32 product tmp, rounded once.
__global__ void rows_bias_act_bf16(int n, int out, const float* __restrict__ tmp,
                                   const float* __restrict__ b, Act act, bf16* __restrict__ y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n * out; i += gridDim.x * blockDim.x)
    y[i] = kit::from_f32<bf16>(act_apply(tmp[i] + (b ? b[i % out] : 0.f), act));
}
// g (bf16) = act'(y) dy, rounded once (the GEMMs' operand).
__global__ void act_mask_bf16(int total, const bf16* __restrict__ y, const bf16* __restrict__ dy,
                              Act act, bf16* __restrict__ g) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x)
    g[i] = kit::from_f32<bf16>(kit::act_grad(kit::to_f32(y[i]), kit::to_f32(dy[i]), act));
}
// db[o] += sum over rows of g[i][o] (bf16), rows in order, in fp32 as the fp32 kernel.
__global__ void rows_bias_backward_bf16(int n, int out, const bf16* __restrict__ g,
                                        float* __restrict__ db) {
  for (int o = blockIdx.x * blockDim.x + threadIdx.x; o < out; o += gridDim.x * blockDim.x) {
    float s = db[o];
    for (int i = 0; i < n; ++i) s += kit::to_f32(g[i * out + o]);
    db[o] = s;
  }
}

}  // namespace

void dense_forward(int64_t n, int64_t in, int64_t out, const bf16* x, const bf16* w,
                   const float* b, bf16* y, Act act, float* ws, CudaExec e) {
  if (n <= 0 || out <= 0) return;
  gemm(false, true, n, out, in, 1.f, x, w, 0.f, ws, e);
  rows_bias_act_bf16<<<blocks_for(n * out, tpb(e)), tpb(e), 0, stream_of(e)>>>(
      static_cast<int>(n), static_cast<int>(out), ws, b, act, y);
  PDNN_CUDA_LAUNCH_CHECK("dense bias/activation (bf16)");
}

void dense_backward(int64_t n, int64_t in, int64_t out, const bf16* x, const bf16* w,
                    const bf16* dy, const bf16* y, float* dw, float* db, bf16* dx, Act act,
                    float* ws, bool dw_zero, CudaExec e) {
  if (act.kind != FusedAct::None) {
    bf16* g = reinterpret_cast<bf16*>(ws);
    act_mask_bf16<<<blocks_for(n * out, tpb(e)), tpb(e), 0, stream_of(e)>>>(
        static_cast<int>(n * out), y, dy, act, g);
    PDNN_CUDA_LAUNCH_CHECK("dense activation backward (bf16)");
    dy = g;
  }
  gemm(true, false, out, in, n, 1.f, dy, x, dw_zero ? 0.f : 1.f, dw, e);  // fp32 dw (+)= g^T x
  if (db) {
    rows_bias_backward_bf16<<<blocks_for(out, 64), 64, 0, stream_of(e)>>>(
        static_cast<int>(n), static_cast<int>(out), dy, db);
    PDNN_CUDA_LAUNCH_CHECK("dense bias backward (bf16)");
  }
  if (dx) gemm(false, false, n, in, out, 1.f, dy, w, 0.f, dx, e);  // bf16 dx = g w
}

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
                    float* ws, bool dw_zero, CudaExec e) {
  if (act.kind != FusedAct::None) {
    act_mask<<<blocks_for(n * out, tpb(e)), tpb(e), 0, stream_of(e)>>>(static_cast<int>(n * out), y, dy,
                                                                act, ws);
    PDNN_CUDA_LAUNCH_CHECK("dense activation backward");
    dy = ws;
  }
  // Batches of up to kDenseSmallKRows rows with 16-byte rows: the thin products by hand, for
  // weight matrices up to kDenseSmallKWeights elements (W2, W3). Past that cuBLAS wins: W4's
  // 1024 x 100352 weight is read and written at the memory's speed by cuBLAS, while the hand
  // kernel re-reads x once per 16 output features (4.6 ms for both products at batch 64).
  const bool thin = n <= kDenseSmallKRows && in % 4 == 0 && out * in <= kDenseSmallKWeights;
  if (thin)  // dw (out x in) += dy^T x: j = batch row, t = output feature
    small_k_gemm_launch(static_cast<int>(n), static_cast<int>(out), static_cast<int>(in), dy,
                        static_cast<int>(out), 1, x, dw, !dw_zero, e);
  else
    gemm(true, false, out, in, n, 1.f, dy, x, dw_zero ? 0.f : 1.f, dw, e);
  if (db) {
    rows_bias_backward<<<blocks_for(out, 64), 64, 0, stream_of(e)>>>(static_cast<int>(n),
                                                                     static_cast<int>(out), dy, db);
    PDNN_CUDA_LAUNCH_CHECK("dense bias backward");
  }
  if (dx && thin)  // dx (n x in) = dy w: j = output feature, t = batch row
    small_k_gemm_launch(static_cast<int>(out), static_cast<int>(n), static_cast<int>(in), dy, 1,
                        static_cast<int>(out), w, dx, false, e);
  else if (dx)
    gemm(false, false, n, in, out, 1.f, dy, w, 0.f, dx, e);
}

}  // namespace cuda
}  // namespace pdnn
