// CSV results files that survive crashes: every row re-reads the file (so rows another run
// appended meanwhile are kept), adds the row and rewrites the whole file to a temporary name
// beside it, then renames it into place, so a reader never sees a half-written row. Nothing is
// written before the first row: a run that fails early leaves no header-only file behind.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace pdnn {

class CsvWriter {
 public:
  // Checks, writing nothing: an existing file must be a regular file, and with append = true
  // its header must equal `columns` (throws pdnn::Error naming the file when it differs).
  // append = false: the first row replaces the file's contents.
  CsvWriter(std::string path, std::vector<std::string> columns, bool append = true);

  // One row; values.size() must equal the column count. Fields with a comma, quote, CR or LF
  // are quoted (RFC 4180, quotes doubled). Creates the file (header and row) and its parent
  // folders on the first row. The file is durable when this returns. Returns the number of
  // data rows the file holds now.
  size_t row(const std::vector<std::string>& values);
  // Several rows in one rewrite (one fsync, not one per row: the DCGAN's iteration rows, an
  // epoch's at a time); none written when rows is empty, and none when one has the wrong size.
  size_t add_rows(const std::vector<std::vector<std::string>>& rows);

  // The data rows in the file now (none when it does not exist yet), each split into fields.
  std::vector<std::vector<std::string>> rows() const;
  // Rewrites the file without the data rows for which drop(index, fields) is true (index counts
  // data rows from 0); returns how many were dropped (and writes nothing when none is).
  size_t drop_rows(const std::function<bool(size_t, const std::vector<std::string>&)>& drop);

  const std::string& path() const { return path_; }
  const std::vector<std::string>& columns() const { return columns_; }

 private:
  // False when the file does not exist; throws when it is not a regular file.
  bool exists() const;
  // The file's records (header first), or none when it does not exist or is to be replaced.
  std::vector<std::string> read_records() const;
  void write_all(const std::vector<std::string>& records) const;

  std::string path_;
  std::vector<std::string> columns_;
  std::string header_;
  bool replace_ = false;  // append = false and no row written yet
};

// One CSV field, quoted if needed.
std::string csv_escape(const std::string& field);
// The fields of one CSV record (the inverse of joining csv_escape()d fields with commas).
std::vector<std::string> csv_split(const std::string& record);

// v with `digits` digits after the decimal point ("%.*f"); "nan"/"inf" as printf writes them.
std::string fmt(double v, int digits);

}  // namespace pdnn
