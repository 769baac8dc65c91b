// optimizer_step: update every parameter, charging the time to the layer that owns it.
#include "train/optimizer_step.h"

#include "core/error.h"
#include "train/profiler.h"

namespace pdnn {

void optimizer_step(Context& ctx, Optimizer& opt, Sequential& model) {
  const std::vector<size_t> owner = model.param_layers();
  PDNN_CHECK(owner.size() == opt.num_params(),
             "optimizer_step: optimizer has %zu parameters, the model %zu (build it over "
             "model.params())", opt.num_params(), owner.size());
  Profiler* prof = ctx.profiler();
  if (!prof) {
    opt.step(ctx);
    return;
  }
  opt.begin_step();
  for (size_t i = 0; i < owner.size(); ++i) {
    const TimeMark t0 = time_mark(ctx);
    opt.update(ctx, i);
    prof->record_update(model.layer(owner[i]), ms_since(ctx, t0));
  }
}

}  // namespace pdnn
