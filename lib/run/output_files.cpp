// Output file checks (output_files.h).
#include "run/output_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace pdnn {
namespace {

namespace fs = std::filesystem;

// What identifies a file: its inode when it exists, else its absolute path with symbolic
// links of the existing part resolved.
struct Identity {
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
  std::string canonical;
};

Identity identify(const std::string& path) {
  Identity id;
  std::error_code ec;
  id.canonical = fs::weakly_canonical(fs::absolute(path), ec).string();
  if (ec) id.canonical = fs::absolute(path).lexically_normal().string();
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    id.exists = true;
    id.dev = st.st_dev;
    id.ino = st.st_ino;
  }
  return id;
}

bool same_file(const Identity& a, const Identity& b) {
  if (a.exists && b.exists) return a.dev == b.dev && a.ino == b.ino;
  return a.canonical == b.canonical;
}

void check_one(const OutputFile& o) {
  const char* f = o.flag.c_str();
  const char* p = o.path.c_str();
  PDNN_CHECK(!o.path.empty(), "%s: empty path", f);
  PDNN_CHECK(o.path.back() != '/', "%s '%s': names a folder; give a file name", f, p);
  struct stat st;
  if (::stat(p, &st) == 0) {
    PDNN_CHECK(S_ISREG(st.st_mode),
               "%s '%s': exists and is not a regular file (%s): name a file", f, p,
               S_ISDIR(st.st_mode)    ? "a folder"
               : S_ISFIFO(st.st_mode) ? "a FIFO"
               : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                                                            : "a socket or other special file");
  } else {
    PDNN_CHECK(errno == ENOENT || errno == ENOTDIR, "%s '%s': %s", f, p, std::strerror(errno));
  }
  // The file is replaced by renaming a temporary beside it: its folder, or the nearest one
  // that exists when folders are still to be created, must be writable.
  fs::path dir = fs::absolute(o.path).parent_path();
  while (::stat(dir.c_str(), &st) != 0) {
    PDNN_CHECK(errno == ENOENT || errno == ENOTDIR, "%s '%s': cannot use folder '%s': %s", f, p,
               dir.c_str(), std::strerror(errno));
    PDNN_CHECK(dir.has_parent_path() && dir.parent_path() != dir, "%s '%s': no folder to write in",
               f, p);
    dir = dir.parent_path();
  }
  PDNN_CHECK(S_ISDIR(st.st_mode), "%s '%s': '%s' is a file, not a folder", f, p, dir.c_str());
  PDNN_CHECK(::access(dir.c_str(), W_OK | X_OK) == 0, "%s '%s': folder '%s' is not writable: %s",
             f, p, dir.c_str(), std::strerror(errno));
}

}  // namespace

void check_output_files(const std::vector<OutputFile>& outputs,
                        const std::vector<std::string>& inputs) {
  std::vector<Identity> ids;
  for (const OutputFile& o : outputs) {
    check_one(o);
    ids.push_back(identify(o.path));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    for (size_t j = 0; j < i; ++j)
      PDNN_CHECK(!same_file(ids[i], ids[j]),
                 "%s '%s' and %s '%s' are the same file: one would overwrite the other; give "
                 "each its own path",
                 outputs[j].flag.c_str(), outputs[j].path.c_str(), outputs[i].flag.c_str(),
                 outputs[i].path.c_str());
    for (const std::string& in : inputs)
      PDNN_CHECK(!same_file(ids[i], identify(in)),
                 "%s '%s' is the input file '%s': writing it would destroy the run's input",
                 outputs[i].flag.c_str(), outputs[i].path.c_str(), in.c_str());
  }
}

void create_parent_folders(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  if (parent.empty()) return;
  std::error_code ec;
  fs::create_directories(parent, ec);
  PDNN_CHECK(!ec, "cannot write '%s': cannot create folder '%s': %s", path.c_str(),
             parent.c_str(), ec.message().c_str());
}

}  // namespace pdnn
