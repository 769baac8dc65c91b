// Checkpoint save/load (format in checkpoint.h). Load reads everything into temporaries and
// validates it before copying, so a bad file never leaves a half-loaded model.
#include "model/checkpoint.h"

#include <zlib.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
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

namespace {

std::string models_text(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + names[i];
  return s;
}

// Checks the list of models a save or load was given; returns their names.
std::vector<std::string> check_models(const char* what, const std::string& path,
                                      const std::vector<CheckpointModel>& models) {
  PDNN_CHECK(!models.empty(), "%s '%s': no models given", what, path.c_str());
  std::vector<std::string> names;
  for (const CheckpointModel& m : models) {
    PDNN_CHECK(m.model != nullptr, "%s '%s': model '%s' is null", what, path.c_str(),
               m.name.c_str());
    PDNN_CHECK(m.name.size() <= 64 &&
                   std::all_of(m.name.begin(), m.name.end(),
                               [](char c) {
                                 return std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
                                        c == '-';
                               }),
               "%s '%s': model name '%s' must be letters, digits, '_' or '-' (at most 64)", what,
               path.c_str(), m.name.c_str());
    PDNN_CHECK(std::find(names.begin(), names.end(), m.name) == names.end(),
               "%s '%s': model name '%s' given twice", what, path.c_str(), m.name.c_str());
    names.push_back(m.name);
  }
  PDNN_CHECK(models.size() == 1 || std::none_of(names.begin(), names.end(),
                                                [](const std::string& n) { return n.empty(); }),
             "%s '%s': with several models every one needs a name", what, path.c_str());
  return names;
}

// "<name>." for a named model, "" for the single model of a version-1 file.
std::string prefix_of(const std::string& name) { return name.empty() ? "" : name + "."; }

}  // namespace

void save_checkpoint(const std::string& path, Model& model, Optimizer* opt, int64_t epoch,
                     const std::map<std::string, int64_t>& values, Context* ctx) {
  save_checkpoint(path, {CheckpointModel{"", &model, opt}}, epoch, values, ctx);
}

void save_checkpoint(const std::string& path, const std::vector<CheckpointModel>& models,
                     int64_t epoch, const std::map<std::string, int64_t>& values, Context* ctx) {
  check_models("save_checkpoint", path, models);
  const bool named = !models[0].name.empty();
  std::vector<std::pair<std::string, int64_t>> fixed{{"epoch", epoch}};
  for (const CheckpointModel& m : models)
    if (m.opt) fixed.push_back({prefix_of(m.name) + "optim.steps", m.opt->steps()});
  for (const auto& kv : values) {
    bool reserved = false;
    for (const auto& f : fixed) reserved = reserved || f.first == kv.first;
    PDNN_CHECK(!reserved && kv.first != "epoch" && kv.first != "optim.steps" &&
                   kv.first.size() <= kMaxName,
               "save_checkpoint '%s': value name '%s' is reserved or too long", path.c_str(),
               kv.first.c_str());
  }
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const CheckpointModel& m : models) {
    const std::string pre = prefix_of(m.name);
    for (const Param& p : m.model->params())
      tensors.push_back({pre + "param:" + p.name, on_host(*p.value, ctx, path)});
    for (const Param& p : m.model->buffers())
      tensors.push_back({pre + "buffer:" + p.name, on_host(*p.value, ctx, path)});
    if (m.opt)
      for (const auto& st : m.opt->state())
        tensors.push_back({pre + "optim:" + st.first, on_host(*st.second, ctx, path)});
  }

  AtomicFile file(path, /*binary=*/true);
  Writer w(file.stream());
  w.raw(kMagic, sizeof kMagic);
  w.u32(named ? kCheckpointVersionNamed : kCheckpointVersion);
  w.u32(static_cast<uint32_t>(values.size() + fixed.size()));
  for (const auto& f : fixed) {
    w.str(f.first);
    w.i64(f.second);
  }
  for (const auto& kv : values) {
    w.str(kv.first);
    w.i64(kv.second);
  }
  if (named) {
    w.u32(static_cast<uint32_t>(models.size()));
    for (const CheckpointModel& m : models) {
      w.str(m.name);
      w.str(m.opt ? m.opt->kind() : std::string());
    }
  } else {
    w.str(models[0].opt ? models[0].opt->kind() : std::string());
  }
  w.u32(static_cast<uint32_t>(tensors.size()));
  for (const auto& t : tensors) w.tensor(t.first, t.second);
  w.finish();
  file.commit();
}

CheckpointInfo load_checkpoint(const std::string& path, Model& model, Optimizer* opt,
                               Context* ctx) {
  return load_checkpoint(path, {CheckpointModel{"", &model, opt}}, ctx);
}

CheckpointInfo load_checkpoint(const std::string& path, const std::vector<CheckpointModel>& models,
                               Context* ctx) {
  const std::vector<std::string> wanted = check_models("load_checkpoint", path, models);
  Reader r(path);

  // 1. Read and check the whole file into temporaries.
  char magic[sizeof kMagic];
  r.raw(magic, sizeof magic, "magic");
  if (std::memcmp(magic, kMagic, sizeof kMagic) != 0)
    r.fail("not a pdnn checkpoint (starts with '%s', expected 'PDNNCKPT')",
           printable(magic, sizeof magic).c_str());
  const uint32_t version = r.u32("version");
  if (version != kCheckpointVersion && version != kCheckpointVersionNamed)
    r.fail("format version %u, this pdnn reads versions %u and %u", version, kCheckpointVersion,
           kCheckpointVersionNamed);
  const bool named = version == kCheckpointVersionNamed;

  CheckpointInfo info;
  std::map<std::string, int64_t> raw_values;  // everything, the fixed fields included
  bool have_epoch = false;
  const uint32_t n_values = r.u32("value count");
  if (n_values > r.left() / 12) r.fail("corrupt or truncated: %u values cannot fit", n_values);
  for (uint32_t i = 0; i < n_values; ++i) {
    const std::string name = r.str("value name");
    const int64_t v = r.i64("value");
    const bool repeated = name == "epoch" ? std::exchange(have_epoch, true)
                                          : raw_values.count(name) > 0;
    if (repeated) r.fail("corrupt: value '%s' appears twice", name.c_str());
    if (name == "epoch") {
      if (v < 0) r.fail("corrupt: field epoch = %lld is negative", static_cast<long long>(v));
      info.epoch = v;
      continue;
    }
    const std::string steps_suffix = "optim.steps";
    if (v < 0 && name.size() >= steps_suffix.size() &&
        name.compare(name.size() - steps_suffix.size(), steps_suffix.size(), steps_suffix) == 0)
      r.fail("corrupt: field %s = %lld is negative", name.c_str(), static_cast<long long>(v));
    raw_values[name] = v;
  }

  // The models the file holds, with their optimizer kinds.
  std::vector<std::string> file_models;
  std::map<std::string, std::string> kinds;
  if (named) {
    const uint32_t n_models = r.u32("model count");
    if (n_models == 0 || n_models > r.left() / 8)
      r.fail("corrupt or truncated: %u models", n_models);
    for (uint32_t i = 0; i < n_models; ++i) {
      const std::string name = r.str("model name");
      const std::string kind = r.str("optimizer kind");
      if (name.empty() || kinds.count(name)) r.fail("corrupt: model name '%s' empty or repeated",
                                                    name.c_str());
      file_models.push_back(name);
      kinds[name] = kind;
    }
  } else {
    file_models.push_back("");
    kinds[""] = r.str("optimizer kind");
  }
  // Step counts of the optimizers; everything else is the caller's.
  std::map<std::string, int64_t> steps;
  for (const auto& kv : raw_values) {
    bool is_steps = false;
    for (const std::string& m : file_models)
      if (kv.first == prefix_of(m) + "optim.steps") {
        steps[m] = kv.second;
        is_steps = true;
      }
    if (!is_steps) info.values[kv.first] = kv.second;
  }
  info.optimizer = kinds[file_models[0]];

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

  // 2. The models asked for must be the file's kind (one unnamed, or named ones it holds).
  const bool want_named = !wanted[0].empty();
  if (want_named && !named)
    r.fail("holds a single model (format version 1, e.g. an mnist checkpoint); this run needs "
           "the models %s (a multi-model checkpoint, format version 2)",
           models_text(wanted).c_str());
  if (!want_named && named)
    r.fail("holds the models %s (format version 2, e.g. a dcgan checkpoint); this run needs a "
           "single-model checkpoint", models_text(file_models).c_str());
  for (const std::string& w : wanted)
    if (!kinds.count(w))
      r.fail("has no model '%s' (it holds %s)", w.c_str(), models_text(file_models).c_str());

  // 3. Match against each model (and optimizer): every target found with its shape, nothing of
  //    the model's left over in the file.
  std::vector<std::pair<Tensor*, const FileTensor*>> copies;
  std::vector<std::pair<Optimizer*, int64_t>> set_steps;
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
  for (const CheckpointModel& m : models) {
    const std::string pre = prefix_of(m.name);
    const std::string optim_pre = pre + "optim:";
    const std::string label = m.name.empty() ? "the model" : "model " + m.name;
    // Tensors of this model in the file: "<pre>param:", "<pre>buffer:", "<pre>optim:".
    auto ours = [&](const std::string& n, const std::string& kind) {
      return n.compare(0, pre.size() + kind.size(), pre + kind) == 0;
    };
    size_t model_in_file = 0, optim_in_file = 0;
    // In a version-1 file every tensor that is not optimizer state is the model's.
    auto model_tensor = [&](const std::string& n) {
      return named ? ours(n, "param:") || ours(n, "buffer:") : !ours(n, "optim:");
    };
    for (const FileTensor& t : file) {
      if (ours(t.name, "optim:")) ++optim_in_file;
      else if (model_tensor(t.name)) ++model_in_file;
    }
    const size_t first = copies.size();
    for (const Param& p : m.model->params()) match(pre + "param:" + p.name, p.value);
    for (const Param& p : m.model->buffers()) match(pre + "buffer:" + p.name, p.value);
    if (copies.size() - first != model_in_file) {
      for (const FileTensor& t : file) {
        if (!model_tensor(t.name)) continue;
        bool used = false;
        for (size_t c = first; c < copies.size(); ++c) used = used || copies[c].second == &t;
        if (!used)
          r.fail("has tensor '%s' that %s lacks (saved from a different model?)",
                 t.name.c_str(), label.c_str());
      }
    }
    if (m.opt) {
      const std::string& kind = kinds[m.name];
      const std::string whose = m.name.empty() ? "" : " for model " + m.name;
      if (kind.empty())
        r.fail("holds no optimizer state%s; load it without an optimizer to restore weights "
               "only", whose.c_str());
      if (kind != m.opt->kind())
        r.fail("holds %s optimizer state%s, the optimizer given is %s", kind.c_str(),
               whose.c_str(), m.opt->kind().c_str());
      const auto state = m.opt->state();
      if (state.size() != optim_in_file)
        r.fail("holds %zu optimizer state tensors%s, the %s optimizer has %zu (different "
               "settings or model?)", optim_in_file, whose.c_str(), m.opt->kind().c_str(),
               state.size());
      for (const auto& st : state) match(optim_pre + st.first, st.second);
      if (!steps.count(m.name)) r.fail("holds optimizer state%s but no step count", whose.c_str());
      set_steps.push_back({m.opt, steps[m.name]});
    }
  }

  // 4. Everything checked: copy (to the model's device when it is elsewhere).
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
  for (const auto& s : set_steps) s.first->set_steps(s.second);
  return info;
}

}  // namespace pdnn
