// Stochastic gradient descent with optional momentum, dampening, Nesterov and L2 weight decay,
// exactly as torch/optim/sgd.py (PyTorch 1.13, _single_tensor_sgd):
//   d = g + weight_decay * w
//   momentum != 0: buf = d on the first step, else buf = momentum * buf + (1 - dampening) * d
//                  d = nesterov ? d + momentum * buf : buf
//   w -= lr * d
// State: "<i>.momentum_buffer" (only when momentum != 0). The first step is steps() == 1, so a
// checkpoint restores steps() together with the buffers.
#pragma once
#include "optim/optimizer.h"

namespace pdnn {

class Sgd : public Optimizer {
 public:
  // PyTorch has no default lr for SGD; nesterov needs momentum > 0 and dampening == 0.
  // Hyper-parameters are doubles, as PyTorch's Python floats: the kernels get them rounded once.
  Sgd(ParamSet& params, double lr, double momentum = 0, double weight_decay = 0,
      double dampening = 0, bool nesterov = false);
  std::string kind() const override { return "sgd"; }

 protected:
  std::vector<std::pair<const char*, Tensor*>> slots() override;
  void update_views(Context& ctx, const Tensor& step, const Tensor& g, Tensor& w,
                    std::vector<Tensor>& state) override;
  bool updates_in_parts() const override { return true; }

 private:
  double momentum_, weight_decay_, dampening_;
  bool nesterov_;
  Tensor buf_;  // flat momentum buffers (empty without momentum)
};

}  // namespace pdnn
