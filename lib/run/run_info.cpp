// RunInfo: gathers the identifying columns of a results row.
#include "run/run_info.h"

#include <unistd.h>

#include <ctime>
#include <fstream>

#include "core/context.h"
#include "core/cuda_state.h"
#include "run/blas_core.h"
#include "pdnn_version.h"

namespace pdnn {
namespace {

std::string read_cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    auto colon = line.find(':');
    if (colon == std::string::npos) break;
    auto start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "unknown" : line.substr(start);
  }
  return "unknown";
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

std::string compiler_name() {
#if defined(__clang__)
  return std::string("Clang ") + __clang_version__;
#elif defined(__GNUC__)
  return std::string("GCC ") + __VERSION__;
#else
  return "unknown";
#endif
}

}  // namespace

std::string iso8601_utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string build_revision() { return PDNN_GIT_REV; }

RunInfo run_info(const Context& ctx) {
  RunInfo r;
  r.git_rev = build_revision();
  r.host = host_name();
  r.timestamp = iso8601_utc_now();
  r.cpu_model = read_cpu_model();
  r.blas_core = blas_core_name();
  r.blas_text = blas_core_text();
  r.compiler = compiler_name();
  r.threads = ctx.threads();
  if (ctx.has_cuda()) r.gpu = ctx.cuda().info().str();
  return r;
}

}  // namespace pdnn
