// Dense: shape logic; the math is in ops/dense.
#include "layers/dense.h"

#include "core/error.h"
#include "core/init.h"
#include "ops/dense.h"

namespace pdnn {


Dense::Dense(int64_t in_features, int64_t out_features, bool bias)
    : in_(in_features), out_(out_features), has_bias_(bias) {
  PDNN_CHECK(in_features >= 1 && out_features >= 1, "Dense: features %lld -> %lld must be >= 1",
             static_cast<long long>(in_features), static_cast<long long>(out_features));
  w_ = Tensor::zeros(Shape{out_, in_});
  dw_ = Tensor::zeros(Shape{out_, in_});
  if (has_bias_) {
    b_ = Tensor::zeros(Shape{out_});
    db_ = Tensor::zeros(Shape{out_});
  }
}

std::string Dense::describe() const {
  return strprintf("Dense(%lld->%lld%s)%s", static_cast<long long>(in_),
                   static_cast<long long>(out_), has_bias_ ? "" : ", no bias",
                   act_.kind == FusedAct::None
                       ? ""
                       : (std::string(" + ") + fused_act_name(act_.kind)).c_str());
}

bool Dense::fuse_activation(const Act& a) {
  if (act_.kind != FusedAct::None || a.kind == FusedAct::None) return false;
  act_ = a;
  return true;
}

Shape Dense::output_shape(const Shape& in) const {
  PDNN_CHECK(in.rank() == 2 || in.rank() == 4,
             "Dense: input %s must be (N,features) or (N,C,H,W); weight %s", in.str().c_str(),
             w_.shape().str().c_str());
  PDNN_CHECK(in.per_sample() == in_,
             "Dense: input %s has %lld features per sample, weight %s expects %lld",
             in.str().c_str(), static_cast<long long>(in.per_sample()), w_.shape().str().c_str(),
             static_cast<long long>(in_));
  return Shape{in.n(), out_};
}

void Dense::forward(Context& ctx, const Tensor& x, Tensor& y) {
  check_same_shape("Dense forward: y vs expected", y.shape(), output_shape(x.shape()));
  ops::dense_forward(ctx, x, weight_for(x, w_, w16_, "Dense"), b_, y, act_);
}

void Dense::backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) {
  check_same_shape("Dense backward: y vs expected", y.shape(), output_shape(x.shape()));
  check_same_shape("Dense backward: dy vs y", dy.shape(), y.shape());
  if (dx) check_same_shape("Dense backward: dx vs x", dx->shape(), x.shape());
  ops::dense_backward(ctx, x, weight_for(x, w_, w16_, "Dense"), dy, y, dw_, db_, dx, act_,
                      take_grads_zero());
}

std::vector<Param> Dense::params() {
  std::vector<Param> ps{{"weight", &w_, &dw_}};
  if (has_bias_) ps.push_back({"bias", &b_, &db_});
  return ps;
}

double Dense::flops(const Shape& in) const {
  return 2.0 * static_cast<double>(output_shape(in).n()) * static_cast<double>(in_) *
         static_cast<double>(out_);
}

void Dense::reset_parameters(Rng& rng) { init::torch_default(w_, has_bias_ ? &b_ : nullptr, rng); }

void Dense::set_bf16_params(const std::vector<Tensor>& copies) {
  w16_ = copies.empty() ? Tensor() : copies.front();  // params()[0] is the weight
}

}  // namespace pdnn
