// Overlays of prediction and truth (overlay_image.h).
#include "workloads/segmentation/overlay_image.h"

#include <algorithm>
#include <cmath>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"

namespace pdnn {

void class_colour(int k, unsigned char rgb[3]) {
  // Hue (k - 1) * 0.618... turns, full saturation and value: HSV to RGB by hand.
  const double h = std::fmod((k - 1) * 0.6180339887498949, 1.0) * 6.0;
  const int i = static_cast<int>(h);
  const double f = h - i;
  const double v[6][3] = {{1, f, 0}, {1 - f, 1, 0}, {0, 1, f}, {0, 1 - f, 1}, {f, 0, 1}, {1, 0, 1 - f}};
  for (int c = 0; c < 3; ++c) rgb[c] = static_cast<unsigned char>(std::lround(255 * v[i % 6][c]));
}

void write_overlay_png(const std::string& path, const Tensor& images, const Normalization& norm,
                       const Tensor& truth, const Tensor& pred, const std::string& title) {
  const Shape s = images.shape();
  PDNN_CHECK(s.rank() == 4 && s.c() == 3 && images.device() == Device::CPU &&
                 truth.dtype() == DType::I32 && pred.dtype() == DType::I32 &&
                 truth.numel() == s.n() * s.h() * s.w() && pred.numel() == truth.numel(),
             "%s: overlays need host images (n,3,H,W) and two int32 maps (n,H,W); got %s, %s "
             "and %s",
             path.c_str(), s.str().c_str(), truth.shape().str().c_str(), pred.shape().str().c_str());
  const int n = static_cast<int>(s.n()), h = static_cast<int>(s.h()), w = static_cast<int>(s.w());
  const int zoom = std::max(1, (128 + std::min(h, w) - 1) / std::min(h, w));
  const int th = h * zoom, tw = w * zoom, pad = 4, top = 40;
  cv::Mat img(top + n * (th + pad) + pad, 3 * (tw + pad) + pad, CV_8UC3, cv::Scalar(255, 255, 255));
  const int64_t plane = static_cast<int64_t>(h) * w;
  for (int i = 0; i < n; ++i) {
    const float* x = images.data() + static_cast<int64_t>(i) * 3 * plane;
    const int32_t* maps[2] = {truth.data<int32_t>() + i * plane, pred.data<int32_t>() + i * plane};
    for (int col = 0; col < 3; ++col) {
      const int y0 = top + pad + i * (th + pad), x0 = pad + col * (tw + pad);
      for (int v = 0; v < th; ++v)
        for (int u = 0; u < tw; ++u) {
          const int64_t q = static_cast<int64_t>(v / zoom) * w + u / zoom;
          double rgb[3];
          for (int c = 0; c < 3; ++c)
            rgb[c] = std::clamp(255.0 * (x[c * plane + q] * norm.std[c] + norm.mean[c]), 0.0, 255.0);
          const int k = col == 0 ? 0 : maps[col - 1][q];
          if (k > 0) {
            unsigned char paint[3];
            class_colour(k, paint);
            for (int c = 0; c < 3; ++c) rgb[c] = 0.5 * rgb[c] + 0.5 * paint[c];
          }
          cv::Vec3b& px = img.at<cv::Vec3b>(y0 + v, x0 + u);  // OpenCV's order: BGR
          for (int c = 0; c < 3; ++c) px[2 - c] = static_cast<uchar>(std::lround(rgb[c]));
        }
    }
  }
  const int font = cv::FONT_HERSHEY_SIMPLEX;
  cv::putText(img, title, cv::Point(pad, 16), font, 0.4, cv::Scalar(0, 0, 0), 1, cv::LINE_AA);
  const char* heads[3] = {"photo", "truth", "prediction"};
  for (int col = 0; col < 3; ++col)
    cv::putText(img, heads[col], cv::Point(pad + col * (tw + pad) + 2, 34), font, 0.4,
                cv::Scalar(80, 80, 80), 1, cv::LINE_AA);
  std::vector<uchar> png;
  PDNN_CHECK(cv::imencode(".png", img, png), "%s: OpenCV could not encode the PNG", path.c_str());
  AtomicFile f(path, /*binary=*/true);
  f.stream().write(reinterpret_cast<const char*>(png.data()), static_cast<std::streamsize>(png.size()));
  f.commit();
}

}  // namespace pdnn
