// AtomicFile: write a file so that readers see either the old file or the complete new one,
// never a half-written one: everything goes to "<path>.tmp.<pid>", and commit() renames it
// over <path> (rename is atomic within one file system). Used for checkpoints and CSV files.
#pragma once
#include <fstream>
#include <ostream>
#include <string>

namespace pdnn {

class AtomicFile {
 public:
  // Opens the temporary file; throws pdnn::Error naming it when it cannot be created.
  explicit AtomicFile(const std::string& path, bool binary = false);
  // Removes the temporary file unless commit() succeeded.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  std::ostream& stream() { return out_; }
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return tmp_; }
  // Flushes, closes and renames over path(); throws pdnn::Error (and removes the temporary
  // file) if any write failed or the rename does.
  void commit();

 private:
  std::string path_;
  std::string tmp_;
  std::ofstream out_;
  bool committed_ = false;
};

}  // namespace pdnn
