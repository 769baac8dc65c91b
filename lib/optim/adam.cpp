// Adam: construction checks, dispatch and the CPU update (formulas in adam.h).
#include "optim/adam.h"

#include <cmath>

#include "core/error.h"
#include "core/parallel.h"
#include "optim/optim_state.h"

namespace pdnn {

namespace cpu {

void adam_update(float* w, float* m, float* v, const float* g, int64_t n, float beta1, float keep1,
                 float beta2, float keep2, float eps, float weight_decay, float step_size,
                 float bc2_sqrt) {
#pragma omp parallel for if(PDNN_PAR(n))
  for (int64_t i = 0; i < n; ++i) {
    const float d = weight_decay != 0.f ? g[i] + weight_decay * w[i] : g[i];
    m[i] = m[i] * beta1 + keep1 * d;
    v[i] = v[i] * beta2 + keep2 * (d * d);
    const float denom = std::sqrt(v[i]) / bc2_sqrt + eps;
    w[i] -= step_size * (m[i] / denom);
  }
}

}  // namespace cpu

Adam::Adam(std::vector<Param> params, double lr, double beta1, double beta2, double eps,
           double weight_decay)
    : Optimizer(std::move(params)),
      beta1_(beta1),
      beta2_(beta2),
      eps_(eps),
      weight_decay_(weight_decay) {
  PDNN_CHECK(lr >= 0, "adam: invalid learning rate %g", lr);
  PDNN_CHECK(eps >= 0, "adam: invalid eps %g", eps);
  PDNN_CHECK(beta1 >= 0 && beta1 < 1, "adam: invalid beta1 %g (needs [0,1))", beta1);
  PDNN_CHECK(beta2 >= 0 && beta2 < 1, "adam: invalid beta2 %g (needs [0,1))", beta2);
  PDNN_CHECK(weight_decay >= 0, "adam: invalid weight_decay %g", weight_decay);
  lr_ = static_cast<float>(lr);
  exp_avg_ = state_like(params_, 0.f);
  exp_avg_sq_ = state_like(params_, 0.f);
}

void Adam::update(Context& ctx, size_t i) {
  (void)ctx;
  const Param& p = params_[i];
  check_param("adam", i, p);
  PDNN_CHECK(steps_ >= 1, "adam: update() before begin_step() (bias correction needs step >= 1)");
  // Python-float (double) arithmetic in PyTorch; rounded to float once for the kernel.
  const double step = static_cast<double>(steps_);
  const double bc1 = 1.0 - std::pow(beta1_, step);
  const double bc2 = 1.0 - std::pow(beta2_, step);
  cpu::adam_update(
      p.value->data(), exp_avg_[i].data(), exp_avg_sq_[i].data(), p.grad->data(), p.value->numel(),
      static_cast<float>(beta1_), static_cast<float>(1.0 - beta1_), static_cast<float>(beta2_),
      static_cast<float>(1.0 - beta2_), static_cast<float>(eps_), static_cast<float>(weight_decay_),
      static_cast<float>(static_cast<double>(lr_) / bc1), static_cast<float>(std::sqrt(bc2)));
}

std::vector<std::pair<std::string, Tensor*>> Adam::state() {
  return name_state({{"exp_avg", &exp_avg_}, {"exp_avg_sq", &exp_avg_sq_}});
}

}  // namespace pdnn
