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
  Adadelta(std::vector<Param> params, double lr = 1.0, double rho = 0.9, double eps = 1e-6,
           double weight_decay = 0);
  std::string kind() const override { return "adadelta"; }
  void update(Context& ctx, size_t i) override;
  std::vector<std::pair<std::string, Tensor*>> state() override;

 private:
  double rho_, eps_, weight_decay_;
  std::vector<Tensor> square_avg_, acc_delta_;
};

namespace cpu {
// w, square_avg, acc_delta (n) updated in place from g (n) as above; keep = 1 - rho.
void adadelta_update(float* w, float* square_avg, float* acc_delta, const float* g, int64_t n,
                     float lr, float rho, float keep, float eps, float weight_decay);
}  // namespace cpu

}  // namespace pdnn
