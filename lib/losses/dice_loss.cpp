// Soft Dice loss: buffers and shapes; the kernels are in ops/loss.
#include "losses/dice_loss.h"

#include <vector>

#include "core/error.h"
#include "ops/loss.h"

namespace pdnn {

DiceLoss::DiceLoss(float smooth) : smooth_(smooth) {
  PDNN_CHECK(smooth >= 0.f, "dice loss: smoothing %g must be >= 0", static_cast<double>(smooth));
}

namespace {

// The buffers a forward on logits s holds, in the order probs, parts, stats, loss, labels: one
// description for forward's sizes and for the memory plan's count (buffer_bytes).
struct Buffer {
  Shape shape;
  DType dtype;
};
std::vector<Buffer> buffers_for(const Shape& s) {
  const int64_t k = s[1], rows = s.numel() / k;
  return {{s, DType::F32},
          {Shape{loss_chunks(rows) * k * 3}, DType::F64},
          {Shape{3 * k + 1}, DType::F64},
          {Shape{1}, DType::F32},
          {Shape{rows}, DType::I32}};
}

}  // namespace

void DiceLoss::forward(Context& ctx, const Tensor& logits, const Tensor& labels) {
  const Shape& s = logits.shape();
  PDNN_CHECK((s.rank() == 2 || s.rank() == 4) && s[0] > 0 && s[1] > 0,
             "dice loss: logits must be a map (N,K,H,W) or (N,K), got %s", s.str().c_str());
  const Device d = logits.device();
  in_shape_ = s;
  const std::vector<Buffer> b = buffers_for(s);
  Tensor* held[] = {&probs_, &parts_, &stats_, &loss_, &labels_};
  for (size_t i = 0; i < b.size(); ++i) held[i]->resize(b[i].shape, b[i].dtype, d, ctx);
  ops::dice_forward(ctx, smooth_, logits, labels, probs_, parts_, stats_, loss_);
  copy_into(labels_, labels.reshape(labels_.shape()), ctx);
}

std::vector<int64_t> DiceLoss::buffer_bytes(const Shape& logits) {
  std::vector<int64_t> bytes;
  for (const Buffer& b : buffers_for(logits))
    bytes.push_back(b.shape.numel() * static_cast<int64_t>(dtype_size(b.dtype)));
  return bytes;
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
