// Adadelta: construction checks and the fused update (formulas in adadelta.h, kernel in
// ops/optim).
#include "optim/adadelta.h"

#include "core/error.h"
#include "ops/optim.h"

namespace pdnn {

Adadelta::Adadelta(ParamSet& params, double lr, double rho, double eps, double weight_decay)
    : Optimizer(params), rho_(rho), eps_(eps), weight_decay_(weight_decay) {
  PDNN_CHECK(lr >= 0, "adadelta: invalid learning rate %g", lr);
  PDNN_CHECK(rho >= 0 && rho <= 1, "adadelta: invalid rho %g (needs [0,1])", rho);
  PDNN_CHECK(eps >= 0, "adadelta: invalid eps %g", eps);
  PDNN_CHECK(weight_decay >= 0, "adadelta: invalid weight_decay %g", weight_decay);
  lr_ = static_cast<float>(lr);
  square_avg_ = state_like(0.f);
  acc_delta_ = state_like(0.f);
}

std::vector<std::pair<const char*, Tensor*>> Adadelta::slots() {
  return {{"square_avg", &square_avg_}, {"acc_delta", &acc_delta_}};
}

void Adadelta::update_views(Context& ctx, const Tensor&, const Tensor& g, Tensor& w,
                            std::vector<Tensor>& state) {
  const AdadeltaArgs a{lr_, static_cast<float>(rho_), static_cast<float>(1.0 - rho_),
                       static_cast<float>(eps_), static_cast<float>(weight_decay_)};
  ops::adadelta_update(ctx, a, g, w, state.at(0), state.at(1));
}

}  // namespace pdnn
