// Augmentation draws and the one-pass crop/flip/rotate/jitter/normalise resampler (augment.h).
#include "data/augment.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/rng.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

namespace pdnn {
namespace {

// Distinguishes the augmentation streams from the epoch-order streams of the same seed
// (Rng::at(seed, epoch + 1)); any odd 64-bit constant far from small multiples of the
// splitmix increment does.
constexpr uint64_t kAugmentSalt = 0xA5A5F00DC0FFEE01ull;

inline int clamp_index(int i, int n) { return i < 0 ? 0 : (i >= n ? n - 1 : i); }
inline float clamp01(float v) { return v < 0.f ? 0.f : (v > 1.f ? 1.f : v); }

// Where output pixel (u,v) samples the source, in pixel-index coordinates (pixel k's centre at
// k): x = x00 + dxu*u + dxv*v, y = y00 + dyu*u + dyv*v. Shared by the image and its mask, so
// they cannot drift apart.
struct SampleMap {
  double x00, y00, dxu, dxv, dyu, dyv;
};

SampleMap sample_map(const AugmentDraw& d, int out_h, int out_w) {
  // Output pixel centre (u + 0.5, v + 0.5), taken relative to the output's centre and scaled
  // to the crop, mirrored and rotated, lands at crop centre + offset; -0.5 turns the source
  // point into pixel-index coordinates. Every term is exact for the identity, so that case
  // copies pixels bit for bit.
  const double sx = static_cast<double>(d.crop_w) / out_w;
  const double sy = static_cast<double>(d.crop_h) / out_h;
  const double theta = d.angle_deg * M_PI / 180.0;
  const double c = d.angle_deg == 0 ? 1.0 : std::cos(theta);
  const double s = d.angle_deg == 0 ? 0.0 : std::sin(theta);
  const double fx = d.flip ? -sx : sx;
  SampleMap m;
  m.dxu = c * fx, m.dxv = -s * sy;
  m.dyu = s * fx, m.dyv = c * sy;
  const double ou = 0.5 - out_w / 2.0, ov = 0.5 - out_h / 2.0;  // (u,v) = (0,0) offsets
  const double cx = d.crop_x + d.crop_w / 2.0 - 0.5, cy = d.crop_y + d.crop_h / 2.0 - 0.5;
  m.x00 = cx + m.dxu * ou + m.dxv * ov, m.y00 = cy + m.dyu * ou + m.dyv * ov;
  return m;
}

void check_augment_sizes(const AugmentDraw& d, int src_h, int src_w, int out_h, int out_w) {
  PDNN_CHECK(src_h >= 1 && src_w >= 1 && out_h >= 1 && out_w >= 1,
             "augment: source %dx%d, output %dx%d", src_w, src_h, out_w, out_h);
  PDNN_CHECK(d.crop_w > 0 && d.crop_h > 0, "augment: empty crop %gx%g", d.crop_w, d.crop_h);
}

}  // namespace

AugmentOptions AugmentOptions::none() {
  AugmentOptions o;
  o.flip = false;
  o.scale_min = o.scale_max = 1.f;
  o.ratio_min = o.ratio_max = 1.f;
  o.rotate_deg = 0.f;
  o.brightness = o.contrast = 0.f;
  return o;
}

AugmentOptions AugmentOptions::flip_and_crop() {
  AugmentOptions o;
  o.rotate_deg = 0.f;
  o.brightness = o.contrast = 0.f;
  return o;
}

Normalization Normalization::imagenet() {
  return Normalization{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};
}

uint64_t augment_key(uint64_t seed, int64_t epoch, int64_t index) {
  const uint64_t epoch_seed = Rng::at(seed ^ kAugmentSalt, static_cast<uint64_t>(epoch) + 1);
  return Rng::at(epoch_seed, static_cast<uint64_t>(index) + 1);
}

AugmentDraw identity_draw(int src_h, int src_w) {
  AugmentDraw d;
  d.crop_w = static_cast<float>(src_w);
  d.crop_h = static_cast<float>(src_h);
  return d;
}

AugmentDraw draw_augment(const AugmentOptions& o, uint64_t key, int src_h, int src_w) {
  PDNN_CHECK(src_h >= 1 && src_w >= 1, "augment: source %dx%d", src_w, src_h);
  PDNN_CHECK(o.scale_min > 0 && o.scale_min <= o.scale_max && o.scale_max <= 1,
             "augment: crop scale [%g, %g] must satisfy 0 < min <= max <= 1", o.scale_min,
             o.scale_max);
  PDNN_CHECK(o.ratio_min > 0 && o.ratio_min <= o.ratio_max,
             "augment: crop ratio [%g, %g] must satisfy 0 < min <= max", o.ratio_min,
             o.ratio_max);
  PDNN_CHECK(o.rotate_deg >= 0 && o.rotate_deg <= 180 && o.brightness >= 0 &&
                 o.brightness < 1 && o.contrast >= 0 && o.contrast < 1,
             "augment: rotation %g deg (0..180), brightness %g and contrast %g (0..1)",
             o.rotate_deg, o.brightness, o.contrast);
  Rng rng(key);
  double u[8];
  for (double& x : u) x = rng.uniform();

  AugmentDraw d;
  d.flip = o.flip && u[0] < 0.5;
  const double scale = o.scale_min + (o.scale_max - o.scale_min) * u[1];
  const double lo = std::log(o.ratio_min), hi = std::log(o.ratio_max);
  const double ratio = std::exp(lo + (hi - lo) * u[2]);
  // Clipping to the source keeps the crop inside it (torchvision retries instead; clipping
  // only happens for scales near 1 and only trims the long side).
  const double w = std::min<double>(src_w, src_w * std::sqrt(scale * ratio));
  const double h = std::min<double>(src_h, src_h * std::sqrt(scale / ratio));
  d.crop_w = static_cast<float>(w);
  d.crop_h = static_cast<float>(h);
  d.crop_x = static_cast<float>((src_w - w) * u[3]);
  d.crop_y = static_cast<float>((src_h - h) * u[4]);
  d.angle_deg = static_cast<float>(o.rotate_deg * (2 * u[5] - 1));
  d.brightness = static_cast<float>(1 + o.brightness * (2 * u[6] - 1));
  d.contrast = static_cast<float>(1 + o.contrast * (2 * u[7] - 1));
  return d;
}

namespace {

// The clamped, brightened R, G, B planes (values in [0,1], CHW into dst) of either kernel, and
// the image's grey sum that contrast is taken around: per row, each channel summed in float in
// the order u = 0, 1, ... (float addition is not associative, so this order is part of the
// result), then 0.299 R + 0.587 G + 0.114 B of those sums added in double, rows in order.

// One output pixel at a time (its three channels in one SSE register where there is SSE2).
double resample_per_pixel(const SampleMap& m, float brightness, int src_h, int src_w,
                          const uint8_t* src, int out_h, int out_w, float* dst) {
  const double x00 = m.x00, y00 = m.y00, dxu = m.dxu, dxv = m.dxv, dyu = m.dyu, dyv = m.dyv;
  const int64_t plane = static_cast<int64_t>(out_h) * out_w;
  float* r_out = dst;
  float* g_out = dst + plane;
  float* b_out = dst + 2 * plane;
  const float scale = brightness / 255.f;
  // Per row: first the four taps' byte offsets and the two fractions of every output pixel,
  // then the gather. Both halves are scalar-exact.
  std::vector<int32_t> taps(static_cast<size_t>(out_w) * 4);
  std::vector<float> frac_x(static_cast<size_t>(out_w)), frac_y(static_cast<size_t>(out_w));
  std::vector<int32_t> max_tap(static_cast<size_t>(out_w));
  const int32_t row_bytes = src_w * 3;
  const int64_t src_bytes = static_cast<int64_t>(src_h) * row_bytes;
  double grey_sum = 0;
  for (int v = 0; v < out_h; ++v) {
    const double xr = x00 + dxv * v, yr = y00 + dyv * v;
    for (int u = 0; u < out_w; ++u) {
      const double x = xr + dxu * u, y = yr + dyu * u;
      const double xf = std::floor(x), yf = std::floor(y);
      frac_x[static_cast<size_t>(u)] = static_cast<float>(x - xf);
      frac_y[static_cast<size_t>(u)] = static_cast<float>(y - yf);
      const int xi = static_cast<int>(xf), yi = static_cast<int>(yf);
      const int32_t x0 = clamp_index(xi, src_w) * 3, x1 = clamp_index(xi + 1, src_w) * 3;
      const int32_t y0 = clamp_index(yi, src_h) * row_bytes;
      const int32_t y1 = clamp_index(yi + 1, src_h) * row_bytes;
      int32_t* t = taps.data() + static_cast<size_t>(u) * 4;
      t[0] = y0 + x0, t[1] = y0 + x1, t[2] = y1 + x0, t[3] = y1 + x1;
      max_tap[static_cast<size_t>(u)] = std::max(std::max(t[0], t[1]), std::max(t[2], t[3]));
    }
    float* ro = r_out + static_cast<int64_t>(v) * out_w;
    float* go = g_out + static_cast<int64_t>(v) * out_w;
    float* bo = b_out + static_cast<int64_t>(v) * out_w;
    float sum[3] = {0, 0, 0};
    int u = 0;
#ifdef __SSE2__
    // A pixel's 3 bytes and the next byte in one 4-byte load, so 4 lanes blend R, G, B (and a
    // lane that is thrown away) at once. Only while the load stays inside the image.
    const __m128i zero = _mm_setzero_si128();
    const __m128 lo = _mm_setzero_ps(), hi = _mm_set1_ps(1.f), sc = _mm_set1_ps(scale);
    __m128 acc_sum = _mm_setzero_ps();
    auto pixel = [&](int32_t off) {
      int32_t word;
      std::memcpy(&word, src + off, 4);
      const __m128i b = _mm_unpacklo_epi16(_mm_unpacklo_epi8(_mm_cvtsi32_si128(word), zero), zero);
      return _mm_cvtepi32_ps(b);
    };
    for (; u < out_w && max_tap[static_cast<size_t>(u)] + 4 <= src_bytes; ++u) {
      const int32_t* t = taps.data() + static_cast<size_t>(u) * 4;
      const float ax = frac_x[static_cast<size_t>(u)], ay = frac_y[static_cast<size_t>(u)];
      const __m128 top = _mm_add_ps(_mm_mul_ps(_mm_set1_ps(1 - ax), pixel(t[0])),
                                    _mm_mul_ps(_mm_set1_ps(ax), pixel(t[1])));
      const __m128 bottom = _mm_add_ps(_mm_mul_ps(_mm_set1_ps(1 - ax), pixel(t[2])),
                                       _mm_mul_ps(_mm_set1_ps(ax), pixel(t[3])));
      __m128 rgb = _mm_add_ps(_mm_mul_ps(_mm_set1_ps(1 - ay), top), _mm_mul_ps(_mm_set1_ps(ay), bottom));
      rgb = _mm_min_ps(_mm_max_ps(_mm_mul_ps(rgb, sc), lo), hi);
      acc_sum = _mm_add_ps(acc_sum, rgb);
      _mm_store_ss(ro + u, rgb);
      _mm_store_ss(go + u, _mm_shuffle_ps(rgb, rgb, 1));
      _mm_store_ss(bo + u, _mm_shuffle_ps(rgb, rgb, 2));
    }
    float lanes[4];
    _mm_storeu_ps(lanes, acc_sum);
    sum[0] = lanes[0], sum[1] = lanes[1], sum[2] = lanes[2];
#endif
    for (; u < out_w; ++u) {  // the same arithmetic, one channel at a time
      const int32_t* t = taps.data() + static_cast<size_t>(u) * 4;
      const float ax = frac_x[static_cast<size_t>(u)], ay = frac_y[static_cast<size_t>(u)];
      float rgb[3];
      for (int k = 0; k < 3; ++k) {
        const float top = (1 - ax) * src[t[0] + k] + ax * src[t[1] + k];
        const float bottom = (1 - ax) * src[t[2] + k] + ax * src[t[3] + k];
        rgb[k] = clamp01(((1 - ay) * top + ay * bottom) * scale);
        sum[k] += rgb[k];
      }
      ro[u] = rgb[0];
      go[u] = rgb[1];
      bo[u] = rgb[2];
    }
    grey_sum += 0.299 * sum[0] + 0.587 * sum[1] + 0.114 * sum[2];
  }
  return grey_sum;
}

#if defined(__AVX512F__) || defined(__AVX2__)
#define PDNN_AUGMENT_VECTOR 1
// kLanes output pixels of a row at a time: the per-pixel kernel's operations lane by lane, on
// the same types (the coordinates in doubles, kLanes / 2 to a register; the blend in floats),
// so that every value is the same bit for bit (-ffp-contract=off: no fused multiply-adds).
namespace vec {

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), written `__Y = __Y`, which its
// own -Wmaybe-uninitialized then reports once per call (a known false positive; ops/simd.cpp).
#pragma GCC diagnostic push
#ifndef __clang__
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#if defined(__AVX512F__)
constexpr int kLanes = 16;
#else
constexpr int kLanes = 8;
#endif
typedef float vf __attribute__((vector_size(kLanes * 4)));
typedef int32_t vi __attribute__((vector_size(kLanes * 4)));
typedef uint32_t vu __attribute__((vector_size(kLanes * 4)));
typedef double vd __attribute__((vector_size(kLanes * 4)));  // kLanes / 2 doubles
typedef float vf_half __attribute__((vector_size(kLanes * 2)));  // kLanes / 2 floats
typedef int32_t vi_half __attribute__((vector_size(kLanes * 2)));

inline vd floor(vd x) {  // std::floor, lane by lane
#if defined(__AVX512F__)
  return _mm512_roundscale_pd(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
#else
  return _mm256_round_pd(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
#endif
}
template <class V, class H>
V join(H lo, H hi) {
#if defined(__AVX512F__)
  return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#else
  return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7);
#endif
}
inline vi clamp_index(vi i, int n) {  // the scalar clamp_index: into [0, n - 1]
#if defined(__AVX512F__)
  return (vi)_mm512_min_epi32(_mm512_max_epi32((__m512i)i, __m512i{}), _mm512_set1_epi32(n - 1));
#else
  return (vi)_mm256_min_epi32(_mm256_max_epi32((__m256i)i, __m256i{}), _mm256_set1_epi32(n - 1));
#endif
}
inline vi gather(const uint8_t* base, vi offset) {  // the 4 bytes at base + offset, per lane
#if defined(__AVX512F__)
  return (vi)_mm512_i32gather_epi32((__m512i)offset, base, 1);
#else
  return (vi)_mm256_i32gather_epi32(reinterpret_cast<const int*>(base), (__m256i)offset, 1);
#endif
}
// The 8 bytes at base + offset, per lane: bytes 0-3 into *low, 4-7 into *high.
inline void gather_pair(const uint8_t* base, vi offset, vi* low, vi* high) {
#if defined(__AVX512F__)
  const __m512i a = _mm512_i32gather_epi64(_mm512_castsi512_si256((__m512i)offset), base, 1);
  const __m512i b = _mm512_i32gather_epi64(_mm512_extracti64x4_epi64((__m512i)offset, 1), base, 1);
  const vi even = {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30};
  *low = (vi)_mm512_permutex2var_epi32(a, (__m512i)even, b);
  *high = (vi)_mm512_permutex2var_epi32(a, (__m512i)(even + 1), b);
#else
  const auto* p = reinterpret_cast<const long long*>(base);
  const __m128i lo_offset = _mm256_castsi256_si128((__m256i)offset);
  const __m128i hi_offset = _mm256_extracti128_si256((__m256i)offset, 1);
  const __m256 a = _mm256_castsi256_ps(_mm256_i32gather_epi64(p, lo_offset, 1));
  const __m256 b = _mm256_castsi256_ps(_mm256_i32gather_epi64(p, hi_offset, 1));
  // Per 128-bit half: a's two qwords' dwords, then b's; the qword permute puts lanes in order.
  const __m256 lo = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
  const __m256 hi = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
  *low = (vi)_mm256_permute4x64_epi64(_mm256_castps_si256(lo), _MM_SHUFFLE(3, 1, 2, 0));
  *high = (vi)_mm256_permute4x64_epi64(_mm256_castps_si256(hi), _MM_SHUFFLE(3, 1, 2, 0));
#endif
}
inline bool any(vi mask) {  // lanes all ones or zero
#if defined(__AVX512F__)
  return _mm512_test_epi32_mask((__m512i)mask, (__m512i)mask) != 0;
#else
  return _mm256_movemask_ps(_mm256_castsi256_ps((__m256i)mask)) != 0;
#endif
}
// _mm_min_ps(_mm_max_ps(v, 0), 1) as the per-pixel kernel has it (the operand order decides
// what -0 and NaN give). Its scalar pixels (the last bytes of the image) clamp with
// clamp01(), which differs only there, and a brightness > 0 makes neither: the blend of
// bytes with weights >= 0 is >= +0.
inline vf clamp01_as_sse(vf v) {
#if defined(__AVX512F__)
  return _mm512_min_ps(_mm512_max_ps(v, _mm512_setzero_ps()), _mm512_set1_ps(1.f));
#else
  return _mm256_min_ps(_mm256_max_ps(v, _mm256_setzero_ps()), _mm256_set1_ps(1.f));
#endif
}
// The first n lanes of v to p (n <= kLanes; nothing past p + n is written).
inline void store(float* p, vf v, int n) {
  if (n >= kLanes) {
    std::memcpy(p, &v, sizeof v);
    return;
  }
#if defined(__AVX512F__)
  _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1), v);
#else
  const vi lane = {0, 1, 2, 3, 4, 5, 6, 7};
  _mm256_maskstore_ps(p, (__m256i)(lane < n), v);
#endif
}
inline vf bytes_to_float(vi w, int byte) {  // byte 0..3 of each lane, as a float
  return __builtin_convertvector(byte == 3 ? (vi)((vu)w >> 24) : (w >> (8 * byte)) & 0xFF, vf);
}

// Asks for the source rows that output rows a few ahead will sample, before their gathers need
// them: a photo of the loader's cache is usually in none of the caches, and a rotated row's
// gathers then wait on a miss after another (W4's draws, 224 px from 256: 2.5x the time of a
// photo in the cache without this, the same with it). An output row samples (taps included)
// between the rows of its two ends (the map is affine); they move by dyv a row, one way.
class SourcePrefetch {
 public:
  SourcePrefetch(const SampleMap& m, int src_h, int src_w, const uint8_t* src, int out_h,
                 int out_w)
      : m_(m), src_h_(src_h), out_h_(out_h), src_(src), row_bytes_(int64_t{src_w} * 3) {
    double x_lo = m.x00, x_hi = m.x00;
    for (const int v : {0, out_h - 1})
      for (const int u : {0, out_w - 1}) {
        const double x = m.x00 + m.dxv * v + m.dxu * u;
        x_lo = std::min(x_lo, x), x_hi = std::max(x_hi, x);
      }
    col_begin_ = index(x_lo, src_w) * int64_t{3};
    col_end_ = (index(x_hi + 1, src_w) + 1) * int64_t{3};
    const double span = m.dyu * (out_w - 1);
    y_below_ = std::min(0.0, span), y_above_ = std::max(0.0, span) + 1;
    down_ = m.dyv >= 0;
    next_ = index(m.y00 + (down_ ? y_below_ : y_above_), src_h);
  }
  // Before output row v: the rows of output rows up to v + kAhead not asked for yet.
  void before_row(int v) {
    const double y = m_.y00 + m_.dyv * std::min(v + kAhead, out_h_ - 1);
    if (down_) {
      for (const int last = index(y + y_above_, src_h_); next_ <= last; ++next_) row(next_);
    } else {
      for (const int first = index(y + y_below_, src_h_); next_ >= first; --next_) row(next_);
    }
  }

 private:
  static constexpr int kAhead = 8;  // 4 to 16 did as well on an EPYC; all at once, worse
  static int index(double c, int n) {
    return !(c >= 0) ? 0 : c >= n - 1 ? n - 1 : static_cast<int>(c);
  }
  // Not _mm_prefetch: GCC takes a function of prefetches alone for one without side effects
  // and drops its calls (IPA pure-const); an asm volatile it keeps.
  void row(int r) const {
    const uint8_t* p = src_ + r * row_bytes_;
    for (int64_t b = col_begin_; b < col_end_ + 63; b += 64)
      asm volatile("prefetcht0 %0" : : "m"(p[std::min(b, col_end_ - 1)]));
  }
  SampleMap m_;
  int src_h_, out_h_;
  const uint8_t* src_;
  int64_t row_bytes_, col_begin_, col_end_;
  double y_below_, y_above_;
  bool down_;
  int next_;
};

// augment_image's contrast and normalisation of n values, kLanes at a time (GCC leaves the
// loop of clamp01() scalar under AVX2: 40% of an image there). max(0, v), min(1, v) with the
// constant first are clamp01() to the bit, -0 and NaN included.
void contrast_and_normalise(float* p, int64_t n, float mean_grey, float contrast, float inv_std,
                            float shift) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    vf v;
    std::memcpy(&v, p + i, sizeof v);
    v = (v - mean_grey) * contrast + mean_grey;
#if defined(__AVX512F__)
    v = _mm512_min_ps(_mm512_set1_ps(1.f), _mm512_max_ps(_mm512_setzero_ps(), v));
#else
    v = _mm256_min_ps(_mm256_set1_ps(1.f), _mm256_max_ps(_mm256_setzero_ps(), v));
#endif
    v = v * inv_std + shift;
    std::memcpy(p + i, &v, sizeof v);
  }
  for (; i < n; ++i) p[i] = clamp01((p[i] - mean_grey) * contrast + mean_grey) * inv_std + shift;
}

// Adds rows' values in the per-pixel kernel's order, R rows' 3 R chains side by side so that
// their latencies overlap: sum[r][k] over plane k's row r (rows out_w apart).
template <int R>
void row_sums(const float* const planes[3], int out_w, float (*sum)[3]) {
  float s[R][3] = {};
  for (int u = 0; u < out_w; ++u)
    for (int r = 0; r < R; ++r)
      for (int k = 0; k < 3; ++k) s[r][k] += planes[k][static_cast<int64_t>(r) * out_w + u];
  for (int r = 0; r < R; ++r)
    for (int k = 0; k < 3; ++k) sum[r][k] = s[r][k];
}

// resample_per_pixel's planes and grey sum. Taps: a 4-byte gather each (words), or where a
// vector's two taps of each row are neighbours (no column clamped) and 8 bytes from the lower
// row's first stay inside the image, an 8-byte gather for both (half the elements gathered).
// normalise: when given, the values are written normalised, v * inv_std + shift as augment_image
// does without contrast, and no grey sum is taken (0 is returned).
double resample(const SampleMap& m, float brightness, int src_h, int src_w, const uint8_t* src,
                int out_h, int out_w, float* dst, bool words, const Normalization* normalise) {
  SourcePrefetch prefetch(m, src_h, src_w, src, out_h, out_w);
  const int64_t plane = static_cast<int64_t>(out_h) * out_w;
  const float scale = brightness / 255.f;
  float inv_std[3] = {1, 1, 1}, shift[3] = {0, 0, 0};
  if (normalise)
    for (int k = 0; k < 3; ++k)
      inv_std[k] = 1.f / normalise->std[k], shift[k] = -normalise->mean[k] * inv_std[k];
  const int32_t row_bytes = src_w * 3;
  // A tap past last_word (only the last pixel's) would read its 4-byte word past the image: such
  // a lane reads the word one byte earlier and shifts it. A pair's load past last_pair: words.
  const int32_t last_word = src_h * row_bytes - 4, last_pair = src_h * row_bytes - 8;
  auto word_taps = [&](vi t, bool near_end, vf* rgb) {
    vi w;
    if (!near_end) {
      w = gather(src, t);
    } else {
      const vi past = t > last_word;  // -1 where past
      w = (vi)((vu)gather(src, t + past) >> (vu)(past & 8));
    }
    for (int k = 0; k < 3; ++k) rgb[k] = bytes_to_float(w, k);
  };
  auto pair_taps = [&](vi t, vf* left, vf* right) {
    vi low, high;
    gather_pair(src, t, &low, &high);
    for (int k = 0; k < 3; ++k) left[k] = bytes_to_float(low, k);
    right[0] = bytes_to_float(low, 3);
    right[1] = bytes_to_float(high, 0);
    right[2] = bytes_to_float(high, 1);
  };
  vd iota{};
  for (int j = 0; j < kLanes / 2; ++j) iota[j] = j;
  constexpr int kSumRows = 4;
  double grey_sum = 0;
  for (int v0 = 0; v0 < out_h; v0 += kSumRows) {
    const int rows = std::min(kSumRows, out_h - v0);
    for (int v = v0; v < v0 + rows; ++v) {
      prefetch.before_row(v);
      const double xr = m.x00 + m.dxv * v, yr = m.y00 + m.dyv * v;
      float* out[3];
      for (int k = 0; k < 3; ++k) out[k] = dst + k * plane + static_cast<int64_t>(v) * out_w;
      for (int u = 0; u < out_w; u += kLanes) {
        const vd u_lo = iota + static_cast<double>(u);
        const vd u_hi = u_lo + static_cast<double>(kLanes / 2);
        const vd x_lo = xr + m.dxu * u_lo, x_hi = xr + m.dxu * u_hi;
        const vd y_lo = yr + m.dyu * u_lo, y_hi = yr + m.dyu * u_hi;
        const vd xf_lo = floor(x_lo), xf_hi = floor(x_hi);
        const vd yf_lo = floor(y_lo), yf_hi = floor(y_hi);
        const vf ax = join<vf>(__builtin_convertvector(x_lo - xf_lo, vf_half),
                               __builtin_convertvector(x_hi - xf_hi, vf_half));
        const vf ay = join<vf>(__builtin_convertvector(y_lo - yf_lo, vf_half),
                               __builtin_convertvector(y_hi - yf_hi, vf_half));
        const vi xi = join<vi>(__builtin_convertvector(xf_lo, vi_half),
                               __builtin_convertvector(xf_hi, vi_half));
        const vi yi = join<vi>(__builtin_convertvector(yf_lo, vi_half),
                               __builtin_convertvector(yf_hi, vi_half));
        const vi x0 = clamp_index(xi, src_w) * 3, x1 = clamp_index(xi + 1, src_w) * 3;
        const vi y0 = clamp_index(yi, src_h) * row_bytes;
        const vi y1 = clamp_index(yi + 1, src_h) * row_bytes;
        vf p00[3], p01[3], p10[3], p11[3];
        if (!words && !any((x1 != x0 + 3) | ((y1 + x0) > last_pair))) {
          pair_taps(y0 + x0, p00, p01);
          pair_taps(y1 + x0, p10, p11);
        } else {
          const bool near_end = any((y1 + x1) > last_word);  // y1 + x1 is the largest tap
          word_taps(y0 + x0, near_end, p00);
          word_taps(y0 + x1, near_end, p01);
          word_taps(y1 + x0, near_end, p10);
          word_taps(y1 + x1, near_end, p11);
        }
        const vf bx = 1 - ax, by = 1 - ay;
        const int n = std::min(kLanes, out_w - u);
        for (int k = 0; k < 3; ++k) {
          const vf top = bx * p00[k] + ax * p01[k];
          const vf bottom = bx * p10[k] + ax * p11[k];
          const vf rgb = clamp01_as_sse((by * top + ay * bottom) * scale);
          store(out[k] + u, normalise ? rgb * inv_std[k] + shift[k] : rgb, n);
        }
      }
    }
    if (normalise) continue;
    float sum[kSumRows][3];
    const float* first[3];
    for (int k = 0; k < 3; ++k) first[k] = dst + k * plane + static_cast<int64_t>(v0) * out_w;
    if (rows == kSumRows) {
      row_sums<kSumRows>(first, out_w, sum);
    } else {
      for (int r = 0; r < rows; ++r) {
        const float* one[3];
        for (int k = 0; k < 3; ++k) one[k] = first[k] + static_cast<int64_t>(r) * out_w;
        row_sums<1>(one, out_w, sum + r);
      }
    }
    for (int r = 0; r < rows; ++r)
      grey_sum += 0.299 * sum[r][0] + 0.587 * sum[r][1] + 0.114 * sum[r][2];
  }
  return grey_sum;
}

#pragma GCC diagnostic pop
}  // namespace vec
#endif

}  // namespace

int augment_vector_lanes() {
#ifdef PDNN_AUGMENT_VECTOR
  return vec::kLanes;
#else
  return 0;
#endif
}

void augment_image(const AugmentDraw& d, const Normalization& norm, int src_h, int src_w,
                   const uint8_t* src, int out_h, int out_w, float* dst, AugmentKernel kernel) {
  check_augment_sizes(d, src_h, src_w, out_h, out_w);
  const SampleMap m = sample_map(d, out_h, out_w);
  const bool jitter = d.contrast != 1.f;
  const int64_t plane = static_cast<int64_t>(out_h) * out_w;
#ifdef PDNN_AUGMENT_VECTOR
  // A one-pixel source has no 4-byte word inside it.
  if (kernel != AugmentKernel::PerPixel && plane > 0 && static_cast<int64_t>(src_h) * src_w >= 2) {
    // Without contrast, nothing waits for the whole image: the kernel normalises as it goes.
    const double grey_sum =
        vec::resample(m, d.brightness, src_h, src_w, src, out_h, out_w, dst,
                      kernel == AugmentKernel::VectorWords, jitter ? nullptr : &norm);
    if (!jitter) return;
    const float mean_grey = static_cast<float>(grey_sum / plane);
    for (int k = 0; k < 3; ++k) {
      const float inv_std = 1.f / norm.std[k], shift = -norm.mean[k] * inv_std;
      vec::contrast_and_normalise(dst + k * plane, plane, mean_grey, d.contrast, inv_std, shift);
    }
    return;
  }
#endif
  const double grey_sum =
      resample_per_pixel(m, d.brightness, src_h, src_w, src, out_h, out_w, dst);
  const float mean_grey = static_cast<float>(grey_sum / plane);
  for (int k = 0; k < 3; ++k) {
    float* p = dst + k * plane;
    const float inv_std = 1.f / norm.std[k], shift = -norm.mean[k] * inv_std;
    if (jitter) {
      for (int64_t i = 0; i < plane; ++i)
        p[i] = clamp01((p[i] - mean_grey) * d.contrast + mean_grey) * inv_std + shift;
    } else {
      for (int64_t i = 0; i < plane; ++i) p[i] = p[i] * inv_std + shift;
    }
  }
}

void augment_mask(const AugmentDraw& d, int src_h, int src_w, const uint8_t* map, int map_h,
                  int map_w, int out_h, int out_w, int32_t* dst) {
  check_augment_sizes(d, src_h, src_w, out_h, out_w);
  PDNN_CHECK(map_h >= 1 && map_w >= 1, "augment: mask %dx%d", map_w, map_h);
  const SampleMap m = sample_map(d, out_h, out_w);
  // Pixel-index x in the image's frame is the continuous x + 0.5 there, map_w / src_w times
  // that in the map's; the map pixel containing it is the floor.
  const double kx = static_cast<double>(map_w) / src_w, ky = static_cast<double>(map_h) / src_h;
  for (int v = 0; v < out_h; ++v) {
    const double xr = m.x00 + m.dxv * v, yr = m.y00 + m.dyv * v;
    int32_t* row = dst + static_cast<int64_t>(v) * out_w;
    for (int u = 0; u < out_w; ++u) {
      const double x = xr + m.dxu * u, y = yr + m.dyu * u;
      const int xi = clamp_index(static_cast<int>(std::floor((x + 0.5) * kx)), map_w);
      const int yi = clamp_index(static_cast<int>(std::floor((y + 0.5) * ky)), map_h);
      row[u] = map[static_cast<int64_t>(yi) * map_w + xi];
    }
  }
}

}  // namespace pdnn
