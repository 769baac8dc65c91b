// AtomicFile: temporary file + fsync + rename; stale temporaries of killed writers.
#include "core/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace pdnn {
namespace {

// fsync of a file or folder by name; false when it cannot be opened or synced.
bool sync_path(const std::string& p, bool dir) {
  const int fd = ::open(p.c_str(), (dir ? O_RDONLY | O_DIRECTORY : O_WRONLY) | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::fsync(fd) == 0;
  ::close(fd);
  return ok;
}

std::string parent_of(const std::string& path) {
  const std::filesystem::path p(path);
  return p.has_parent_path() ? p.parent_path().string() : std::string(".");
}

}  // namespace

AtomicFile::AtomicFile(const std::string& path, bool binary)
    : path_(path), tmp_(path + ".tmp." + std::to_string(static_cast<long long>(::getpid()))) {
  struct stat st;
  if (::stat(path_.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    PDNN_FAIL("cannot write '%s': it exists and is not a regular file (a folder, FIFO or "
              "device); name a file",
              path_.c_str());
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
  // The data reaches the disk before the rename does: after a power loss the name points at
  // the old file or the complete new one, never at an empty one.
  if (!wrote || out_.fail() || !sync_path(tmp_, false)) {
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
  sync_path(parent_of(path_), true);  // the rename itself; best effort (some file systems refuse)
}

std::vector<std::string> remove_stale_temporaries(const std::string& path) {
  std::vector<std::string> removed;
  const std::filesystem::path p(path);
  const std::string dir = parent_of(path);
  const std::string prefix = p.filename().string() + ".tmp.";
  DIR* d = ::opendir(dir.c_str());
  if (!d) return removed;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos)
      continue;
    const long pid = std::strtol(digits.c_str(), nullptr, 10);
    if (pid <= 0 || pid == static_cast<long>(::getpid())) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // still running
    const std::string full = (std::filesystem::path(dir) / name).string();
    struct stat st;
    if (::lstat(full.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (std::remove(full.c_str()) == 0) removed.push_back(full);
  }
  ::closedir(d);
  return removed;
}

}  // namespace pdnn
