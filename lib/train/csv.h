// CSV results files that survive crashes: every row rewrites the whole file to a temporary
// name beside it and renames it into place, so a reader never sees a half-written row.
#pragma once
#include <string>
#include <vector>

namespace pdnn {

class CsvWriter {
 public:
  // Creates parent folders. append = true keeps an existing file's rows when its header equals
  // `columns` (throws pdnn::Error naming the file when it differs); append = false starts the
  // file afresh (header only) at construction.
  CsvWriter(std::string path, std::vector<std::string> columns, bool append = true);

  // One row; values.size() must equal the column count. Fields with a comma, quote, CR or LF
  // are quoted (RFC 4180, quotes doubled). The file is durable when this returns.
  void row(const std::vector<std::string>& values);

  const std::string& path() const { return path_; }
  const std::vector<std::string>& columns() const { return columns_; }

 private:
  void write_all() const;

  std::string path_;
  std::vector<std::string> columns_;
  std::vector<std::string> lines_;  // header and rows, already encoded, without '\n'
};

// One CSV field, quoted if needed.
std::string csv_escape(const std::string& field);

// v with `digits` digits after the decimal point ("%.*f"); "nan"/"inf" as printf writes them.
std::string fmt(double v, int digits);

}  // namespace pdnn
