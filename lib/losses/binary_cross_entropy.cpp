// Binary cross-entropy on probabilities and on logits: checks and buffers; kernels in ops/loss.
#include "losses/binary_cross_entropy.h"

#include "core/error.h"
#include "ops/loss.h"

namespace pdnn {

namespace {

// Checks shapes and (on the CPU) value ranges; copies x and t into the loss's own buffers.
void keep_inputs(Context& ctx, const char* op, const Tensor& x, const Tensor& t, bool x_is_prob,
                 Tensor& x_keep, Tensor& t_keep, Tensor& parts) {
  check_same_shape(op, x.shape(), t.shape());
  PDNN_CHECK(x.device() == t.device(), "%s: input on %s, target on %s", op,
             device_name(x.device()), device_name(t.device()));
  PDNN_CHECK(x.numel() > 0, "%s: empty input %s", op, x.shape().str().c_str());
  const int64_t n = x.numel();
  if (x.device() == Device::CPU) {
    const float* xs = x.data();
    const float* ts = t.data();
    for (int64_t i = 0; i < n; ++i) {
      // Written so that NaN fails too.
      PDNN_CHECK(ts[i] >= 0.f && ts[i] <= 1.f, "%s: target %g at %lld is outside [0,1]", op,
                 static_cast<double>(ts[i]), static_cast<long long>(i));
      PDNN_CHECK(!x_is_prob || (xs[i] >= 0.f && xs[i] <= 1.f),
                 "%s: input %g at %lld is not a probability in [0,1] (use the logits form?)", op,
                 static_cast<double>(xs[i]), static_cast<long long>(i));
    }
  }
  x_keep.resize(x.shape(), DType::F32, x.device(), ctx);
  t_keep.resize(t.shape(), DType::F32, x.device(), ctx);
  copy_into(x_keep, x, ctx);
  copy_into(t_keep, t, ctx);
  parts.resize(Shape{loss_chunks(n)}, DType::F32, x.device(), ctx);
}

float mean_of_parts(Context& ctx, const Tensor& parts, int64_t n) {
  const Tensor host = parts.device() == Device::CPU ? parts : parts.to(Device::CPU, ctx);
  double s = 0.0;
  for (int64_t c = 0; c < host.numel(); ++c) s += host[c];
  return static_cast<float>(s / static_cast<double>(n));
}

float inv(int64_t n) { return static_cast<float>(1.0 / static_cast<double>(n)); }

// What a mean divides by: p's elements, or mean_over (a global batch's, at least p's).
int64_t mean_count(const Tensor& p, int64_t mean_over) {
  PDNN_CHECK(mean_over == 0 || mean_over >= p.numel(),
             "binary_cross_entropy: a mean over %lld values of which this input holds %lld",
             static_cast<long long>(mean_over), static_cast<long long>(p.numel()));
  return mean_over > 0 ? mean_over : p.numel();
}

}  // namespace

void BinaryCrossEntropy::forward(Context& ctx, const Tensor& p, const Tensor& t) {
  keep_inputs(ctx, "binary_cross_entropy", p, t, true, p_, t_, parts_);
  ops::binary_cross_entropy_forward(ctx, p_, t_, parts_);
}

float BinaryCrossEntropy::loss(Context& ctx) const {
  PDNN_CHECK(!p_.empty(), "binary_cross_entropy: loss() before forward");
  return mean_of_parts(ctx, parts_, p_.numel());
}

void BinaryCrossEntropy::accumulate(Context& ctx, Tensor& acc, int64_t slot,
                                    int64_t mean_over) const {
  PDNN_CHECK(!p_.empty(), "binary_cross_entropy: accumulate() before forward");
  ops::sum_into(ctx, inv(mean_count(p_, mean_over)), parts_, acc, slot);
}

void BinaryCrossEntropy::backward(Context& ctx, Tensor& dp, int64_t mean_over) {
  PDNN_CHECK(!p_.empty(), "binary_cross_entropy: backward before forward");
  dp.resize(p_.shape(), DType::F32, p_.device(), ctx);
  ops::binary_cross_entropy_backward(ctx, inv(mean_count(p_, mean_over)), p_, t_, dp);
}

void BinaryCrossEntropyWithLogits::forward(Context& ctx, const Tensor& z, const Tensor& t) {
  keep_inputs(ctx, "binary_cross_entropy_with_logits", z, t, false, z_, t_, parts_);
  ops::bce_with_logits_forward(ctx, z_, t_, parts_);
}

float BinaryCrossEntropyWithLogits::loss(Context& ctx) const {
  PDNN_CHECK(!z_.empty(), "binary_cross_entropy_with_logits: loss() before forward");
  return mean_of_parts(ctx, parts_, z_.numel());
}

void BinaryCrossEntropyWithLogits::accumulate(Context& ctx, Tensor& acc, int64_t slot) const {
  PDNN_CHECK(!z_.empty(), "binary_cross_entropy_with_logits: accumulate() before forward");
  ops::sum_into(ctx, inv(z_.numel()), parts_, acc, slot);
}

void BinaryCrossEntropyWithLogits::backward(Context& ctx, Tensor& dz) {
  PDNN_CHECK(!z_.empty(), "binary_cross_entropy_with_logits: backward before forward");
  dz.resize(z_.shape(), DType::F32, z_.device(), ctx);
  ops::bce_with_logits_backward(ctx, inv(z_.numel()), z_, t_, dz);
}

}  // namespace pdnn
