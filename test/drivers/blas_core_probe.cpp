// build/bin/blas_core_probe (tests only): the re-execution of run/blas_core.h with a pretended
// misdetection, on this machine's real OpenBLAS and CPU. OpenBLAS detects the CPU from CPUID,
// which a test cannot change, so `--pretend-detected CORE` makes the first process believe
// OpenBLAS chose CORE; the process then executes itself again with OPENBLAS_CORETYPE set, and
// the new one (which pretends nothing: the marker is set) prints what OpenBLAS really runs:
//   BLAS <the run header's text>
//   running <openblas_get_corename()>
//   execs <how many times main ran in this process>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/context.h"
#include "run/blas_core.h"

int main(int argc, char** argv) {
  std::string pretend;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--pretend-detected") pretend = argv[i + 1];
  // How many times main ran in this process: an environment variable carries it across exec.
  const char* prior = std::getenv("BLAS_CORE_PROBE_EXECS");
  const int execs = (prior ? std::atoi(prior) : 0) + 1;
  setenv("BLAS_CORE_PROBE_EXECS", std::to_string(execs).c_str(), 1);

  pdnn::BlasCoreInputs in = pdnn::blas_core_inputs();
  if (!pretend.empty() && in.detected.empty()) in.running = pretend;
  pdnn::ensure_blas_core(in);
  std::printf("BLAS %s\nrunning %s\nexecs %d\n", pdnn::blas_core_text().c_str(),
              pdnn::blas_core_name(), execs);
  return 0;
}
