// Casts float32 <-> bfloat16: the CPU twins and the dispatch (cast.h).
#include "ops/cast.h"

#include "core/parallel.h"
#include "ops/dispatch.h"
#include "ops/kit/round.h"

namespace pdnn {

namespace cpu {

void cast_to_bf16(int64_t n, const float* x, bf16* y, CpuExec e) {
  parallel_for(e, n, PDNN_PAR(n), [=](int64_t i) { y[i] = kit::from_f32<bf16>(x[i]); });
}

void cast_to_f32(int64_t n, const bf16* x, float* y, CpuExec e) {
  parallel_for(e, n, PDNN_PAR(n), [=](int64_t i) { y[i] = kit::to_f32(x[i]); });
}

}  // namespace cpu

namespace ops {

void cast(Context& ctx, const Tensor& x, Tensor& y) {
  PDNN_CHECK(x.numel() == y.numel(), "cast: x %s, y %s hold different numbers of elements",
             x.shape().str().c_str(), y.shape().str().c_str());
  const Device d = op_device("cast", {&x, &y});
  if (x.empty()) return;
  if (x.dtype() == DType::F32 && y.dtype() == DType::BF16) {
    PDNN_DISPATCH(ctx, d, cast_to_bf16, x.numel(), x.data<float>(), y.data<bf16>());
    return;
  }
  PDNN_CHECK(x.dtype() == DType::BF16 && y.dtype() == DType::F32,
             "cast: %s to %s: only float32 <-> bfloat16", dtype_name(x.dtype()),
             dtype_name(y.dtype()));
  PDNN_DISPATCH(ctx, d, cast_to_f32, x.numel(), x.data<bf16>(), y.data<float>());
}

void refresh_bf16_copy(Context& ctx, const Tensor& values, Tensor& copy) {
  PDNN_CHECK(values.dtype() == DType::F32,
             "refresh_bf16_copy: the parameter buffer is %s, not float32",
             dtype_name(values.dtype()));
  copy.resize(values.shape(), DType::BF16, values.device(), ctx);
  cast(ctx, values, copy);
}

}  // namespace ops
}  // namespace pdnn
