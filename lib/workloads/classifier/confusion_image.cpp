// The confusion matrix as a PNG and as text (confusion_image.h).
#include "workloads/classifier/confusion_image.h"

#include <algorithm>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/atomic_file.h"
#include "core/error.h"

namespace pdnn {

namespace {

int check_square(const std::vector<int64_t>& counts, const std::vector<std::string>& classes) {
  const int k = static_cast<int>(classes.size());
  PDNN_CHECK(k >= 1 && counts.size() == classes.size() * classes.size(),
             "confusion matrix: %zu counts for %d classes (need classes^2)", counts.size(), k);
  for (const int64_t c : counts) PDNN_CHECK(c >= 0, "confusion matrix: negative count %lld",
                                            static_cast<long long>(c));
  return k;
}

int64_t row_total(const std::vector<int64_t>& counts, int k, int r) {
  int64_t n = 0;
  for (int j = 0; j < k; ++j) n += counts[static_cast<size_t>(r * k + j)];
  return n;
}

}  // namespace

void write_confusion_png(const std::string& path, const std::vector<int64_t>& counts,
                         const std::vector<std::string>& classes, const std::string& title) {
  const int k = check_square(counts, classes);
  const int font = cv::FONT_HERSHEY_SIMPLEX;
  const double label_scale = 0.5, cell_scale = 0.5, title_scale = 0.55;
  const int cell = 84, pad = 12;
  int label_w = 0;
  for (const std::string& c : classes) {
    int base = 0;
    label_w = std::max(label_w, cv::getTextSize(c, font, label_scale, 1, &base).width);
  }
  // Column names are written under the matrix, alternating two lines so long names do not
  // run into each other.
  const int left = pad + label_w + 10, top = 56, bottom = 64;
  const int width = std::max(left + k * cell + pad, 420), height = top + k * cell + bottom;
  cv::Mat img(height, width, CV_8UC3, cv::Scalar(255, 255, 255));
  const cv::Scalar black(0, 0, 0), grey(110, 110, 110);

  int64_t total = 0, correct = 0;
  for (int r = 0; r < k; ++r) {
    total += row_total(counts, k, r);
    correct += counts[static_cast<size_t>(r * k + r)];
  }
  cv::putText(img, title, cv::Point(pad, 22), font, title_scale, black, 1, cv::LINE_AA);
  cv::putText(img,
              strprintf("rows: true class, columns: predicted; %lld/%lld correct (%.1f%%)",
                        static_cast<long long>(correct), static_cast<long long>(total),
                        total > 0 ? 100.0 * static_cast<double>(correct) / total : 0.0),
              cv::Point(pad, 44), font, 0.45, grey, 1, cv::LINE_AA);
  for (int r = 0; r < k; ++r) {
    const int64_t n = row_total(counts, k, r);
    int base = 0;
    const cv::Size ts = cv::getTextSize(classes[static_cast<size_t>(r)], font, label_scale, 1, &base);
    cv::putText(img, classes[static_cast<size_t>(r)],
                cv::Point(left - 10 - ts.width, top + r * cell + cell / 2 + ts.height / 2), font,
                label_scale, black, 1, cv::LINE_AA);
    for (int c = 0; c < k; ++c) {
      const int64_t v = counts[static_cast<size_t>(r * k + c)];
      const double share = n > 0 ? static_cast<double>(v) / n : 0.0;
      // White to (BGR) 140, 60, 20: a dark blue.
      const cv::Scalar fill(255 - share * (255 - 140), 255 - share * (255 - 60),
                            255 - share * (255 - 20));
      const cv::Point p0(left + c * cell, top + r * cell), p1(p0.x + cell, p0.y + cell);
      cv::rectangle(img, p0, p1, fill, cv::FILLED);
      cv::rectangle(img, p0, p1, cv::Scalar(200, 200, 200), 1);
      const cv::Scalar ink = share > 0.5 ? cv::Scalar(255, 255, 255) : black;
      const std::string a = std::to_string(v), b = strprintf("%.1f%%", 100.0 * share);
      const cv::Size sa = cv::getTextSize(a, font, cell_scale, 1, &base);
      const cv::Size sb = cv::getTextSize(b, font, 0.4, 1, &base);
      cv::putText(img, a, cv::Point(p0.x + (cell - sa.width) / 2, p0.y + cell / 2 - 4), font,
                  cell_scale, ink, 1, cv::LINE_AA);
      cv::putText(img, b, cv::Point(p0.x + (cell - sb.width) / 2, p0.y + cell / 2 + 16), font,
                  0.4, ink, 1, cv::LINE_AA);
    }
    const cv::Point d0(left + r * cell, top + r * cell);
    cv::rectangle(img, d0, cv::Point(d0.x + cell, d0.y + cell), black, 2);
  }
  for (int c = 0; c < k; ++c) {
    int base = 0;
    const std::string& name = classes[static_cast<size_t>(c)];
    const cv::Size ts = cv::getTextSize(name, font, 0.45, 1, &base);
    const int y = top + k * cell + 20 + (c % 2) * 20;
    cv::putText(img, name, cv::Point(left + c * cell + (cell - ts.width) / 2, y), font, 0.45,
                black, 1, cv::LINE_AA);
  }

  std::vector<uchar> png;
  PDNN_CHECK(cv::imencode(".png", img, png), "%s: OpenCV could not encode the PNG", path.c_str());
  AtomicFile f(path, /*binary=*/true);
  f.stream().write(reinterpret_cast<const char*>(png.data()),
                   static_cast<std::streamsize>(png.size()));
  f.commit();
}

std::string confusion_text(const std::vector<int64_t>& counts,
                           const std::vector<std::string>& classes) {
  const int k = check_square(counts, classes);
  int w = 9;  // "true\pred"
  for (const std::string& c : classes) w = std::max(w, static_cast<int>(c.size()));
  int64_t most = 1;
  for (const int64_t v : counts) most = std::max(most, v);
  const int cw = std::max(4, static_cast<int>(std::to_string(most).size()) + 1);
  std::string s = strprintf("    %-*s", w, "true\\pred");
  for (int c = 0; c < k; ++c) s += strprintf("%*d", cw, c);
  s += "     acc\n";
  for (int r = 0; r < k; ++r) {
    s += strprintf("%2d  %-*s", r, w, classes[static_cast<size_t>(r)].c_str());
    for (int c = 0; c < k; ++c)
      s += strprintf("%*lld", cw, static_cast<long long>(counts[static_cast<size_t>(r * k + c)]));
    const int64_t n = row_total(counts, k, r);
    s += strprintf("  %5.1f%%\n",
                   n > 0 ? 100.0 * static_cast<double>(counts[static_cast<size_t>(r * k + r)]) / n
                         : 0.0);
  }
  return s;
}

}  // namespace pdnn
