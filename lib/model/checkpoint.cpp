// Checkpoint save/load (format in checkpoint.h). Load reads everything into temporaries and
// validates it before copying, so a bad file never leaves a half-loaded model.
#include "model/checkpoint.h"

#include <zlib.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>
#include <unordered_map>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"

namespace pdnn {

namespace {

const char kMagic[8] = {'P', 'D', 'N', 'N', 'C', 'K', 'P', 'T'};
constexpr uint32_t kMaxName = 4096;

uint32_t crc_update(uint32_t crc, const void* p, size_t n) {
  const Bytef* b = static_cast<const Bytef*>(p);
  while (n > 0) {  // zlib takes uInt lengths: feed large tensors in chunks
    const uInt chunk = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    crc = static_cast<uint32_t>(crc32(crc, b, chunk));
    b += chunk;
    n -= chunk;
  }
  return crc;
}

class Writer {
 public:
  explicit Writer(std::ostream& o) : o_(o), crc_(static_cast<uint32_t>(crc32(0, nullptr, 0))) {}
  void raw(const void* p, size_t n) {
    o_.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
    crc_ = crc_update(crc_, p, n);
    bytes_ += n;
  }
  void u32(uint32_t v) { raw(&v, sizeof v); }
  void i64(int64_t v) { raw(&v, sizeof v); }
  void str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    raw(s.data(), s.size());
  }
  void tensor(const std::string& name, const Tensor& t) {
    str(name);
    u32(static_cast<uint32_t>(t.rank()));
    for (int d = 0; d < t.rank(); ++d) i64(t.shape(d));
    if (t.numel() > 0) raw(t.data(), static_cast<size_t>(t.numel()) * sizeof(float));
  }
  // Trailer: not part of the checksummed bytes.
  void finish() {
    const uint64_t n = bytes_;
    const uint32_t c = crc_;
    o_.write(reinterpret_cast<const char*>(&n), sizeof n);
    o_.write(reinterpret_cast<const char*>(&c), sizeof c);
  }

 private:
  std::ostream& o_;
  uint32_t crc_;
  uint64_t bytes_ = 0;
};

struct FileTensor {
  std::string name;
  Shape shape;
  std::vector<float> data;
};

Shape make_shape(const std::vector<int64_t>& d) {
  switch (d.size()) {
    case 0: return Shape();
    case 1: return Shape{d[0]};
    case 2: return Shape{d[0], d[1]};
    case 3: return Shape{d[0], d[1], d[2]};
    default: return Shape{d[0], d[1], d[2], d[3]};
  }
}

class Reader {
 public:
  explicit Reader(const std::string& path) : path_(path) {
    // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused just below.
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) fail("cannot open it: %s", std::strerror(errno));
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      fail("not a regular file (a folder, FIFO or device)");
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    in_ = ::fdopen(fd, "rb");
    if (!in_) {
      ::close(fd);
      fail("cannot open it: %s", std::strerror(errno));
    }
    size_ = static_cast<uint64_t>(st.st_size);
    crc_ = static_cast<uint32_t>(crc32(0, nullptr, 0));
  }
  ~Reader() { std::fclose(in_); }
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  template <class... A>
  [[noreturn]] void fail(const char* fmt, A... args) const {
    PDNN_FAIL("checkpoint '%s': %s", path_.c_str(), strprintf(fmt, args...).c_str());
  }
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }
  uint64_t size() const { return size_; }
  uint32_t crc() const { return crc_; }

  void raw(void* p, size_t n, const char* what, bool hash = true) {
    if (n > left())
      fail("truncated: %zu bytes of %s needed at offset %llu, but the file has %llu bytes", n,
           what, static_cast<unsigned long long>(pos_), static_cast<unsigned long long>(size_));
    if (n > 0 && std::fread(p, 1, n, in_) != n)
      fail("read error at offset %llu (%s)", static_cast<unsigned long long>(pos_), what);
    if (hash) crc_ = crc_update(crc_, p, n);
    pos_ += n;
  }
  uint32_t u32(const char* what) {
    uint32_t v;
    raw(&v, sizeof v, what);
    return v;
  }
  int64_t i64(const char* what) {
    int64_t v;
    raw(&v, sizeof v, what);
    return v;
  }
  std::string str(const char* what) {
    const uint32_t n = u32(what);
    if (n > kMaxName) fail("corrupt: a %s of %u bytes (limit %u)", what, n, kMaxName);
    std::string s(n, '\0');
    raw(s.data(), n, what);
    return s;
  }

 private:
  std::string path_;
  std::FILE* in_ = nullptr;
  uint64_t size_ = 0, pos_ = 0;
  uint32_t crc_ = 0;
};

// Printable form of a magic that is not ours.
std::string printable(const char* p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += (p[i] >= 32 && p[i] < 127) ? p[i] : '?';
  return s;
}

}  // namespace

namespace {
// The host copy of a tensor that may live on a device (to(CPU): the only way out).
Tensor on_host(const Tensor& t, Context* ctx, const std::string& path) {
  if (t.device() == Device::CPU) return t;
  PDNN_CHECK(ctx != nullptr, "checkpoint '%s': the model is on %s; pass the context",
             path.c_str(), device_name(t.device()));
  return t.to(Device::CPU, *ctx);
}
}  // namespace

void save_checkpoint(const std::string& path, Sequential& model, Optimizer* opt, int64_t epoch,
                     const std::map<std::string, int64_t>& values, Context* ctx) {
  for (const auto& kv : values)
    PDNN_CHECK(kv.first != "epoch" && kv.first != "optim.steps" && kv.first.size() <= kMaxName,
               "save_checkpoint '%s': value name '%s' is reserved or too long", path.c_str(),
               kv.first.c_str());
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const Param& p : model.params())
    tensors.push_back({"param:" + p.name, on_host(*p.value, ctx, path)});
  for (const Param& p : model.buffers())
    tensors.push_back({"buffer:" + p.name, on_host(*p.value, ctx, path)});
  if (opt)
    for (const auto& s : opt->state())
      tensors.push_back({"optim:" + s.first, on_host(*s.second, ctx, path)});

  AtomicFile file(path, /*binary=*/true);
  Writer w(file.stream());
  w.raw(kMagic, sizeof kMagic);
  w.u32(kCheckpointVersion);
  w.u32(static_cast<uint32_t>(values.size() + (opt ? 2 : 1)));
  w.str("epoch");
  w.i64(epoch);
  if (opt) {
    w.str("optim.steps");
    w.i64(opt->steps());
  }
  for (const auto& kv : values) {
    w.str(kv.first);
    w.i64(kv.second);
  }
  w.str(opt ? opt->kind() : std::string());
  w.u32(static_cast<uint32_t>(tensors.size()));
  for (const auto& t : tensors) w.tensor(t.first, t.second);
  w.finish();
  file.commit();
}

CheckpointInfo load_checkpoint(const std::string& path, Sequential& model, Optimizer* opt,
                               Context* ctx) {
  Reader r(path);

  // 1. Read and check the whole file into temporaries.
  char magic[sizeof kMagic];
  r.raw(magic, sizeof magic, "magic");
  if (std::memcmp(magic, kMagic, sizeof kMagic) != 0)
    r.fail("not a pdnn checkpoint (starts with '%s', expected 'PDNNCKPT')",
           printable(magic, sizeof magic).c_str());
  const uint32_t version = r.u32("version");
  if (version != kCheckpointVersion)
    r.fail("format version %u, this pdnn reads version %u", version, kCheckpointVersion);

  CheckpointInfo info;
  std::optional<int64_t> opt_steps;
  bool have_epoch = false;
  const uint32_t n_values = r.u32("value count");
  if (n_values > r.left() / 12) r.fail("corrupt or truncated: %u values cannot fit", n_values);
  for (uint32_t i = 0; i < n_values; ++i) {
    const std::string name = r.str("value name");
    const int64_t v = r.i64("value");
    const bool repeated = name == "epoch"         ? std::exchange(have_epoch, true)
                          : name == "optim.steps" ? opt_steps.has_value()
                                                  : info.values.count(name) > 0;
    if (repeated) r.fail("corrupt: value '%s' appears twice", name.c_str());
    if (name == "epoch") {
      if (v < 0) r.fail("corrupt: field epoch = %lld is negative", static_cast<long long>(v));
      info.epoch = v;
    } else if (name == "optim.steps") {
      if (v < 0)
        r.fail("corrupt: field optim.steps = %lld is negative", static_cast<long long>(v));
      opt_steps = v;
    } else {
      info.values[name] = v;
    }
  }
  info.optimizer = r.str("optimizer kind");

  std::vector<FileTensor> file;
  std::unordered_map<std::string, size_t> by_name;
  const uint32_t n_tensors = r.u32("tensor count");
  if (n_tensors > r.left() / 8) r.fail("corrupt or truncated: %u tensors cannot fit", n_tensors);
  for (uint32_t i = 0; i < n_tensors; ++i) {
    FileTensor t;
    t.name = r.str("tensor name");
    const uint32_t rank = r.u32("tensor rank");
    if (rank > static_cast<uint32_t>(Shape::kMaxRank))
      r.fail("corrupt: tensor '%s' has rank %u (at most %d)", t.name.c_str(), rank,
             Shape::kMaxRank);
    std::vector<int64_t> dims(rank);
    uint64_t numel = 1, bytes = 0;
    for (uint32_t d = 0; d < rank; ++d) {
      dims[d] = r.i64("tensor dims");
      if (dims[d] < 0)
        r.fail("corrupt: tensor '%s' dimension %u of %u is %lld (negative)", t.name.c_str(),
               d + 1, rank, static_cast<long long>(dims[d]));
      // Overflow-checked, and bounded by the file: a wrapped product must never pass.
      if (__builtin_mul_overflow(numel, static_cast<uint64_t>(dims[d]), &numel) ||
          __builtin_mul_overflow(numel, uint64_t{sizeof(float)}, &bytes) || bytes > r.left())
        r.fail("corrupt or truncated: tensor '%s' dimension %u of %u is %lld: the tensor would "
               "need more bytes than the %llu left in the file",
               t.name.c_str(), d + 1, rank, static_cast<long long>(dims[d]),
               static_cast<unsigned long long>(r.left()));
    }
    t.shape = make_shape(dims);
    t.data.resize(numel);
    const std::string what = "tensor '" + t.name + "'";
    r.raw(t.data.data(), bytes, what.c_str());
    if (!by_name.emplace(t.name, file.size()).second)
      r.fail("corrupt: tensor '%s' appears twice", t.name.c_str());
    file.push_back(std::move(t));
  }
  const uint32_t crc = r.crc();
  const uint64_t payload = r.pos();
  uint64_t length = 0;
  uint32_t stored_crc = 0;
  r.raw(&length, sizeof length, "trailer (length)", /*hash=*/false);
  r.raw(&stored_crc, sizeof stored_crc, "trailer (checksum)", /*hash=*/false);
  if (length != payload)
    r.fail("corrupt: trailer says %llu bytes of content, read %llu",
           static_cast<unsigned long long>(length), static_cast<unsigned long long>(payload));
  if (stored_crc != crc) r.fail("corrupt: checksum mismatch (file damaged?)");
  if (r.left() != 0)
    r.fail("corrupt: %llu unexpected bytes after the end", static_cast<unsigned long long>(r.left()));

  // 2. Match against the model (and optimizer): every target found with its shape, nothing
  //    of the model's left over in the file.
  std::vector<std::pair<Tensor*, const FileTensor*>> copies;
  size_t model_tensors_in_file = 0, optim_tensors_in_file = 0;
  for (const FileTensor& t : file) {
    if (t.name.rfind("optim:", 0) == 0)
      ++optim_tensors_in_file;
    else
      ++model_tensors_in_file;
  }
  auto match = [&](const std::string& name, Tensor* target) {
    auto it = by_name.find(name);
    if (it == by_name.end())
      r.fail("has no tensor '%s' (saved from a different model?)", name.c_str());
    const FileTensor& t = file[it->second];
    if (t.shape != target->shape())
      r.fail("tensor '%s' has shape %s in the file, %s in the model", name.c_str(),
             t.shape.str().c_str(), target->shape().str().c_str());
    copies.push_back({target, &t});
  };
  for (const Param& p : model.params()) match("param:" + p.name, p.value);
  for (const Param& p : model.buffers()) match("buffer:" + p.name, p.value);
  if (copies.size() != model_tensors_in_file) {
    for (const FileTensor& t : file) {
      if (t.name.rfind("optim:", 0) == 0) continue;
      bool used = false;
      for (const auto& c : copies) used = used || c.second == &t;
      if (!used) r.fail("has tensor '%s' that the model lacks (saved from a different model?)",
                        t.name.c_str());
    }
  }
  if (opt) {
    if (info.optimizer.empty())
      r.fail("holds no optimizer state; load it without an optimizer to restore weights only");
    if (info.optimizer != opt->kind())
      r.fail("holds %s optimizer state, the optimizer given is %s", info.optimizer.c_str(),
             opt->kind().c_str());
    const auto state = opt->state();
    if (state.size() != optim_tensors_in_file)
      r.fail("holds %zu optimizer state tensors, the %s optimizer has %zu (different settings "
             "or model?)", optim_tensors_in_file, opt->kind().c_str(), state.size());
    for (const auto& s : state) match("optim:" + s.first, s.second);
    if (!opt_steps) r.fail("holds optimizer state but no step count");
  }

  // 3. Everything checked: copy (to the model's device when it is elsewhere).
  for (const auto& c : copies)
    PDNN_CHECK(c.first->device() == Device::CPU || ctx != nullptr,
               "checkpoint '%s': the model is on %s; pass the context", path.c_str(),
               device_name(c.first->device()));
  for (const auto& c : copies) {
    if (c.second->data.empty()) continue;
    if (c.first->device() == Device::CPU) {
      std::memcpy(c.first->data(), c.second->data.data(), c.second->data.size() * sizeof(float));
    } else {
      Tensor host(c.first->shape());
      std::memcpy(host.data(), c.second->data.data(), c.second->data.size() * sizeof(float));
      copy_into(*c.first, host, *ctx);
    }
  }
  if (opt) opt->set_steps(*opt_steps);
  return info;
}

}  // namespace pdnn
