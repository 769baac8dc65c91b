// The GPU kernels' building blocks below the tile (.cu files only; sm_80 and later):
//   - cp.async: global -> shared copies of 4, 8 or 16 bytes that bypass the registers, with the
//     source size 0 where `ok` is false (the copy then writes zeros and reads nothing), grouped
//     by commit and waited for by wait<N> (N groups may still be in flight);
//   - ldmatrix: 8x8 matrices of 16-bit elements from shared memory into the mma fragment layout,
//     one, two or four at a time, .trans for a transposed matrix. Lane l gives the address of
//     row l % 8 of matrix l / 8 (16 contiguous bytes); lane t receives, of each matrix, row t / 4,
//     elements 2 (t % 4) and 2 (t % 4) + 1 in one register. 32-bit elements (TF32) load as pairs
//     of 16-bit ones: row t / 4, element t % 4 (not .trans);
//   - mma.sync, fp32 accumulate: m16n8k8 with TF32 operands and m16n8k16 with BF16 operands.
//     Fragments (g = lane / 4, t = lane % 4; rows of A and C are m, columns of B and C are n):
//       TF32 A a0 (g, t) a1 (g+8, t) a2 (g, t+4) a3 (g+8, t+4);   B b0 (k t, n g) b1 (t+4, g)
//       BF16 A a0 (g, 2t..2t+1) a1 (g+8, 2t..) a2 (g, 2t+8..) a3 (g+8, 2t+8..), lower k in the
//            low half;                                           B b0 (k 2t..2t+1, n g) b1 (k 2t+8..)
//       C (both) c0 (g, 2t) c1 (g, 2t+1) c2 (g+8, 2t) c3 (g+8, 2t+1)
//   - the precision tags F32 (fp32 on the FMA units), TF32 and BF16 (tensor cores): a kernel is a
//     template over one of them instead of one copy per precision.
// Every wrapper is a single PTX instruction; the compiler sees the same code as when the kernels
// wrote them inline (the same registers, the same schedule).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "ops/kit/round.h"

namespace pdnn {
namespace kit {

// ---- cp.async -------------------------------------------------------------------------------
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// 4 bytes from src to shared dst, or 4 zero bytes when !ok (src is then not read). Through L1.
__device__ __forceinline__ void cp_async4(void* dst, const void* src, bool ok) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(ok ? 4 : 0));
}
__device__ __forceinline__ void cp_async8(void* dst, const void* src, bool ok) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(ok ? 8 : 0));
}
// 16 bytes (both addresses 16-byte aligned), past L1 (.cg: a tile read once per block).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool ok) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)),
               "l"(src), "r"(ok ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// ---- ldmatrix (p: this lane's row address, see above) ---------------------------------------
__device__ __forceinline__ void ldmatrix_x1(uint32_t (&r)[1], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
               : "=r"(r[0]) : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1]) : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x1_trans(uint32_t (&r)[1], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
               : "=r"(r[0]) : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t (&r)[2], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1]) : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)));
}

// ---- mma.sync, d += a b (fp32 accumulators d[0..3]) -----------------------------------------
__device__ __forceinline__ void mma_tf32(float* d, const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void mma_bf16(float* d, const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// ---- precision tags -------------------------------------------------------------------------
// A kernel templated on the tag: `if (P::kMma)` picks the tensor-core path, P::kK is the depth
// of one mma, P::mma and P::frag (one float operand as its fragment register) its arithmetic.
// Operands sit in shared memory as P::Elem (BF16: two to a fragment register), stored there
// as P::elem(v); the tensors the kernel reads and writes hold P::Data (float; BF16: core's
// bf16), read as float by ldg_f32 and written by from_f32<Data>.
struct F32 {  // fp32 FMA units: no fragments
  static constexpr bool kMma = false;
  static constexpr int kK = 1;
  using Elem = float;
  using Data = float;
  static constexpr const char* kName = "fp32";
  __device__ __forceinline__ static float elem(float v) { return v; }
};
struct TF32 {
  static constexpr bool kMma = true;
  static constexpr int kK = 8;
  using Elem = float;  // rounded (round_tf32) where the kernel chooses: as it lands, or as read
  using Data = float;
  static constexpr const char* kName = "tf32";
  __device__ __forceinline__ static float elem(float v) { return round_tf32(v); }
  __device__ __forceinline__ static uint32_t frag(float v) { return tf32_bits(v); }
  __device__ __forceinline__ static void mma(float* d, const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    mma_tf32(d, a, b);
  }
};
struct BF16 {
  static constexpr bool kMma = true;
  static constexpr int kK = 16;
  using Elem = uint16_t;  // bf16 bits (bf16_bits)
  using Data = bf16;
  static constexpr const char* kName = "bf16";
  __device__ __forceinline__ static uint16_t elem(float v) { return bf16_bits(v); }
  // two consecutive k of one row or column, the lower k in the low half
  __device__ __forceinline__ static uint32_t frag(float lo, float hi) { return bf16x2_bits(lo, hi); }
  __device__ __forceinline__ static void mma(float* d, const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    mma_bf16(d, a, b);
  }
};

// Calls f(F32{}) or f(TF32{}) by the run's precision (host side of a launch).
template <class F>
void with_precision(bool tf32, F&& f) {
  if (tf32)
    f(TF32{});
  else
    f(F32{});
}

// Calls f(int{}) or f(int64_t{}): a kernel's index type for offsets within an image, 64-bit
// only where a shape needs it (wide), so the 32-bit instantiation stays what it was.
template <class F>
void with_index(bool wide, F&& f) {
  if (wide)
    f(int64_t{});
  else
    f(int{});
}

// ---- tensor elements as float ----------------------------------------------------------------
// Through the read-only cache, as __ldg (a bf16 exactly widened).
__device__ __forceinline__ float ldg_f32(const float* p) { return __ldg(p); }
__device__ __forceinline__ float ldg_f32(const bf16* p) {
  return bf16_float(__ldg(reinterpret_cast<const unsigned short*>(p)));
}

// A tensor's bf16 bits, raw: one element (low half), two consecutive ones (the lower address
// in the low half; the address 4-byte aligned) or eight (16-byte aligned), through the
// read-only cache.
__device__ __forceinline__ uint32_t ldg_bits16(const bf16* p) {
  return __ldg(reinterpret_cast<const unsigned short*>(p));
}
__device__ __forceinline__ uint32_t ldg_bits32(const bf16* p) {
  return __ldg(reinterpret_cast<const unsigned int*>(p));
}
__device__ __forceinline__ uint4 ldg_bits128(const bf16* p) {
  return __ldg(reinterpret_cast<const uint4*>(p));
}

// ---- bf16 rows of 16 k-elements for ldmatrix -----------------------------------------------
// A shared-memory tile of rows of 16 bf16 (32 bytes, two 16-byte halves, no padding): row r's
// half h is stored at half h ^ ((r >> 2) & 1). An ldmatrix phase reads one half of 8
// consecutive rows; unswizzled those would fall on 4 of the 8 16-byte bank groups (2-way
// conflicts), swizzled on all 8, wherever the 8 rows start. Returns the element offset.
__device__ __forceinline__ int swz16(int row, int half) {
  return row * 16 + (((half ^ (row >> 2)) & 1) << 3);
}

// ---- the accumulator fragment ---------------------------------------------------------------
// put(row, col, value) for the four values of one m16n8 accumulator c whose lane's first
// element is at (m, n) = (g, 2t) of the tile, in the order c0..c3.
template <class Put>
__device__ __forceinline__ void frag_put(const float* c, int m, int n, Put&& put) {
  put(m, n, c[0]);
  put(m, n + 1, c[1]);
  put(m + 8, n, c[2]);
  put(m + 8, n + 1, c[3]);
}

}  // namespace kit
}  // namespace pdnn
