// build/bin/blas_core: the OpenBLAS kernel set pdnn's apps run on this machine, and why
// (lib/run/blas_core.h: an OpenBLAS that misdetects the CPU gets the best core the CPU has).
// `--env` prints the environment assignments pdnn made ("OPENBLAS_CORETYPE=SkylakeX
// PDNN_OPENBLAS_DETECTED=Prescott"; nothing when it made none): the make targets that time
// numpy or PyTorch beside pdnn run both under them, so the Python side gets the same kernels.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "run/blas_core.h"
#include "run/run_flags.h"
#include "run/timing.h"

namespace {

int run(int argc, char** argv) {
  CLI::App app{"Prints the OpenBLAS kernel set pdnn's apps run here, and how it was chosen"};
  bool env = false;
  app.add_flag("--env", env,
               "print the environment assignments pdnn made (empty: none), for `env $(...)`");
  if (const int status = pdnn::parse_flags(app, "blas_core", argc, argv); status >= 0)
    return status;
  // run_app has already executed this process again where pdnn picks the core.
  const pdnn::BlasCoreInputs in = pdnn::blas_core_inputs();
  if (env) {
    const std::string assignments = pdnn::blas_core_env(in);
    if (!assignments.empty()) std::printf("%s\n", assignments.c_str());
  } else {
    std::printf("BLAS %s\n", pdnn::decide_blas_core(in).text.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return pdnn::run_app("blas_core", run, argc, argv); }
