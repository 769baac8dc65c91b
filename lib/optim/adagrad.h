// Adagrad, exactly as torch/optim/adagrad.py (PyTorch 1.13, _single_tensor_adagrad):
//   g' = g + weight_decay * w
//   clr = lr / (1 + (step - 1) * lr_decay)            (step = steps(), 1 on the first step)
//   sum += g' * g'                                     (sum starts at initial_accumulator_value)
//   w -= clr * g' / (sqrt(sum) + eps)
// State: "<i>.sum".
#pragma once
#include "optim/optimizer.h"

namespace pdnn {

class Adagrad : public Optimizer {
 public:
  Adagrad(ParamSet& params, double lr = 1e-2, double lr_decay = 0, double weight_decay = 0,
          double initial_accumulator_value = 0, double eps = 1e-10);
  std::string kind() const override { return "adagrad"; }

 protected:
  std::vector<std::pair<const char*, Tensor*>> slots() override;
  void update_views(Context& ctx, const Tensor& step, const Tensor& g, Tensor& w,
                    std::vector<Tensor>& state) override;
  bool updates_in_parts() const override { return true; }

 private:
  double lr_decay_, weight_decay_, eps_;
  Tensor sum_;  // flat
};

}  // namespace pdnn
