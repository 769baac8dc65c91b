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
  if (training_ && shards_ > 1) {
    forward_shards(ctx, g, x, y);
  } else if (training_) {
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
  if (batch_stats_ && shards_ > 1) return backward_shards(ctx, g, x, y, dy, dx);
  Tensor none;
  ops::batchnorm2d_backward(ctx, g, batch_stats_, x, y, dy, mean_, invstd_,
                            affine_ ? gamma_ : none, grads ? dgamma_ : none,
                            grads ? dbeta_ : none, dx);
}

void BatchNorm2d::set_stat_shards(int shards) {
  PDNN_CHECK(shards >= 1, "BatchNorm2d: %d statistics shards", shards);
  PDNN_CHECK(shards == 1 || running_mean_.device() == Device::CPU,
             "BatchNorm2d: statistics per shard are implemented on the CPU only");
  shards_ = shards;
}

namespace {
// Rows [lo, hi) of shard k (shard_rows of the data-parallel loader), as a view of t.
Tensor shard_of(const Tensor& t, int k, int shards) {
  const int64_t n = t.shape(0), lo = n * k / shards, hi = n * (k + 1) / shards;
  const int64_t per = t.numel() / n;
  return t.slice(lo * per, Shape{hi - lo, t.shape(1), t.shape(2), t.shape(3)});
}
}  // namespace

void BatchNorm2d::forward_shards(Context& ctx, const BnGeom& g, const Tensor& x, Tensor& y) {
  PDNN_CHECK(x.device() == Device::CPU, "BatchNorm2d: statistics per shard on the CPU only");
  PDNN_CHECK(g.n >= shards_ && (g.n / shards_) * g.hw > 1,
             "BatchNorm2d: %d statistics shards of a batch %s need more than one value per "
             "channel each", shards_, x.shape().str().c_str());
  mean_.resize(Shape{shards_ * c_}, DType::F32, x.device(), ctx);
  invstd_.resize(Shape{shards_ * c_}, DType::F32, x.device(), ctx);
  for (Tensor* t : {&rm_sum_, &rv_sum_, &rm_k_, &rv_k_})
    t->resize(Shape{c_}, DType::F32, Device::CPU, ctx);
  rm_sum_.fill(0.f);
  rv_sum_.fill(0.f);
  static const Tensor none;
  for (int k = 0; k < shards_; ++k) {
    const Tensor xk = shard_of(x, k, shards_);
    Tensor yk = shard_of(y, k, shards_);
    BnGeom gk = g;
    gk.n = xk.shape(0);
    // Each shard updates the running statistics from the same old values, as each rank does.
    copy_into(rm_k_, running_mean_, ctx);
    copy_into(rv_k_, running_var_, ctx);
    Tensor mk = mean_.slice(k * c_, Shape{c_}), ik = invstd_.slice(k * c_, Shape{c_});
    ops::batchnorm2d_forward_train(ctx, gk, xk, affine_ ? gamma_ : none, affine_ ? beta_ : none,
                                   rm_k_, rv_k_, mk, ik, yk);
    for (int64_t c = 0; c < c_; ++c) {
      rm_sum_.data()[c] += rm_k_.data()[c];
      rv_sum_.data()[c] += rv_k_.data()[c];
    }
  }
  for (int64_t c = 0; c < c_; ++c) {
    running_mean_.data()[c] = rm_sum_.data()[c] / static_cast<float>(shards_);
    running_var_.data()[c] = rv_sum_.data()[c] / static_cast<float>(shards_);
  }
}

void BatchNorm2d::backward_shards(Context& ctx, const BnGeom& g, const Tensor& x,
                                  const Tensor& y, const Tensor& dy, Tensor* dx) {
  const bool grads = affine_ && param_grads_;
  Tensor none;
  for (int k = 0; k < shards_; ++k) {
    BnGeom gk = g;
    const Tensor xk = shard_of(x, k, shards_);
    gk.n = xk.shape(0);
    Tensor dxk = dx ? shard_of(*dx, k, shards_) : Tensor();
    // dgamma and dbeta accumulate (+=) over the shards, as the ranks' all-reduce sums them.
    ops::batchnorm2d_backward(ctx, gk, true, xk, shard_of(y, k, shards_),
                              shard_of(dy, k, shards_), mean_.slice(k * c_, Shape{c_}),
                              invstd_.slice(k * c_, Shape{c_}), affine_ ? gamma_ : none,
                              grads ? dgamma_ : none, grads ? dbeta_ : none,
                              dx ? &dxk : nullptr);
  }
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
