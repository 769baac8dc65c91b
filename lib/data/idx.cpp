// IDX reading and writing (see idx.h). Files are read whole: the largest, MNIST's training
// images, is 47 MB uncompressed.
#include "data/idx.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "core/error.h"

namespace pdnn {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;  // unsigned byte, 3 dimensions
constexpr uint32_t kLabelsMagic = 0x00000801;  // unsigned byte, 1 dimension

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

struct FileBytes {
  std::vector<uint8_t> data;
  bool compressed = false;
};

// Whole file, decompressed when it is gzip (zlib reads plain files through unchanged).
FileBytes read_all(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    PDNN_FAIL("%s: cannot open: %s", path.c_str(), std::strerror(errno));
  if (!S_ISREG(st.st_mode)) PDNN_FAIL("%s: not a regular file", path.c_str());
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) PDNN_FAIL("%s: cannot open: %s", path.c_str(), std::strerror(errno));
  gzbuffer(f, 1 << 17);
  FileBytes out;
  out.data.reserve(static_cast<size_t>(st.st_size));
  constexpr size_t kChunk = 1 << 20;
  for (;;) {
    const size_t old = out.data.size();
    out.data.resize(old + kChunk);
    const int got = gzread(f, out.data.data() + old, static_cast<unsigned>(kChunk));
    if (got < 0) break;
    out.data.resize(old + static_cast<size_t>(got));
    if (got == 0) break;
  }
  int err = Z_OK;
  const char* msg = gzerror(f, &err);
  out.compressed = gzdirect(f) == 0;
  const std::string zmsg = msg ? msg : "";
  gzclose(f);
  if (err != Z_OK && err != Z_STREAM_END) {
    if (err == Z_ERRNO) PDNN_FAIL("%s: read error: %s", path.c_str(), std::strerror(errno));
    PDNN_FAIL("%s: corrupt or truncated gzip data (zlib: %s)", path.c_str(), zmsg.c_str());
  }
  return out;
}

uint32_t be32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

void put_be32(std::vector<uint8_t>& out, uint32_t v) {
  out.push_back(uint8_t(v >> 24));
  out.push_back(uint8_t(v >> 16));
  out.push_back(uint8_t(v >> 8));
  out.push_back(uint8_t(v));
}

const char* size_note(bool compressed) { return compressed ? " after decompression" : ""; }

void check_magic(const std::string& path, const FileBytes& f, uint32_t want, const char* what) {
  if (f.data.size() < 4)
    PDNN_FAIL("%s: too short for an IDX %s file (%zu bytes%s)", path.c_str(), what, f.data.size(),
              size_note(f.compressed));
  const uint32_t magic = be32(f.data.data());
  if (magic != want)
    PDNN_FAIL("%s: not an IDX %s file: magic number 0x%08x, expected 0x%08x", path.c_str(), what,
              magic, want);
}

// Header, then exactly `payload` bytes: anything shorter is truncated, longer has garbage.
void check_length(const std::string& path, const FileBytes& f, size_t header, size_t payload,
                  const std::string& says) {
  const size_t have = f.data.size() - header;
  if (have < payload)
    PDNN_FAIL("%s: truncated: header says %s (%zu bytes), file has %zu%s", path.c_str(),
              says.c_str(), payload, have, size_note(f.compressed));
  if (have > payload)
    PDNN_FAIL("%s: %zu bytes of trailing garbage after %s (%zu bytes)%s", path.c_str(),
              have - payload, says.c_str(), payload, size_note(f.compressed));
}

// Writes bytes to path (gzip when it ends in .gz) through a temporary name, then renames, so
// a crash never leaves a half-written file under the real name.
void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  const std::string tmp = path + ".tmp";
  bool ok;
  if (ends_with(path, ".gz")) {
    gzFile f = gzopen(tmp.c_str(), "wb6");
    if (!f) PDNN_FAIL("%s: cannot create: %s", tmp.c_str(), std::strerror(errno));
    ok = bytes.empty() ||
         gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) == int(bytes.size());
    ok = (gzclose(f) == Z_OK) && ok;
  } else {
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) PDNN_FAIL("%s: cannot create: %s", tmp.c_str(), std::strerror(errno));
    ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
    ok = (std::fclose(f) == 0) && ok;
  }
  if (!ok) {
    std::remove(tmp.c_str());
    PDNN_FAIL("%s: write failed", path.c_str());
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    PDNN_FAIL("%s: cannot rename from %s: %s", path.c_str(), tmp.c_str(), std::strerror(e));
  }
}

// First existing of dir/<base> and dir/<base>.gz, also with the ".idx" spelling.
std::string find_file(const std::string& dir, const std::string& base, const std::string& alt) {
  for (const std::string& b : {base, alt})
    for (const char* ext : {"", ".gz"}) {
      const std::string p = dir + "/" + b + ext;
      if (file_exists(p)) return p;
    }
  PDNN_FAIL("%s: no %s or %s.gz (see datasets/README.md)", dir.c_str(), base.c_str(), base.c_str());
}

LabeledImages load_split(const std::string& dir, const char* prefix, int num_classes) {
  const std::string ip = find_file(dir, std::string(prefix) + "-images-idx3-ubyte",
                                   std::string(prefix) + "-images.idx3-ubyte");
  const std::string lp = find_file(dir, std::string(prefix) + "-labels-idx1-ubyte",
                                   std::string(prefix) + "-labels.idx1-ubyte");
  const IdxImages im = read_idx_images(ip);
  const std::vector<uint8_t> lab = read_idx_labels(lp);
  if (static_cast<int64_t>(lab.size()) != im.n)
    PDNN_FAIL("%s: %lld images but %s has %zu labels", ip.c_str(), static_cast<long long>(im.n),
              lp.c_str(), lab.size());
  LabeledImages s;
  s.images = idx_to_tensor(im);
  s.labels.resize(lab.size());
  for (size_t i = 0; i < lab.size(); ++i) {
    if (lab[i] >= num_classes)
      PDNN_FAIL("%s: label %d at index %zu is outside 0..%d", lp.c_str(), lab[i], i,
                num_classes - 1);
    s.labels[i] = lab[i];
  }
  return s;
}

}  // namespace

IdxImages read_idx_images(const std::string& path) {
  const FileBytes f = read_all(path);
  check_magic(path, f, kImagesMagic, "image");
  if (f.data.size() < 16)
    PDNN_FAIL("%s: truncated IDX image header (%zu of 16 bytes%s)", path.c_str(), f.data.size(),
              size_note(f.compressed));
  IdxImages im;
  im.n = be32(&f.data[4]);
  im.rows = be32(&f.data[8]);
  im.cols = be32(&f.data[12]);
  if (im.n == 0 || im.rows == 0 || im.cols == 0)
    PDNN_FAIL("%s: empty image set: header says %lld images of %lldx%lld", path.c_str(),
              static_cast<long long>(im.n), static_cast<long long>(im.rows),
              static_cast<long long>(im.cols));
  const size_t payload = static_cast<size_t>(im.n * im.rows * im.cols);
  check_length(path, f, 16, payload,
               strprintf("%lld images of %lldx%lld", static_cast<long long>(im.n),
                         static_cast<long long>(im.rows), static_cast<long long>(im.cols)));
  im.pixels.assign(f.data.begin() + 16, f.data.end());
  return im;
}

std::vector<uint8_t> read_idx_labels(const std::string& path) {
  const FileBytes f = read_all(path);
  check_magic(path, f, kLabelsMagic, "label");
  if (f.data.size() < 8)
    PDNN_FAIL("%s: truncated IDX label header (%zu of 8 bytes%s)", path.c_str(), f.data.size(),
              size_note(f.compressed));
  const uint32_t n = be32(&f.data[4]);
  if (n == 0) PDNN_FAIL("%s: empty label set: header says 0 labels", path.c_str());
  check_length(path, f, 8, n, strprintf("%u labels", n));
  return std::vector<uint8_t>(f.data.begin() + 8, f.data.end());
}

void write_idx_images(const std::string& path, const IdxImages& im) {
  PDNN_CHECK(static_cast<int64_t>(im.pixels.size()) == im.n * im.rows * im.cols,
             "write_idx_images: %zu pixels for %lld images of %lldx%lld", im.pixels.size(),
             static_cast<long long>(im.n), static_cast<long long>(im.rows),
             static_cast<long long>(im.cols));
  std::vector<uint8_t> b;
  b.reserve(16 + im.pixels.size());
  put_be32(b, kImagesMagic);
  put_be32(b, static_cast<uint32_t>(im.n));
  put_be32(b, static_cast<uint32_t>(im.rows));
  put_be32(b, static_cast<uint32_t>(im.cols));
  b.insert(b.end(), im.pixels.begin(), im.pixels.end());
  write_bytes(path, b);
}

void write_idx_labels(const std::string& path, const std::vector<uint8_t>& labels) {
  std::vector<uint8_t> b;
  b.reserve(8 + labels.size());
  put_be32(b, kLabelsMagic);
  put_be32(b, static_cast<uint32_t>(labels.size()));
  b.insert(b.end(), labels.begin(), labels.end());
  write_bytes(path, b);
}

Tensor idx_to_tensor(const IdxImages& im) {
  Tensor t(Shape{im.n, 1, im.rows, im.cols});
  float* p = t.data();
  // Division, not multiplication by 1/255, so the values equal numpy's u8 / float32(255).
  for (size_t i = 0; i < im.pixels.size(); ++i) p[i] = static_cast<float>(im.pixels[i]) / 255.f;
  return t;
}

std::string dataset_name(const std::string& dir, const std::string& default_name) {
  std::ifstream in(dir + "/NAME");
  std::string line;
  if (in && std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) return line;
  }
  return default_name;
}

ImageDataset load_idx_dataset(const std::string& dir, const std::string& default_name,
                              int num_classes) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    PDNN_FAIL("%s: no such data folder (run datasets/get_mnist.sh, or pass --data)", dir.c_str());
  ImageDataset d;
  d.name = dataset_name(dir, default_name);
  d.dir = dir;
  d.num_classes = num_classes;
  d.train = load_split(dir, "train", num_classes);
  d.test = load_split(dir, "t10k", num_classes);
  const Shape a = d.train.images.shape(), b = d.test.images.shape();
  if (a.h() != b.h() || a.w() != b.w())
    PDNN_FAIL("%s: training images are %lldx%lld but test images %lldx%lld", dir.c_str(),
              static_cast<long long>(a.h()), static_cast<long long>(a.w()),
              static_cast<long long>(b.h()), static_cast<long long>(b.w()));
  return d;
}

}  // namespace pdnn
