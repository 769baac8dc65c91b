// SGD: construction checks, dispatch and the CPU update (formulas in sgd.h).
#include "optim/sgd.h"

#include "core/error.h"
#include "core/parallel.h"
#include "optim/optim_state.h"

namespace pdnn {

namespace cpu {

void sgd_update(float* w, float* buf, const float* g, int64_t n, float lr, float momentum,
                float keep, float weight_decay, bool nesterov, bool first) {
#pragma omp parallel for if(PDNN_PAR(n))
  for (int64_t i = 0; i < n; ++i) {
    float d = weight_decay != 0.f ? g[i] + weight_decay * w[i] : g[i];
    if (buf) {
      buf[i] = first ? d : buf[i] * momentum + keep * d;
      d = nesterov ? d + momentum * buf[i] : buf[i];
    }
    w[i] -= lr * d;
  }
}

}  // namespace cpu

Sgd::Sgd(std::vector<Param> params, double lr, double momentum, double weight_decay,
         double dampening, bool nesterov)
    : Optimizer(std::move(params)),
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
  if (momentum_ != 0) buf_ = state_like(params_, 0.f);
}

void Sgd::update(Context& ctx, size_t i) {
  (void)ctx;
  const Param& p = params_[i];
  check_param("sgd", i, p);
  cpu::sgd_update(p.value->data(), buf_.empty() ? nullptr : buf_[i].data(), p.grad->data(),
                  p.value->numel(), lr_, static_cast<float>(momentum_),
                  static_cast<float>(1.0 - dampening_), static_cast<float>(weight_decay_),
                  nesterov_, steps_ <= 1);
}

std::vector<std::pair<std::string, Tensor*>> Sgd::state() {
  if (buf_.empty()) return {};
  return name_state({{"momentum_buffer", &buf_}});
}

}  // namespace pdnn
