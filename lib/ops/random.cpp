// Normal draws: CPU kernel and dispatch (see random.h).
#include "ops/random.h"

#include <cmath>

#include "core/error.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "ops/basic.h"
#include "ops/dispatch.h"

namespace pdnn {

namespace cpu {

void normal_fill(int64_t n, float mean, float stddev, uint64_t seed, const int64_t* base,
                 float* y, CpuExec e) {
  const uint64_t b = static_cast<uint64_t>(*base);
  // A log, a cos and a sqrt per element: threads pay off early.
  parallel_for(e, n, PDNN_PAR(n / 16), [=](int64_t i) {
    const double z = Rng::normal_at(seed, b + 2 * static_cast<uint64_t>(i));
    y[i] = std::fmaf(stddev, static_cast<float>(z), mean);
  });
}

}  // namespace cpu

namespace ops {

void normal_fill(Context& ctx, Tensor& t, float mean, float stddev) {
  PDNN_CHECK(t.dtype() == DType::F32, "normal_fill: tensor %s must be float32",
             t.shape().str().c_str());
  PDNN_CHECK(std::isfinite(mean) && std::isfinite(stddev) && stddev >= 0.f,
             "normal_fill: mean %g and stddev %g must be finite, stddev >= 0", mean, stddev);
  const int64_t n = t.numel();
  if (n == 0) return;
  const uint64_t seed = ctx.rng().seed();
  // Under a row shard this rank's rows draw what they would in one process (Rng::plan_rows);
  // two stream values per element.
  const Rng::RowDraw draw = ctx.rng().plan_rows(n, t.rank() > 0 ? t.shape(0) : 1);
  const int64_t skip = 2 * static_cast<int64_t>(draw.skip);
  const int64_t advance = 2 * static_cast<int64_t>(draw.advance);
  if (t.device() == Device::CPU) {
    const int64_t base =
        static_cast<int64_t>(ctx.rng().reserve(static_cast<uint64_t>(advance))) + skip;
    cpu::normal_fill(n, mean, stddev, seed, &base, t.data(), ctx.cpu_exec());
    return;
  }
  // The device counter is moved past the rows before this rank's, then past the rest: no
  // kernel of its own for a shard (and the same inside a CUDA graph).
  Tensor& counter = ctx.device_rng_counter();
  if (skip > 0) counter_add(ctx, counter, skip);
  PDNN_DISPATCH(ctx, t.device(), normal_fill, n, mean, stddev, seed, counter.data<int64_t>(),
                t.data());
  counter_add(ctx, counter, advance - skip);
  ctx.mirror_rng_advance(static_cast<uint64_t>(advance));
}

}  // namespace ops
}  // namespace pdnn
