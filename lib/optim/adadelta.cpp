// Adadelta: construction checks, dispatch and the CPU update (formulas in adadelta.h).
#include "optim/adadelta.h"

#include <cmath>

#include "core/error.h"
#include "core/parallel.h"
#include "optim/optim_state.h"

namespace pdnn {

namespace cpu {

void adadelta_update(float* w, float* square_avg, float* acc_delta, const float* g, int64_t n,
                     float lr, float rho, float keep, float eps, float weight_decay) {
#pragma omp parallel for if(PDNN_PAR(n))
  for (int64_t i = 0; i < n; ++i) {
    const float d = weight_decay != 0.f ? g[i] + weight_decay * w[i] : g[i];
    square_avg[i] = square_avg[i] * rho + keep * (d * d);
    const float std_ = std::sqrt(square_avg[i] + eps);
    const float delta = std::sqrt(acc_delta[i] + eps) / std_ * d;
    acc_delta[i] = acc_delta[i] * rho + keep * (delta * delta);
    w[i] -= lr * delta;
  }
}

}  // namespace cpu

Adadelta::Adadelta(std::vector<Param> params, double lr, double rho, double eps,
                   double weight_decay)
    : Optimizer(std::move(params)), rho_(rho), eps_(eps), weight_decay_(weight_decay) {
  PDNN_CHECK(lr >= 0, "adadelta: invalid learning rate %g", lr);
  PDNN_CHECK(rho >= 0 && rho <= 1, "adadelta: invalid rho %g (needs [0,1])", rho);
  PDNN_CHECK(eps >= 0, "adadelta: invalid eps %g", eps);
  PDNN_CHECK(weight_decay >= 0, "adadelta: invalid weight_decay %g", weight_decay);
  lr_ = static_cast<float>(lr);
  square_avg_ = state_like(params_, 0.f);
  acc_delta_ = state_like(params_, 0.f);
}

void Adadelta::update(Context& ctx, size_t i) {
  (void)ctx;
  const Param& p = params_[i];
  check_param("adadelta", i, p);
  cpu::adadelta_update(p.value->data(), square_avg_[i].data(), acc_delta_[i].data(), p.grad->data(),
                       p.value->numel(), lr_, static_cast<float>(rho_),
                       static_cast<float>(1.0 - rho_), static_cast<float>(eps_),
                       static_cast<float>(weight_decay_));
}

std::vector<std::pair<std::string, Tensor*>> Adadelta::state() {
  return name_state({{"square_avg", &square_avg_}, {"acc_delta", &acc_delta_}});
}

}  // namespace pdnn
