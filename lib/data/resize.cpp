// Bilinear and area resampling, as PyTorch defines them (resize.h).
#include "data/resize.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace pdnn {

namespace {
// For each output index: the two input indices and the second one's weight (torch's
// compute_indices_weights_linear with align_corners=False).
struct Taps {
  std::vector<int> i0, i1;
  std::vector<float> w1;
};
Taps taps(int in, int out) {
  Taps t;
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  for (int j = 0; j < out; ++j) {
    const float real = std::max(scale * (static_cast<float>(j) + 0.5f) - 0.5f, 0.f);
    const int i0 = std::min(static_cast<int>(real), in - 1);
    const float lambda = std::min(std::max(real - static_cast<float>(i0), 0.f), 1.f);
    t.i0.push_back(i0);
    t.i1.push_back(i0 < in - 1 ? i0 + 1 : i0);
    t.w1.push_back(lambda);
  }
  return t;
}

void check_sizes(const char* what, int channels, int h, int w, int oh, int ow) {
  PDNN_CHECK(channels >= 1 && h >= 1 && w >= 1 && oh >= 1 && ow >= 1,
             "%s: %d channels, %dx%d -> %dx%d: every size must be >= 1", what, channels, h, w,
             oh, ow);
}
}  // namespace

void resize_bilinear(int channels, int h, int w, const float* src, int oh, int ow, float* dst) {
  check_sizes("resize_bilinear", channels, h, w, oh, ow);
  const Taps ty = taps(h, oh), tx = taps(w, ow);
  for (int c = 0; c < channels; ++c) {
    const float* s = src + static_cast<size_t>(c) * h * w;
    float* d = dst + static_cast<size_t>(c) * oh * ow;
    for (int y = 0; y < oh; ++y) {
      const float* r0 = s + static_cast<size_t>(ty.i0[y]) * w;
      const float* r1 = s + static_cast<size_t>(ty.i1[y]) * w;
      const float wy1 = ty.w1[y], wy0 = 1.f - wy1;
      for (int x = 0; x < ow; ++x) {
        const float wx1 = tx.w1[x], wx0 = 1.f - wx1;
        const int x0 = tx.i0[x], x1 = tx.i1[x];
        d[static_cast<size_t>(y) * ow + x] =
            wy0 * (wx0 * r0[x0] + wx1 * r0[x1]) + wy1 * (wx0 * r1[x0] + wx1 * r1[x1]);
      }
    }
  }
}

void resize_area(int channels, int h, int w, const float* src, int oh, int ow, float* dst) {
  check_sizes("resize_area", channels, h, w, oh, ow);
  auto start = [](int j, int in, int out) {
    return static_cast<int>(std::floor(static_cast<double>(j) * in / out));
  };
  auto end = [](int j, int in, int out) {
    return static_cast<int>(std::ceil(static_cast<double>(j + 1) * in / out));
  };
  for (int c = 0; c < channels; ++c) {
    const float* s = src + static_cast<size_t>(c) * h * w;
    float* d = dst + static_cast<size_t>(c) * oh * ow;
    for (int y = 0; y < oh; ++y) {
      const int y0 = start(y, h, oh), y1 = end(y, h, oh);
      for (int x = 0; x < ow; ++x) {
        const int x0 = start(x, w, ow), x1 = end(x, w, ow);
        double sum = 0;
        for (int yy = y0; yy < y1; ++yy)
          for (int xx = x0; xx < x1; ++xx) sum += s[static_cast<size_t>(yy) * w + xx];
        d[static_cast<size_t>(y) * ow + x] =
            static_cast<float>(sum / static_cast<double>((y1 - y0) * (x1 - x0)));
      }
    }
  }
}

}  // namespace pdnn
