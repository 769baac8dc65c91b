// Loss kernels and metric accumulators: CPU kernels and dispatch (see loss.h).
#include "ops/loss.h"

#include <algorithm>
#include <cmath>

#include "core/parallel.h"
#include "ops/dice_formula.h"
#include "ops/loss_formula.h"
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

// pi = softmax(zi) over the row; returns the sum of exp(z - m) (in double) and sets *m.
inline double softmax_row(int64_t k, int64_t plane, const float* zi, float* pi, float* m_out) {
  float m = zi[0];
  for (int64_t j = 1; j < k; ++j) m = zi[j * plane] > m ? zi[j * plane] : m;
  double sum = 0.0;
  for (int64_t j = 0; j < k; ++j) {
    pi[j * plane] = std::exp(zi[j * plane] - m);
    sum += pi[j * plane];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < k; ++j) pi[j * plane] *= inv;
  *m_out = m;
  return sum;
}

void softmax_cross_entropy_forward(int64_t n, int64_t k, int64_t plane, const float* z,
                                   const int32_t* labels, float* probs, float* row_loss,
                                   CpuExec e) {
  const int64_t rows = n * plane;
  parallel_for(e, rows, PDNN_PAR(rows * k), [=](int64_t i) {
    const int64_t at = row_start(i, k, plane);
    const float* zi = z + at;
    float m;
    const double sum = softmax_row(k, plane, zi, probs + at, &m);
    // log-sum-exp form: exact even when the label's probability underflows to 0 in float.
    row_loss[i] =
        static_cast<float>(std::log(sum) - (static_cast<double>(zi[labels[i] * plane]) - m));
  });
}

void softmax_cross_entropy_backward(int64_t n, int64_t k, int64_t plane, float scale,
                                    const float* probs, const int32_t* labels, float* dz,
                                    CpuExec e) {
  const int64_t rows = n * plane;
  parallel_for(e, rows, PDNN_PAR(rows * k), [=](int64_t i) {
    const int64_t at = row_start(i, k, plane);
    for (int64_t j = 0; j < k; ++j) dz[at + j * plane] = probs[at + j * plane] * scale;
    dz[at + labels[i] * plane] -= scale;
  });
}

void classifier_metrics(int64_t n, int64_t k, int64_t plane, const float* z,
                        const int32_t* labels, const float* row_loss, double* parts, double* acc,
                        CpuExec e) {
  const int64_t rows = n * plane, chunks = loss_chunks(rows);
  parallel_for(e, chunks, PDNN_PAR(rows * k), [=](int64_t c) {
    double loss = 0.0, correct = 0.0;
    for (int64_t i = c * kLossChunk; i < std::min(rows, (c + 1) * kLossChunk); ++i) {
      loss += row_loss[i];
      correct += argmax_is(k, plane, z + row_start(i, k, plane), labels[i]) ? 1.0 : 0.0;
    }
    parts[2 * c] = loss;
    parts[2 * c + 1] = correct;
  });
  metrics_finish(chunks, rows, parts, acc);
}

void dice_forward(int64_t n, int64_t k, int64_t plane, const float* z, const int32_t* labels,
                  float* probs, double* parts, CpuExec e) {
  const int64_t rows = n * plane;
  parallel_for(e, rows, PDNN_PAR(rows * k), [=](int64_t i) {
    const int64_t at = row_start(i, k, plane);
    float m;
    softmax_row(k, plane, z + at, probs + at, &m);
  });
  // Per chunk of pixels and class: I, P, G in index order.
  const int64_t chunks = loss_chunks(rows);
  parallel_for(e, chunks * k, PDNN_PAR(rows * k), [=](int64_t t) {
    const int64_t c = t / k, cls = t % k, end = std::min(rows, (c + 1) * kLossChunk);
    double in = 0, p_sum = 0, g_sum = 0;
    for (int64_t i = c * kLossChunk; i < end; ++i) {
      const double p = probs[row_start(i, k, plane) + cls * plane];
      const bool g = labels[i] == cls;
      in += g ? p : 0.0;
      p_sum += p;
      g_sum += g ? 1.0 : 0.0;
    }
    parts[t * 3] = in;
    parts[t * 3 + 1] = p_sum;
    parts[t * 3 + 2] = g_sum;
  });
}

void dice_finish(int64_t chunks, int64_t k, float smooth, const double* parts, double* stats,
                 float* loss, CpuExec) {
  dice_totals(chunks, k, smooth, parts, stats, loss);
}

void dice_backward(int64_t n, int64_t k, int64_t plane, float smooth, float scale,
                   const float* probs, const int32_t* labels, const double* stats, float* dz,
                   bool add, CpuExec e) {
  const int64_t rows = n * plane;
  parallel_for(e, rows, PDNN_PAR(rows * k), [=](int64_t i) {
    const int64_t at = row_start(i, k, plane);
    dice_pixel_backward(k, plane, smooth, scale, probs + at, labels[i], stats, dz + at, add);
  });
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

// The classes k and the pixels per sample (1 for (N,K) or (N,K,1,1) logits, H*W for a map
// (N,K,H,W)) of logits z, whose labels must be N*plane int32 values in [0,k).
int64_t classes(const char* op, const Tensor& z, const Tensor& labels, int64_t* plane) {
  const Shape& s = z.shape();
  PDNN_CHECK((s.rank() == 2 || s.rank() == 4) && s[0] > 0 && s[1] > 0,
             "%s: logits must be (N,K) or a map (N,K,H,W), got %s", op, s.str().c_str());
  *plane = s.rank() == 4 ? s[2] * s[3] : 1;
  const int64_t rows = s[0] * *plane, k = s[1];
  PDNN_CHECK(labels.dtype() == DType::I32 && labels.numel() == rows,
             "%s: labels must be %lld int32 values (one per %s), got %s %s", op,
             static_cast<long long>(rows), *plane > 1 ? "pixel" : "sample",
             labels.shape().str().c_str(), dtype_name(labels.dtype()));
  if (labels.device() == Device::CPU) {
    const int32_t* l = labels.data<int32_t>();
    for (int64_t i = 0; i < rows; ++i)
      PDNN_CHECK(l[i] >= 0 && l[i] < k,
                 "%s: label %d of %s %lld is outside [0,%lld) (K = %lld classes)", op, l[i],
                 *plane > 1 ? "pixel" : "sample", static_cast<long long>(i),
                 static_cast<long long>(k), static_cast<long long>(k));
  }
  return k;
}

// (n, k, plane) of probabilities laid out as forward wrote them, with labels of n * plane.
void prob_geometry(const char* op, const Tensor& probs, const Tensor& labels, int64_t* n,
                   int64_t* k, int64_t* plane) {
  const Shape& s = probs.shape();
  PDNN_CHECK(s.rank() >= 2 && s[0] > 0 && s[1] > 0, "%s: probabilities %s", op, s.str().c_str());
  *n = s[0];
  *k = s[1];
  *plane = s.numel() / (s[0] * s[1]);
  PDNN_CHECK(labels.numel() == *n * *plane, "%s: %lld labels for probabilities %s", op,
             static_cast<long long>(labels.numel()), s.str().c_str());
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
  int64_t plane = 1;
  const int64_t k = classes(op, z, labels, &plane), n = z.shape(0);
  PDNN_CHECK(probs.numel() == z.numel() && row_loss.numel() == n * plane, "%s: output sizes", op);
  const Device d = op_device(op, {&z, &labels, &probs, &row_loss});
  PDNN_DISPATCH_TYPED(ctx, d, z.dtype(), softmax_cross_entropy_forward, n, k, plane, z.data<E>(),
                      labels.data<int32_t>(), probs.data(), row_loss.data());
}

void softmax_cross_entropy_backward(Context& ctx, float scale, const Tensor& probs,
                                    const Tensor& labels, Tensor& dz) {
  const char* op = "softmax_cross_entropy_backward";
  int64_t n = 0, k = 0, plane = 1;
  prob_geometry(op, probs, labels, &n, &k, &plane);
  PDNN_CHECK(dz.numel() == probs.numel(), "%s: dz %s for probabilities %s", op,
             dz.shape().str().c_str(), probs.shape().str().c_str());
  const Device d = op_device(op, {&probs, &labels, &dz});
  PDNN_DISPATCH_TYPED(ctx, d, dz.dtype(), softmax_cross_entropy_backward, n, k, plane, scale,
                      probs.data(), labels.data<int32_t>(), dz.data<E>());
}

void classifier_metrics(Context& ctx, const Tensor& z, const Tensor& labels,
                        const Tensor& row_loss, Tensor& parts, Tensor& acc) {
  const char* op = "classifier_metrics";
  int64_t plane = 1;
  const int64_t k = classes(op, z, labels, &plane), n = z.shape(0);
  PDNN_CHECK(row_loss.numel() == n * plane && acc.dtype() == DType::F64 && acc.numel() >= 3 &&
                 parts.dtype() == DType::F64 && parts.numel() >= metric_parts(n * plane),
             "%s: row_loss (%lld) / parts (float64, >= %lld) / acc (float64, >= 3) sizes", op,
             static_cast<long long>(n * plane), static_cast<long long>(metric_parts(n * plane)));
  const Device d = op_device(op, {&z, &labels, &row_loss, &parts, &acc});
  PDNN_DISPATCH_TYPED(ctx, d, z.dtype(), classifier_metrics, n, k, plane, z.data<E>(),
                      labels.data<int32_t>(), row_loss.data(), parts.data<double>(),
                      acc.data<double>());
}

void dice_forward(Context& ctx, float smooth, const Tensor& z, const Tensor& labels,
                  Tensor& probs, Tensor& parts, Tensor& stats, Tensor& loss) {
  const char* op = "dice_forward";
  int64_t plane = 1;
  const int64_t k = classes(op, z, labels, &plane), n = z.shape(0);
  const int64_t chunks = loss_chunks(n * plane);
  PDNN_CHECK(smooth >= 0.f, "%s: smoothing %g must be >= 0", op, static_cast<double>(smooth));
  PDNN_CHECK(probs.numel() == z.numel() && parts.dtype() == DType::F64 &&
                 parts.numel() >= chunks * k * 3 && stats.dtype() == DType::F64 &&
                 stats.numel() >= 3 * k + 1 && loss.numel() == 1,
             "%s: probs (%lld), parts (float64, %lld), stats (float64, %lld), loss (1) sizes", op,
             static_cast<long long>(z.numel()), static_cast<long long>(chunks * k * 3),
             static_cast<long long>(3 * k + 1));
  const Device d = op_device(op, {&z, &labels, &probs, &parts, &stats, &loss});
  PDNN_DISPATCH(ctx, d, dice_forward, n, k, plane, z.data(), labels.data<int32_t>(),
                probs.data(), parts.data<double>());
  PDNN_DISPATCH(ctx, d, dice_finish, chunks, k, smooth, parts.data<double>(),
                stats.data<double>(), loss.data());
}

void dice_backward(Context& ctx, float smooth, float scale, const Tensor& probs,
                   const Tensor& labels, const Tensor& stats, Tensor& dz, bool add) {
  const char* op = "dice_backward";
  int64_t n = 0, k = 0, plane = 1;
  prob_geometry(op, probs, labels, &n, &k, &plane);
  PDNN_CHECK(dz.numel() == probs.numel() && stats.dtype() == DType::F64 &&
                 stats.numel() >= 3 * k + 1,
             "%s: dz %s / stats sizes for probabilities %s", op, dz.shape().str().c_str(),
             probs.shape().str().c_str());
  const Device d = op_device(op, {&probs, &labels, &stats, &dz});
  PDNN_DISPATCH(ctx, d, dice_backward, n, k, plane, smooth, scale, probs.data(),
                labels.data<int32_t>(), stats.data<double>(), dz.data(), add);
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
