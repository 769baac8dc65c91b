// Message formatting for pdnn::Error.
#include "core/error.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <vector>

namespace pdnn {

std::string strprintf(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  va_list ap2;
  va_copy(ap2, ap);
  int n = std::vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  std::vector<char> buf(static_cast<size_t>(n > 0 ? n : 0) + 1);
  std::vsnprintf(buf.data(), buf.size(), fmt, ap2);
  va_end(ap2);
  return std::string(buf.data());
}

void throw_error(const char* file, int line, const std::string& msg) {
  const char* base = std::strrchr(file, '/');
  // Show the path from lib/ or apps/ on: enough to find the line, short enough to read.
  const char* lib = std::strstr(file, "/lib/");
  const char* app = std::strstr(file, "/apps/");
  const char* shown = lib ? lib + 1 : app ? app + 1 : base ? base + 1 : file;
  throw Error(msg + " [" + shown + ":" + std::to_string(line) + "]");
}

}  // namespace pdnn
