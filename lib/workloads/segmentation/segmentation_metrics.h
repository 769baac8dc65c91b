// IoU and Dice per class of a segmentation, from confusion counts accumulated over a set of
// batches on the logits' device (ops::segmentation_confusion: int64, no read-back until asked):
//   per class c, with TP_c = pixels of class c predicted c, FP_c = pixels of other classes
//   predicted c, FN_c = pixels of class c predicted otherwise (prediction: the argmax over the
//   class axis, ties to the lowest index),
//     IoU_c  = TP_c / (TP_c + FP_c + FN_c),
//     Dice_c = 2 TP_c / (2 TP_c + FP_c + FN_c)   (F1 of class c);
//   a class neither present nor predicted in the whole set has no score (NaN), and the means
//   are over the classes that have one.
#pragma once
#include <cstdint>
#include <vector>

#include "core/context.h"
#include "core/tensor.h"

namespace pdnn {

struct SegmentationScores {
  std::vector<double> iou, dice;   // per class (NaN: absent and never predicted)
  double mean_iou = 0, mean_dice = 0;
  int64_t pixels = 0;
  double pixel_acc = 0;            // the diagonal's share of all pixels
};

// Scores from k x k counts (row: true class, column: predicted).
SegmentationScores segmentation_scores(const std::vector<int64_t>& confusion, int64_t classes);

class SegmentationCounts {
 public:
  explicit SegmentationCounts(int64_t classes);
  // Adds a batch: logits (N,K,H,W), labels N*H*W int32, both on one device (the counts
  // follow it: moved there at the first batch, zero).
  void add(Context& ctx, const Tensor& logits, const Tensor& labels);
  void reset(Context& ctx);
  // The counts so far (reads back: a sync on the GPU), row = true class.
  std::vector<int64_t> counts(Context& ctx) const;
  SegmentationScores scores(Context& ctx) const { return segmentation_scores(counts(ctx), k_); }
  int64_t classes() const { return k_; }

 private:
  int64_t k_;
  Tensor counts_;
};

}  // namespace pdnn
