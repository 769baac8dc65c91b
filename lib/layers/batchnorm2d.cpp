// BatchNorm2d: statistics, running-average update, CPU kernels (see batchnorm2d.h).
#include "layers/batchnorm2d.h"

#include <cmath>

#include "core/error.h"
#include "core/parallel.h"

namespace pdnn {

namespace cpu {

void batchnorm2d_stats(float* mean, float* var, const float* x, int64_t n, int64_t c, int64_t hw) {
  const double m = static_cast<double>(n * hw);
  // One channel per iteration, its sums in a fixed order: deterministic at any thread count.
  // Two passes (mean, then squared deviations) avoid the cancellation of E[x^2] - E[x]^2.
  // 'omp simd' sums in vector lanes: a fixed order for a given build, at any thread count.
#pragma omp parallel for if(PDNN_PAR(n * c * hw)) schedule(static)
  for (int64_t ch = 0; ch < c; ++ch) {
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const float* p = x + (i * c + ch) * hw;
#pragma omp simd reduction(+ : s)
      for (int64_t j = 0; j < hw; ++j) s += p[j];
    }
    const double mu = s / m;
    double ss = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const float* p = x + (i * c + ch) * hw;
#pragma omp simd reduction(+ : ss)
      for (int64_t j = 0; j < hw; ++j) {
        const double d = p[j] - mu;
        ss += d * d;
      }
    }
    mean[ch] = static_cast<float>(mu);
    var[ch] = static_cast<float>(ss / m);
  }
}

void batchnorm2d_apply(float* y, const float* x, const float* mean, const float* invstd,
                       const float* gamma, const float* beta, int64_t n, int64_t c, int64_t hw) {
  // Over all N*C planes, which gives more parallel work than channels alone.
#pragma omp parallel for if(PDNN_PAR(n * c * hw)) schedule(static)
  for (int64_t p = 0; p < n * c; ++p) {
    const int64_t ch = p % c;
    const float scale = invstd[ch] * (gamma ? gamma[ch] : 1.f);
    const float shift = (beta ? beta[ch] : 0.f) - mean[ch] * scale;
    const float* xp = x + p * hw;
    float* yp = y + p * hw;
    for (int64_t j = 0; j < hw; ++j) yp[j] = xp[j] * scale + shift;
  }
}

void batchnorm2d_backward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                          const float* mean, const float* invstd, const float* gamma, int64_t n,
                          int64_t c, int64_t hw, bool batch_stats) {
  const double m = static_cast<double>(n * hw);
#pragma omp parallel for if(PDNN_PAR(n * c * hw)) schedule(static)
  for (int64_t ch = 0; ch < c; ++ch) {
    const double mu = mean[ch], is = invstd[ch];
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const float* xp = x + (i * c + ch) * hw;
      const float* dyp = dy + (i * c + ch) * hw;
#pragma omp simd reduction(+ : sum_dy, sum_dy_xhat)
      for (int64_t j = 0; j < hw; ++j) {
        sum_dy += dyp[j];
        sum_dy_xhat += dyp[j] * ((xp[j] - mu) * is);
      }
    }
    if (dgamma) dgamma[ch] += static_cast<float>(sum_dy_xhat);
    if (dbeta) dbeta[ch] += static_cast<float>(sum_dy);
    if (!dx) continue;
    const float g = static_cast<float>((gamma ? gamma[ch] : 1.f) * is);
    // dx = g * (dy - a - xhat * b); in eval mode the statistics are constants, so a = b = 0.
    const float a = batch_stats ? static_cast<float>(sum_dy / m) : 0.f;
    const float b = batch_stats ? static_cast<float>(sum_dy_xhat / m) : 0.f;
    const float muf = mean[ch], isf = invstd[ch];
    for (int64_t i = 0; i < n; ++i) {
      const float* xp = x + (i * c + ch) * hw;
      const float* dyp = dy + (i * c + ch) * hw;
      float* dxp = dx + (i * c + ch) * hw;
      for (int64_t j = 0; j < hw; ++j) dxp[j] = g * (dyp[j] - a - (xp[j] - muf) * isf * b);
    }
  }
}

}  // namespace cpu

BatchNorm2d::BatchNorm2d(int64_t channels, float eps, float momentum, bool affine)
    : c_(channels), eps_(eps), momentum_(momentum), affine_(affine) {
  PDNN_CHECK(channels >= 1, "BatchNorm2d: channels %lld must be >= 1",
             static_cast<long long>(channels));
  PDNN_CHECK(eps > 0.f, "BatchNorm2d: eps %g must be > 0", eps);
  PDNN_CHECK(momentum >= 0.f && momentum <= 1.f, "BatchNorm2d: momentum %g must be in [0, 1]",
             momentum);
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
  var_ = Tensor(s);
  invstd_ = Tensor(s);
  set_defaults();
}

std::string BatchNorm2d::describe() const {
  return strprintf("BatchNorm2d(%lld%s)", static_cast<long long>(c_), affine_ ? "" : ", no affine");
}

Shape BatchNorm2d::output_shape(const Shape& in) const {
  PDNN_CHECK(in.rank() == 4 && in.c() == c_, "BatchNorm2d: input %s must be (N,%lld,H,W)",
             in.str().c_str(), static_cast<long long>(c_));
  return in;
}

void BatchNorm2d::forward(Context& ctx, const Tensor& x, Tensor& y) {
  (void)ctx;
  check_same_shape("BatchNorm2d forward: y vs x", y.shape(), output_shape(x.shape()));
  const int64_t n = x.shape(0), hw = x.shape(2) * x.shape(3);
  float* mean = mean_.data();
  float* var = var_.data();
  float* invstd = invstd_.data();
  batch_stats_ = training_;
  last_ = x.shape();
  if (training_) {
    const int64_t m = n * hw;
    PDNN_CHECK(m > 1, "BatchNorm2d: training needs more than one value per channel, input %s",
               x.shape().str().c_str());
    cpu::batchnorm2d_stats(mean, var, x.data(), n, c_, hw);
    float* rm = running_mean_.data();
    float* rv = running_var_.data();
    const double unbias = static_cast<double>(m) / static_cast<double>(m - 1);
    for (int64_t ch = 0; ch < c_; ++ch) {
      rm[ch] = (1.f - momentum_) * rm[ch] + momentum_ * mean[ch];
      rv[ch] = (1.f - momentum_) * rv[ch] + momentum_ * static_cast<float>(var[ch] * unbias);
    }
  } else {
    for (int64_t ch = 0; ch < c_; ++ch) {
      mean[ch] = running_mean_[ch];
      var[ch] = running_var_[ch];
    }
  }
  for (int64_t ch = 0; ch < c_; ++ch)
    invstd[ch] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(var[ch]) + eps_));
  cpu::batchnorm2d_apply(y.data(), x.data(), mean, invstd, affine_ ? gamma_.data() : nullptr,
                         affine_ ? beta_.data() : nullptr, n, c_, hw);
}

void BatchNorm2d::backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                           Tensor* dx) {
  (void)ctx;
  check_same_shape("BatchNorm2d backward: x vs last forward's input", x.shape(), last_);
  check_same_shape("BatchNorm2d backward: dy vs y", dy.shape(), y.shape());
  check_same_shape("BatchNorm2d backward: dy vs x", dy.shape(), x.shape());
  if (dx) check_same_shape("BatchNorm2d backward: dx vs x", dx->shape(), x.shape());
  if (!dx && !affine_) return;
  cpu::batchnorm2d_backward(dx ? dx->data() : nullptr, affine_ ? dgamma_.data() : nullptr,
                            affine_ ? dbeta_.data() : nullptr, dy.data(), x.data(), mean_.data(),
                            invstd_.data(), affine_ ? gamma_.data() : nullptr, x.shape(0), c_,
                            x.shape(2) * x.shape(3), batch_stats_);
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
  return static_cast<double>(output_shape(in).numel()) * (training_ ? 4.0 : 2.0);
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
