// Softmax cross-entropy, fused and numerically stable: logits (N,K) or (N,K,1,1) and integer
// labels -> mean over the batch of -log softmax(logits)[label].
//   forward:  loss = (1/N) sum_n [ log sum_k exp(z_nk - m_n) - (z_n,label_n - m_n) ],
//             m_n = max_k z_nk (so exp never overflows, even for logits of 1000)
//   backward: dlogits (same shape as logits) = (softmax(z) - onehot(label)) / N, written (=)
#pragma once
#include <cstdint>
#include <vector>

#include "core/context.h"
#include "core/tensor.h"

namespace pdnn {

class SoftmaxCrossEntropy {
 public:
  // logits: (N,K) or (N,K,1,1); labels: N values, each in [0,K) (pdnn::Error otherwise).
  // Returns the mean loss; keeps softmax(logits) and the labels for backward().
  float forward(Context& ctx, const Tensor& logits, const int32_t* labels);
  // dlogits is resized to the logits' shape of the last forward and written (=).
  void backward(Context& ctx, Tensor& dlogits);
  // softmax(logits) of the last forward, shape (N,K).
  const Tensor& probs() const { return probs_; }

 private:
  Tensor probs_;
  Tensor row_loss_;  // (N): per-sample loss, summed serially so the mean is thread-independent
  std::vector<int32_t> labels_;
  Shape in_shape_;
};

// Samples whose argmax (ties -> lowest index) equals the label; logits (N,K) or (N,K,1,1).
int64_t count_correct(const Tensor& logits, const int32_t* labels);

namespace cpu {
// probs (N,K) = softmax(z) row by row; row_loss (N) = -log probs[n, labels[n]].
void softmax_cross_entropy_forward(float* probs, float* row_loss, const float* z,
                                   const int32_t* labels, int64_t n, int64_t k);
// dz (N,K) = (probs - onehot(labels)) * scale.
void softmax_cross_entropy_backward(float* dz, const float* probs, const int32_t* labels, int64_t n,
                                    int64_t k, float scale);
}  // namespace cpu

}  // namespace pdnn
