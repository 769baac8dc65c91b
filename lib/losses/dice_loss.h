// Soft Dice loss over the softmax probabilities of a segmentation's logits, for the classes
// of a label map (Milletari et al. 2016's Dice with sums, not squares, in the denominator, as
// segmentation_models_pytorch's DiceLoss in multiclass mode with log_loss=False):
//   p = softmax over the channel axis of logits (N,K,H,W); labels (N,H,W) int32 in [0,K);
//   per class c, over every pixel of the batch (not per image):
//     I_c = sum p_c [label = c],  P_c = sum p_c,  G_c = sum [label = c],
//     D_c = (2 I_c + s) / (P_c + G_c + s),   s = smoothing (default 1),
//   loss = 1 - (1/K) sum_c D_c   (every class, the background too; a class absent from both
//     the labels and the prediction has D_c near 1 and adds nothing).
//   backward: dL/dz through the softmax (ops/dice_formula.h), written (=) or added (+=, to
//     combine with the cross-entropy's gradient in one buffer), times a weight.
// Sums in double, per chunk of pixels in index order and then over the chunks in order: the
// same at any thread count. The Dice of a batch is not a sum over its rows: in micro-batches
// or over data-parallel ranks each slice is scored on its own.
#pragma once
#include <cstdint>
#include <vector>

#include "core/context.h"
#include "core/tensor.h"

namespace pdnn {

class DiceLoss {
 public:
  explicit DiceLoss(float smooth = 1.f);
  // logits (N,K,H,W) (or (N,K)), labels N*H*W int32 on their device (checked on the CPU).
  // Keeps the probabilities, the sums and a copy of the labels; nothing is read back.
  void forward(Context& ctx, const Tensor& logits, const Tensor& labels);
  // The loss of the last forward (reads back: a sync on the GPU).
  float loss(Context& ctx) const;
  // acc (float64, on the device): acc[slot] += the last forward's loss.
  void accumulate(Context& ctx, Tensor& acc, int64_t slot) const;
  // dlogits = weight * dL/dlogits, resized to the logits' shape and written (=), or added to
  // (add: dlogits must hold the logits' shape already, e.g. the cross-entropy's gradient).
  void backward(Context& ctx, Tensor& dlogits, float weight = 1.f, bool add = false);
  // The sums of the last forward, read back: I, P, G per class, then the loss (3K + 1).
  std::vector<double> stats(Context& ctx) const;
  float smooth() const { return smooth_; }
  // The device buffers a forward on logits of this shape leaves held, bytes each (the
  // probabilities, the per-chunk sums, the sums, the loss, the labels' copy): what a memory
  // plan counts for this loss (RunConfig::loss_buffers). held_bytes(): their sum as held now.
  static std::vector<int64_t> buffer_bytes(const Shape& logits);
  int64_t held_bytes() const;

 private:
  float smooth_;
  Shape in_shape_;
  Tensor probs_, labels_, parts_, stats_, loss_;
};

}  // namespace pdnn
