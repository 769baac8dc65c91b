// Loss kernels and metric accumulators: CPU kernels and dispatch (see loss.h).
#include "ops/loss.h"

#include <algorithm>
#include <cmath>

#include "core/parallel.h"
#include "ops/dispatch.h"

namespace pdnn {

namespace cpu {

namespace {
// Sums f(i) over each chunk in double; chunks in parallel, each summed in index order.
template <typename F>
void chunk_sums(CpuExec e, float* parts, int64_t n, F f) {
  const int64_t chunks = loss_chunks(n);
  parallel_for(e, chunks, PDNN_PAR(n), [=](int64_t c) {
    const int64_t end = std::min(n, (c + 1) * kLossChunk);
    double s = 0.0;
    for (int64_t i = c * kLossChunk; i < end; ++i) s += f(i);
    parts[c] = static_cast<float>(s);
  });
}
}  // namespace

void softmax_cross_entropy_forward(int64_t n, int64_t k, const float* z, const int32_t* labels,
                                   float* probs, float* row_loss, CpuExec e) {
  parallel_for(e, n, PDNN_PAR(n * k), [=](int64_t i) {
    const float* zi = z + i * k;
    float* pi = probs + i * k;
    float m = zi[0];
    for (int64_t j = 1; j < k; ++j) m = zi[j] > m ? zi[j] : m;
    double sum = 0.0;
    for (int64_t j = 0; j < k; ++j) {
      pi[j] = std::exp(zi[j] - m);
      sum += pi[j];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t j = 0; j < k; ++j) pi[j] *= inv;
    // log-sum-exp form: exact even when the label's probability underflows to 0 in float.
    row_loss[i] = static_cast<float>(std::log(sum) - (static_cast<double>(zi[labels[i]]) - m));
  });
}

void softmax_cross_entropy_backward(int64_t n, int64_t k, float scale, const float* probs,
                                    const int32_t* labels, float* dz, CpuExec e) {
  parallel_for(e, n, PDNN_PAR(n * k), [=](int64_t i) {
    for (int64_t j = 0; j < k; ++j) dz[i * k + j] = probs[i * k + j] * scale;
    dz[i * k + labels[i]] -= scale;
  });
}

void classifier_metrics(int64_t n, int64_t k, const float* z, const int32_t* labels,
                        const float* row_loss, double* acc, CpuExec) {
  double loss = 0.0;
  int64_t correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    loss += row_loss[i];
    int64_t best = 0;
    for (int64_t j = 1; j < k; ++j)
      if (z[i * k + j] > z[i * k + best]) best = j;  // strict: ties keep the lowest index
    correct += best == labels[i];
  }
  acc[0] += loss;
  acc[1] += static_cast<double>(correct);
  acc[2] += static_cast<double>(n);
}

void binary_cross_entropy_forward(int64_t n, const float* p, const float* t, float* parts,
                                  CpuExec e) {
  chunk_sums(e, parts, n, [=](int64_t i) {
    const double lp = std::max(std::log(static_cast<double>(p[i])), -100.0);
    const double lq = std::max(std::log1p(-static_cast<double>(p[i])), -100.0);
    return -(t[i] * lp + (1.0 - t[i]) * lq);
  });
}

void binary_cross_entropy_backward(int64_t n, float scale, const float* p, const float* t,
                                   float* dp, CpuExec e) {
  // ATen's guard: the denominator never drops below 1e-12, so p = 0 or 1 gives a large but
  // finite gradient.
  constexpr float kEps = 1e-12f;
  parallel_for(e, n, PDNN_PAR(n), [=](int64_t i) {
    dp[i] = scale * (p[i] - t[i]) / std::max((1.f - p[i]) * p[i], kEps);
  });
}

void bce_with_logits_forward(int64_t n, const float* z, const float* t, float* parts, CpuExec e) {
  chunk_sums(e, parts, n, [=](int64_t i) {
    const double zi = z[i];
    return std::max(zi, 0.0) - zi * t[i] + std::log1p(std::exp(-std::fabs(zi)));
  });
}

void bce_with_logits_backward(int64_t n, float scale, const float* z, const float* t, float* dz,
                              CpuExec e) {
  parallel_for(e, n, PDNN_PAR(n), [=](int64_t i) {
    // sigmoid without overflow: exp of a non-positive number only.
    const float e = std::exp(-std::fabs(z[i]));
    const float s = z[i] >= 0.f ? 1.f / (1.f + e) : e / (1.f + e);
    dz[i] = scale * (s - t[i]);
  });
}

void sum_into(int64_t n, float scale, const float* x, double* acc, CpuExec) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += x[i];
  acc[0] += static_cast<double>(scale) * s;
}

}  // namespace cpu

namespace ops {

namespace {

int64_t classes(const char* op, const Tensor& z, const Tensor& labels) {
  const Shape& s = z.shape();
  const bool flat = s.rank() == 2, spatial1 = s.rank() == 4 && s[2] == 1 && s[3] == 1;
  PDNN_CHECK(flat || spatial1, "%s: logits must be (N,K) or (N,K,1,1), got %s", op,
             s.str().c_str());
  PDNN_CHECK(labels.dtype() == DType::I32 && labels.numel() == s[0],
             "%s: labels must be %lld int32 values, got %s %s", op, static_cast<long long>(s[0]),
             labels.shape().str().c_str(), dtype_name(labels.dtype()));
  const int64_t k = s[1];
  if (labels.device() == Device::CPU) {
    const int32_t* l = labels.data<int32_t>();
    for (int64_t i = 0; i < s[0]; ++i)
      PDNN_CHECK(l[i] >= 0 && l[i] < k,
                 "%s: label %d of sample %lld is outside [0,%lld) (K = %lld classes)", op, l[i],
                 static_cast<long long>(i), static_cast<long long>(k), static_cast<long long>(k));
  }
  return k;
}

void check_pair(const char* op, const Tensor& a, const Tensor& b) {
  check_same_shape(op, a.shape(), b.shape());
  PDNN_CHECK(a.numel() > 0, "%s: empty input %s", op, a.shape().str().c_str());
}

void check_parts(const char* op, const Tensor& x, const Tensor& parts) {
  PDNN_CHECK(parts.numel() >= loss_chunks(x.numel()), "%s: parts holds %lld, needs %lld", op,
             static_cast<long long>(parts.numel()), static_cast<long long>(loss_chunks(x.numel())));
}

}  // namespace

void softmax_cross_entropy_forward(Context& ctx, const Tensor& z, const Tensor& labels,
                                   Tensor& probs, Tensor& row_loss) {
  const char* op = "softmax_cross_entropy_forward";
  const int64_t k = classes(op, z, labels), n = z.shape(0);
  PDNN_CHECK(n > 0 && k > 0, "%s: empty logits %s", op, z.shape().str().c_str());
  PDNN_CHECK(probs.numel() == n * k && row_loss.numel() == n, "%s: output sizes", op);
  const Device d = op_device(op, {&z, &labels, &probs, &row_loss});
  PDNN_DISPATCH_TYPED(ctx, d, z.dtype(), softmax_cross_entropy_forward, n, k, z.data<E>(),
                      labels.data<int32_t>(), probs.data(), row_loss.data());
}

void softmax_cross_entropy_backward(Context& ctx, float scale, const Tensor& probs,
                                    const Tensor& labels, Tensor& dz) {
  const char* op = "softmax_cross_entropy_backward";
  const int64_t n = probs.shape(0), k = probs.numel() / std::max<int64_t>(1, n);
  PDNN_CHECK(dz.numel() == probs.numel() && labels.numel() == n, "%s: sizes", op);
  const Device d = op_device(op, {&probs, &labels, &dz});
  PDNN_DISPATCH_TYPED(ctx, d, dz.dtype(), softmax_cross_entropy_backward, n, k, scale,
                      probs.data(), labels.data<int32_t>(), dz.data<E>());
}

void classifier_metrics(Context& ctx, const Tensor& z, const Tensor& labels,
                        const Tensor& row_loss, Tensor& acc) {
  const char* op = "classifier_metrics";
  const int64_t k = classes(op, z, labels), n = z.shape(0);
  PDNN_CHECK(row_loss.numel() == n && acc.dtype() == DType::F64 && acc.numel() >= 3,
             "%s: row_loss (%lld) / acc (float64, >= 3) sizes", op, static_cast<long long>(n));
  const Device d = op_device(op, {&z, &labels, &row_loss, &acc});
  PDNN_DISPATCH_TYPED(ctx, d, z.dtype(), classifier_metrics, n, k, z.data<E>(),
                      labels.data<int32_t>(), row_loss.data(), acc.data<double>());
}

void binary_cross_entropy_forward(Context& ctx, const Tensor& p, const Tensor& t, Tensor& parts) {
  const char* op = "binary_cross_entropy_forward";
  check_pair(op, p, t);
  check_parts(op, p, parts);
  const Device d = op_device(op, {&p, &t, &parts});
  PDNN_DISPATCH_TYPED(ctx, d, p.dtype(), binary_cross_entropy_forward, p.numel(), p.data<E>(),
                      t.data(), parts.data());
}

void binary_cross_entropy_backward(Context& ctx, float scale, const Tensor& p, const Tensor& t,
                                   Tensor& dp) {
  const char* op = "binary_cross_entropy_backward";
  check_pair(op, p, t);
  check_same_shape(op, dp.shape(), p.shape());
  const Device d = op_device(op, {&p, &t, &dp});
  check_same_dtype(op, {&p, &dp});
  PDNN_DISPATCH_TYPED(ctx, d, p.dtype(), binary_cross_entropy_backward, p.numel(), scale,
                      p.data<E>(), t.data(), dp.data<E>());
}

void bce_with_logits_forward(Context& ctx, const Tensor& z, const Tensor& t, Tensor& parts) {
  const char* op = "bce_with_logits_forward";
  check_pair(op, z, t);
  check_parts(op, z, parts);
  const Device d = op_device(op, {&z, &t, &parts});
  PDNN_DISPATCH_TYPED(ctx, d, z.dtype(), bce_with_logits_forward, z.numel(), z.data<E>(),
                      t.data(), parts.data());
}

void bce_with_logits_backward(Context& ctx, float scale, const Tensor& z, const Tensor& t,
                              Tensor& dz) {
  const char* op = "bce_with_logits_backward";
  check_pair(op, z, t);
  check_same_shape(op, dz.shape(), z.shape());
  const Device d = op_device(op, {&z, &t, &dz});
  check_same_dtype(op, {&z, &dz});
  PDNN_DISPATCH_TYPED(ctx, d, z.dtype(), bce_with_logits_backward, z.numel(), scale,
                      z.data<E>(), t.data(), dz.data<E>());
}

void sum_into(Context& ctx, float scale, const Tensor& x, Tensor& acc, int64_t slot) {
  PDNN_CHECK(acc.dtype() == DType::F64 && slot >= 0 && slot < acc.numel(),
             "sum_into: acc must be float64 with slot %lld", static_cast<long long>(slot));
  const Device d = op_device("sum_into", {&x, &acc});
  PDNN_DISPATCH(ctx, d, sum_into, x.numel(), scale, x.data(), acc.data<double>() + slot);
}

}  // namespace ops
}  // namespace pdnn
