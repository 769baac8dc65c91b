// ClassifierTask (classifier_task.h).
#include "train/classifier_task.h"

namespace pdnn {

ClassifierTask::ClassifierTask(Context& ctx, Sequential& model, Optimizer& opt,
                               const LabeledImages& train, const LabeledImages& test,
                               int64_t batch, int64_t eval_batch, bool cuda_graph)
    : ctx_(ctx),
      model_(model),
      opt_(opt),
      test_(test),
      eval_batch_(eval_batch),
      loader_(train, batch),
      trainer_(model, opt, cuda_graph),
      x_(train.images.shape().with_n(batch), DType::F32, ctx.staging_allocator()),
      y_(Shape{batch}, DType::I32, ctx.staging_allocator()) {}

int64_t ClassifierTask::begin_epoch(Context& ctx, int epoch, uint64_t data_seed) {
  Rng order = BatchLoader::epoch_rng(data_seed, epoch);
  loader_.start_epoch(&order);
  model_.train(true);
  trainer_.reset_metrics(ctx);
  return loader_.num_batches();
}

int64_t ClassifierTask::train_batch(Context& ctx, int64_t b) {
  trainer_.wait_inputs_free(ctx);  // the last batch may still be on its way out of x_, y_
  const int64_t nb = loader_.load(b, x_, y_);
  trainer_.step(ctx, x_, y_);
  return nb;
}

std::vector<double> ClassifierTask::train_metrics(Context& ctx) {
  const ClassifierMetrics m = trainer_.metrics(ctx);
  return {m.loss(), m.acc()};
}

std::string ClassifierTask::step_mode() const {
  if (model_.device() == Device::CPU) return "";
  return trainer_.graph_replays() > 0 ? "graph" : "eager";
}

std::vector<double> ClassifierTask::evaluate(Context& ctx) {
  const EvalResult r = evaluate_classifier(ctx, model_, test_, eval_batch_);
  return {r.loss, r.acc};
}

void ClassifierTask::save_checkpoint(const std::string& path, int64_t epoch,
                                     const std::map<std::string, int64_t>& values) {
  pdnn::save_checkpoint(path, model_, &opt_, epoch, values, &ctx_);
}

CheckpointInfo ClassifierTask::load_checkpoint(const std::string& path) {
  return pdnn::load_checkpoint(path, model_, &opt_, &ctx_);
}

void ClassifierTask::save_weights(const std::string& path) {
  pdnn::save_checkpoint(path, model_, nullptr, 0, {}, &ctx_);
}

}  // namespace pdnn
