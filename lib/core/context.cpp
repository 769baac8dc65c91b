// Context: thread pool settings, workspace.
#include "core/context.h"

#include <cblas.h>
#include <omp.h>

#include <cstdlib>

#include "core/error.h"

namespace pdnn {

Context::Context(int threads, uint64_t seed, Device dev) : device_(dev), rng_(seed) {
  PDNN_CHECK(dev == Device::CPU, "context: the CUDA backend is not built into this pdnn");
  set_threads(threads);
}

Context::~Context() { std::free(ws_); }

void Context::set_threads(int n) {
  if (n <= 0) n = omp_get_num_procs();
  threads_ = n;
  omp_set_num_threads(n);
  // With the OpenMP build of OpenBLAS this is the same pool; with the pthread build it at
  // least keeps BLAS from starting more threads than we asked for.
  openblas_set_num_threads(n);
}

float* Context::workspace(size_t n_floats) {
  if (n_floats > ws_n_) {
    std::free(ws_);
    size_t bytes = ((n_floats * sizeof(float) + 63) / 64) * 64;
    ws_ = static_cast<float*>(std::aligned_alloc(64, bytes));
    PDNN_CHECK(ws_ != nullptr, "workspace: out of memory allocating %zu bytes", bytes);
    ws_n_ = n_floats;
  }
  return ws_;
}

const char* blas_core_name() { return openblas_get_corename(); }
const char* blas_config() { return openblas_get_config(); }

}  // namespace pdnn
