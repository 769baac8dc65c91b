// AtomicFile: temp file + fsync + rename(2).
#include "core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace pdnn {
namespace {

// Makes the data reach the disk before the rename publishes it.
void fsync_path(const std::string& p) {
  int fd = ::open(p.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  static std::atomic<unsigned> counter{0};
  tmp_ = path_ + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  out_.open(tmp_, std::ios::binary | std::ios::trunc);
  PDNN_CHECK(out_.is_open(), "atomic file: cannot create %s: %s", tmp_.c_str(),
             std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (committed_) return;
  out_.close();
  std::remove(tmp_.c_str());
}

void AtomicFile::commit() {
  PDNN_CHECK(!committed_, "atomic file: %s committed twice", path_.c_str());
  out_.flush();
  const bool ok = out_.good();
  out_.close();
  PDNN_CHECK(ok && !out_.fail(), "atomic file: writing %s failed (disk full?)", tmp_.c_str());
  fsync_path(tmp_);
  PDNN_CHECK(std::rename(tmp_.c_str(), path_.c_str()) == 0, "atomic file: cannot rename %s to %s: %s",
             tmp_.c_str(), path_.c_str(), std::strerror(errno));
  committed_ = true;
  const auto slash = path_.find_last_of('/');
  fsync_path(slash == std::string::npos ? "." : path_.substr(0, slash + 1));
}

}  // namespace pdnn
