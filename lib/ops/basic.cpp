// fill / zero / counter_add: CPU kernels and dispatch.
#include "ops/basic.h"

#include <cstring>

#include "core/parallel.h"
#include "ops/dispatch.h"

namespace pdnn {

namespace cpu {

void fill(int64_t n, float v, float* y, CpuExec e) {
  parallel_for(e, n, PDNN_PAR(n), [=](int64_t i) { y[i] = v; });
}

void zero_bytes(size_t bytes, void* p, CpuExec) {
  if (bytes > 0) std::memset(p, 0, bytes);
}

void counter_add(int64_t add, int64_t* counter, CpuExec) { *counter += add; }

}  // namespace cpu

namespace ops {

void fill(Context& ctx, Tensor& t, float v) {
  if (t.empty()) return;
  PDNN_DISPATCH(ctx, t.device(), fill, t.numel(), v, t.data());
}

void zero(Context& ctx, Tensor& t) {
  if (t.empty()) return;
  PDNN_DISPATCH(ctx, t.device(), zero_bytes, t.nbytes(), t.raw_data());
}

void counter_add(Context& ctx, Tensor& counter, int64_t add) {
  PDNN_CHECK(counter.numel() == 1, "counter_add: counter %s must hold one value",
             counter.shape().str().c_str());
  PDNN_DISPATCH(ctx, counter.device(), counter_add, add, counter.data<int64_t>());
}

}  // namespace ops
}  // namespace pdnn
