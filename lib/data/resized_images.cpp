// ResizedImages (resized_images.h).
#include "data/resized_images.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "data/resize.h"

namespace pdnn {

ResizedImages::ResizedImages(const LabeledImages& data, int num_classes, int side, int channels,
                             float lo, float hi)
    : data_(data), num_classes_(num_classes), side_(side), channels_(channels), lo_(lo), hi_(hi) {
  const Shape& s = data.images.shape();
  PDNN_CHECK(s.rank() == 4 && s.n() == data.size() && s.n() >= 1,
             "ResizedImages: images %s must be (N,C,H,W) with one label each (%lld labels)",
             s.str().c_str(), static_cast<long long>(data.size()));
  PDNN_CHECK(side >= 1 && (channels == s.c() || (s.c() == 1 && channels == 3)),
             "ResizedImages: %lld-channel images cannot become %d channels of %dx%d (same "
             "channels, or grey to 3)",
             static_cast<long long>(s.c()), channels, side, side);
  PDNN_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo < hi,
             "ResizedImages: range [%g, %g] must be finite and increasing", lo, hi);
}

void ResizedImages::read(int64_t i, float* dst, std::optional<uint64_t>) const {
  PDNN_CHECK(i >= 0 && i < size(), "ResizedImages: sample %lld of %lld",
             static_cast<long long>(i), static_cast<long long>(size()));
  const Shape& s = data_.images.shape();
  const int c = static_cast<int>(s.c()), h = static_cast<int>(s.h()), w = static_cast<int>(s.w());
  const float* src = data_.images.data() + i * s.numel() / s.n();
  const size_t plane = static_cast<size_t>(side_) * side_;
  resize_bilinear(c, h, w, src, side_, side_, dst);
  const float scale = hi_ - lo_;
  for (size_t k = 0; k < plane * c; ++k) dst[k] = lo_ + scale * dst[k];
  for (int ch = c; ch < channels_; ++ch) std::copy(dst, dst + plane, dst + plane * ch);
}

}  // namespace pdnn
