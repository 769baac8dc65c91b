// optimizer_step: the update, timed when profiling.
#include "train/optimizer_step.h"

#include "core/error.h"
#include "train/profiler.h"

namespace pdnn {

void optimizer_step(Context& ctx, Optimizer& opt, Sequential& model) {
  PDNN_CHECK(opt.num_params() == model.parameters().params().size(),
             "optimizer_step: optimizer has %zu parameters, the model %zu (build it over "
             "model.parameters())", opt.num_params(), model.parameters().params().size());
  Profiler* prof = ctx.profiler();
  if (!prof) {
    opt.step(ctx);
    return;
  }
  const TimeMark t0 = time_mark(ctx);
  opt.step(ctx);
  prof->record_update(model.name().empty() ? "update" : model.name() + ".update", opt.kind(),
                      ms_since(ctx, t0));
}

}  // namespace pdnn
