// The OpenBLAS kernel set a run gets without being told. Debian's OpenBLAS 0.3.21 picks its
// kernels from CPUID in its library constructor, before main, and falls back to its SSE3
// "Prescott" kernels on CPUs it does not know (a Sapphire Rapids VM that calls itself "Intel(R)
// Xeon(R) Processor": sgemm 30 GFLOP/s where SkylakeX's kernels give 157, issue 31). It reads
// OPENBLAS_CORETYPE only in that constructor, so the only way to change a running process's
// kernels is to execute it again with the variable set: every app does that first thing in
// run_app (ensure_blas_core), at most once (the marker kBlasDetectedVar, which also lets the
// new process say what happened). An OPENBLAS_CORETYPE from the environment is kept as it is.
// The decision is a pure function of its inputs, so tests fake the detected core and the CPU.
#pragma once
#include <string>

namespace pdnn {

// Set, with OPENBLAS_CORETYPE, by pdnn when it chose the core: the core OpenBLAS had detected.
inline constexpr const char* kBlasDetectedVar = "PDNN_OPENBLAS_DETECTED";

// The instruction sets an OpenBLAS kernel set uses, or a CPU offers, in OpenBLAS's x86 tiers.
enum class BlasIsa { Unknown = -1, Sse = 0, Avx = 1, Avx2 = 2, Avx512 = 3 };
const char* blas_isa_name(BlasIsa isa);  // "SSE", "AVX", "AVX2", "AVX-512"

// The tier of an OpenBLAS core name (openblas_get_corename()); Unknown for a name not listed.
BlasIsa blas_core_isa(const std::string& core);

// What a CPU offers, from its /proc/cpuinfo flags (the kernel's view: AVX-512 the OS does not
// enable is not listed). AVX-512 counts when SkylakeX's kernels can run: F, CD, BW, DQ, VL.
struct CpuFeatures {
  BlasIsa isa = BlasIsa::Sse;
  bool avx512_bf16 = false;  // Cooperlake's extra (OpenBLAS's sbgemm)
};
CpuFeatures cpu_features_from_flags(const std::string& flags);  // "fpu vme ... avx512f ..."
CpuFeatures cpu_features();  // this machine's, from /proc/cpuinfo ("flags" line)

// The best OpenBLAS core for a CPU: Cooperlake (AVX-512 with BF16), SkylakeX, Haswell,
// Sandybridge; "" for a CPU without AVX (OpenBLAS's detection is as good as any).
std::string best_blas_core(const CpuFeatures& cpu);

struct BlasCoreInputs {
  std::string env_core;  // OPENBLAS_CORETYPE, "" when unset
  std::string detected;  // kBlasDetectedVar, "" when unset
  std::string running;   // the core OpenBLAS runs, openblas_get_corename()
  CpuFeatures cpu;
};
// This process's inputs: its environment, OpenBLAS and /proc/cpuinfo.
BlasCoreInputs blas_core_inputs();

struct BlasCoreDecision {
  std::string set_core;  // not empty: execute again with OPENBLAS_CORETYPE=set_core
  std::string text;      // what the run header says after "BLAS ", the running core first
};
// Acts only when the environment names no core, pdnn has not acted already, and the running
// core lacks an instruction tier the CPU has (an unknown core name is left alone).
BlasCoreDecision decide_blas_core(const BlasCoreInputs& in);

// This process's header text, e.g. "SkylakeX (OpenBLAS detected Prescott on an AVX-512 CPU;
// OPENBLAS_CORETYPE set)".
std::string blas_core_text();

// Executes /proc/self/exe again, with its original arguments (/proc/self/cmdline: a driver may
// have rewritten argv), OPENBLAS_CORETYPE and kBlasDetectedVar set, when decide_blas_core(in)
// says so; returns only when it did not (nothing to do, or the exec failed: then the variables
// are taken back and the header says which core would have been right). Call it before
// anything is printed or any thread started.
void ensure_blas_core(const BlasCoreInputs& in);
void ensure_blas_core();  // with blas_core_inputs()

// The environment assignments pdnn made ("OPENBLAS_CORETYPE=SkylakeX
// PDNN_OPENBLAS_DETECTED=Prescott"), "" when it made none: what `build/bin/blas_core --env`
// prints, so that a make target gives its Python side (numpy, PyTorch: the same OpenBLAS) the
// kernels pdnn runs.
std::string blas_core_env(const BlasCoreInputs& in);

}  // namespace pdnn
