// Softmax cross-entropy: buffers and shapes; the kernels are in ops/loss.
#include "losses/softmax_cross_entropy.h"

#include <vector>

#include "core/error.h"
#include "ops/loss.h"

namespace pdnn {

void SoftmaxCrossEntropy::forward(Context& ctx, const Tensor& logits, const Tensor& labels) {
  const Shape& s = logits.shape();
  PDNN_CHECK((s.rank() == 2 || s.rank() == 4) && s[0] > 0 && s[1] > 0,
             "softmax_cross_entropy: logits must be (N,K), (N,K,1,1) or a map (N,K,H,W), got %s",
             s.str().c_str());
  const int64_t n = s[0], k = s[1], rows = s.numel() / k;
  const Device d = logits.device();
  in_shape_ = s;
  probs_.resize(rows == n ? Shape{n, k} : s, DType::F32, d, ctx);
  row_loss_.resize(Shape{rows}, DType::F32, d, ctx);
  labels_.resize(Shape{rows}, DType::I32, d, ctx);
  metric_parts_.resize(Shape{ops::metric_parts(rows)}, DType::F64, d, ctx);
  ops::softmax_cross_entropy_forward(ctx, logits, labels, probs_, row_loss_);
  copy_into(labels_, labels.reshape(Shape{rows}), ctx);
}

float SoftmaxCrossEntropy::forward(Context& ctx, const Tensor& logits, const int32_t* labels) {
  PDNN_CHECK(labels != nullptr, "softmax_cross_entropy: labels is null");
  PDNN_CHECK(logits.rank() >= 2 && logits.numel() == logits.shape(0) * logits.shape(1),
             "softmax_cross_entropy: labels from a host array go with logits (N,K) or "
             "(N,K,1,1), got %s (a map's labels: pass them as a tensor)",
             logits.shape().str().c_str());
  Tensor l(Shape{logits.shape(0)}, DType::I32);
  for (int64_t i = 0; i < l.numel(); ++i) l.data<int32_t>()[i] = labels[i];
  forward(ctx, logits, l);
  return loss(ctx);
}

float SoftmaxCrossEntropy::loss(Context& ctx) const {
  PDNN_CHECK(!row_loss_.empty(), "softmax_cross_entropy: loss() before forward");
  const Tensor host = row_loss_.device() == Device::CPU ? row_loss_ : row_loss_.to(Device::CPU, ctx);
  double total = 0.0;
  for (int64_t i = 0; i < host.numel(); ++i) total += host[i];
  return static_cast<float>(total / static_cast<double>(host.numel()));
}

void SoftmaxCrossEntropy::backward(Context& ctx, Tensor& dlogits, int64_t mean_over) {
  PDNN_CHECK(!labels_.empty(), "softmax_cross_entropy: backward before forward");
  // The mean over the batch's rows (every pixel of a map).
  const int64_t n = (mean_over > 0 ? mean_over : in_shape_[0]) * (row_loss_.numel() / in_shape_[0]);
  dlogits.resize(in_shape_, DType::F32, probs_.device(), ctx);
  ops::softmax_cross_entropy_backward(ctx, static_cast<float>(1.0 / static_cast<double>(n)),
                                      probs_, labels_, dlogits);
}

void SoftmaxCrossEntropy::accumulate_metrics(Context& ctx, const Tensor& logits,
                                             Tensor& acc) const {
  PDNN_CHECK(!labels_.empty() && logits.shape() == in_shape_,
             "softmax_cross_entropy: metrics for logits %s, the last forward saw %s",
             logits.shape().str().c_str(), in_shape_.str().c_str());
  ops::classifier_metrics(ctx, logits, labels_, row_loss_, metric_parts_, acc);
}

int64_t count_correct(const Tensor& logits, const int32_t* labels) {
  PDNN_CHECK(logits.device() == Device::CPU && logits.rank() >= 2,
             "count_correct: CPU logits (N,K) expected, got %s on %s",
             logits.shape().str().c_str(), device_name(logits.device()));
  const int64_t n = logits.shape(0), k = logits.shape(1);
  PDNN_CHECK(logits.numel() == n * k, "count_correct: logits %s are not (N,K)",
             logits.shape().str().c_str());
  for (int64_t i = 0; i < n; ++i)
    PDNN_CHECK(labels[i] >= 0 && labels[i] < k, "count_correct: label %d of sample %lld is "
               "outside [0,%lld)", labels[i], static_cast<long long>(i), static_cast<long long>(k));
  const Tensor zero_loss = Tensor::zeros(Shape{n});
  double acc[3] = {0, 0, 0};
  std::vector<double> parts(static_cast<size_t>(ops::metric_parts(n)));
  cpu::classifier_metrics(n, k, 1, logits.data(), labels, zero_loss.data(), parts.data(), acc,
                          CpuExec{1});
  return static_cast<int64_t>(acc[1]);
}

}  // namespace pdnn
