// Optimizer base: the step count on the device, state placement, state views.
#include "optim/optimizer.h"

#include "core/error.h"
#include "core/profile_hook.h"
#include "ops/basic.h"

namespace pdnn {

Tensor Optimizer::state_like(float v) const {
  PDNN_CHECK(ps_.built(), "optimizer: the parameters are not gathered yet (ParamSet::build)");
  Tensor t(ps_.values().shape());
  t.fill(v);
  return t;
}

void Optimizer::step(Context& ctx) {
  ProfileHook* prof = ctx.profile_hook();
  if (prof) prof->begin_pass(ctx);
  const Device dev = ps_.device();
  for (auto& [name, t] : slots())
    if (!t->empty() && t->device() != dev) *t = t->to(dev, ctx);
  if (!step_synced_ || step_.empty() || step_.device() != dev) {
    Tensor host(Shape{1}, DType::I64);
    host.data<int64_t>()[0] = steps_;
    step_ = dev == Device::CPU ? host : host.to(dev, ctx);
    step_synced_ = true;
  }
  ops::counter_add(ctx, step_, 1);
  ++steps_;
  update(ctx, step_);
  if (prof) prof->end_update(ctx, label_, kind());
}

StateList Optimizer::state() {
  StateList out;
  views_.clear();
  const auto s = slots();
  const std::vector<Param>& ps = ps_.params();
  views_.reserve(ps.size() * s.size());
  for (size_t i = 0; i < ps.size(); ++i)
    for (const auto& [name, flat] : s) {
      if (flat->empty()) continue;
      views_.push_back(flat->slice(ps_.offset(i), ps[i].value->shape()));
      out.emplace_back(std::to_string(i) + "." + name, &views_.back());
    }
  return out;
}

}  // namespace pdnn
