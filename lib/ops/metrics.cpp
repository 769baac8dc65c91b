// On-device metric accumulators: CPU kernels and dispatch (see metrics.h).
#include "ops/metrics.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"
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

void segmentation_confusion(int64_t n, int64_t k, int64_t plane, const float* z,
                            const int32_t* labels, int64_t* counts, CpuExec e) {
  // An image's counts, added to the total atomically: integer sums, so any order gives the same.
  parallel_for(e, n, PDNN_PAR(n * k * plane), [=](int64_t b) {
    std::vector<int64_t> local(static_cast<size_t>(k * k), 0);
    for (int64_t p = 0; p < plane; ++p) {
      const float* zi = z + b * k * plane + p;
      int64_t best = 0;
      for (int64_t j = 1; j < k; ++j)
        if (zi[j * plane] > zi[best * plane]) best = j;
      ++local[static_cast<size_t>(labels[b * plane + p] * k + best)];
    }
    for (int64_t c = 0; c < k * k; ++c)
      if (local[static_cast<size_t>(c)] != 0) {
#pragma omp atomic
        counts[c] += local[static_cast<size_t>(c)];
      }
  });
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

void segmentation_confusion(Context& ctx, const Tensor& z, const Tensor& labels, Tensor& counts) {
  const char* op = "segmentation_confusion";
  const Shape& s = z.shape();
  PDNN_CHECK((s.rank() == 2 || s.rank() == 4) && s[0] > 0 && s[1] > 0,
             "%s: logits must be a map (N,K,H,W) or (N,K), got %s", op, s.str().c_str());
  const int64_t n = s[0], k = s[1], plane = s.numel() / (n * k);
  PDNN_CHECK(labels.dtype() == DType::I32 && labels.numel() == n * plane &&
                 counts.dtype() == DType::I64 && counts.numel() == k * k,
             "%s: labels (%lld int32, got %s) and counts (%lld int64, got %s) for logits %s", op,
             static_cast<long long>(n * plane), labels.shape().str().c_str(),
             static_cast<long long>(k * k), counts.shape().str().c_str(), s.str().c_str());
  if (labels.device() == Device::CPU) {
    const int32_t* l = labels.data<int32_t>();
    for (int64_t i = 0; i < n * plane; ++i)
      PDNN_CHECK(l[i] >= 0 && l[i] < k, "%s: label %d of pixel %lld is outside [0,%lld)", op,
                 l[i], static_cast<long long>(i), static_cast<long long>(k));
  }
  const Device d = op_device(op, {&z, &labels, &counts});
  PDNN_DISPATCH(ctx, d, segmentation_confusion, n, k, plane, z.data(), labels.data<int32_t>(),
                counts.data<int64_t>());
}

}  // namespace ops
}  // namespace pdnn
