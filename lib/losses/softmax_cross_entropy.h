// Softmax cross-entropy, fused and numerically stable: logits (N,K) or (N,K,1,1) and integer
// labels -> mean over the batch of -log softmax(logits)[label].
//   forward:  loss = (1/N) sum_n [ log sum_k exp(z_nk - m_n) - (z_n,label_n - m_n) ],
//             m_n = max_k z_nk (so exp never overflows, even for logits of 1000)
//   backward: dlogits (same shape as logits) = (softmax(z) - onehot(label)) / N, written (=)
// Per pixel for a segmentation: logits (N,K,H,W) and labels (N,H,W) (any shape of N*H*W
// int32), the softmax over the channel axis, the mean over all N*H*W pixels (each pixel counts
// as a row above: "rows" below are pixels).
// The per-sample losses stay on the logits' device; loss() reads the mean back (a sync on the
// GPU), accumulate_metrics() adds loss, correct count and sample count to a device accumulator
// so a training loop reads back only when it prints.
#pragma once
#include <cstdint>

#include "core/context.h"
#include "core/tensor.h"

namespace pdnn {

class SoftmaxCrossEntropy {
 public:
  // labels: N (N*H*W) int32 values on the logits' device, each in [0,K) (checked on the CPU;
  // on the GPU a bad label gives a NaN loss). Keeps softmax(logits), the losses and a copy of
  // the labels.
  void forward(Context& ctx, const Tensor& logits, const Tensor& labels);
  // Convenience for host code and tests: CPU logits (N,K), labels from a host array of N;
  // returns loss().
  float forward(Context& ctx, const Tensor& logits, const int32_t* labels);
  // Mean loss of the last forward.
  float loss(Context& ctx) const;
  // dlogits is resized to the logits' shape of the last forward (on their device), written (=).
  // mean_over > 0 divides by it (times H*W) instead of N: a data-parallel rank holding N rows of
  // a global batch of mean_over gets its share of the global mean's gradient, bit for bit the
  // rows one process with the whole batch would compute.
  void backward(Context& ctx, Tensor& dlogits, int64_t mean_over = 0);
  // acc (float64, >= 3, logits' device): [0] += sum of losses, [1] += correct, [2] += N (pixels
  // of a map: N*H*W), for the last forward; `logits` must be the tensor that forward saw.
  void accumulate_metrics(Context& ctx, const Tensor& logits, Tensor& acc) const;
  // softmax(logits) of the last forward, shape (N,K) (a map's: (N,K,H,W)).
  const Tensor& probs() const { return probs_; }

 private:
  Tensor probs_;
  Tensor row_loss_;  // (N*H*W): per-row loss, summed in order so the mean is thread-independent
  Tensor labels_;
  // accumulate_metrics' per-chunk sums (ops::metric_parts), sized by forward: scratch.
  mutable Tensor metric_parts_;
  Shape in_shape_;
};

// Samples whose argmax (ties -> lowest index) equals the label; CPU logits (N,K) or (N,K,1,1).
int64_t count_correct(const Tensor& logits, const int32_t* labels);

}  // namespace pdnn
