// W1: pi as the integral of 4/(1+x^2) over [0,1] by the trapezoidal rule with n intervals, in
// double. Three variants of the same sum: plain loop, OpenMP threads, OpenMP threads + SIMD.
#pragma once
#include <cstdint>

#include "core/exec.h"

namespace pdnn {
namespace cpu {

// h * (f(0)/2 + f(1)/2 + sum_{i=1}^{n-1} f(i h)), h = 1/n. Error ~ 1/(6 n^2) from the trapezoid
// (for f = 4/(1+x^2): f'(1) - f'(0) = -2, error = h^2/12 * 2).
// Scalar loop, no OpenMP: a double sum is not vectorised without reassociation.
double pi_serial(int64_t n);
// `parallel for reduction` over `threads` threads (static schedule: fixed split, so the same
// thread count gives the same bits); each thread's loop is scalar.
double pi_omp(int64_t n, int threads);
// `parallel for simd reduction`: each thread's loop is vectorised (with AVX2, 4 doubles per
// vdivpd), so it runs at the divider's throughput.
double pi_omp_simd(int64_t n, int threads);

}  // namespace cpu

namespace cuda {
// The same sum on the GPU, in double or (fp32) in float: each thread sums a grid-stride share
// of the points, each block reduces its threads' sums in a tree, one more block reduces the
// blocks' sums, and the result comes back to the host (so the call includes that copy and its
// synchronisation). partials: kPiBlocks doubles of device memory.
constexpr int kPiBlocks = 1056;  // 8 per multiprocessor of an H100 (132)
double pi_trapezoid(int64_t n, bool fp32, double* partials, CudaExec e);
}  // namespace cuda
}  // namespace pdnn
