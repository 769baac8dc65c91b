// ClassifierTrainer: forward, loss, backward, update.
#include "train/classifier_trainer.h"

#include "train/optimizer_step.h"

namespace pdnn {

float ClassifierTrainer::step(Context& ctx, const Tensor& x, const int32_t* labels) {
  logits_ = &model_.forward(ctx, x);
  const float l = loss_.forward(ctx, *logits_, labels);
  loss_.backward(ctx, dlogits_);
  model_.zero_grad();
  model_.backward(ctx, dlogits_);
  optimizer_step(ctx, opt_, model_);
  return l;
}

}  // namespace pdnn
