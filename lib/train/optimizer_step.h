// optimizer_step: one optimizer update of a model's parameters, timed per owning layer when a
// profiler is attached to the context (otherwise the same as opt.step(ctx)).
#pragma once
#include "core/context.h"
#include "model/sequential.h"
#include "optim/optimizer.h"

namespace pdnn {

// `opt` must have been built over model.params() (same order); checked by count.
void optimizer_step(Context& ctx, Optimizer& opt, Sequential& model);

}  // namespace pdnn
