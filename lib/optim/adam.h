// Adam (L2 weight decay added to the gradient, not AdamW), exactly as torch/optim/adam.py
// (PyTorch 1.13, _single_tensor_adam, amsgrad off):
//   g' = g + weight_decay * w
//   exp_avg = beta1 * exp_avg + (1 - beta1) * g'
//   exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * g'^2
//   bias_correction1 = 1 - beta1^step, bias_correction2 = 1 - beta2^step   (step = steps())
//   denom = sqrt(exp_avg_sq) / sqrt(bias_correction2) + eps
//   w -= (lr / bias_correction1) * exp_avg / denom
// State: "<i>.exp_avg", "<i>.exp_avg_sq".
#pragma once
#include "optim/optimizer.h"

namespace pdnn {

class Adam : public Optimizer {
 public:
  Adam(std::vector<Param> params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999,
       double eps = 1e-8, double weight_decay = 0);
  std::string kind() const override { return "adam"; }
  void update(Context& ctx, size_t i) override;
  std::vector<std::pair<std::string, Tensor*>> state() override;

 private:
  double beta1_, beta2_, eps_, weight_decay_;
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
};

namespace cpu {
// w, m (exp_avg), v (exp_avg_sq) (n) updated in place from g (n) as above; keep1 = 1 - beta1,
// keep2 = 1 - beta2 (rounded from double, as PyTorch hands Python floats to the float kernel);
// step_size = lr / bias_correction1 and bc2_sqrt = sqrt(bias_correction2) come from the step
// count.
void adam_update(float* w, float* m, float* v, const float* g, int64_t n, float beta1, float keep1,
                 float beta2, float keep2, float eps, float weight_decay, float step_size,
                 float bc2_sqrt);
}  // namespace cpu

}  // namespace pdnn
