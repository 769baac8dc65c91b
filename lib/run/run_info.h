// What identifies a results row: revision, machine, time, BLAS core, compiler, threads.
// Every app and benchmark stamps its CSV rows with these so a number can be traced to a build.
#pragma once
#include <string>

namespace pdnn {

class Context;

struct RunInfo {
  std::string git_rev;    // PDNN_GIT_REV at build time ("-dirty" when uncommitted changes)
  std::string host;       // gethostname()
  std::string timestamp;  // ISO 8601 UTC, e.g. 2024-05-01T12:34:56Z
  std::string cpu_model;  // "model name" from /proc/cpuinfo, "unknown" if absent
  std::string blas_core;  // OpenBLAS kernel set, e.g. Haswell, Zen
  std::string blas_text;  // for the run header: the core and how it was chosen (blas_core.h)
  std::string compiler;   // e.g. "GCC 12.2.0"
  int threads = 1;        // ctx.threads()
  std::string gpu;        // the context's GPU (name, memory, compute capability, driver), or ""
};

RunInfo run_info(const Context& ctx);

// PDNN_GIT_REV of this build (RunInfo::git_rev without the rest).
std::string build_revision();

// The current time as ISO 8601 UTC (second resolution).
std::string iso8601_utc_now();

}  // namespace pdnn
