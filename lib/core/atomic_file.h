// AtomicFile: write a file so that readers see either the old file or the complete new one,
// never a half-written one: everything goes to "<path>.tmp.<pid>", and commit() flushes it to
// disk (fsync) and renames it over <path> (rename is atomic within one file system). Used for
// checkpoints and CSV files. A process killed mid-write leaves its "<path>.tmp.<pid>" behind;
// remove_stale_temporaries() clears those of dead processes.
#pragma once
#include <fstream>
#include <ostream>
#include <string>
#include <vector>

namespace pdnn {

class AtomicFile {
 public:
  // Opens the temporary file; throws pdnn::Error naming the file when it cannot, or when <path>
  // exists and is not a regular file (a FIFO, a device or a folder is never replaced).
  explicit AtomicFile(const std::string& path, bool binary = false);
  // Removes the temporary file unless commit() succeeded.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  std::ostream& stream() { return out_; }
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return tmp_; }
  // Flushes, fsyncs, closes and renames over path(); throws pdnn::Error (and removes the
  // temporary file) if any write failed or the rename does.
  void commit();

 private:
  std::string path_;
  std::string tmp_;
  std::ofstream out_;
  bool committed_ = false;
};

// Removes "<path>.tmp.<pid>" files beside path whose process no longer runs (left by a run
// that was killed while writing path); returns the paths removed. Temporaries of live
// processes (another run writing the same file right now) are left alone.
std::vector<std::string> remove_stale_temporaries(const std::string& path);

}  // namespace pdnn
