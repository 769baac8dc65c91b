// Tuning: per-device algorithm choices and their cache file (tuning.h).
#include "core/tuning.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"

namespace pdnn {

namespace {
std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> f;
  size_t start = 0;
  for (size_t tab; (tab = line.find('\t', start)) != std::string::npos; start = tab + 1)
    f.push_back(line.substr(start, tab - start));
  f.push_back(line.substr(start));
  return f;
}
}  // namespace

void Tuning::set_cache_file(const std::string& path, const std::string& device) {
  path_ = path;
  device_ = device;
  other_lines_.clear();
  std::ifstream in(path);
  if (!in) return;  // no file yet: the first choice creates it
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> f = split_tabs(line);
    char* end = nullptr;
    const double ms = f.size() == 4 ? std::strtod(f[3].c_str(), &end) : 0.0;
    PDNN_CHECK(f.size() == 4 && end && *end == '\0' && !f[1].empty() && !f[2].empty(),
               "%s:%d: not an algorithm cache line (device, key, choice, ms separated by tabs); "
               "remove the file to start a new cache", path.c_str(), no);
    if (f[0] != device) {
      other_lines_.push_back(line);
      continue;
    }
    choices_[f[1]] = Choice{f[2], ms, true};
  }
}

const Tuning::Choice* Tuning::lookup(const std::string& key) {
  auto it = choices_.find(key);
  if (it == choices_.end()) return nullptr;
  if (!made_index_.count(key)) {
    made_index_[key] = made_.size();
    made_.emplace_back(key, it->second);
  }
  return &it->second;
}

const Tuning::Choice* Tuning::find(const std::string& key) const {
  auto it = choices_.find(key);
  return it == choices_.end() ? nullptr : &it->second;
}

void Tuning::put(const std::string& key, const std::string& choice, double ms) {
  choices_[key] = Choice{choice, ms, false};
  auto it = made_index_.find(key);
  if (it == made_index_.end()) {
    made_index_[key] = made_.size();
    made_.emplace_back(key, choices_[key]);
  } else {
    made_[it->second].second = choices_[key];
  }
  if (!path_.empty()) save();
}

void Tuning::keep(const std::string& key, const std::string& detail) {
  choices_[key] = Choice{detail, 0.0, false};
  if (!path_.empty()) save();
}

void Tuning::save() const {
  AtomicFile f(path_);
  f.stream() << "# pdnn algorithm cache: device, key, choice, ms (written by pdnn; safe to delete)\n";
  for (const std::string& l : other_lines_) f.stream() << l << '\n';
  char ms[32];
  for (const auto& [key, c] : choices_) {
    std::snprintf(ms, sizeof ms, "%.4f", c.ms);
    f.stream() << device_ << '\t' << key << '\t' << c.choice << '\t' << ms << '\n';
  }
  f.commit();
}

std::string Tuning::summary() const {
  std::ostringstream s;
  char ms[32];
  for (const auto& [key, c] : made_) {
    std::snprintf(ms, sizeof ms, "%.3f ms", c.ms);
    s << "  " << key << " -> " << c.choice << " (" << ms << (c.from_file ? ", cached" : "")
      << ")\n";
  }
  return s.str();
}

}  // namespace pdnn
