// MaxPool2d: shape logic; the kernels are in ops/pool.
#include "layers/maxpool2d.h"

#include <limits>

#include "core/error.h"

namespace pdnn {



MaxPool2d::MaxPool2d(int kernel, int stride) : k_(kernel), s_(stride > 0 ? stride : kernel) {
  PDNN_CHECK(kernel >= 1 && kernel <= kMaxPoolKernelMax,
             "MaxPool2d: kernel %d must be 1..%lld (the argmax is a one-byte offset in the window)",
             kernel, static_cast<long long>(kMaxPoolKernelMax));
}

std::string MaxPool2d::describe() const {
  return drop_p_ < 0.f ? strprintf("MaxPool2d(k%d s%d)", k_, s_)
                       : strprintf("MaxPool2d(k%d s%d) + Dropout(%g)", k_, s_, drop_p_);
}

bool MaxPool2d::fuse_dropout(float p) {
  // Overlapping windows would sum masked products (see ops/maxpool2d.h): left to the Dropout layer.
  if (drop_p_ >= 0.f || p < 0.f || p >= 1.f || s_ < k_) return false;
  drop_p_ = p;
  return true;
}

bool MaxPool2d::fold_input_activation(const Act& a) {
  // Overlapping windows would sum before the activation's derivative, as no layer pair does.
  if (in_act_.kind != FusedAct::None || a.kind == FusedAct::None || s_ < k_) return false;
  in_act_ = a;
  return true;
}

Pool2d MaxPool2d::geometry(const Shape& in) const {
  PDNN_CHECK(in.rank() == 4, "MaxPool2d: input %s must be NCHW (rank 4)", in.str().c_str());
  PDNN_CHECK(in.h() >= k_ && in.w() >= k_,
             "MaxPool2d(k%d s%d): input %s is smaller than the kernel", k_, s_, in.str().c_str());
  // The GPU kernels index within a plane in 32 bits; the argmax is an offset in the window.
  PDNN_CHECK(in.h() * in.w() <= std::numeric_limits<int32_t>::max(),
             "MaxPool2d: input plane of %s too large for 32-bit indices", in.str().c_str());
  return Pool2d{in.n() * in.c(),        in.h(), in.w(), (in.h() - k_) / s_ + 1,
                (in.w() - k_) / s_ + 1, k_,     s_};
}

Shape MaxPool2d::output_shape(const Shape& in) const {
  const Pool2d g = geometry(in);
  return Shape{in.n(), in.c(), g.oh, g.ow};
}

double MaxPool2d::flops(const Shape& in) const {
  const Pool2d g = geometry(in);
  return static_cast<double>(g.planes * g.oh * g.ow * g.k * g.k);
}

BackwardNeeds MaxPool2d::backward_needs(const Shape& in, const PlanFor& p) const {
  (void)p;  // the argmax is one byte and a fused dropout's mask float32 in any precision
  const int64_t n = output_shape(in).numel();
  const bool mask = drop_p_ >= 0.f && training_;
  BackwardNeeds b;
  b.input = !keep_argmax_;
  b.output = in_act_.kind != FusedAct::None;
  b.scratch_bytes = n * static_cast<int64_t>((keep_argmax_ ? sizeof(uint8_t) : 0) +
                                             (mask ? sizeof(float) : 0));
  b.recomputable = true;
  b.argmax_bytes = n * static_cast<int64_t>(sizeof(uint8_t));
  return b;
}

void MaxPool2d::forward(Context& ctx, const Tensor& x, Tensor& y) {
  const Pool2d g = geometry(x.shape());
  check_same_shape("MaxPool2d forward: y vs expected", y.shape(), output_shape(x.shape()));
  // Only a training forward keeps anything for backward.
  recorded_ = keep_argmax_ && training_;
  if (recorded_) argmax_.resize(y.shape(), DType::U8, x.device(), ctx);
  last_ = x.shape();
  masked_ = drop_p_ >= 0.f && training_;
  if (!masked_) {
    ops::maxpool2d_forward(ctx, g, x, y, recorded_ ? &argmax_ : nullptr);
    return;
  }
  mask_.resize(y.shape(), DType::F32, x.device(), ctx);
  ops::maxpool2d_dropout_forward(ctx, g, drop_p_, x, y, recorded_ ? &argmax_ : nullptr, mask_);
}

void MaxPool2d::backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                         Tensor* dx) {
  if (!dx) return;
  check_same_shape("MaxPool2d backward: x vs last forward's input", x.shape(), last_);
  check_same_shape("MaxPool2d backward: dy vs y", dy.shape(), y.shape());
  check_same_shape("MaxPool2d backward: dx vs x", dx->shape(), x.shape());
  const Tensor* am = recorded_ ? &argmax_ : nullptr;
  if (masked_)
    ops::maxpool2d_dropout_backward(ctx, geometry(x.shape()), &x, dy, am, mask_, *dx, &y,
                                    in_act_);
  else
    ops::maxpool2d_backward(ctx, geometry(x.shape()), &x, dy, am, *dx, &y, in_act_);
}

}  // namespace pdnn
