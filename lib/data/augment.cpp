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

void augment_image(const AugmentDraw& d, const Normalization& norm, int src_h, int src_w,
                   const uint8_t* src, int out_h, int out_w, float* dst) {
  check_augment_sizes(d, src_h, src_w, out_h, out_w);
  const SampleMap m = sample_map(d, out_h, out_w);
  const double x00 = m.x00, y00 = m.y00, dxu = m.dxu, dxv = m.dxv, dyu = m.dyu, dyv = m.dyv;

  const int64_t plane = static_cast<int64_t>(out_h) * out_w;
  float* r_out = dst;
  float* g_out = dst + plane;
  float* b_out = dst + 2 * plane;
  const float scale = d.brightness / 255.f;
  // Per row: first the four taps' byte offsets and the two fractions of every output pixel
  // (a loop the compiler vectorises), then the gather. Both halves are scalar-exact.
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

  const float mean_grey = static_cast<float>(grey_sum / plane);
  const bool jitter = d.contrast != 1.f;
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
