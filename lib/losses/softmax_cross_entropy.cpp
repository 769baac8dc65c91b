// Softmax cross-entropy: shape checks, dispatch and the CPU kernels (see the header).
#include "losses/softmax_cross_entropy.h"

#include <cmath>

#include "core/error.h"
#include "core/parallel.h"

namespace pdnn {

namespace {

// K for logits of shape (N,K) or (N,K,1,1) (a classifier ending in a 1x1 convolution).
int64_t num_classes(const char* op, const Shape& s) {
  const bool flat = s.rank() == 2;
  const bool spatial1 = s.rank() == 4 && s[2] == 1 && s[3] == 1;
  PDNN_CHECK(flat || spatial1, "%s: logits must be (N,K) or (N,K,1,1), got %s", op,
             s.str().c_str());
  return s[1];
}

void check_labels(const char* op, const int32_t* labels, int64_t n, int64_t k) {
  PDNN_CHECK(labels != nullptr || n == 0, "%s: labels is null", op);
  for (int64_t i = 0; i < n; ++i)
    PDNN_CHECK(labels[i] >= 0 && labels[i] < k,
               "%s: label %d of sample %lld is outside [0,%lld) (K = %lld classes)", op, labels[i],
               static_cast<long long>(i), static_cast<long long>(k), static_cast<long long>(k));
}

void check_cpu(const char* op, const Tensor& t) {
  PDNN_CHECK(t.device() == Device::CPU, "%s: tensor on %s, only the CPU kernel exists", op,
             device_name(t.device()));
}

}  // namespace

namespace cpu {

void softmax_cross_entropy_forward(float* probs, float* row_loss, const float* z,
                                   const int32_t* labels, int64_t n, int64_t k) {
#pragma omp parallel for if(PDNN_PAR(n * k))
  for (int64_t i = 0; i < n; ++i) {
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
  }
}

void softmax_cross_entropy_backward(float* dz, const float* probs, const int32_t* labels, int64_t n,
                                    int64_t k, float scale) {
#pragma omp parallel for if(PDNN_PAR(n * k))
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < k; ++j) dz[i * k + j] = probs[i * k + j] * scale;
    dz[i * k + labels[i]] -= scale;
  }
}

}  // namespace cpu

float SoftmaxCrossEntropy::forward(Context& ctx, const Tensor& logits, const int32_t* labels) {
  (void)ctx;
  const char* op = "softmax_cross_entropy";
  check_cpu(op, logits);
  const int64_t k = num_classes(op, logits.shape());
  const int64_t n = logits.shape(0);
  PDNN_CHECK(n > 0 && k > 0, "%s: empty logits %s", op, logits.shape().str().c_str());
  check_labels(op, labels, n, k);
  in_shape_ = logits.shape();
  labels_.assign(labels, labels + n);
  probs_.resize(Shape{n, k});
  row_loss_.resize(Shape{n});
  cpu::softmax_cross_entropy_forward(probs_.data(), row_loss_.data(), logits.data(), labels_.data(),
                                     n, k);
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) total += row_loss_[i];
  return static_cast<float>(total / static_cast<double>(n));
}

void SoftmaxCrossEntropy::backward(Context& ctx, Tensor& dlogits) {
  (void)ctx;
  PDNN_CHECK(!labels_.empty(), "softmax_cross_entropy: backward before forward");
  const int64_t n = probs_.shape(0), k = probs_.shape(1);
  dlogits.resize(in_shape_);
  cpu::softmax_cross_entropy_backward(dlogits.data(), probs_.data(), labels_.data(), n, k,
                                      static_cast<float>(1.0 / static_cast<double>(n)));
}

int64_t count_correct(const Tensor& logits, const int32_t* labels) {
  const char* op = "count_correct";
  check_cpu(op, logits);
  const int64_t k = num_classes(op, logits.shape());
  const int64_t n = logits.shape(0);
  check_labels(op, labels, n, k);
  const float* z = logits.data();
  int64_t correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t best = 0;
    for (int64_t j = 1; j < k; ++j)
      if (z[i * k + j] > z[i * k + best]) best = j;  // strict: ties keep the lowest index
    correct += best == labels[i];
  }
  return correct;
}

}  // namespace pdnn
