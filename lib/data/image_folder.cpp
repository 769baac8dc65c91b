// Image folders: scanning, decoding through OpenCV into the uint8 cache, the per-class split
// (image_folder.h).
#include "data/image_folder.h"
#include "data/image_decode.h"

#include <omp.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/error.h"
#include "core/parallel.h"
#include "core/rng.h"

namespace pdnn {

namespace fs = std::filesystem;

struct ImageStore {
  int side = 0;                         // cache_size
  std::vector<std::string> classes;
  std::vector<std::string> paths;       // relative to the folder
  std::vector<int32_t> labels;
  std::unique_ptr<uint8_t[]> pixels;    // images x side x side x 3, RGB
  size_t bytes_per_image() const { return static_cast<size_t>(side) * side * 3; }
  const uint8_t* image(int64_t k) const {
    return pixels.get() + static_cast<size_t>(k) * bytes_per_image();
  }
};

namespace {

enum class Format { Jpeg, Png, Bmp, Other };

Format sniff(const std::vector<uint8_t>& b) {
  if (b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) return Format::Jpeg;
  static const uint8_t png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (b.size() >= 8 && std::memcmp(b.data(), png, 8) == 0) return Format::Png;
  if (b.size() >= 2 && b[0] == 'B' && b[1] == 'M') return Format::Bmp;
  return Format::Other;
}

// Walks a JPEG's marker segments and entropy-coded data up to the end-of-image marker.
// libjpeg decodes a truncated file without an error (it pads the missing rows with grey and
// prints a warning), so completeness is checked here. Data after the end marker (some cameras
// append more) is allowed. Returns "" when complete, else the problem; *w, *h: the frame's
// size from its SOF segment (0 when none was seen).
std::string jpeg_check(const std::vector<uint8_t>& b, int* w, int* h) {
  *w = *h = 0;
  const size_t n = b.size();
  size_t pos = 2;  // after SOI
  while (pos < n) {
    if (b[pos] != 0xFF) {  // stray bytes between segments: libjpeg skips them, so do we
      ++pos;
      continue;
    }
    while (pos < n && b[pos] == 0xFF) ++pos;  // fill bytes
    if (pos >= n) break;
    const uint8_t m = b[pos++];
    if (m == 0xD9) return "";
    if (m == 0x01 || m == 0xD8 || (m >= 0xD0 && m <= 0xD7)) continue;  // no length field
    if (pos + 2 > n) break;
    const size_t len = static_cast<size_t>(b[pos]) << 8 | b[pos + 1];
    if (len < 2) return "corrupt JPEG (bad segment length)";
    if (pos + len > n) break;
    const bool sof = m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
    if (sof && len >= 7 && *w == 0) {
      *h = b[pos + 3] << 8 | b[pos + 4];
      *w = b[pos + 5] << 8 | b[pos + 6];
    }
    pos += len;
    if (m == 0xDA) {  // scan data: runs until a marker other than a stuffed 0xFF00 or RSTn
      while (pos + 1 < n) {
        if (b[pos] == 0xFF && b[pos + 1] != 0x00 && !(b[pos + 1] >= 0xD0 && b[pos + 1] <= 0xD7))
          break;
        pos += b[pos] == 0xFF ? 2 : 1;
      }
      if (pos + 1 >= n) break;
    }
  }
  return "truncated JPEG (no end-of-image marker)";
}

// The width and height a PNG or BMP header announces, as OpenCV's decoders read them (PNG: the
// IHDR chunk, which libpng requires first; BMP: the 12-byte OS/2 header's 16-bit fields or the
// 40-byte-and-longer Windows header's 32-bit ones, a negative height meaning top-down). False
// when the header is too short or of another kind: OpenCV then rejects the file itself.
bool header_size(const std::vector<uint8_t>& b, Format format, int64_t* w, int64_t* h) {
  auto be32 = [&](size_t i) {
    return static_cast<uint32_t>(b[i]) << 24 | static_cast<uint32_t>(b[i + 1]) << 16 |
           static_cast<uint32_t>(b[i + 2]) << 8 | b[i + 3];
  };
  auto le32 = [&](size_t i) {
    return static_cast<uint32_t>(b[i + 3]) << 24 | static_cast<uint32_t>(b[i + 2]) << 16 |
           static_cast<uint32_t>(b[i + 1]) << 8 | b[i];
  };
  if (format == Format::Png) {
    if (b.size() < 24 || std::memcmp(b.data() + 12, "IHDR", 4) != 0) return false;
    *w = be32(16), *h = be32(20);
    return true;
  }
  if (format == Format::Bmp) {
    if (b.size() < 26) return false;
    const uint32_t header = le32(14);
    if (header == 12) {
      *w = b[18] | b[19] << 8, *h = b[20] | b[21] << 8;
      return true;
    }
    *w = std::abs(static_cast<int64_t>(static_cast<int32_t>(le32(18))));
    *h = std::abs(static_cast<int64_t>(static_cast<int32_t>(le32(22))));
    return true;
  }
  return false;
}

}  // namespace

std::string read_file_bytes(const std::string& path, std::vector<uint8_t>* out) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return std::string("cannot open: ") + std::strerror(errno);
  out->clear();
  uint8_t buf[1 << 16];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) out->insert(out->end(), buf, buf + got);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) return std::string("cannot read: ") + std::strerror(err);
  return "";
}

namespace {

// OpenCV allocates the whole image from the header's size before it reads any pixel (and
// accepts up to 2^30 pixels), so a 50-byte corrupt BMP claiming 1044 x 720884 pixels took
// 2.26 GB per decoding thread (found by fuzz_image_folder). The size is checked first.
std::string too_large(int64_t w, int64_t h) {
  // Each side first: a PNG may claim 2^32 - 1 x 2^32 - 1, whose product overflows.
  if (w <= kMaxImagePixels && h <= kMaxImagePixels && w * h <= kMaxImagePixels) return "";
  return "image too large (" + std::to_string(w) + " x " + std::to_string(h) +
         " pixels to decode; at most " + std::to_string(kMaxImagePixels) + ")";
}

}  // namespace

std::string check_announced_size(const std::vector<uint8_t>& bytes) {
  int64_t w, h;
  const Format format = sniff(bytes);
  if (format == Format::Other || format == Format::Jpeg || !header_size(bytes, format, &w, &h))
    return "";
  return too_large(w, h);
}

std::string decode_image_bytes(const std::vector<uint8_t>& bytes, int side, bool center_crop,
                               uint8_t* dst, int* src_w, int* src_h) {
  std::string problem;
  if (src_w) *src_w = 0;
  if (src_h) *src_h = 0;
  if (bytes.empty()) return "empty file";
  const Format format = sniff(bytes);
  if (format == Format::Other) return "not a JPEG, PNG or BMP file";

  cv::Mat img;
  try {
    if (format == Format::Jpeg) {
      int w, h;
      problem = jpeg_check(bytes, &w, &h);
      if (!problem.empty()) return problem;
      // JPEGs are 8-bit grey or colour, so IMREAD_COLOR loses nothing; libjpeg can decode at
      // 1/2, 1/4 or 1/8 scale directly (DCT scaling), several times faster, when the reduced
      // image is still at least the cache size (small --size runs, the unit tests).
      int scale = 1;
      if (w > 0 && h > 0) {
        const int shorter = std::min(w, h);
        scale = shorter >= 8 * side ? 8 : shorter >= 4 * side ? 4 : shorter >= 2 * side ? 2 : 1;
      }
      const int flags = (scale == 8   ? cv::IMREAD_REDUCED_COLOR_8
                         : scale == 4 ? cv::IMREAD_REDUCED_COLOR_4
                         : scale == 2 ? cv::IMREAD_REDUCED_COLOR_2
                                      : cv::IMREAD_COLOR) |
                        cv::IMREAD_IGNORE_ORIENTATION;
      problem = too_large((w + scale - 1) / scale, (h + scale - 1) / scale);
      if (!problem.empty()) return problem;
      img = cv::imdecode(bytes, flags);
      if (src_w) *src_w = w;
      if (src_h) *src_h = h;
    } else {
      problem = check_announced_size(bytes);
      if (!problem.empty()) return problem;
      // PNG and BMP as stored (grey, grey+alpha, RGB, RGBA; 8 or 16 bits), converted below.
      img = cv::imdecode(bytes, cv::IMREAD_UNCHANGED);
    }
    if (img.empty() || img.cols < 1 || img.rows < 1) return "cannot decode (corrupt or unsupported)";
    // The size as stored (a JPEG's frame, whatever scale it was decoded at; the decoded size
    // when its header had none).
    if (src_w && *src_w == 0) *src_w = img.cols;
    if (src_h && *src_h == 0) *src_h = img.rows;
    if (img.depth() == CV_16U) {
      cv::Mat eight;
      img.convertTo(eight, CV_8U, 1.0 / 257.0);  // rounds; 65535 -> 255, 257 k -> k
      img = eight;
    } else if (img.depth() != CV_8U) {
      return "unsupported pixel depth (8 or 16 bits per channel expected)";
    }
    cv::Mat rgb;
    switch (img.channels()) {
      case 1: cv::cvtColor(img, rgb, cv::COLOR_GRAY2RGB); break;
      case 2: {  // grey + alpha
        cv::Mat grey;
        cv::extractChannel(img, grey, 0);
        cv::cvtColor(grey, rgb, cv::COLOR_GRAY2RGB);
        break;
      }
      case 3: cv::cvtColor(img, rgb, cv::COLOR_BGR2RGB); break;
      case 4: cv::cvtColor(img, rgb, cv::COLOR_BGRA2RGB); break;
      default: return "unsupported channel count " + std::to_string(img.channels());
    }
    if (center_crop && rgb.cols != rgb.rows) {
      const int s = std::min(rgb.cols, rgb.rows);
      rgb = rgb(cv::Rect((rgb.cols - s) / 2, (rgb.rows - s) / 2, s, s));
    }
    cv::Mat out(side, side, CV_8UC3, dst);  // writes straight into the cache
    if (rgb.cols == side && rgb.rows == side) {
      rgb.copyTo(out);
    } else {
      const bool shrink = static_cast<int64_t>(rgb.cols) * rgb.rows >
                          static_cast<int64_t>(side) * side;
      cv::resize(rgb, out, cv::Size(side, side), 0, 0,
                 shrink ? cv::INTER_AREA : cv::INTER_LINEAR);
    }
    if (out.data != dst) return "internal: resize reallocated its output";
  } catch (const cv::Exception& e) {
    return std::string("OpenCV: ") + e.what();
  }
  return "";
}

namespace {

// Decodes one file into side x side x 3 RGB bytes at dst; "" or why it was skipped.
std::string decode_into(const std::string& path, int side, bool center_crop, uint8_t* dst) {
  std::vector<uint8_t> bytes;
  const std::string problem = read_file_bytes(path, &bytes);
  if (!problem.empty()) return problem;
  return decode_image_bytes(bytes, side, center_crop, dst);
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

// Regular files under dir/cls at any depth, relative to dir, sorted.
std::vector<std::string> list_files(const std::string& dir, const std::string& cls) {
  std::vector<std::string> files;
  const fs::path root(dir);
  std::error_code ec;
  for (fs::recursive_directory_iterator it(root / cls, ec), end; !ec && it != end;
       it.increment(ec)) {
    std::error_code ec2;
    if (it->is_regular_file(ec2)) files.push_back(it->path().lexically_relative(root).string());
  }
  PDNN_CHECK(!ec, "image folder %s: cannot list class '%s': %s", dir.c_str(), cls.c_str(),
             ec.message().c_str());
  std::sort(files.begin(), files.end());
  return files;
}

// FNV-1a (64 bits) of a class name: the class's split stream, so that a class splits the same
// way whichever other classes are loaded and in whatever order.
uint64_t name_hash(const std::string& name) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (const char ch : name) {
    h ^= static_cast<uint8_t>(ch);
    h *= 0x100000001B3ull;
  }
  return h;
}

std::string with_commas(int64_t v) {
  std::string s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

}  // namespace

Normalization rgb_channel_statistics(const uint8_t* cache, size_t bytes_per_image,
                                     const std::vector<int64_t>& which, int threads) {
  uint64_t sum[3] = {0, 0, 0}, sum_sq[3] = {0, 0, 0};
  const int64_t n = static_cast<int64_t>(which.size());
  const size_t per = bytes_per_image;
#pragma omp parallel num_threads(threads) reduction(+ : sum[:3], sum_sq[:3]) if (n > 64)
  {
    observe_team();
#pragma omp for nowait
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t* p = cache + per * static_cast<size_t>(which[static_cast<size_t>(i)]);
      for (size_t k = 0; k < per; k += 3)
        for (int c = 0; c < 3; ++c) {
          const uint64_t v = p[k + static_cast<size_t>(c)];
          sum[c] += v;
          sum_sq[c] += v * v;
        }
    }
  }
  Normalization norm;
  const double count = static_cast<double>(n) * static_cast<double>(per / 3);
  for (int c = 0; c < 3; ++c) {
    const double mean = static_cast<double>(sum[c]) / count;
    const double var = static_cast<double>(sum_sq[c]) / count - mean * mean;
    norm.mean[c] = static_cast<float>(mean / 255.0);
    // A constant channel (one flat colour everywhere) keeps std 1 rather than dividing by 0.
    norm.std[c] = var > 1e-6 ? static_cast<float>(std::sqrt(var) / 255.0) : 1.f;
  }
  return norm;
}

// ---- ImageFolderDataset ---------------------------------------------------------------------

ImageFolderDataset::ImageFolderDataset(std::shared_ptr<const ImageStore> store,
                                       std::vector<int64_t> images, int size,
                                       const AugmentOptions& augment, const Normalization& norm)
    : store_(std::move(store)), images_(std::move(images)), size_(size), augment_(augment),
      norm_(norm) {
  PDNN_CHECK(store_ != nullptr, "ImageFolderDataset: no image store");
  PDNN_CHECK(size >= 1, "ImageFolderDataset: size %d must be >= 1", size);
}

int ImageFolderDataset::num_classes() const { return static_cast<int>(store_->classes.size()); }

std::string ImageFolderDataset::class_name(int k) const {
  PDNN_CHECK(k >= 0 && k < num_classes(), "image folder: class %d of %d", k, num_classes());
  return store_->classes[static_cast<size_t>(k)];
}

int32_t ImageFolderDataset::label(int64_t i) const {
  return store_->labels[static_cast<size_t>(images_[static_cast<size_t>(i)])];
}

const std::string& ImageFolderDataset::path(int64_t i) const {
  return store_->paths[static_cast<size_t>(images_[static_cast<size_t>(i)])];
}

const uint8_t* ImageFolderDataset::cached(int64_t i) const {
  return store_->image(images_[static_cast<size_t>(i)]);
}

int ImageFolderDataset::cache_size() const { return store_->side; }

void ImageFolderDataset::read(int64_t i, float* dst, std::optional<uint64_t> augment_key) const {
  PDNN_CHECK(i >= 0 && i < size(), "image folder: sample %lld of %lld",
             static_cast<long long>(i), static_cast<long long>(size()));
  const int s = store_->side;
  const AugmentDraw d =
      augment_key ? draw_augment(augment_, *augment_key, s, s) : identity_draw(s, s);
  augment_image(d, norm_, s, s, cached(i), size_, size_, dst);
}

// ---- load_image_folder ----------------------------------------------------------------------

std::vector<std::string> list_image_folder_classes(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    std::error_code ec2;
    if (it->is_directory(ec2)) names.push_back(name);
  }
  PDNN_CHECK(!ec, "image folder %s: cannot list: %s", dir.c_str(), ec.message().c_str());
  std::sort(names.begin(), names.end());
  return names;
}

ImageFolder load_image_folder(const std::string& dir, const ImageFolderOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  PDNN_CHECK(opt.size >= 1, "image folder %s: size %d must be >= 1", dir.c_str(), opt.size);
  PDNN_CHECK(opt.cache_size >= 0, "image folder %s: cache size %d must be >= 0 (0: default)",
             dir.c_str(), opt.cache_size);
  PDNN_CHECK(opt.train_fraction > 0 && opt.train_fraction <= 1,
             "image folder %s: train fraction %g must be in (0, 1]", dir.c_str(),
             opt.train_fraction);
  std::error_code ec;
  PDNN_CHECK(fs::is_directory(dir, ec), "image folder %s: %s", dir.c_str(),
             fs::exists(dir, ec) ? "not a directory" : "no such directory");

  // ---- classes and files
  auto store = std::make_shared<ImageStore>();
  const std::vector<std::string> found = list_image_folder_classes(dir);
  if (opt.classes.empty()) {
    PDNN_CHECK(!found.empty(), "image folder %s: no class subfolders (expected %s/<class>/<images>)",
               dir.c_str(), dir.c_str());
    store->classes = found;
  } else {
    for (size_t k = 0; k < opt.classes.size(); ++k) {
      const std::string& c = opt.classes[k];
      PDNN_CHECK(!c.empty() && c.find('/') == std::string::npos,
                 "image folder %s: bad class name '%s'", dir.c_str(), c.c_str());
      PDNN_CHECK(std::find(opt.classes.begin(), opt.classes.begin() + k, c) ==
                     opt.classes.begin() + k,
                 "image folder %s: class '%s' is listed twice", dir.c_str(), c.c_str());
      PDNN_CHECK(std::find(found.begin(), found.end(), c) != found.end(),
                 "image folder %s: no folder for class '%s' (classes there: %s)", dir.c_str(),
                 c.c_str(), found.empty() ? "none" : join(found, ", ").c_str());
    }
    store->classes = opt.classes;
  }
  const int num_classes = static_cast<int>(store->classes.size());
  std::vector<std::string> files;
  std::vector<int32_t> file_labels;
  for (int k = 0; k < num_classes; ++k) {
    const std::vector<std::string> f = list_files(dir, store->classes[static_cast<size_t>(k)]);
    PDNN_CHECK(!f.empty(), "image folder %s: class '%s' is empty (no files in %s/%s)",
               dir.c_str(), store->classes[static_cast<size_t>(k)].c_str(), dir.c_str(),
               store->classes[static_cast<size_t>(k)].c_str());
    files.insert(files.end(), f.begin(), f.end());
    file_labels.insert(file_labels.end(), f.size(), k);
  }

  // ---- decode, one photo per thread at a time, into per-file slots of the cache
  const int side = opt.cache_size > 0 ? opt.cache_size : (opt.size * 8 + 6) / 7;
  store->side = side;
  const int64_t n_files = static_cast<int64_t>(files.size());
  const size_t per = store->bytes_per_image();
  store->pixels.reset(new uint8_t[per * static_cast<size_t>(n_files)]);
  std::vector<std::string> problems(static_cast<size_t>(n_files));
  const int threads = opt.threads > 0 ? opt.threads : omp_get_num_procs();
  cv::setNumThreads(1);  // see the header: our threads, not OpenCV's pool
  const fs::path root(dir);
#pragma omp parallel num_threads(threads)
  {
    observe_team();
#pragma omp for schedule(dynamic, 4) nowait
    for (int64_t i = 0; i < n_files; ++i) {
      std::string& p = problems[static_cast<size_t>(i)];
      try {
        p = decode_into((root / files[static_cast<size_t>(i)]).string(), side, opt.center_crop,
                        store->pixels.get() + per * static_cast<size_t>(i));
      } catch (const std::exception& e) {  // e.g. std::bad_alloc on a huge image
        p = e.what();
      }
    }
  }

  // ---- keep the readable images (moving them down over the skipped ones' slots)
  ImageFolder out{dir, store->classes,
                  ImageFolderDataset(store, {}, opt.size, opt.augment, Normalization{}),
                  ImageFolderDataset(store, {}, opt.size, AugmentOptions::none(), Normalization{}),
                  {}, {}, Normalization{}, n_files, {}, side, 0, 0};
  std::vector<int64_t> per_class(static_cast<size_t>(num_classes), 0);
  int64_t kept = 0;
  for (int64_t i = 0; i < n_files; ++i) {
    const size_t si = static_cast<size_t>(i);
    if (!problems[si].empty()) {
      out.skipped.push_back({files[si], problems[si]});
      continue;
    }
    if (kept != i)
      std::memcpy(store->pixels.get() + per * static_cast<size_t>(kept),
                  store->pixels.get() + per * si, per);
    store->paths.push_back(files[si]);
    store->labels.push_back(file_labels[si]);
    ++per_class[static_cast<size_t>(file_labels[si])];
    ++kept;
  }
  auto skipped_list = [&](const std::string& cls, size_t max) {
    std::vector<std::string> names;
    for (const SkippedFile& s : out.skipped)
      if (names.size() < max && (cls.empty() || s.path.compare(0, cls.size() + 1, cls + "/") == 0))
        names.push_back(s.path + " (" + s.reason + ")");
    return join(names, ", ");
  };
  for (int k = 0; k < num_classes; ++k) {
    const std::string& c = store->classes[static_cast<size_t>(k)];
    const int64_t n = per_class[static_cast<size_t>(k)];
    PDNN_CHECK(n > 0, "image folder %s: class '%s' has no readable image (skipped: %s)",
               dir.c_str(), c.c_str(), skipped_list(c, 3).c_str());
    PDNN_CHECK(n >= 2 || opt.train_fraction == 1,
               "image folder %s: class '%s' has 1 readable image; a train/test split needs 2",
               dir.c_str(), c.c_str());
  }

  // ---- the split
  std::vector<int64_t> train, test;
  int64_t begin = 0;  // readable images are grouped by class, in path order
  for (int k = 0; k < num_classes; ++k) {
    const int64_t n = per_class[static_cast<size_t>(k)];
    int64_t n_train = std::llround(static_cast<double>(n) * opt.train_fraction);
    n_train = std::max<int64_t>(1, std::min(n_train, opt.train_fraction < 1 ? n - 1 : n));
    Rng rng(Rng::at(opt.split_seed, name_hash(store->classes[static_cast<size_t>(k)])));
    std::vector<int64_t> perm = rng.permutation(n);
    std::sort(perm.begin(), perm.begin() + n_train);
    std::sort(perm.begin() + n_train, perm.end());
    for (int64_t j = 0; j < n; ++j)
      (j < n_train ? train : test).push_back(begin + perm[static_cast<size_t>(j)]);
    out.train_per_class.push_back(n_train);
    out.test_per_class.push_back(n - n_train);
    begin += n;
  }
  out.norm =
      opt.norm ? *opt.norm : rgb_channel_statistics(store->pixels.get(), per, train, threads);
  out.train = ImageFolderDataset(store, std::move(train), opt.size, opt.augment, out.norm);
  out.test = ImageFolderDataset(store, std::move(test), opt.size, AugmentOptions::none(), out.norm);
  out.cache_bytes = per * static_cast<size_t>(n_files);
  out.decode_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  if (opt.log) {
    std::string counts;
    for (int k = 0; k < num_classes; ++k)
      counts += (k ? ", " : "") + store->classes[static_cast<size_t>(k)] + " " +
                std::to_string(out.train_per_class[static_cast<size_t>(k)]) + "/" +
                std::to_string(out.test_per_class[static_cast<size_t>(k)]);
    std::fprintf(opt.log,
                 "image folder %s: %s images in %d classes decoded to %dx%d in %.2f s on %d "
                 "thread%s (cache %.0f MB)\n",
                 dir.c_str(), with_commas(kept).c_str(), num_classes, side, side,
                 out.decode_seconds, threads, threads == 1 ? "" : "s",
                 static_cast<double>(out.cache_bytes) / 1e6);
    std::fprintf(opt.log,
                 "image folder %s: train/test (split seed %llu) %s = %s/%s; RGB mean %.3f %.3f "
                 "%.3f, std %.3f %.3f %.3f (%s)\n",
                 dir.c_str(), static_cast<unsigned long long>(opt.split_seed), counts.c_str(),
                 with_commas(out.train.size()).c_str(), with_commas(out.test.size()).c_str(),
                 out.norm.mean[0], out.norm.mean[1], out.norm.mean[2], out.norm.std[0],
                 out.norm.std[1], out.norm.std[2], opt.norm ? "given" : "of the train split");
    if (!out.skipped.empty())
      std::fprintf(opt.log, "image folder %s: %s\n", dir.c_str(), skipped_summary(out).c_str());
    std::fflush(opt.log);
  }
  return out;
}

std::string skipped_summary(const ImageFolder& f, size_t max_listed) {
  std::string s = "skipped " + std::to_string(f.skipped.size()) + " of " + with_commas(f.files) +
                  " files";
  for (size_t i = 0; i < f.skipped.size() && i < max_listed; ++i)
    s += (i == 0 ? ": " : ", ") + f.skipped[i].path + " (" + f.skipped[i].reason + ")";
  if (f.skipped.size() > max_listed) s += ", ...";
  return s;
}

}  // namespace pdnn
