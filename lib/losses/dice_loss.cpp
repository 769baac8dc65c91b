// Soft Dice loss: buffers and shapes; the kernels are in ops/loss.
#include "losses/dice_loss.h"

#include <vector>

#include "core/error.h"
#include "ops/loss.h"

namespace pdnn {

DiceLoss::DiceLoss(float smooth) : smooth_(smooth) {
  PDNN_CHECK(smooth >= 0.f, "dice loss: smoothing %g must be >= 0", static_cast<double>(smooth));
}

void DiceLoss::forward(Context& ctx, const Tensor& logits, const Tensor& labels) {
  const Shape& s = logits.shape();
  PDNN_CHECK((s.rank() == 2 || s.rank() == 4) && s[0] > 0 && s[1] > 0,
             "dice loss: logits must be a map (N,K,H,W) or (N,K), got %s", s.str().c_str());
  const int64_t k = s[1], rows = s.numel() / k;
  const Device d = logits.device();
  in_shape_ = s;
  probs_.resize(s, DType::F32, d, ctx);
  parts_.resize(Shape{loss_chunks(rows) * k * 3}, DType::F64, d, ctx);
  stats_.resize(Shape{3 * k + 1}, DType::F64, d, ctx);
  loss_.resize(Shape{1}, DType::F32, d, ctx);
  labels_.resize(Shape{rows}, DType::I32, d, ctx);
  ops::dice_forward(ctx, smooth_, logits, labels, probs_, parts_, stats_, loss_);
  copy_into(labels_, labels.reshape(Shape{rows}), ctx);
}

std::vector<int64_t> DiceLoss::buffer_bytes(const Shape& logits) {
  const int64_t k = logits[1], rows = logits.numel() / k;
  return {logits.numel() * 4, loss_chunks(rows) * k * 3 * 8, (3 * k + 1) * 8, 4, rows * 4};
}

int64_t DiceLoss::held_bytes() const {
  int64_t b = 0;
  for (const Tensor* t : {&probs_, &parts_, &stats_, &loss_, &labels_})
    b += static_cast<int64_t>(t->nbytes());
  return b;
}

float DiceLoss::loss(Context& ctx) const {
  PDNN_CHECK(!loss_.empty(), "dice loss: loss() before forward");
  return (loss_.device() == Device::CPU ? loss_ : loss_.to(Device::CPU, ctx))[0];
}

void DiceLoss::accumulate(Context& ctx, Tensor& acc, int64_t slot) const {
  PDNN_CHECK(!loss_.empty(), "dice loss: accumulate() before forward");
  ops::sum_into(ctx, 1.f, loss_, acc, slot);
}

void DiceLoss::backward(Context& ctx, Tensor& dlogits, float weight, bool add) {
  PDNN_CHECK(!labels_.empty(), "dice loss: backward before forward");
  if (add) {
    PDNN_CHECK(dlogits.shape() == in_shape_ && dlogits.device() == probs_.device(),
               "dice loss: adding to a gradient %s, the logits are %s",
               dlogits.shape().str().c_str(), in_shape_.str().c_str());
  } else {
    dlogits.resize(in_shape_, DType::F32, probs_.device(), ctx);
  }
  ops::dice_backward(ctx, smooth_, weight, probs_, labels_, stats_, dlogits, add);
}

std::vector<double> DiceLoss::stats(Context& ctx) const {
  PDNN_CHECK(!stats_.empty(), "dice loss: stats() before forward");
  const Tensor h = stats_.device() == Device::CPU ? stats_ : stats_.to(Device::CPU, ctx);
  return std::vector<double>(h.data<double>(), h.data<double>() + h.numel());
}

}  // namespace pdnn
