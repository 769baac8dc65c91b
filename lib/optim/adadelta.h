// Adadelta, exactly as torch/optim/adadelta.py (PyTorch 1.13, _single_tensor_adadelta):
//   g' = g + weight_decay * w
//   square_avg = rho * square_avg + (1 - rho) * g'^2
//   delta = sqrt(acc_delta + eps) / sqrt(square_avg + eps) * g'
//   acc_delta = rho * acc_delta + (1 - rho) * delta^2
//   w -= lr * delta
// State: "<i>.square_avg", "<i>.acc_delta".
#pragma once
#include "optim/optimizer.h"

namespace pdnn {

class Adadelta : public Optimizer {
 public:
  Adadelta(ParamSet& params, double lr = 1.0, double rho = 0.9, double eps = 1e-6,
           double weight_decay = 0);
  std::string kind() const override { return "adadelta"; }

 protected:
  std::vector<std::pair<const char*, Tensor*>> slots() override;
  void update_views(Context& ctx, const Tensor& step, const Tensor& g, Tensor& w,
                    std::vector<Tensor>& state) override;
  bool updates_in_parts() const override { return true; }

 private:
  double rho_, eps_, weight_decay_;
  Tensor square_avg_, acc_delta_;  // flat
};

}  // namespace pdnn
