// AtomicFile: temporary file + rename.
#include "core/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace pdnn {

AtomicFile::AtomicFile(const std::string& path, bool binary)
    : path_(path), tmp_(path + ".tmp." + std::to_string(static_cast<long long>(::getpid()))) {
  out_.open(tmp_, binary ? std::ios::out | std::ios::binary | std::ios::trunc
                         : std::ios::out | std::ios::trunc);
  PDNN_CHECK(out_.is_open(), "cannot write '%s' (creating '%s': %s)", path_.c_str(),
             tmp_.c_str(), std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (committed_) return;
  if (out_.is_open()) out_.close();
  std::remove(tmp_.c_str());
}

void AtomicFile::commit() {
  PDNN_CHECK(!committed_, "AtomicFile '%s': commit() called twice", path_.c_str());
  out_.flush();
  const bool wrote = out_.good();
  out_.close();
  if (!wrote || out_.fail()) {
    std::remove(tmp_.c_str());
    committed_ = true;  // nothing left for the destructor to clean up
    PDNN_FAIL("cannot write '%s': writing '%s' failed (disk full?)", path_.c_str(), tmp_.c_str());
  }
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp_.c_str());
    committed_ = true;
    PDNN_FAIL("cannot write '%s': renaming '%s' over it failed: %s", path_.c_str(), tmp_.c_str(),
              std::strerror(err));
  }
  committed_ = true;
}

}  // namespace pdnn
