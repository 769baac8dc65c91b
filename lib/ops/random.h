// Normal random numbers from the run's counter-based stream (core/rng.h), the same on the CPU
// and the GPU: element i of a draw that starts at stream position `base` is
//   u1 = 1 - to_unit(at(seed, base + 2i + 1)),  u2 = to_unit(at(seed, base + 2i + 2)),
//   y[i] = fmaf(stddev, float(sqrt(-2 ln u1) cos(2 pi u2)), mean)
// which is exactly what n calls of Rng::normal() followed by init::normal's fmaf give, so a
// host draw, a device draw and scripts/pylib/pdnn_rng.py agree (the GPU's double log/cos are within
// an ulp of glibc's: the float results match but for rare last-bit differences).
// The DCGAN's noise batches are drawn this way inside its CUDA graph (the position lives in
// device memory, as dropout's does).
#pragma once
#include <cstdint>

#include "core/context.h"
#include "core/exec.h"
#include "core/tensor.h"

namespace pdnn {

namespace cpu {
// base: the stream position before the draw (read, not changed). y: n floats.
void normal_fill(int64_t n, float mean, float stddev, uint64_t seed, const int64_t* base,
                 float* y, CpuExec e);
}  // namespace cpu

namespace cuda {
void normal_fill(int64_t n, float mean, float stddev, uint64_t seed, const int64_t* base,
                 float* y, CudaExec e);
}  // namespace cuda

namespace ops {
// Fills t (float32, any shape) with N(mean, stddev^2) values drawn from the context's stream
// (ctx.rng() on the CPU, its device copy on the GPU), advancing it by 2 * t.numel(). Under a
// row shard (data-parallel, Rng::RowShard) t holds this rank's rows of the global batch: they
// get the values one process would draw for them, and the stream moves by the global batch's.
void normal_fill(Context& ctx, Tensor& t, float mean = 0.f, float stddev = 1.f);
}  // namespace ops

}  // namespace pdnn
