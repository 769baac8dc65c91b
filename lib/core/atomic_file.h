// Whole-file atomic writes: write to a temporary name in the same folder, then rename over the
// target, so a crash leaves either the old file or the new one, never half of one.
#pragma once
#include <fstream>
#include <ostream>
#include <string>

namespace pdnn {

class AtomicFile {
 public:
  // Opens "<path>.tmp.<pid>.<n>" beside path (same file system, so rename is atomic).
  explicit AtomicFile(std::string path);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();  // removes the temporary if commit() was not reached

  std::ostream& stream() { return out_; }
  // Flushes, fsyncs and renames the temporary onto path; throws pdnn::Error on any failure.
  void commit();

 private:
  std::string path_, tmp_;
  std::ofstream out_;
  bool committed_ = false;
};

}  // namespace pdnn
