// Sample grids as PNG files, grey bytes for IDX sample files (image_grid.h).
#include "data/image_grid.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "core/atomic_file.h"
#include "core/error.h"

namespace pdnn {

namespace {
uint8_t to_byte(float v, float lo, float hi) {
  const float u = std::round(255.f * (v - lo) / (hi - lo));
  return static_cast<uint8_t>(std::min(255.f, std::max(0.f, std::isnan(u) ? 0.f : u)));
}
void check_images(const char* what, const Tensor& images, float lo, float hi) {
  PDNN_CHECK(images.device() == Device::CPU && images.dtype() == DType::F32 &&
                 images.rank() == 4 && images.shape(0) >= 1,
             "%s: images %s must be host (N,C,H,W) float32", what, images.shape().str().c_str());
  PDNN_CHECK(lo < hi, "%s: range [%g, %g]", what, lo, hi);
}
}  // namespace

void write_image_grid_png(const std::string& path, const Tensor& images, int cols, int pad,
                          float lo, float hi) {
  check_images("image grid", images, lo, hi);
  const Shape& s = images.shape();
  const int n = static_cast<int>(s.n()), c = static_cast<int>(s.c()),
            h = static_cast<int>(s.h()), w = static_cast<int>(s.w());
  PDNN_CHECK(c == 1 || c == 3, "image grid %s: %d channels (1 or 3 can be written)",
             path.c_str(), c);
  PDNN_CHECK(cols >= 1 && pad >= 0, "image grid %s: %d columns, padding %d", path.c_str(), cols,
             pad);
  const int xs = std::min(cols, n), ys = (n + xs - 1) / xs;
  cv::Mat grid = cv::Mat::zeros(ys * (h + pad) + pad, xs * (w + pad) + pad,
                                c == 3 ? CV_8UC3 : CV_8UC1);
  const float* p = images.data();
  for (int k = 0; k < n; ++k) {
    const int oy = (k / xs) * (h + pad) + pad, ox = (k % xs) * (w + pad) + pad;
    const float* img = p + static_cast<size_t>(k) * c * h * w;
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        if (c == 1) {
          grid.at<uint8_t>(oy + y, ox + x) = to_byte(img[y * w + x], lo, hi);
        } else {
          // OpenCV stores B, G, R.
          cv::Vec3b& px = grid.at<cv::Vec3b>(oy + y, ox + x);
          for (int ch = 0; ch < 3; ++ch)
            px[2 - ch] = to_byte(img[static_cast<size_t>(ch) * h * w + y * w + x], lo, hi);
        }
      }
  }
  std::vector<uint8_t> png;
  PDNN_CHECK(cv::imencode(".png", grid, png), "image grid %s: PNG encoding failed",
             path.c_str());
  AtomicFile f(path, /*binary=*/true);
  f.stream().write(reinterpret_cast<const char*>(png.data()),
                   static_cast<std::streamsize>(png.size()));
  f.commit();
}

std::vector<uint8_t> to_bytes(const Tensor& images, float lo, float hi) {
  check_images("bytes", images, lo, hi);
  std::vector<uint8_t> out(static_cast<size_t>(images.numel()));
  const float* p = images.data();
  for (size_t i = 0; i < out.size(); ++i) out[i] = to_byte(p[i], lo, hi);
  return out;
}

std::vector<uint8_t> to_grey_bytes(const Tensor& images, float lo, float hi) {
  check_images("grey bytes", images, lo, hi);
  const Shape& s = images.shape();
  const int64_t n = s.n(), c = s.c(), hw = s.h() * s.w();
  std::vector<uint8_t> out(static_cast<size_t>(n * hw));
  const float* p = images.data();
  for (int64_t k = 0; k < n; ++k)
    for (int64_t i = 0; i < hw; ++i) {
      float sum = 0.f;
      for (int64_t ch = 0; ch < c; ++ch) sum += p[(k * c + ch) * hw + i];
      out[static_cast<size_t>(k * hw + i)] = to_byte(sum / static_cast<float>(c), lo, hi);
    }
  return out;
}

bool png_size(const std::string& path, int* width, int* height) {
  std::ifstream in(path, std::ios::binary);
  unsigned char b[24];
  if (!in.read(reinterpret_cast<char*>(b), sizeof b)) return false;
  static const unsigned char magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (!std::equal(magic, magic + 8, b) || std::string(reinterpret_cast<char*>(b + 12), 4) != "IHDR")
    return false;
  *width = b[16] << 24 | b[17] << 16 | b[18] << 8 | b[19];
  *height = b[20] << 24 | b[21] << 16 | b[22] << 8 | b[23];
  return true;
}

}  // namespace pdnn
