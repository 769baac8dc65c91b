// optimizer_step: one optimizer update of a model's parameters (one fused kernel over the flat
// buffer), timed as the profiler's "update" row when a profiler is attached to the context.
#pragma once
#include "core/context.h"
#include "model/sequential.h"
#include "optim/optimizer.h"

namespace pdnn {

// `opt` must have been built over model.parameters() (checked by count).
void optimizer_step(Context& ctx, Optimizer& opt, Sequential& model);

}  // namespace pdnn
