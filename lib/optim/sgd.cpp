// SGD: construction checks and the fused update (formulas in sgd.h, kernel in ops/optim).
#include "optim/sgd.h"

#include "core/error.h"
#include "ops/optim.h"

namespace pdnn {

Sgd::Sgd(ParamSet& params, double lr, double momentum, double weight_decay, double dampening,
         bool nesterov)
    : Optimizer(params),
      momentum_(momentum),
      weight_decay_(weight_decay),
      dampening_(dampening),
      nesterov_(nesterov) {
  PDNN_CHECK(lr >= 0, "sgd: invalid learning rate %g", lr);
  PDNN_CHECK(momentum >= 0, "sgd: invalid momentum %g", momentum);
  PDNN_CHECK(weight_decay >= 0, "sgd: invalid weight_decay %g", weight_decay);
  PDNN_CHECK(!nesterov || (momentum > 0 && dampening == 0),
             "sgd: nesterov needs momentum > 0 and dampening 0 (got momentum %g, dampening %g)",
             momentum, dampening);
  lr_ = static_cast<float>(lr);
  if (momentum_ != 0) buf_ = state_like(0.f);
}

std::vector<std::pair<const char*, Tensor*>> Sgd::slots() {
  return {{"momentum_buffer", &buf_}};
}

void Sgd::update_views(Context& ctx, const Tensor& step, const Tensor& g, Tensor& w,
                       std::vector<Tensor>& state) {
  const SgdArgs a{lr_, static_cast<float>(momentum_), static_cast<float>(1.0 - dampening_),
                  static_cast<float>(weight_decay_), nesterov_, !state.empty()};
  Tensor none;
  ops::sgd_update(ctx, a, step, g, w, state.empty() ? none : state[0]);
}

}  // namespace pdnn
