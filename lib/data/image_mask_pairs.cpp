// Image/mask pair folders: the lists, the checks, decoding photos and masks through OpenCV,
// the samples with their per-pixel targets (image_mask_pairs.h).
#include "data/image_mask_pairs.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <set>

#include "core/error.h"
#include "core/parallel.h"
#include "data/image_decode.h"

namespace pdnn {

namespace fs = std::filesystem;

struct PairStore {
  int side = 0;  // of the cached photos
  std::vector<std::string> classes;
  std::vector<std::string> ids, image_paths;
  std::unique_ptr<uint8_t[]> pixels;         // pairs x side x side x 3, RGB
  std::vector<std::vector<uint8_t>> masks;   // class ids at the photo's size
  std::vector<int> widths, heights;          // the photos' (and masks') stored sizes
  size_t bytes_per_image() const { return static_cast<size_t>(side) * side * 3; }
  const uint8_t* image(int64_t k) const {
    return pixels.get() + static_cast<size_t>(k) * bytes_per_image();
  }
};

namespace {

const char* const kImageExtensions[] = {".jpg", ".jpeg", ".png", ".bmp"};

// Lines of a small text file, trailing white space (and a CR) removed, blank lines dropped.
// Throws naming the file when it cannot be read.
std::vector<std::string> read_lines(const std::string& dir, const std::string& rel) {
  std::ifstream in(fs::path(dir) / rel);
  PDNN_CHECK(in.good(), "image/mask folder %s: cannot read %s", dir.c_str(), rel.c_str());
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (!line.empty()) lines.push_back(line);
  }
  PDNN_CHECK(!in.bad(), "image/mask folder %s: error reading %s", dir.c_str(), rel.c_str());
  return lines;
}

// The first line of an optional file; "" when it does not exist.
std::string first_line(const std::string& dir, const std::string& rel) {
  std::error_code ec;
  if (!fs::exists(fs::path(dir) / rel, ec)) return "";
  const std::vector<std::string> lines = read_lines(dir, rel);
  return lines.empty() ? "" : lines[0];
}

std::string range(int lo, int hi) {
  return lo == hi ? std::to_string(lo) : std::to_string(lo) + "-" + std::to_string(hi);
}

// Reads and checks one mask (PNG, 8-bit, one channel, w x h, values < classes; 0/255 for two
// classes mapped to 0/1) into out. "" or the problem, which names no file (the caller does).
std::string read_mask(const std::string& path, int w, int h, int classes,
                      std::vector<uint8_t>* out, bool* two_tone) {
  std::vector<uint8_t> bytes;
  std::string problem = read_file_bytes(path, &bytes);
  if (!problem.empty()) return problem;
  if (bytes.empty()) return "empty file";
  static const uint8_t png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (bytes.size() < 8 || std::memcmp(bytes.data(), png, 8) != 0)
    return "not a PNG file (masks are PNG: lossless, so class ids survive)";
  problem = check_announced_size(bytes);
  if (!problem.empty()) return problem;
  cv::Mat m;
  try {
    m = cv::imdecode(bytes, cv::IMREAD_UNCHANGED);
  } catch (const cv::Exception& e) {
    return std::string("OpenCV: ") + e.what();
  }
  if (m.empty()) return "cannot decode (corrupt PNG)";
  if (m.channels() != 1)
    return std::to_string(m.channels()) +
           "-channel (colour or palette) mask; a single channel of class ids expected";
  if (m.depth() != CV_8U) return "16-bit mask; 8-bit class ids expected";
  if (m.cols != w || m.rows != h)
    return std::to_string(m.cols) + "x" + std::to_string(m.rows) + " but its photo is " +
           std::to_string(w) + "x" + std::to_string(h);
  std::array<int64_t, 256> count{};
  out->resize(static_cast<size_t>(w) * static_cast<size_t>(h));
  for (int y = 0; y < h; ++y) {
    const uint8_t* row = m.ptr<uint8_t>(y);
    std::memcpy(out->data() + static_cast<size_t>(y) * w, row, static_cast<size_t>(w));
    for (int x = 0; x < w; ++x) ++count[row[x]];
  }
  // A black-and-white mask (a 1-bit PNG reads as 0/255) for two classes: 255 is class 1.
  *two_tone = false;
  if (classes == 2 && count[255] > 0 &&
      count[0] + count[255] == static_cast<int64_t>(w) * static_cast<int64_t>(h)) {
    for (uint8_t& v : *out) v = v == 255 ? 1 : 0;
    *two_tone = true;
    return "";
  }
  std::string bad;
  int listed = 0;
  for (int v = classes; v < 256; ++v) {
    if (count[static_cast<size_t>(v)] == 0) continue;
    if (listed++ < 4)
      bad += (bad.empty() ? "" : ", ") + std::to_string(v) + " (" +
             std::to_string(count[static_cast<size_t>(v)]) + " pixels)";
  }
  if (listed == 0) return "";
  if (listed > 4) bad += ", ...";
  return "values " + bad + " outside the " + std::to_string(classes) + " classes 0.." +
         std::to_string(classes - 1) +
         (classes == 2 ? " (a 2-class mask may instead be black and white: 0 and 255 only)"
                       : "");
}

}  // namespace

// ---- ImageMaskDataset -----------------------------------------------------------------------

ImageMaskDataset::ImageMaskDataset(std::shared_ptr<const PairStore> store,
                                   std::vector<int64_t> pairs, int size,
                                   const AugmentOptions& augment, const Normalization& norm)
    : store_(std::move(store)), pairs_(std::move(pairs)), size_(size), augment_(augment),
      norm_(norm) {
  PDNN_CHECK(store_ != nullptr, "ImageMaskDataset: no store");
  PDNN_CHECK(size >= 1, "ImageMaskDataset: size %d must be >= 1", size);
}

int ImageMaskDataset::num_classes() const { return static_cast<int>(store_->classes.size()); }

std::string ImageMaskDataset::class_name(int k) const {
  PDNN_CHECK(k >= 0 && k < num_classes(), "image/mask folder: class %d of %d", k, num_classes());
  return store_->classes[static_cast<size_t>(k)];
}

const std::string& ImageMaskDataset::id(int64_t i) const {
  return store_->ids[static_cast<size_t>(pairs_[static_cast<size_t>(i)])];
}
const std::string& ImageMaskDataset::image_path(int64_t i) const {
  return store_->image_paths[static_cast<size_t>(pairs_[static_cast<size_t>(i)])];
}
const uint8_t* ImageMaskDataset::cached(int64_t i) const {
  return store_->image(pairs_[static_cast<size_t>(i)]);
}
int ImageMaskDataset::cache_size() const { return store_->side; }
const uint8_t* ImageMaskDataset::mask(int64_t i) const {
  return store_->masks[static_cast<size_t>(pairs_[static_cast<size_t>(i)])].data();
}
int ImageMaskDataset::mask_width(int64_t i) const {
  return store_->widths[static_cast<size_t>(pairs_[static_cast<size_t>(i)])];
}
int ImageMaskDataset::mask_height(int64_t i) const {
  return store_->heights[static_cast<size_t>(pairs_[static_cast<size_t>(i)])];
}

void ImageMaskDataset::read(int64_t i, float* dst, std::optional<uint64_t> augment_key) const {
  read_with_target(i, dst, nullptr, augment_key);
}

void ImageMaskDataset::read_with_target(int64_t i, float* dst, int32_t* target,
                                        std::optional<uint64_t> augment_key) const {
  PDNN_CHECK(i >= 0 && i < size(), "image/mask folder: sample %lld of %lld",
             static_cast<long long>(i), static_cast<long long>(size()));
  const int s = store_->side;
  const AugmentDraw d =
      augment_key ? draw_augment(augment_, *augment_key, s, s) : identity_draw(s, s);
  augment_image(d, norm_, s, s, cached(i), size_, size_, dst);
  if (target)
    augment_mask(d, s, s, mask(i), mask_height(i), mask_width(i), size_, size_, target);
}

// ---- ImageMaskFolder ------------------------------------------------------------------------

std::string ImageMaskFolder::describe() const {
  std::string s = name + ": " + std::to_string(train.size() + test.size()) + " pairs (" +
                  std::to_string(train.size()) + " train, " + std::to_string(test.size()) +
                  " test), " + std::to_string(classes.size()) + " classes; ";
  s += resized.empty() ? "photos " + range(min_width, max_width) + " x " +
                             range(min_height, max_height) + " as stored"
                       : resized;
  s += "; sampled at " + std::to_string(size) + " x " + std::to_string(size);
  if (upsampled > 0)
    s += ": up-sampled (" + std::to_string(upsampled) + " photos below " + std::to_string(size) +
         " px)";
  return s;
}

ImageMaskFolder load_image_mask_folder(const std::string& dir, const ImageMaskOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  const char* d = dir.c_str();
  PDNN_CHECK(opt.size >= 1, "image/mask folder %s: size %d must be >= 1", d, opt.size);
  PDNN_CHECK(opt.cache_size >= 0, "image/mask folder %s: cache size %d must be >= 0 (0: default)",
             d, opt.cache_size);
  PDNN_CHECK(!opt.masks.empty() && opt.masks.find('/') == std::string::npos &&
                 opt.masks[0] != '.',
             "image/mask folder %s: bad mask folder name '%s'", d, opt.masks.c_str());
  std::error_code ec;
  PDNN_CHECK(fs::is_directory(dir, ec), "image/mask folder %s: %s", d,
             fs::exists(dir, ec) ? "not a directory" : "no such directory");
  const fs::path root(dir);
  const std::string& mk = opt.masks;
  PDNN_CHECK(fs::is_directory(root / mk, ec),
             "image/mask folder %s: no mask folder %s/ (ImageMaskOptions::masks)", d, mk.c_str());
  PDNN_CHECK(fs::is_directory(root / "images", ec), "image/mask folder %s: no images/ folder", d);

  // ---- classes, name, lists
  auto store = std::make_shared<PairStore>();
  store->classes = read_lines(dir, mk + "/classes.txt");
  const int num_classes = static_cast<int>(store->classes.size());
  PDNN_CHECK(num_classes >= 2 && num_classes <= 256,
             "image/mask folder %s: %s/classes.txt names %d classes (2..256: 8-bit class ids)", d,
             mk.c_str(), num_classes);
  for (int k = 0; k < num_classes; ++k)
    PDNN_CHECK(std::find(store->classes.begin(), store->classes.begin() + k,
                         store->classes[static_cast<size_t>(k)]) == store->classes.begin() + k,
               "image/mask folder %s: %s/classes.txt names class '%s' twice", d, mk.c_str(),
               store->classes[static_cast<size_t>(k)].c_str());
  ImageMaskFolder out(
      ImageMaskDataset(store, {}, opt.size, opt.augment, Normalization{}),
      ImageMaskDataset(store, {}, opt.size, AugmentOptions::none(), Normalization{}));
  out.dir = dir;
  out.masks = mk;
  out.name = first_line(dir, mk + "/NAME");
  out.resized = first_line(dir, "RESIZED");
  out.classes = store->classes;
  if (out.name.empty()) {
    fs::path folder = fs::absolute(root, ec).lexically_normal();
    if (folder.filename().empty()) folder = folder.parent_path();  // "dir/"
    out.name = folder.filename().string() + (mk == "masks" ? "" : "-" + mk);
  }
  out.size = opt.size;

  std::map<std::string, std::string> listed;  // id -> the list that names it
  std::vector<int64_t> train, test;
  for (const char* list : {"train.txt", "test.txt"}) {
    for (const std::string& id : read_lines(dir, list)) {
      PDNN_CHECK(id.find('/') == std::string::npos && id[0] != '.' &&
                     id.find_first_of(" \t") == std::string::npos,
                 "image/mask folder %s: %s: bad id '%s'", d, list, id.c_str());
      const auto [it, fresh] = listed.emplace(id, list);
      PDNN_CHECK(fresh, "image/mask folder %s: id %s is listed in %s and in %s", d, id.c_str(),
                 it->second.c_str(), list);
      (std::strcmp(list, "train.txt") == 0 ? train : test)
          .push_back(static_cast<int64_t>(store->ids.size()));
      store->ids.push_back(id);
    }
  }
  PDNN_CHECK(!train.empty(), "image/mask folder %s: train.txt lists no id", d);

  // ---- each id's photo (one file named <id> with an image extension) and mask
  std::map<std::string, std::vector<std::string>> photos;  // id -> files in images/
  for (fs::directory_iterator it(root / "images", ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path p = it->path();
    std::string ext = p.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (std::find(std::begin(kImageExtensions), std::end(kImageExtensions), ext) !=
        std::end(kImageExtensions))
      photos[p.stem().string()].push_back("images/" + p.filename().string());
  }
  PDNN_CHECK(!ec, "image/mask folder %s: cannot list images/: %s", d, ec.message().c_str());
  std::vector<std::string> mask_paths;
  for (const std::string& id : store->ids) {
    const auto it = photos.find(id);
    PDNN_CHECK(it != photos.end(), "image/mask folder %s: images/%s.jpg (or .jpeg, .png, .bmp): "
               "no photo for id %s of %s", d, id.c_str(), id.c_str(), listed[id].c_str());
    std::sort(it->second.begin(), it->second.end());
    PDNN_CHECK(it->second.size() == 1, "image/mask folder %s: %s and %s: two photos for id %s",
               d, it->second[0].c_str(), it->second[1].c_str(), id.c_str());
    store->image_paths.push_back(it->second[0]);
    const std::string m = mk + "/" + id + ".png";
    PDNN_CHECK(fs::is_regular_file(root / m, ec), "image/mask folder %s: %s: no mask for %s", d,
               m.c_str(), it->second[0].c_str());
    mask_paths.push_back(m);
  }

  // ---- decode, one pair per thread at a time
  const int side = opt.cache_size > 0 ? opt.cache_size : (opt.size * 8 + 6) / 7;
  store->side = side;
  const int64_t n = static_cast<int64_t>(store->ids.size());
  const size_t per = store->bytes_per_image();
  store->pixels.reset(new uint8_t[per * static_cast<size_t>(n)]);
  store->masks.resize(static_cast<size_t>(n));
  store->widths.assign(static_cast<size_t>(n), 0);
  store->heights.assign(static_cast<size_t>(n), 0);
  std::vector<std::string> problems(static_cast<size_t>(n));
  std::vector<char> two_tone(static_cast<size_t>(n), 0);
  const int threads = opt.threads > 0 ? opt.threads : omp_get_num_procs();
  cv::setNumThreads(1);  // our threads, not OpenCV's pool (image_folder.h)
#pragma omp parallel num_threads(threads)
  {
    observe_team();
#pragma omp for schedule(dynamic, 4) nowait
    for (int64_t i = 0; i < n; ++i) {
      const size_t si = static_cast<size_t>(i);
      std::string& p = problems[si];
      try {
        std::vector<uint8_t> bytes;
        const std::string& photo = store->image_paths[si];
        p = read_file_bytes((root / photo).string(), &bytes);
        if (p.empty())
          p = decode_image_bytes(bytes, side, false, store->pixels.get() + per * si,
                                 &store->widths[si], &store->heights[si]);
        if (!p.empty()) {
          p = photo + ": " + p;
          continue;
        }
        bool tt = false;
        p = read_mask((root / mask_paths[si]).string(), store->widths[si], store->heights[si],
                      num_classes, &store->masks[si], &tt);
        two_tone[si] = tt;
        if (!p.empty()) p = mask_paths[si] + ": " + p;
      } catch (const std::exception& e) {  // e.g. std::bad_alloc on a huge image
        p = store->image_paths[si] + ": " + e.what();
      }
    }
  }
  for (const std::string& p : problems)
    PDNN_CHECK(p.empty(), "image/mask folder %s: %s", d, p.c_str());

  // ---- sizes, statistics, the splits
  out.min_width = *std::min_element(store->widths.begin(), store->widths.end());
  out.max_width = *std::max_element(store->widths.begin(), store->widths.end());
  out.min_height = *std::min_element(store->heights.begin(), store->heights.end());
  out.max_height = *std::max_element(store->heights.begin(), store->heights.end());
  out.train_class_pixels.assign(static_cast<size_t>(num_classes), 0);
  for (int64_t i = 0; i < n; ++i) {
    const size_t si = static_cast<size_t>(i);
    out.upsampled += store->widths[si] < opt.size || store->heights[si] < opt.size;
    out.two_tone_masks += two_tone[si];
    out.cache_bytes += per + store->masks[si].size();
  }
  for (const int64_t k : train)
    for (const uint8_t v : store->masks[static_cast<size_t>(k)])
      ++out.train_class_pixels[v];
  out.norm =
      opt.norm ? *opt.norm : rgb_channel_statistics(store->pixels.get(), per, train, threads);
  out.train = ImageMaskDataset(store, std::move(train), opt.size, opt.augment, out.norm);
  out.test = ImageMaskDataset(store, std::move(test), opt.size, AugmentOptions::none(), out.norm);
  out.cache_size = side;
  out.decode_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  if (opt.log) {
    int64_t total = 0;
    for (const int64_t c : out.train_class_pixels) total += c;
    std::string shares;
    for (int k = 0; k < num_classes && k < 8; ++k) {
      const size_t sk = static_cast<size_t>(k);
      shares += strprintf("%s%s %.1f%%", k ? ", " : "", store->classes[sk].c_str(),
                          100.0 * static_cast<double>(out.train_class_pixels[sk]) /
                              static_cast<double>(std::max<int64_t>(total, 1)));
    }
    if (num_classes > 8) shares += ", ...";
    std::fprintf(opt.log, "image/mask folder %s (%s): %s\n", d, mk.c_str(),
                 out.describe().c_str());
    std::fprintf(opt.log,
                 "image/mask folder %s: decoded to %dx%d in %.2f s on %d thread%s (cache %.0f MB); "
                 "RGB mean %.3f %.3f %.3f, std %.3f %.3f %.3f (%s); train pixels: %s\n",
                 d, side, side, out.decode_seconds, threads, threads == 1 ? "" : "s",
                 static_cast<double>(out.cache_bytes) / 1e6, out.norm.mean[0], out.norm.mean[1],
                 out.norm.mean[2], out.norm.std[0], out.norm.std[1], out.norm.std[2],
                 opt.norm ? "given" : "of the train split", shares.c_str());
    std::fflush(opt.log);
  }
  return out;
}

}  // namespace pdnn
