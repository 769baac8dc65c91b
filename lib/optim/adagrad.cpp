// Adagrad: construction checks, dispatch and the CPU update (formulas in adagrad.h).
#include "optim/adagrad.h"

#include <cmath>

#include "core/error.h"
#include "core/parallel.h"
#include "optim/optim_state.h"

namespace pdnn {

namespace cpu {

void adagrad_update(float* w, float* sum, const float* g, int64_t n, float clr, float weight_decay,
                    float eps) {
#pragma omp parallel for if(PDNN_PAR(n))
  for (int64_t i = 0; i < n; ++i) {
    const float d = weight_decay != 0.f ? g[i] + weight_decay * w[i] : g[i];
    sum[i] += d * d;
    w[i] -= clr * (d / (std::sqrt(sum[i]) + eps));
  }
}

}  // namespace cpu

Adagrad::Adagrad(std::vector<Param> params, double lr, double lr_decay, double weight_decay,
                 double initial_accumulator_value, double eps)
    : Optimizer(std::move(params)), lr_decay_(lr_decay), weight_decay_(weight_decay), eps_(eps) {
  PDNN_CHECK(lr >= 0, "adagrad: invalid learning rate %g", lr);
  PDNN_CHECK(lr_decay >= 0, "adagrad: invalid lr_decay %g", lr_decay);
  PDNN_CHECK(weight_decay >= 0, "adagrad: invalid weight_decay %g", weight_decay);
  PDNN_CHECK(initial_accumulator_value >= 0, "adagrad: invalid initial_accumulator_value %g",
             initial_accumulator_value);
  PDNN_CHECK(eps >= 0, "adagrad: invalid eps %g", eps);
  lr_ = static_cast<float>(lr);
  sum_ = state_like(params_, static_cast<float>(initial_accumulator_value));
}

void Adagrad::update(Context& ctx, size_t i) {
  (void)ctx;
  const Param& p = params_[i];
  check_param("adagrad", i, p);
  // In double as PyTorch's Python float arithmetic, then rounded once.
  const double clr = static_cast<double>(lr_) / (1.0 + static_cast<double>(steps_ - 1) * lr_decay_);
  cpu::adagrad_update(p.value->data(), sum_[i].data(), p.grad->data(), p.value->numel(),
                      static_cast<float>(clr), static_cast<float>(weight_decay_),
                      static_cast<float>(eps_));
}

std::vector<std::pair<std::string, Tensor*>> Adagrad::state() {
  return name_state({{"sum", &sum_}});
}

}  // namespace pdnn
