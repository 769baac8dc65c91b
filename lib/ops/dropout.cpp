// Dropout: CPU kernels and dispatch (see dropout.h).
#include "ops/dropout.h"

#include "core/parallel.h"
#include "core/rng.h"
#include "ops/basic.h"
#include "ops/dispatch.h"

namespace pdnn {

namespace cpu {

void dropout_forward(int64_t n, float p, uint64_t seed, const int64_t* base, uint64_t skip,
                     const float* x, float* y, float* mask, CpuExec e) {
  const float scale = 1.f / (1.f - p);
  const double pd = p;
  const uint64_t b = static_cast<uint64_t>(*base) + skip;
  // One hash per element (~10 integer ops): worth threads at a lower size than a plain loop.
  parallel_for(e, n, PDNN_PAR(n / 4), [=](int64_t i) {
    const bool keep = Rng::to_unit(Rng::at(seed, b + static_cast<uint64_t>(i) + 1)) >= pd;
    mask[i] = keep ? scale : 0.f;
    y[i] = x[i] * mask[i];
  });
}

void dropout_backward(int64_t n, const float* dy, const float* mask, float* dx, CpuExec e) {
  parallel_for(e, n, PDNN_PAR(n), [=](int64_t i) { dx[i] = dy[i] * mask[i]; });
}

}  // namespace cpu

namespace ops {

void dropout_forward(Context& ctx, float p, const Tensor& x, Tensor& y, Tensor& mask) {
  const Device d = op_device("dropout_forward", {&x, &y, &mask});
  check_same_shape("dropout_forward: y vs x", y.shape(), x.shape());
  check_same_shape("dropout_forward: mask vs x", mask.shape(), x.shape());
  check_same_dtype("dropout_forward", {&x, &y});
  if (x.dtype() == DType::BF16 && d == Device::CPU) fail_bf16_on_cpu("dropout_forward");
  const int64_t n = x.numel();
  const uint64_t seed = ctx.rng().seed();
  const Rng::RowDraw draw = ctx.rng().plan_rows(n, x.rank() > 0 ? x.shape(0) : 1);
  if (d == Device::CPU) {
    const int64_t base = static_cast<int64_t>(ctx.rng().reserve(draw.advance));
    cpu::dropout_forward(n, p, seed, &base, draw.skip, x.data(), y.data(), mask.data(),
                         ctx.cpu_exec());
    return;
  }
  Tensor& counter = ctx.device_rng_counter();
  PDNN_DISPATCH_TYPED(ctx, d, x.dtype(), dropout_forward, n, p, seed, counter.data<int64_t>(),
                      draw.skip, x.data<E>(), y.data<E>(), mask.data());
  counter_add(ctx, counter, static_cast<int64_t>(draw.advance));
  ctx.mirror_rng_advance(draw.advance);
}

void dropout_backward(Context& ctx, const Tensor& dy, const Tensor& mask, Tensor& dx) {
  const Device d = op_device("dropout_backward", {&dy, &mask, &dx});
  check_same_shape("dropout_backward: mask vs dy", mask.shape(), dy.shape());
  check_same_shape("dropout_backward: dx vs dy", dx.shape(), dy.shape());
  check_same_dtype("dropout_backward", {&dy, &dx});
  PDNN_DISPATCH_TYPED(ctx, d, dy.dtype(), dropout_backward, dy.numel(), dy.data<E>(),
                      mask.data(), dx.data<E>());
}

}  // namespace ops
}  // namespace pdnn
