// Normal draws on the GPU (see random.h): the CPU's formula in double, position read from
// device memory so a CUDA graph draws fresh values every replay.
#include "cuda/launch.h"
#include "ops/random.h"

namespace pdnn {
namespace cuda {

namespace {
__global__ void normal_fill_k(int64_t n, float mean, float stddev, uint64_t seed,
                              const int64_t* base, float* y) {
  const uint64_t b = static_cast<uint64_t>(*base);
  const double two_pi = 2.0 * 3.14159265358979323846;  // exactly 2 * M_PI, as the CPU
  PDNN_GRID_LOOP(i, n) {
    const uint64_t k = b + 2 * static_cast<uint64_t>(i);
    const double u1 = 1.0 - rng_to_unit(rng_at(seed, k + 1));
    const double u2 = rng_to_unit(rng_at(seed, k + 2));
    const double z = sqrt(-2.0 * log(u1)) * cos(two_pi * u2);
    y[i] = fmaf(stddev, static_cast<float>(z), mean);
  }
}
}  // namespace

void normal_fill(int64_t n, float mean, float stddev, uint64_t seed, const int64_t* base,
                 float* y, CudaExec e) {
  if (n <= 0) return;
  normal_fill_k<<<blocks_for(n, tpb(e)), tpb(e), 0, stream_of(e)>>>(n, mean, stddev, seed, base,
                                                                     y);
  PDNN_CUDA_LAUNCH_CHECK("normal_fill");
}

}  // namespace cuda
}  // namespace pdnn
