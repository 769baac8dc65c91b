// GPU probes of ops/kit/ (kernel_kit_probe.h): each kernel exercises one building block the
// way a convolution kernel will, so test_kernel_kit.cpp can compare it with the host.
#include "kernel_kit_probe.h"

#include "cuda/launch.h"
#include "ops/kit/argmax.h"
#include "ops/kit/mma.h"

namespace pdnn {
namespace kit_probe {

namespace {

__global__ void tf32_k(int n, const float* x, uint32_t* bits) {
  PDNN_GRID_LOOP(i, n) bits[i] = kit::tf32_bits(x[i]);
}
__global__ void bf16_k(int n, const float* x, uint32_t* bits) {
  PDNN_GRID_LOOP(i, n) bits[i] = kit::bf16_bits(x[i]);
}
__global__ void bf16x2_k(int n, const float* x, uint32_t* bits) {
  PDNN_GRID_LOOP(i, n / 2) bits[i] = kit::bf16x2_bits(x[2 * i], x[2 * i + 1]);
}

constexpr int kMaxK = 64;

__global__ void tile_tf32_k(int K, const float* a, const float* bt, float* c) {
  __shared__ __align__(16) float As[16 * kMaxK];  // row-major, k contiguous
  __shared__ __align__(16) float Bt[8 * kMaxK];   // n-major, k contiguous
  const int lane = threadIdx.x;
  for (int i = lane; i < 16 * K; i += 32) As[i] = kit::round_tf32(a[i]);
  for (int i = lane; i < 8 * K; i += 32) Bt[i] = kit::round_tf32(bt[i]);
  __syncwarp();
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int k8 = 0; k8 < K; k8 += 8) {
    uint32_t af[4], bf[2];
    // A: matrices (rows 0-7 | 8-15) x (k 0-3 | 4-7) of this step, in a0..a3's order
    kit::ldmatrix_x4(af, As + ((lane % 8) + 8 * ((lane / 8) % 2)) * K + k8 + 4 * (lane / 16));
    // B^T: rows n 0-7, k 0-3 then 4-7 (lanes 16-31 repeat lanes 0-15's addresses)
    kit::ldmatrix_x2(bf, Bt + (lane % 8) * K + k8 + 4 * ((lane / 8) % 2));
    kit::TF32::mma(acc, af, bf);
  }
  kit::frag_put(acc, lane / 4, 2 * (lane % 4), [&](int m, int n, float v) { c[m * 8 + n] = v; });
}

__global__ void tile_bf16_k(int K, bool kmajor, const float* a, const float* b, float* c) {
  __shared__ __align__(16) uint16_t As[16 * kMaxK];
  __shared__ __align__(16) uint16_t Bs[8 * kMaxK];
  const int lane = threadIdx.x;
  for (int i = lane; i < 16 * K; i += 32) As[i] = kit::bf16_bits(a[i]);
  for (int i = lane; i < 8 * K; i += 32) Bs[i] = kit::bf16_bits(b[i]);
  __syncwarp();
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  const int mat = lane / 8, row = lane % 8;
  for (int k0 = 0; k0 < K; k0 += 16) {
    uint32_t af[4], bf[2];
    if (!kmajor) {
      // A (16 x K): matrices (rows 0-7 | 8-15) x (k 0-7 | 8-15); B^T (8 x K): k 0-7 then 8-15
      kit::ldmatrix_x4(af, As + (row + 8 * (mat % 2)) * K + k0 + 8 * (mat / 2));
      kit::ldmatrix_x2(bf, Bs + row * K + k0 + 8 * (mat % 2));
    } else {
      // A^T (K x 16): matrix i holds k rows 8 (i / 2).., m columns 8 (i % 2).., transposed;
      // B (K x 8): k rows 0-7 then 8-15, transposed
      kit::ldmatrix_x4_trans(af, As + (k0 + row + 8 * (mat / 2)) * 16 + 8 * (mat % 2));
      kit::ldmatrix_x2_trans(bf, Bs + (k0 + row + 8 * (mat % 2)) * 8);
    }
    kit::BF16::mma(acc, af, bf);
  }
  kit::frag_put(acc, lane / 4, 2 * (lane % 4), [&](int m, int n, float v) { c[m * 8 + n] = v; });
}

__global__ void ldmatrix_x1_k(bool trans, const uint32_t* m, uint32_t* regs) {
  __shared__ __align__(16) uint16_t Ms[64];
  const int lane = threadIdx.x;
  Ms[lane] = static_cast<uint16_t>(m[lane]);
  Ms[lane + 32] = static_cast<uint16_t>(m[lane + 32]);
  __syncwarp();
  uint32_t r[1];
  if (trans)
    kit::ldmatrix_x1_trans(r, Ms + (lane % 8) * 8);
  else
    kit::ldmatrix_x1(r, Ms + (lane % 8) * 8);
  regs[lane] = r[0];
}

__global__ void window_max_k(int w, int k, int s, int oh, int ow, const float* x, float* value,
                             int32_t* at) {
  PDNN_GRID_LOOP(o, oh * ow) {
    const int oy = static_cast<int>(o) / ow, ox = static_cast<int>(o) % ow;
    const kit::WindowMax m = kit::window_max(x, w, k, s, oy, ox);
    value[o] = m.value;
    at[o] = m.at;
  }
}

}  // namespace

void tf32_bits(int n, const float* x, uint32_t* bits, CudaExec e) {
  tf32_k<<<cuda::blocks_for(n), 256, 0, e.stream>>>(n, x, bits);
  PDNN_CUDA_LAUNCH_CHECK("tf32_bits");
}
void bf16_bits(int n, const float* x, uint32_t* bits, CudaExec e) {
  bf16_k<<<cuda::blocks_for(n), 256, 0, e.stream>>>(n, x, bits);
  PDNN_CUDA_LAUNCH_CHECK("bf16_bits");
}
void bf16x2_bits(int n, const float* x, uint32_t* bits, CudaExec e) {
  bf16x2_k<<<cuda::blocks_for(n), 256, 0, e.stream>>>(n, x, bits);
  PDNN_CUDA_LAUNCH_CHECK("bf16x2_bits");
}
void tile_gemm_tf32(int K, const float* a, const float* bt, float* c, CudaExec e) {
  PDNN_CHECK(K > 0 && K % 8 == 0 && K <= kMaxK, "tile_gemm_tf32: K = %d", K);
  tile_tf32_k<<<1, 32, 0, e.stream>>>(K, a, bt, c);
  PDNN_CUDA_LAUNCH_CHECK("tile_gemm_tf32");
}
void tile_gemm_bf16(int K, bool kmajor, const float* a, const float* b, float* c, CudaExec e) {
  PDNN_CHECK(K > 0 && K % 16 == 0 && K <= kMaxK, "tile_gemm_bf16: K = %d", K);
  tile_bf16_k<<<1, 32, 0, e.stream>>>(K, kmajor, a, b, c);
  PDNN_CUDA_LAUNCH_CHECK("tile_gemm_bf16");
}
void ldmatrix_x1(bool trans, const uint32_t* m, uint32_t* regs, CudaExec e) {
  ldmatrix_x1_k<<<1, 32, 0, e.stream>>>(trans, m, regs);
  PDNN_CUDA_LAUNCH_CHECK("ldmatrix_x1");
}
void window_max(int h, int w, int k, int s, int oh, int ow, const float* x, float* value,
                int32_t* at, CudaExec e) {
  (void)h;
  window_max_k<<<cuda::blocks_for(oh * ow), 256, 0, e.stream>>>(w, k, s, oh, ow, x, value, at);
  PDNN_CUDA_LAUNCH_CHECK("window_max");
}

}  // namespace kit_probe
}  // namespace pdnn
