// BatchNorm2d: shapes and state; the kernels are in ops/batchnorm.
#include "layers/batchnorm2d.h"

#include <cmath>

#include "core/error.h"

namespace pdnn {

BatchNorm2d::BatchNorm2d(int64_t channels, float eps, float momentum, bool affine, FusedAct act,
                         float slope)
    : c_(channels), eps_(eps), momentum_(momentum), affine_(affine), act_(act), slope_(slope) {
  PDNN_CHECK(channels >= 1, "BatchNorm2d: channels %lld must be >= 1",
             static_cast<long long>(channels));
  PDNN_CHECK(eps > 0.f, "BatchNorm2d: eps %g must be > 0", eps);
  PDNN_CHECK(momentum >= 0.f && momentum <= 1.f, "BatchNorm2d: momentum %g must be in [0, 1]",
             momentum);
  // The backward reads the activation's slope off y's sign, which needs slope >= 0.
  PDNN_CHECK(act != FusedAct::LeakyReLU || (slope >= 0.f && std::isfinite(slope)),
             "BatchNorm2d: a fused LeakyReLU needs a finite slope >= 0, not %g", slope);
  const Shape s{c_};
  if (affine_) {
    gamma_ = Tensor(s);
    beta_ = Tensor(s);
    dgamma_ = Tensor::zeros(s);
    dbeta_ = Tensor::zeros(s);
  }
  running_mean_ = Tensor(s);
  running_var_ = Tensor(s);
  mean_ = Tensor(s);
  invstd_ = Tensor(s);
  set_defaults();
}

std::string BatchNorm2d::describe() const {
  const std::string act = act_ == FusedAct::None    ? ""
                          : act_ == FusedAct::ReLU ? " + ReLU"
                                                   : strprintf(" + LeakyReLU(%g)", slope_);
  return strprintf("BatchNorm2d(%lld%s)%s", static_cast<long long>(c_),
                   affine_ ? "" : ", no affine", act.c_str());
}

Shape BatchNorm2d::output_shape(const Shape& in) const {
  PDNN_CHECK(in.rank() == 4 && in.c() == c_, "BatchNorm2d: input %s must be (N,%lld,H,W)",
             in.str().c_str(), static_cast<long long>(c_));
  return in;
}

void BatchNorm2d::forward(Context& ctx, const Tensor& x, Tensor& y) {
  check_same_shape("BatchNorm2d forward: y vs x", y.shape(), output_shape(x.shape()));
  const BnGeom g{x.shape(0), c_, x.shape(2) * x.shape(3), eps_, momentum_, act_, slope_};
  mean_.resize(Shape{c_}, DType::F32, x.device(), ctx);
  invstd_.resize(Shape{c_}, DType::F32, x.device(), ctx);
  batch_stats_ = training_;
  last_ = x.shape();
  static const Tensor none;
  const Tensor& gamma = affine_ ? gamma_ : none;
  const Tensor& beta = affine_ ? beta_ : none;
  if (training_) {
    PDNN_CHECK(g.n * g.hw > 1,
               "BatchNorm2d: training needs more than one value per channel, input %s",
               x.shape().str().c_str());
    ops::batchnorm2d_forward_train(ctx, g, x, gamma, beta, running_mean_, running_var_, mean_,
                                   invstd_, y);
  } else {
    ops::batchnorm2d_forward_eval(ctx, g, x, gamma, beta, running_mean_, running_var_, mean_,
                                  invstd_, y);
  }
}

void BatchNorm2d::backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                           Tensor* dx) {
  check_same_shape("BatchNorm2d backward: x vs last forward's input", x.shape(), last_);
  check_same_shape("BatchNorm2d backward: dy vs y", dy.shape(), y.shape());
  check_same_shape("BatchNorm2d backward: dy vs x", dy.shape(), x.shape());
  if (dx) check_same_shape("BatchNorm2d backward: dx vs x", dx->shape(), x.shape());
  const bool grads = affine_ && param_grads_;
  if (!dx && !grads) return;
  const BnGeom g{x.shape(0), c_, x.shape(2) * x.shape(3), eps_, momentum_, act_, slope_};
  Tensor none;
  ops::batchnorm2d_backward(ctx, g, batch_stats_, x, y, dy, mean_, invstd_,
                            affine_ ? gamma_ : none, grads ? dgamma_ : none,
                            grads ? dbeta_ : none, dx);
}

bool BatchNorm2d::fuse_activation(const Act& a) {
  if (act_ != FusedAct::None || a.kind == FusedAct::None) return false;
  act_ = a.kind;
  slope_ = a.slope;
  return true;
}

std::vector<Param> BatchNorm2d::params() {
  if (!affine_) return {};
  return {{"weight", &gamma_, &dgamma_}, {"bias", &beta_, &dbeta_}};
}

std::vector<Param> BatchNorm2d::buffers() {
  // No gradients: the grad pointers are null.
  return {{"running_mean", &running_mean_, nullptr}, {"running_var", &running_var_, nullptr}};
}

double BatchNorm2d::flops(const Shape& in) const {
  return static_cast<double>(output_shape(in).numel()) *
         ((training_ ? 4.0 : 2.0) + (act_ == FusedAct::None ? 0.0 : 1.0));
}

void BatchNorm2d::reset_parameters(Rng& rng) {
  (void)rng;
  set_defaults();
}

void BatchNorm2d::set_defaults() {
  if (affine_) {
    gamma_.fill(1.f);
    beta_.fill(0.f);
  }
  running_mean_.fill(0.f);
  running_var_.fill(1.f);
}

}  // namespace pdnn
