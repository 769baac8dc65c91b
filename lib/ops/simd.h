// A float vector for hand-blocked CPU kernels (the Winograd and direct 3x3 convolutions),
// written once with GCC/Clang vector extensions so the same source compiles everywhere:
// 16 lanes (one zmm register) where the target has AVX-512, 8 (one ymm) under AVX2, 4 (one
// xmm) on plain x86-64. Kernels size their register blocks in vectors, so the blocking carries
// over; only the AVX-512 build is tuned (the GPU hosts' bundles use x86-64-v4).
// Also a block transpose between channel-major (NCHW) and channel-last layouts.
#pragma once
#include <cstdint>
#include <cstring>

#if defined(__AVX512F__) || defined(__AVX__)
#include <immintrin.h>
#endif

namespace pdnn {
namespace simd {

#if defined(__AVX512F__)
constexpr int kLanes = 16;
#elif defined(__AVX__)
constexpr int kLanes = 8;
#else
constexpr int kLanes = 4;  // wider vectors would be passed in memory without AVX (-Wpsabi)
#endif

typedef float vf __attribute__((vector_size(kLanes * sizeof(float))));

inline vf zero() { return vf{}; }
// Not `vf{} + s`: that is a real add (0 + -0 is +0), which GCC keeps, ahead of the broadcast.
inline vf splat(float s) {
#if defined(__AVX512F__)
  return _mm512_set1_ps(s);
#elif defined(__AVX__)
  return _mm256_set1_ps(s);
#else
  vf v;
  for (int i = 0; i < kLanes; ++i) v[i] = s;
  return v;
#endif
}
// Unaligned load and store (memcpy compiles to one vmovups).
inline vf load(const float* p) {
  vf v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, vf v) { std::memcpy(p, &v, sizeof v); }

// Stores v where it will be read much later, by another loop: a whole 64-byte line written at
// once goes straight to memory (no read for ownership, nothing useful evicted from the caches).
// An unaligned p gets a plain store. Call stream_fence() before other threads read the data.
inline void store_stream(float* p, vf v) {
#if defined(__AVX512F__)
  if ((reinterpret_cast<uintptr_t>(p) & 63) == 0) return _mm512_stream_ps(p, v);
#elif defined(__AVX__)
  if ((reinterpret_cast<uintptr_t>(p) & 31) == 0) return _mm256_stream_ps(p, v);
#endif
  store(p, v);
}
inline void stream_fence() {
#if defined(__AVX512F__) || defined(__AVX__)
  _mm_sfence();
#endif
}

// a * b + c, fused where the target has FMA. Written out because the build turns the
// compiler's automatic contraction off (-ffp-contract=off, CMakeLists.txt): every fused
// multiply-add is one the source asks for.
inline vf fma(vf a, vf b, vf c) {
#if defined(__AVX512F__)
  return _mm512_fmadd_ps(a, b, c);
#elif defined(__FMA__)
  return _mm256_fmadd_ps(a, b, c);
#else
  return a * b + c;
#endif
}

// c - a * b, fused where the target has FMA (negating a is exact: one rounding, as vfnmadd;
// the negation costs no instruction).
inline vf fnma(vf a, vf b, vf c) { return fma(-a, b, c); }

// v > 0 ? v : slope * v per lane (slope 0: ReLU, exactly max(v, 0) as the scalar ReLU).
inline vf leaky(vf v, float slope) {
  const vf z = zero();
  return slope == 0.f ? (v > z ? v : z) : (v > z ? v : v * splat(slope));
}

// Lanes [0, n) from p, the others 0 (reads only those n floats), n <= kLanes.
inline vf load_first(const float* p, int n) {
  if (n == kLanes) return load(p);
#if defined(__AVX512F__)
  return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1), p);
#else
  float t[kLanes] = {};
  std::memcpy(t, p, sizeof(float) * n);
  return load(t);
#endif
}

// Stores lanes [0, n) of v, n <= kLanes.
inline void store_first(float* p, vf v, int n) {
  if (n == kLanes) return store(p, v);
#if defined(__AVX512F__)
  _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1), v);
#else
  float t[kLanes];
  store(t, v);
  std::memcpy(p, t, sizeof(float) * n);
#endif
}

// Transposes a rows x cols block (rows, cols <= kLanes): dst[j * dst_stride + i] =
// src[i * src_stride + j] for i < rows, j < cols. Reads only inside the block. Writes
// dst rows j < cols, each with lanes [0, dst_lanes) (dst_lanes >= rows); lanes i >= rows of
// those are written 0 (used to zero the channel padding of a channel-last buffer).
void transpose_block(const float* src, int64_t src_stride, int rows, int cols, float* dst,
                     int64_t dst_stride, int dst_lanes);

}  // namespace simd
}  // namespace pdnn
