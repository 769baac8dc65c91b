// ClassifierTrainer: forward, loss, backward, update.
#include "train/classifier_trainer.h"

#include "data/loader.h"
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

EvalResult evaluate_classifier(Context& ctx, Sequential& model, const LabeledImages& data,
                               int64_t batch) {
  model.train(false);
  BatchLoader loader(data, batch);
  SoftmaxCrossEntropy ce;
  Tensor x;
  std::vector<int32_t> y;
  double loss = 0;
  int64_t correct = 0;
  for (int64_t b = 0; b < loader.num_batches(); ++b) {
    const int64_t nb = loader.load(b, x, y);
    const Tensor& logits = model.forward(ctx, x);
    loss += static_cast<double>(ce.forward(ctx, logits, y.data())) * nb;
    correct += count_correct(logits, y.data());
  }
  model.train(true);
  return {loss / data.size(), static_cast<double>(correct) / data.size()};
}

}  // namespace pdnn
