// The OpenBLAS kernel set without being told (blas_core.h).
#include "run/blas_core.h"

#include <strings.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <vector>

#include "core/context.h"

namespace pdnn {
namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// Whether the CPU tier has instructions the core's kernels do not use (an unknown core: no).
bool core_lacks_cpu_tier(const std::string& core, const CpuFeatures& cpu) {
  const BlasIsa have = blas_core_isa(core);
  return have != BlasIsa::Unknown && static_cast<int>(have) < static_cast<int>(cpu.isa);
}

std::string cpu_text(const CpuFeatures& cpu) {
  return std::string("an ") + blas_isa_name(cpu.isa) + " CPU";
}

}  // namespace

const char* blas_isa_name(BlasIsa isa) {
  switch (isa) {
    case BlasIsa::Sse: return "SSE";
    case BlasIsa::Avx: return "AVX";
    case BlasIsa::Avx2: return "AVX2";
    case BlasIsa::Avx512: return "AVX-512";
    default: return "unknown";
  }
}

BlasIsa blas_core_isa(const std::string& core) {
  // OpenBLAS 0.3.21's x86-64 DYNAMIC_ARCH cores (driver/others/dynamic.c, corename[]) by the
  // widest instructions their kernels use; SapphireRapids is 0.3.22's.
  static const struct {
    const char* name;
    BlasIsa isa;
  } kCores[] = {
      {"Katmai", BlasIsa::Sse},        {"Coppermine", BlasIsa::Sse},
      {"Northwood", BlasIsa::Sse},     {"Prescott", BlasIsa::Sse},
      {"Banias", BlasIsa::Sse},        {"Atom", BlasIsa::Sse},
      {"Core2", BlasIsa::Sse},         {"Penryn", BlasIsa::Sse},
      {"Dunnington", BlasIsa::Sse},    {"Nehalem", BlasIsa::Sse},
      {"Athlon", BlasIsa::Sse},        {"Opteron", BlasIsa::Sse},
      {"Opteron(SSE3)", BlasIsa::Sse}, {"Barcelona", BlasIsa::Sse},
      {"Nano", BlasIsa::Sse},          {"Bobcat", BlasIsa::Sse},
      {"Sandybridge", BlasIsa::Avx},   {"Bulldozer", BlasIsa::Avx},
      {"Piledriver", BlasIsa::Avx},    {"Steamroller", BlasIsa::Avx},
      {"Excavator", BlasIsa::Avx},     {"Haswell", BlasIsa::Avx2},
      {"Zen", BlasIsa::Avx2},          {"SkylakeX", BlasIsa::Avx512},
      {"Cooperlake", BlasIsa::Avx512}, {"SapphireRapids", BlasIsa::Avx512},
  };
  for (const auto& c : kCores)
    if (strcasecmp(c.name, core.c_str()) == 0) return c.isa;
  return BlasIsa::Unknown;
}

CpuFeatures cpu_features_from_flags(const std::string& flags) {
  std::istringstream in(flags);
  const std::set<std::string> f{std::istream_iterator<std::string>(in),
                                std::istream_iterator<std::string>()};
  auto has = [&](std::initializer_list<const char*> names) {
    for (const char* n : names)
      if (!f.count(n)) return false;
    return true;
  };
  CpuFeatures c;
  if (has({"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx2", "fma"}))
    c.isa = BlasIsa::Avx512;
  else if (has({"avx2", "fma"}))
    c.isa = BlasIsa::Avx2;
  else if (has({"avx"}))
    c.isa = BlasIsa::Avx;
  c.avx512_bf16 = c.isa == BlasIsa::Avx512 && has({"avx512_bf16"});
  return c;
}

CpuFeatures cpu_features() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0) {
      const auto colon = line.find(':');
      return cpu_features_from_flags(colon == std::string::npos ? "" : line.substr(colon + 1));
    }
  return CpuFeatures{};  // no /proc/cpuinfo: leave OpenBLAS's detection alone
}

std::string best_blas_core(const CpuFeatures& cpu) {
  switch (cpu.isa) {
    case BlasIsa::Avx512: return cpu.avx512_bf16 ? "Cooperlake" : "SkylakeX";
    case BlasIsa::Avx2: return "Haswell";
    case BlasIsa::Avx: return "Sandybridge";
    default: return "";
  }
}

BlasCoreInputs blas_core_inputs() {
  BlasCoreInputs in;
  in.env_core = env_or_empty("OPENBLAS_CORETYPE");
  in.detected = env_or_empty(kBlasDetectedVar);
  in.running = blas_core_name();
  in.cpu = cpu_features();
  return in;
}

BlasCoreDecision decide_blas_core(const BlasCoreInputs& in) {
  BlasCoreDecision d;
  const std::string best = best_blas_core(in.cpu);
  if (!in.env_core.empty() && !in.detected.empty()) {
    // pdnn set the variable (here, or in the make target that started this process).
    d.text = in.running + " (OpenBLAS detected " + in.detected + " on " + cpu_text(in.cpu) +
             "; OPENBLAS_CORETYPE set";
    if (strcasecmp(in.running.c_str(), in.env_core.c_str()) != 0)
      d.text += " to " + in.env_core + ", which this OpenBLAS does not run";
    d.text += ")";
  } else if (!in.env_core.empty()) {
    d.text = in.running + " (OPENBLAS_CORETYPE from the environment";
    if (strcasecmp(in.running.c_str(), in.env_core.c_str()) != 0)
      d.text += ": " + in.env_core + ", which this OpenBLAS does not run";
    else if (core_lacks_cpu_tier(in.running, in.cpu))
      d.text += "; the CPU has " + std::string(blas_isa_name(in.cpu.isa));
    d.text += ")";
  } else if (core_lacks_cpu_tier(in.running, in.cpu) && !best.empty()) {
    if (in.detected.empty()) d.set_core = best;
    // Only reached when the exec failed: say what would have been right.
    d.text = in.running + " (OpenBLAS detected it on " + cpu_text(in.cpu) + "; OPENBLAS_CORETYPE=" +
             best + " runs its kernels)";
  } else {
    d.text = in.running;
  }
  return d;
}

std::string blas_core_text() { return decide_blas_core(blas_core_inputs()).text; }

void ensure_blas_core(const BlasCoreInputs& in) {
  const BlasCoreDecision d = decide_blas_core(in);
  if (d.set_core.empty()) return;
  std::vector<std::string> args;
  {
    std::ifstream cmdline("/proc/self/cmdline", std::ios::binary);
    std::string a;
    while (std::getline(cmdline, a, '\0')) args.push_back(a);
  }
  if (args.empty()) return;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  setenv("OPENBLAS_CORETYPE", d.set_core.c_str(), 1);
  setenv(kBlasDetectedVar, in.running.c_str(), 1);
  std::fflush(nullptr);
  execv("/proc/self/exe", argv.data());
  // Still here: the exec failed. Run on with OpenBLAS's own choice; the header says so.
  unsetenv("OPENBLAS_CORETYPE");
}

void ensure_blas_core() { ensure_blas_core(blas_core_inputs()); }

std::string blas_core_env(const BlasCoreInputs& in) {
  if (in.env_core.empty() || in.detected.empty()) return "";
  return "OPENBLAS_CORETYPE=" + in.env_core + " " + kBlasDetectedVar + "=" + in.detected;
}

}  // namespace pdnn
