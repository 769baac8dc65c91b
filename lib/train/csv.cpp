// CsvWriter: append-or-create with header check, whole-file atomic rewrite per row.
#include "train/csv.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"

namespace pdnn {
namespace {

std::string join_row(const std::vector<std::string>& fields) {
  std::string s;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) s += ',';
    s += csv_escape(fields[i]);
  }
  return s;
}

// Splits a CSV file's text into records (a quoted field may hold newlines), each without its
// line ending.
std::vector<std::string> split_records(const std::string& text) {
  std::vector<std::string> records;
  std::string cur;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"') quoted = !quoted;
    if (!quoted && (c == '\n' || c == '\r')) {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      records.push_back(cur);
      cur.clear();
      continue;
    }
    cur += c;
  }
  if (!cur.empty()) records.push_back(cur);
  return records;
}

}  // namespace

std::string csv_escape(const std::string& field) {
  if (field.find_first_of(",\"\r\n") == std::string::npos) return field;
  std::string s = "\"";
  for (char c : field) {
    if (c == '"') s += '"';
    s += c;
  }
  s += '"';
  return s;
}

std::string fmt(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

CsvWriter::CsvWriter(std::string path, std::vector<std::string> columns, bool append)
    : path_(std::move(path)), columns_(std::move(columns)) {
  PDNN_CHECK(!columns_.empty(), "csv: %s: no columns given", path_.c_str());
  const std::string header = join_row(columns_);
  namespace fs = std::filesystem;
  fs::path p(path_);
  if (p.has_parent_path()) {
    std::error_code ec;
    fs::create_directories(p.parent_path(), ec);
    PDNN_CHECK(!ec, "csv: cannot create folder %s: %s", p.parent_path().c_str(),
               ec.message().c_str());
  }
  if (append && fs::exists(p)) {
    std::ifstream in(path_, std::ios::binary);
    PDNN_CHECK(in.good(), "csv: cannot read %s", path_.c_str());
    std::stringstream ss;
    ss << in.rdbuf();
    std::vector<std::string> records = split_records(ss.str());
    if (!records.empty()) {
      PDNN_CHECK(records[0] == header,
                 "csv: %s has header '%s' but this run writes '%s': move the file away or "
                 "write to another path",
                 path_.c_str(), records[0].c_str(), header.c_str());
      lines_ = std::move(records);
      return;
    }
  }
  lines_.push_back(header);
  write_all();
}

void CsvWriter::row(const std::vector<std::string>& values) {
  PDNN_CHECK(values.size() == columns_.size(), "csv: %s: row has %zu values, header has %zu",
             path_.c_str(), values.size(), columns_.size());
  lines_.push_back(join_row(values));
  write_all();
}

void CsvWriter::write_all() const {
  AtomicFile f(path_);
  std::ostream& os = f.stream();
  for (const std::string& line : lines_) os << line << '\n';
  f.commit();
}

}  // namespace pdnn
