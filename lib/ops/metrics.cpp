// On-device metric accumulators: CPU kernels and dispatch (see metrics.h).
#include "ops/metrics.h"

#include <algorithm>

#include "core/error.h"
#include "ops/dispatch.h"

namespace pdnn {

namespace cpu {

void prob_mean_into(int64_t n, const float* p, double* acc, CpuExec) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += p[i];
  const double m = n > 0 ? s / static_cast<double>(n) : 0.0;
  acc[0] += m;
  acc[1] = std::max(acc[1], std::min(m, 1.0 - m));
}

void append_row(int64_t k, int64_t rows, const double* acc, double* history, int64_t* row,
                CpuExec) {
  if (*row >= 0 && *row < rows) std::copy(acc, acc + k, history + *row * k);
  ++*row;
}

}  // namespace cpu

namespace ops {

void prob_mean_into(Context& ctx, const Tensor& p, Tensor& acc, int64_t slot) {
  PDNN_CHECK(p.dtype() == DType::F32 && acc.dtype() == DType::F64 && slot >= 0 &&
                 slot + 1 < acc.numel(),
             "prob_mean_into: p (float32) %s, acc (float64) %s with slots %lld and %lld",
             p.shape().str().c_str(), acc.shape().str().c_str(), static_cast<long long>(slot),
             static_cast<long long>(slot + 1));
  const Device d = op_device("prob_mean_into", {&p, &acc});
  PDNN_DISPATCH(ctx, d, prob_mean_into, p.numel(), p.data(), acc.data<double>() + slot);
}

void append_row(Context& ctx, const Tensor& acc, Tensor& history, Tensor& row) {
  PDNN_CHECK(acc.dtype() == DType::F64 && history.dtype() == DType::F64 &&
                 history.rank() == 2 && history.shape(1) <= acc.numel() &&
                 row.dtype() == DType::I64 && row.numel() == 1,
             "append_row: acc (float64) %s, history (float64, rows x k <= acc) %s, row (1) "
             "int64 %s",
             acc.shape().str().c_str(), history.shape().str().c_str(), row.shape().str().c_str());
  const Device d = op_device("append_row", {&acc, &history, &row});
  PDNN_DISPATCH(ctx, d, append_row, history.shape(1), history.shape(0), acc.data<double>(),
                history.data<double>(), row.data<int64_t>());
}

}  // namespace ops
}  // namespace pdnn
