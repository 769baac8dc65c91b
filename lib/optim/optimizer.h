// Optimizer base: updates all of a model's parameters with one fused kernel over its flat
// buffers (ParamSet), with PyTorch's formulas (each subclass cites the one it follows). Its
// state (moments, sums) lives in flat buffers of the same size on the same device. The step
// count lives there too, so a CUDA graph that captured step() sees it move every replay.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/param.h"

namespace pdnn {

// ("<param index>.<slot>", tensor): per-parameter views of the state, for checkpoints.
using StateList = std::vector<std::pair<std::string, Tensor*>>;

class Optimizer {
 public:
  // `params` must outlive the optimizer; it may move between devices before a step (the state
  // follows at the next step, one counted copy).
  explicit Optimizer(ParamSet& params) : ps_(params) {}
  virtual ~Optimizer() = default;
  virtual std::string kind() const = 0;

  // One update of every parameter from its gradient (does not zero the gradients); timed as
  // the profiler's row label() when the context has a profile hook.
  void step(Context& ctx);
  // The profiler's name for this optimizer's update ("update"; "D.update" for the optimizer of
  // a model named "D").
  const std::string& label() const { return label_; }
  void set_label(std::string label) { label_ = std::move(label); }

  size_t num_params() const { return ps_.params().size(); }
  // Whether this optimizer was built over `ps` (a trainer checks it pairs a model with its own).
  bool updates(const ParamSet& ps) const { return &ps_ == &ps; }
  int64_t steps() const { return steps_; }
  void set_steps(int64_t s) {
    steps_ = s;
    step_synced_ = false;
  }
  // The host's count alone, for the host side of a CUDA graph (a capture that did not run, a
  // replay that did): the graph's own kernel moves the device's count.
  void set_host_steps(int64_t s) { steps_ = s; }
  float lr() const { return lr_; }
  void set_lr(float lr) { lr_ = lr; }
  // State as per-parameter views, named "<i>.<slot>" (e.g. "3.exp_avg"); valid until the next
  // call or step. On the state's device (copy through to(CPU) to read it).
  StateList state();

 protected:
  // The flat state buffers with their slot names (e.g. {"exp_avg", &m_}).
  virtual std::vector<std::pair<const char*, Tensor*>> slots() = 0;
  // The update itself; `step` (1) int64 on the parameters' device holds the new count.
  virtual void update(Context& ctx, const Tensor& step) = 0;
  // A flat state buffer for the parameters, filled with v (on the host until the first step).
  Tensor state_like(float v) const;

  ParamSet& ps_;
  float lr_ = 0.f;

 private:
  int64_t steps_ = 0;
  std::string label_ = "update";
  Tensor step_;  // (1) int64 beside the parameters
  bool step_synced_ = false;
  std::vector<Tensor> views_;  // backing store of state()
};

}  // namespace pdnn
