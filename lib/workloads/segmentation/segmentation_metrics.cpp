// IoU and Dice per class from confusion counts (segmentation_metrics.h).
#include "workloads/segmentation/segmentation_metrics.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "ops/basic.h"
#include "ops/metrics.h"

namespace pdnn {

SegmentationScores segmentation_scores(const std::vector<int64_t>& confusion, int64_t classes) {
  const size_t k = static_cast<size_t>(classes);
  PDNN_CHECK(classes >= 1 && confusion.size() == k * k,
             "segmentation scores: %zu counts for %lld classes", confusion.size(),
             static_cast<long long>(classes));
  SegmentationScores s;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  int64_t diagonal = 0, scored = 0;
  for (size_t c = 0; c < k; ++c) {
    int64_t row = 0, col = 0;
    for (size_t j = 0; j < k; ++j) {
      row += confusion[c * k + j];
      col += confusion[j * k + c];
      s.pixels += confusion[c * k + j];
    }
    const int64_t tp = confusion[c * k + c], fn = row - tp, fp = col - tp;
    diagonal += tp;
    const bool none = tp + fp + fn == 0;
    s.iou.push_back(none ? nan : static_cast<double>(tp) / static_cast<double>(tp + fp + fn));
    s.dice.push_back(none ? nan : 2.0 * static_cast<double>(tp) / static_cast<double>(2 * tp + fp + fn));
    if (!none) {
      s.mean_iou += s.iou.back();
      s.mean_dice += s.dice.back();
      ++scored;
    }
  }
  s.mean_iou = scored > 0 ? s.mean_iou / static_cast<double>(scored) : nan;
  s.mean_dice = scored > 0 ? s.mean_dice / static_cast<double>(scored) : nan;
  s.pixel_acc = s.pixels > 0 ? static_cast<double>(diagonal) / static_cast<double>(s.pixels) : nan;
  return s;
}

SegmentationCounts::SegmentationCounts(int64_t classes) : k_(classes) {
  PDNN_CHECK(classes >= 1, "segmentation counts: %lld classes", static_cast<long long>(classes));
}

void SegmentationCounts::add(Context& ctx, const Tensor& logits, const Tensor& labels) {
  PDNN_CHECK(logits.rank() >= 2 && logits.shape(1) == k_,
             "segmentation counts: logits %s for %lld classes", logits.shape().str().c_str(),
             static_cast<long long>(k_));
  if (counts_.empty() || counts_.device() != logits.device()) {
    counts_ = Tensor::empty(Shape{k_ * k_}, DType::I64, logits.device(), ctx);
    ops::zero(ctx, counts_);
  }
  ops::segmentation_confusion(ctx, logits, labels, counts_);
}

void SegmentationCounts::reset(Context& ctx) {
  if (!counts_.empty()) ops::zero(ctx, counts_);
}

std::vector<int64_t> SegmentationCounts::counts(Context& ctx) const {
  if (counts_.empty()) return std::vector<int64_t>(static_cast<size_t>(k_ * k_), 0);
  const Tensor h = counts_.device() == Device::CPU ? counts_ : counts_.to(Device::CPU, ctx);
  return std::vector<int64_t>(h.data<int64_t>(), h.data<int64_t>() + h.numel());
}

}  // namespace pdnn
