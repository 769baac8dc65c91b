// Binary cross-entropy, mean over all elements, as PyTorch's BCELoss and BCEWithLogitsLoss.
//   BinaryCrossEntropy (on probabilities p in [0,1], targets t in [0,1], same shape):
//     loss = mean( -(t * max(log p, -100) + (1-t) * max(log(1-p), -100)) )
//     (the clamp at -100 keeps p = 0 or 1 finite, as torch.nn.BCELoss does)
//     dp (=) = (p - t) / max(p (1-p), 1e-12) / numel   (ATen's binary_cross_entropy_backward)
//   BinaryCrossEntropyWithLogits (on logits z, any real; targets t in [0,1], same shape):
//     loss = mean( max(z,0) - z t + log1p(exp(-|z|)) )   (never overflows)
//     dz (=) = (sigmoid(z) - t) / numel
#pragma once
#include <cstdint>

#include "core/context.h"
#include "core/tensor.h"

namespace pdnn {

class BinaryCrossEntropy {
 public:
  // p, t: same shape; every p and t in [0,1] (pdnn::Error otherwise). Returns the mean loss and
  // keeps copies of p and t for backward().
  float forward(Context& ctx, const Tensor& p, const Tensor& t);
  // dp is resized to p's shape and written (=).
  void backward(Context& ctx, Tensor& dp);

 private:
  Tensor p_, t_, parts_;
};

class BinaryCrossEntropyWithLogits {
 public:
  // z, t: same shape; every t in [0,1] (pdnn::Error otherwise). Returns the mean loss.
  float forward(Context& ctx, const Tensor& z, const Tensor& t);
  // dz is resized to z's shape and written (=).
  void backward(Context& ctx, Tensor& dz);

 private:
  Tensor z_, t_, parts_;
};

namespace cpu {
// parts (ceil(n / kLossChunk)): the loss summed over each chunk of kLossChunk elements, so the
// caller's final sum does not depend on the thread count.
constexpr int64_t kLossChunk = 4096;
void binary_cross_entropy_forward(float* parts, const float* p, const float* t, int64_t n);
void binary_cross_entropy_backward(float* dp, const float* p, const float* t, int64_t n,
                                   float scale);
void binary_cross_entropy_with_logits_forward(float* parts, const float* z, const float* t,
                                              int64_t n);
void binary_cross_entropy_with_logits_backward(float* dz, const float* z, const float* t, int64_t n,
                                               float scale);
}  // namespace cpu

}  // namespace pdnn
