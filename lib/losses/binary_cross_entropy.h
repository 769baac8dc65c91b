// Binary cross-entropy, mean over all elements, as PyTorch's BCELoss and BCEWithLogitsLoss.
//   BinaryCrossEntropy (on probabilities p in [0,1], targets t in [0,1], same shape):
//     loss = mean( -(t * max(log p, -100) + (1-t) * max(log(1-p), -100)) )
//     (the clamp at -100 keeps p = 0 or 1 finite, as torch.nn.BCELoss does)
//     dp (=) = (p - t) / max(p (1-p), 1e-12) / numel   (ATen's binary_cross_entropy_backward)
//   BinaryCrossEntropyWithLogits (on logits z, any real; targets t in [0,1], same shape):
//     loss = mean( max(z,0) - z t + log1p(exp(-|z|)) )   (never overflows)
//     dz (=) = (sigmoid(z) - t) / numel
// The kernels are in ops/loss. Inputs and targets are copied (on their device), so the caller
// may reuse its buffers before backward(). Value ranges are checked for CPU tensors.
#pragma once
#include <cstdint>

#include "core/context.h"
#include "core/tensor.h"

namespace pdnn {

class BinaryCrossEntropy {
 public:
  // p, t: same shape and device. Computes the loss parts on that device (no read-back).
  void forward(Context& ctx, const Tensor& p, const Tensor& t);
  // Mean loss of the last forward (reads back: a sync on the GPU).
  float loss(Context& ctx) const;
  // acc (float64, on the device): acc[slot] += the last forward's mean loss.
  // mean_over: the count the mean divides by (0: p's elements). Data-parallel, the global
  // batch's: each rank adds its share of the global mean, and the ranks' shares sum to it.
  void accumulate(Context& ctx, Tensor& acc, int64_t slot, int64_t mean_over = 0) const;
  // dp is resized to p's shape (on its device) and written (=); mean_over as above.
  void backward(Context& ctx, Tensor& dp, int64_t mean_over = 0);

 private:
  Tensor p_, t_, parts_;
};

class BinaryCrossEntropyWithLogits {
 public:
  void forward(Context& ctx, const Tensor& z, const Tensor& t);
  float loss(Context& ctx) const;
  void accumulate(Context& ctx, Tensor& acc, int64_t slot) const;
  // dz is resized to z's shape (on its device) and written (=).
  void backward(Context& ctx, Tensor& dz);

 private:
  Tensor z_, t_, parts_;
};

}  // namespace pdnn
