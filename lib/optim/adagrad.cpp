// Adagrad: construction checks and the fused update (formulas in adagrad.h, kernel in ops/optim).
#include "optim/adagrad.h"

#include "core/error.h"
#include "ops/optim.h"

namespace pdnn {

Adagrad::Adagrad(ParamSet& params, double lr, double lr_decay, double weight_decay,
                 double initial_accumulator_value, double eps)
    : Optimizer(params), lr_decay_(lr_decay), weight_decay_(weight_decay), eps_(eps) {
  PDNN_CHECK(lr >= 0, "adagrad: invalid learning rate %g", lr);
  PDNN_CHECK(lr_decay >= 0, "adagrad: invalid lr_decay %g", lr_decay);
  PDNN_CHECK(weight_decay >= 0, "adagrad: invalid weight_decay %g", weight_decay);
  PDNN_CHECK(initial_accumulator_value >= 0, "adagrad: invalid initial_accumulator_value %g",
             initial_accumulator_value);
  PDNN_CHECK(eps >= 0, "adagrad: invalid eps %g", eps);
  lr_ = static_cast<float>(lr);
  sum_ = state_like(static_cast<float>(initial_accumulator_value));
}

std::vector<std::pair<const char*, Tensor*>> Adagrad::slots() { return {{"sum", &sum_}}; }

void Adagrad::update_views(Context& ctx, const Tensor& step, const Tensor& g, Tensor& w,
                           std::vector<Tensor>& state) {
  const AdagradArgs a{static_cast<double>(lr_), lr_decay_, static_cast<float>(weight_decay_),
                      static_cast<float>(eps_)};
  ops::adagrad_update(ctx, a, step, g, w, state.at(0));
}

}  // namespace pdnn
