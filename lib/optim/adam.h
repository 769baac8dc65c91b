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
  Adam(ParamSet& params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999,
       double eps = 1e-8, double weight_decay = 0);
  std::string kind() const override { return "adam"; }

 protected:
  std::vector<std::pair<const char*, Tensor*>> slots() override;
  void update_views(Context& ctx, const Tensor& step, const Tensor& g, Tensor& w,
                    std::vector<Tensor>& state) override;
  bool updates_in_parts() const override { return true; }

 private:
  double beta1_, beta2_, eps_, weight_decay_;
  Tensor exp_avg_, exp_avg_sq_;  // flat, like the parameters
};

}  // namespace pdnn
