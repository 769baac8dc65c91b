// Errors and checks. Every failure becomes a pdnn::Error whose message names the place
// (file:line), the operation and what was expected, so a user sees the cause, not a crash.
#pragma once
#include <stdexcept>
#include <string>

namespace pdnn {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// printf-style formatting into a std::string (used by the check macros and error messages).
std::string strprintf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

[[noreturn]] void throw_error(const char* file, int line, const std::string& msg);

}  // namespace pdnn

// PDNN_CHECK(cond, "conv2d: input has %d channels, layer expects %d", c, c_in_)
#define PDNN_CHECK(cond, ...)                                                      \
  do {                                                                             \
    if (!(cond)) ::pdnn::throw_error(__FILE__, __LINE__, ::pdnn::strprintf(__VA_ARGS__)); \
  } while (0)

#define PDNN_FAIL(...) ::pdnn::throw_error(__FILE__, __LINE__, ::pdnn::strprintf(__VA_ARGS__))
