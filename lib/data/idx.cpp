// IDX reading and writing (see idx.h). Files are read whole (the largest, MNIST's training
// images, is 47 MB uncompressed), but never more than the header promises.
#include "data/idx.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <string>

#include "core/error.h"

namespace pdnn {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;  // unsigned byte, 3 dimensions
constexpr uint32_t kPlanesMagic = 0x00000804;  // unsigned byte, 4 dimensions (N, C, H, W)
constexpr uint32_t kLabelsMagic = 0x00000801;  // unsigned byte, 1 dimension

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// An IDX file opened for reading, raw or gzip (zlib reads plain files through unchanged), read
// in pieces so that nothing beyond what the header promises is ever held in memory: a small
// gzip that inflates to gigabytes costs what its header claims at most, and that claim is
// checked against the machine's memory first.
class Source {
 public:
  explicit Source(const std::string& path) : path_(path) {
    // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused just below.
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) PDNN_FAIL("%s: cannot open: %s", path.c_str(), std::strerror(errno));
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      PDNN_FAIL("%s: not a regular file (a folder, FIFO or device)", path.c_str());
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    size_ = static_cast<uint64_t>(st.st_size);
    f_ = gzdopen(fd, "rb");
    if (!f_) {
      ::close(fd);
      PDNN_FAIL("%s: cannot open: out of memory", path.c_str());
    }
    gzbuffer(f_, 1 << 17);
  }
  ~Source() { gzclose(f_); }
  Source(const Source&) = delete;
  Source& operator=(const Source&) = delete;

  // Reads up to n bytes into p; fewer only at the end of the (decompressed) data.
  size_t read(uint8_t* p, size_t n) {
    size_t got = 0;
    while (got < n) {
      const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - got, 1u << 30));
      const int r = gzread(f_, p + got, chunk);
      if (r <= 0) {
        check_error();
        break;
      }
      got += static_cast<size_t>(r);
    }
    return got;
  }
  // Reads exactly `want` bytes into `out` (fewer at the end of the data), growing it as the
  // data arrives rather than all at once.
  void read_into(std::vector<uint8_t>& out, size_t want) {
    out.clear();
    size_t cap = std::min<size_t>(want, size_t{16} << 20);
    while (out.size() < want) {
      const size_t old = out.size();
      out.resize(std::min(want, std::max(cap, old)));
      const size_t got = read(out.data() + old, out.size() - old);
      out.resize(old + got);
      if (old + got < std::min(want, std::max(cap, old))) break;
      cap = std::min(want, cap * 2);
    }
  }
  // Bytes left after the payload, counted up to `limit` (so trailing garbage that inflates
  // without end is not read to its end).
  size_t count_rest(size_t limit) {
    uint8_t buf[1 << 14];
    size_t n = 0;
    while (n <= limit) {
      const size_t got = read(buf, sizeof buf);
      if (got == 0) break;
      n += got;
    }
    return n;
  }
  bool compressed() { return gzdirect(f_) == 0; }
  uint64_t file_size() const { return size_; }

 private:
  void check_error() {
    int err = Z_OK;
    const char* msg = gzerror(f_, &err);
    if (err == Z_OK || err == Z_STREAM_END) return;
    if (err == Z_ERRNO) PDNN_FAIL("%s: read error: %s", path_.c_str(), std::strerror(errno));
    PDNN_FAIL("%s: corrupt or truncated gzip data (zlib: %s)", path_.c_str(), msg ? msg : "");
  }

  std::string path_;
  gzFile f_ = nullptr;
  uint64_t size_ = 0;
};

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

// This machine's memory in bytes (0 when unknown).
uint64_t physical_memory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

// The header (magic first) of one of the accepted kinds {magic, header bytes}: throws unless
// the magic is one of them and its whole header is there. Returns the header; *magic its kind.
struct HeaderKind {
  uint32_t magic;
  size_t bytes;
};
std::vector<uint8_t> read_header(const std::string& path, Source& src,
                                 std::initializer_list<HeaderKind> kinds, const char* what,
                                 uint32_t* magic_out = nullptr) {
  std::vector<uint8_t> h(4);
  const size_t got = src.read(h.data(), 4);
  if (got < 4)
    PDNN_FAIL("%s: too short for an IDX %s file (%zu bytes%s)", path.c_str(), what, got,
              size_note(src.compressed()));
  const uint32_t magic = be32(h.data());
  const HeaderKind* kind = nullptr;
  std::string expected;
  for (const HeaderKind& k : kinds) {
    if (k.magic == magic) kind = &k;
    expected += strprintf("%s0x%08x", expected.empty() ? "" : " or ", k.magic);
  }
  if (kind == nullptr)
    PDNN_FAIL("%s: not an IDX %s file: magic number 0x%08x, expected %s", path.c_str(), what,
              magic, expected.c_str());
  h.resize(kind->bytes);
  const size_t rest = src.read(h.data() + 4, kind->bytes - 4);
  if (4 + rest < kind->bytes)
    PDNN_FAIL("%s: truncated IDX %s header (%zu of %zu bytes%s)", path.c_str(), what, 4 + rest,
              kind->bytes, size_note(src.compressed()));
  if (magic_out) *magic_out = magic;
  return h;
}

// Reads the payload the header promises (`payload` bytes, `bytes_per` bytes in memory per
// byte read once converted), checking before any allocation that it can fit in memory and in
// the file, then that the data has exactly that length.
std::vector<uint8_t> read_payload(const std::string& path, Source& src, size_t header,
                                  uint64_t payload, int bytes_per, const std::string& says) {
  const uint64_t mem = physical_memory();
  if (mem > 0 && payload > mem / static_cast<uint64_t>(bytes_per))
    PDNN_FAIL("%s: header says %s: %.1f GiB in memory, more than this machine has (%.1f GiB); "
              "a damaged header?",
              path.c_str(), says.c_str(),
              static_cast<double>(payload) * bytes_per / (1ull << 30),
              static_cast<double>(mem) / (1ull << 30));
  const bool gz = src.compressed();
  const uint64_t in_file = src.file_size() - std::min<uint64_t>(src.file_size(), header);
  if (!gz) {
    // A plain file's length is known: no need to read it to judge it.
    if (in_file < payload)
      PDNN_FAIL("%s: truncated: header says %s (%llu bytes), file has %llu", path.c_str(),
                says.c_str(), static_cast<unsigned long long>(payload),
                static_cast<unsigned long long>(in_file));
    if (in_file > payload)
      PDNN_FAIL("%s: %llu bytes of trailing garbage after %s (%llu bytes)", path.c_str(),
                static_cast<unsigned long long>(in_file - payload), says.c_str(),
                static_cast<unsigned long long>(payload));
  } else if (payload / 1032 > src.file_size() + 64) {
    // Deflate expands at most 1032:1: this file cannot hold what its header says.
    PDNN_FAIL("%s: truncated: header says %s (%llu bytes), more than %llu compressed bytes can "
              "hold",
              path.c_str(), says.c_str(), static_cast<unsigned long long>(payload),
              static_cast<unsigned long long>(src.file_size()));
  }
  std::vector<uint8_t> data;
  src.read_into(data, static_cast<size_t>(payload));
  if (data.size() < payload)
    PDNN_FAIL("%s: truncated: header says %s (%llu bytes), file has %zu%s", path.c_str(),
              says.c_str(), static_cast<unsigned long long>(payload), data.size(),
              size_note(gz));
  constexpr size_t kCountLimit = size_t{1} << 20;
  const size_t rest = src.count_rest(kCountLimit);
  if (rest > kCountLimit)
    PDNN_FAIL("%s: more than %zu bytes of trailing garbage after %s (%llu bytes)%s",
              path.c_str(), kCountLimit, says.c_str(), static_cast<unsigned long long>(payload),
              size_note(gz));
  if (rest > 0)
    PDNN_FAIL("%s: %zu bytes of trailing garbage after %s (%llu bytes)%s", path.c_str(), rest,
              says.c_str(), static_cast<unsigned long long>(payload), size_note(gz));
  return data;
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

LabeledImages load_split(const std::string& dir, const char* prefix, int num_classes,
                         std::vector<std::string>& files) {
  const std::string ip = find_file(dir, std::string(prefix) + "-images-idx3-ubyte",
                                   std::string(prefix) + "-images.idx3-ubyte");
  const std::string lp = find_file(dir, std::string(prefix) + "-labels-idx1-ubyte",
                                   std::string(prefix) + "-labels.idx1-ubyte");
  files.push_back(ip);
  files.push_back(lp);
  const IdxImages im = read_idx_images(ip);
  if (im.channels != 1)
    PDNN_FAIL("%s: %lld channels: this layout holds grey images (one channel)", ip.c_str(),
              static_cast<long long>(im.channels));
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
  Source src(path);
  uint32_t magic = 0;
  const std::vector<uint8_t> h =
      read_header(path, src, {{kImagesMagic, 16}, {kPlanesMagic, 20}}, "image", &magic);
  const bool planes = magic == kPlanesMagic;
  const uint32_t n = be32(&h[4]), c = planes ? be32(&h[8]) : 1,
                 rows = be32(&h[planes ? 12 : 8]), cols = be32(&h[planes ? 16 : 12]);
  const std::string says =
      planes ? strprintf("%u images of %u x %ux%u", n, c, rows, cols)
             : strprintf("%u images of %ux%u", n, rows, cols);
  if (n == 0 || rows == 0 || cols == 0)
    PDNN_FAIL("%s: empty image set: header says %s", path.c_str(), says.c_str());
  if (c != 1 && c != 3)
    PDNN_FAIL("%s: header says %s: %u channels, images have 1 or 3", path.c_str(), says.c_str(),
              c);
  // Three 32-bit fields (and a small fourth): their product can pass 2^64.
  uint64_t payload = 0;
  if (__builtin_mul_overflow(uint64_t{n}, uint64_t{rows}, &payload) ||
      __builtin_mul_overflow(payload, uint64_t{cols}, &payload) ||
      __builtin_mul_overflow(payload, uint64_t{c}, &payload) ||
      payload > static_cast<uint64_t>(INT64_MAX) / sizeof(float))
    PDNN_FAIL("%s: header says %s: the image count times the image size overflows (damaged "
              "header)",
              path.c_str(), says.c_str());
  IdxImages im;
  // In memory: the bytes, then 4 bytes per pixel as float32.
  im.pixels = read_payload(path, src, h.size(), payload, 1 + static_cast<int>(sizeof(float)),
                           says);
  im.n = n;
  im.channels = c;
  im.rows = rows;
  im.cols = cols;
  return im;
}

std::vector<uint8_t> read_idx_labels(const std::string& path) {
  Source src(path);
  const std::vector<uint8_t> h = read_header(path, src, {{kLabelsMagic, 8}}, "label");
  const uint32_t n = be32(&h[4]);
  if (n == 0) PDNN_FAIL("%s: empty label set: header says 0 labels", path.c_str());
  // In memory: the bytes, then an int32 per label.
  return read_payload(path, src, 8, n, 1 + static_cast<int>(sizeof(int32_t)),
                      strprintf("%u labels", n));
}

void write_idx_images(const std::string& path, const IdxImages& im) {
  PDNN_CHECK(im.channels == 1 || im.channels == 3,
             "write_idx_images %s: %lld channels (1 or 3)", path.c_str(),
             static_cast<long long>(im.channels));
  PDNN_CHECK(static_cast<int64_t>(im.pixels.size()) == im.n * im.channels * im.rows * im.cols,
             "write_idx_images: %zu pixels for %lld images of %lld x %lldx%lld", im.pixels.size(),
             static_cast<long long>(im.n), static_cast<long long>(im.channels),
             static_cast<long long>(im.rows), static_cast<long long>(im.cols));
  std::vector<uint8_t> b;
  b.reserve(20 + im.pixels.size());
  put_be32(b, im.channels == 1 ? kImagesMagic : kPlanesMagic);
  put_be32(b, static_cast<uint32_t>(im.n));
  if (im.channels != 1) put_be32(b, static_cast<uint32_t>(im.channels));
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
  Tensor t(Shape{im.n, im.channels, im.rows, im.cols});
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
  d.train = load_split(dir, "train", num_classes, d.files);
  d.test = load_split(dir, "t10k", num_classes, d.files);
  const Shape a = d.train.images.shape(), b = d.test.images.shape();
  if (a.h() != b.h() || a.w() != b.w())
    PDNN_FAIL("%s: training images are %lldx%lld but test images %lldx%lld", dir.c_str(),
              static_cast<long long>(a.h()), static_cast<long long>(a.w()),
              static_cast<long long>(b.h()), static_cast<long long>(b.w()));
  return d;
}

}  // namespace pdnn
