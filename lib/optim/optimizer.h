// Optimizer base: owns per-parameter state; step() applies one update to every parameter with
// PyTorch's formulas (each subclass cites the one it follows).
#pragma once
#include <string>
#include <vector>

#include "layers/layer.h"

namespace pdnn {

class Optimizer {
 public:
  explicit Optimizer(std::vector<Param> params) : params_(std::move(params)) {}
  virtual ~Optimizer() = default;
  virtual std::string kind() const = 0;

  // One update of every parameter from its gradient (does not zero the gradients).
  void step(Context& ctx);
  // Split form of step() for per-layer timing: begin_step(), then update(i) for every i.
  void begin_step() { ++steps_; }
  virtual void update(Context& ctx, size_t i) = 0;

  size_t num_params() const { return params_.size(); }
  int64_t steps() const { return steps_; }
  void set_steps(int64_t s) { steps_ = s; }
  float lr() const { return lr_; }
  void set_lr(float lr) { lr_ = lr; }
  // State tensors for checkpoints, named "<param index>.<slot>" (e.g. "3.exp_avg").
  virtual std::vector<std::pair<std::string, Tensor*>> state() = 0;

 protected:
  std::vector<Param> params_;
  float lr_ = 0.f;
  int64_t steps_ = 0;
};

inline void Optimizer::step(Context& ctx) {
  begin_step();
  for (size_t i = 0; i < params_.size(); ++i) update(ctx, i);
}

}  // namespace pdnn
