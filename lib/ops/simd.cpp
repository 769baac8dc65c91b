// Block transpose for the channel-last kernels (see simd.h).
#include "ops/simd.h"

namespace pdnn {
namespace simd {

#if defined(__AVX512F__)
// GCC 12's AVX-512 shuffle intrinsics start from _mm512_undefined_ps(), written `__Y = __Y`,
// which its own -Wuninitialized then reports once per call (a known false positive).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
namespace {

// In-register 16x16 transpose: r[i] (row i) becomes column i. Three stages: pairs of floats,
// pairs of doubles, then 128-bit lanes.
inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // r[4g + j]: column j of each 128-bit lane, rows 4g..4g+3.
  for (int g = 0; g < 4; ++g) {
    const __m512d a = _mm512_castps_pd(t[4 * g]), b = _mm512_castps_pd(t[4 * g + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * g + 2]), d = _mm512_castps_pd(t[4 * g + 3]);
    r[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    r[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    r[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    r[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  for (int j = 0; j < 4; ++j) {
    const __m512 ab_lo = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x44);
    const __m512 ab_hi = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xEE);
    const __m512 cd_lo = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x44);
    const __m512 cd_hi = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xEE);
    t[j] = _mm512_shuffle_f32x4(ab_lo, cd_lo, 0x88);
    t[j + 4] = _mm512_shuffle_f32x4(ab_lo, cd_lo, 0xDD);
    t[j + 8] = _mm512_shuffle_f32x4(ab_hi, cd_hi, 0x88);
    t[j + 12] = _mm512_shuffle_f32x4(ab_hi, cd_hi, 0xDD);
  }
  for (int i = 0; i < 16; ++i) r[i] = t[i];
}

}  // namespace

void transpose_block(const float* src, int64_t src_stride, int rows, int cols, float* dst,
                     int64_t dst_stride, int dst_lanes) {
  // Loops fully unrolled so that r[] stays in registers (a runtime index spills it).
  __m512 r[16];
  if (rows == 16 && cols == 16) {
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * src_stride);
  } else {
    const __mmask16 col_mask = static_cast<__mmask16>((1u << cols) - 1);
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i)
      r[i] = i < rows ? _mm512_maskz_loadu_ps(col_mask, src + i * src_stride) : _mm512_setzero_ps();
  }
  transpose16(r);
  if (cols == 16 && dst_lanes == 16) {
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) _mm512_storeu_ps(dst + j * dst_stride, r[j]);
  } else {
    const __mmask16 lane_mask = static_cast<__mmask16>((1u << dst_lanes) - 1);
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j)
      if (j < cols) _mm512_mask_storeu_ps(dst + j * dst_stride, lane_mask, r[j]);
  }
}

#else

void transpose_block(const float* src, int64_t src_stride, int rows, int cols, float* dst,
                     int64_t dst_stride, int dst_lanes) {
  for (int j = 0; j < cols; ++j)
    for (int i = 0; i < dst_lanes; ++i)
      dst[j * dst_stride + i] = i < rows ? src[i * src_stride + j] : 0.f;
}

#endif

}  // namespace simd
}  // namespace pdnn
