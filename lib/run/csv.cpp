// CsvWriter: header check up front, re-read + whole-file atomic rewrite per row.
#include "run/csv.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "run/output_files.h"

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

std::vector<std::string> csv_split(const std::string& record) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < record.size(); ++i) {
    const char c = record[i];
    if (quoted) {
      if (c == '"' && i + 1 < record.size() && record[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

std::string fmt(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

CsvWriter::CsvWriter(std::string path, std::vector<std::string> columns, bool append)
    : path_(std::move(path)), columns_(std::move(columns)), replace_(!append) {
  PDNN_CHECK(!columns_.empty(), "csv: %s: no columns given", path_.c_str());
  header_ = join_row(columns_);
  // The file's kind and header are checked now, before the run does any work, reading no more
  // than the first line (a path mistyped onto a big file costs nothing).
  if (!exists() || replace_) return;
  std::ifstream in(path_, std::ios::binary);
  PDNN_CHECK(in.good(), "csv: cannot read %s: %s", path_.c_str(), std::strerror(errno));
  std::string first(header_.size() + 2, '\0');
  in.read(first.data(), static_cast<std::streamsize>(first.size()));
  first.resize(static_cast<size_t>(in.gcount()));
  const size_t end = first.find_first_of("\r\n");
  if (end != std::string::npos) first.resize(end);
  PDNN_CHECK(first.empty() || first == header_,
             "csv: %s has header '%s' but this run writes '%s': move the file away or "
             "write to another path",
             path_.c_str(), first.c_str(), header_.c_str());
}

bool CsvWriter::exists() const {
  struct stat st;
  if (::stat(path_.c_str(), &st) != 0) {
    PDNN_CHECK(errno == ENOENT, "csv: cannot use %s: %s", path_.c_str(), std::strerror(errno));
    return false;
  }
  PDNN_CHECK(S_ISREG(st.st_mode),
             "csv: %s exists and is not a regular file (a folder, FIFO or device): name a file",
             path_.c_str());
  return true;
}

std::vector<std::string> CsvWriter::read_records() const {
  if (!exists() || replace_) return {};
  std::ifstream in(path_, std::ios::binary);
  PDNN_CHECK(in.good(), "csv: cannot read %s: %s", path_.c_str(), std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  std::vector<std::string> records = split_records(ss.str());
  if (!records.empty())
    PDNN_CHECK(records[0] == header_,
               "csv: %s has header '%s' but this run writes '%s': move the file away or "
               "write to another path",
               path_.c_str(), records[0].c_str(), header_.c_str());
  return records;
}

size_t CsvWriter::row(const std::vector<std::string>& values) { return add_rows({values}); }

size_t CsvWriter::add_rows(const std::vector<std::vector<std::string>>& rows) {
  for (const std::vector<std::string>& values : rows)
    PDNN_CHECK(values.size() == columns_.size(), "csv: %s: row has %zu values, header has %zu",
               path_.c_str(), values.size(), columns_.size());
  std::vector<std::string> records = read_records();
  if (rows.empty()) return records.empty() ? 0 : records.size() - 1;
  if (records.empty()) records.push_back(header_);
  for (const std::vector<std::string>& values : rows) records.push_back(join_row(values));
  write_all(records);
  replace_ = false;
  return records.size() - 1;
}

std::vector<std::vector<std::string>> CsvWriter::rows() const {
  std::vector<std::vector<std::string>> out;
  const std::vector<std::string> records = read_records();
  for (size_t i = 1; i < records.size(); ++i) out.push_back(csv_split(records[i]));
  return out;
}

size_t CsvWriter::drop_rows(
    const std::function<bool(size_t, const std::vector<std::string>&)>& drop) {
  const std::vector<std::string> records = read_records();
  if (records.empty()) return 0;
  std::vector<std::string> kept{records[0]};
  for (size_t i = 1; i < records.size(); ++i)
    if (!drop(i - 1, csv_split(records[i]))) kept.push_back(records[i]);
  const size_t dropped = records.size() - kept.size();
  if (dropped > 0) write_all(kept);
  return dropped;
}

void CsvWriter::write_all(const std::vector<std::string>& records) const {
  create_parent_folders(path_);
  AtomicFile f(path_);
  std::ostream& os = f.stream();
  for (const std::string& line : records) os << line << '\n';
  f.commit();
}

}  // namespace pdnn
