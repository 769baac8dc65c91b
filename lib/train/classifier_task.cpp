// ClassifierTask (classifier_task.h).
#include "train/classifier_task.h"

namespace pdnn {

ClassifierTask::ClassifierTask(Sequential& model, Optimizer& opt, const LabeledImages& train,
                               const LabeledImages& test, int64_t batch, int64_t eval_batch)
    : model_(model),
      opt_(opt),
      test_(test),
      eval_batch_(eval_batch),
      loader_(train, batch),
      trainer_(model, opt) {}

int64_t ClassifierTask::begin_epoch(Context& ctx, int epoch, uint64_t data_seed) {
  (void)ctx;
  Rng order = BatchLoader::epoch_rng(data_seed, epoch);
  loader_.start_epoch(&order);
  model_.train(true);
  loss_sum_ = 0;
  correct_ = seen_ = 0;
  return loader_.num_batches();
}

int64_t ClassifierTask::train_batch(Context& ctx, int64_t b) {
  const int64_t nb = loader_.load(b, x_, y_);
  const float loss = trainer_.step(ctx, x_, y_.data());
  correct_ += count_correct(trainer_.logits(), y_.data());
  loss_sum_ += static_cast<double>(loss) * nb;
  seen_ += nb;
  return nb;
}

std::vector<double> ClassifierTask::train_metrics() {
  if (seen_ == 0) return {0.0, 0.0};
  return {loss_sum_ / seen_, static_cast<double>(correct_) / seen_};
}

std::vector<double> ClassifierTask::evaluate(Context& ctx) {
  const EvalResult r = evaluate_classifier(ctx, model_, test_, eval_batch_);
  return {r.loss, r.acc};
}

void ClassifierTask::save_checkpoint(const std::string& path, int64_t epoch,
                                     const std::map<std::string, int64_t>& values) {
  pdnn::save_checkpoint(path, model_, &opt_, epoch, values);
}

CheckpointInfo ClassifierTask::load_checkpoint(const std::string& path) {
  return pdnn::load_checkpoint(path, model_, &opt_);
}

void ClassifierTask::save_weights(const std::string& path) {
  pdnn::save_checkpoint(path, model_, nullptr, 0);
}

}  // namespace pdnn
