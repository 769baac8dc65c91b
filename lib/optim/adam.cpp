// Adam: construction checks and the fused update (formulas in adam.h, kernel in ops/optim).
#include "optim/adam.h"

#include "core/error.h"
#include "ops/optim.h"

namespace pdnn {

Adam::Adam(ParamSet& params, double lr, double beta1, double beta2, double eps,
           double weight_decay)
    : Optimizer(params), beta1_(beta1), beta2_(beta2), eps_(eps), weight_decay_(weight_decay) {
  PDNN_CHECK(lr >= 0, "adam: invalid learning rate %g", lr);
  PDNN_CHECK(eps >= 0, "adam: invalid eps %g", eps);
  PDNN_CHECK(beta1 >= 0 && beta1 < 1, "adam: invalid beta1 %g (needs [0,1))", beta1);
  PDNN_CHECK(beta2 >= 0 && beta2 < 1, "adam: invalid beta2 %g (needs [0,1))", beta2);
  PDNN_CHECK(weight_decay >= 0, "adam: invalid weight_decay %g", weight_decay);
  lr_ = static_cast<float>(lr);
  exp_avg_ = state_like(0.f);
  exp_avg_sq_ = state_like(0.f);
}

std::vector<std::pair<const char*, Tensor*>> Adam::slots() {
  return {{"exp_avg", &exp_avg_}, {"exp_avg_sq", &exp_avg_sq_}};
}

void Adam::update_views(Context& ctx, const Tensor& step, const Tensor& g, Tensor& w,
                        std::vector<Tensor>& state) {
  // Hyper-parameters as PyTorch's Python floats (double); the kernel rounds them once.
  const AdamArgs a{static_cast<double>(lr_), beta1_, beta2_, static_cast<float>(eps_),
                   static_cast<float>(weight_decay_)};
  ops::adam_update(ctx, a, step, g, w, state.at(0), state.at(1));
}

}  // namespace pdnn
