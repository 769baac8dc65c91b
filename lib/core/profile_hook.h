// ProfileHook: what the model (model/model) and the optimizers (optim/) tell a per-layer
// profiler, as an interface in core, so those floors need not know the profiler: train/profiler.h
// implements it, and a Context holds one while profiling is on (Context::set_profile_hook).
// Each pass is bracketed: begin_pass() before a layer's forward or backward or an optimizer's
// update starts the hook's clock, and one end_*() call says what ran.
#pragma once
#include <string>

#include "core/shape.h"

namespace pdnn {

class Context;

// A layer's forward pass, as the profiler's table shows it.
struct ProfiledForward {
  const void* key = nullptr;  // the layer: the same key in its backward and in later steps
  std::string label;          // its node in its model ("3", "enc1.conv1", "D.3" in a named one)
  std::string kind, describe;
  Shape out;
  double flops = 0;  // of this forward
};

class ProfileHook {
 public:
  virtual ~ProfileHook() = default;
  virtual void begin_pass(Context& ctx) = 0;
  virtual void end_forward(Context& ctx, const ProfiledForward& f) = 0;
  virtual void end_backward(Context& ctx, const void* key) = 0;
  // One optimizer update of a whole model: `label` names its row ("update", "D.update").
  virtual void end_update(Context& ctx, const std::string& label, const std::string& optimizer) = 0;
};

}  // namespace pdnn
