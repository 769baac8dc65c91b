// ClassifierTask (classifier_task.h).
#include "train/classifier_task.h"

#include <sys/resource.h>

#include <chrono>
#include <cstring>

#include "core/error.h"

namespace pdnn {

namespace {

LoaderStats minus(const LoaderStats& a, const LoaderStats& b) {
  LoaderStats d;
  d.batches = a.batches - b.batches;
  d.prepare_s = a.prepare_s - b.prepare_s;
  d.wait_s = a.wait_s - b.wait_s;
  return d;
}

// A class name as part of a CSV column name: letters, digits, '-', '_' and '.' kept, anything
// else (a comma, a space) becomes '_'.
std::string column_safe(const std::string& name) {
  std::string s = name;
  for (char& ch : s) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.';
    if (!ok) ch = '_';
  }
  return s;
}

// The test set's evaluation: per_class asks for the confusion matrix.
EvalOptions eval_options(const ClassifierTaskOptions& o) {
  EvalOptions e = o.eval;
  e.confusion = o.per_class;
  return e;
}

}  // namespace

size_t peak_resident_bytes() {
  struct rusage ru;
  if (::getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return static_cast<size_t>(ru.ru_maxrss) * 1024;  // Linux: kilobytes
}

ClassifierTask::ClassifierTask(Context& ctx, Sequential& model, Optimizer& opt,
                               const Dataset& train, const Dataset& test,
                               const ClassifierTaskOptions& options)
    : ctx_(ctx),
      model_(model),
      opt_(opt),
      train_(train),
      test_(test),
      o_(options),
      trainer_(model, opt, options.cuda_graph),
      evaluator_(ctx, test, eval_options(options)) {
  PDNN_CHECK(o_.train.batch >= 1, "classifier task: batch %lld must be >= 1",
             static_cast<long long>(o_.train.batch));
  PDNN_CHECK(o_.prefetch >= 0, "classifier task: prefetch depth %d must be >= 0", o_.prefetch);
  PDNN_CHECK(train.size() > 0, "classifier task: the training set is empty");
  PDNN_CHECK(train.sample_shape() == test.sample_shape() &&
                 train.num_classes() == test.num_classes(),
             "classifier task: training samples %s of %d classes, test samples %s of %d",
             train.sample_shape().str().c_str(), train.num_classes(),
             test.sample_shape().str().c_str(), test.num_classes());
  o_.train.shuffle = true;
  labels_ = Tensor(Shape{o_.train.batch}, DType::I32, ctx.staging_allocator());
}

ClassifierTask::~ClassifierTask() = default;

std::vector<std::string> ClassifierTask::eval_columns() const {
  std::vector<std::string> c = {"test_loss", "test_acc"};
  if (o_.per_class)
    for (int k = 0; k < test_.num_classes(); ++k)
      c.push_back("test_acc_" + column_safe(test_.class_name(k)));
  if (o_.resources)
    for (const char* r : {"peak_rss_mb", "peak_device_mb", "loader_hidden_s", "loader_exposed_s"})
      c.push_back(r);
  return c;
}

LoaderStats ClassifierTask::loader_stats() const {
  return prefetch_ ? prefetch_->stats() : sync_stats_;
}

int64_t ClassifierTask::begin_epoch(Context& ctx, int epoch, uint64_t data_seed) {
  if ((!prefetch_ && !sync_) || o_.train.seed != data_seed) {
    o_.train.seed = data_seed;
    prefetch_.reset();
    sync_.reset();
    if (o_.prefetch > 0) {
      prefetch_ = std::make_unique<PrefetchLoader>(
          train_, o_.train, o_.prefetch,
          [&ctx](const Shape& s) { return Tensor(s, DType::F32, ctx.staging_allocator()); });
      prefetched_epoch_ = 0;  // it starts packing epoch 0 at once
    } else {
      sync_ = std::make_unique<DatasetLoader>(train_, o_.train);
      const Shape s = train_.sample_shape();
      x_ = Tensor(Shape{o_.train.batch, s[0], s[1], s[2]}, DType::F32, ctx.staging_allocator());
    }
  }
  if (prefetch_) {
    // Packing of this epoch may have started already (at the end of the last one); an epoch
    // left half way (a benchmark's last) is started afresh.
    if (prefetched_epoch_ != epoch) prefetch_->start_epoch(epoch);
    prefetched_epoch_ = -1;
    batches_ = prefetch_->num_batches();
  } else {
    sync_->start_epoch(epoch);
    batches_ = sync_->num_batches();
  }
  epoch_ = epoch;
  epoch_start_stats_ = loader_stats();
  model_.train(true);
  trainer_.reset_metrics(ctx);
  return batches_;
}

int64_t ClassifierTask::train_batch(Context& ctx, int64_t b) {
  const Tensor* x = nullptr;
  const std::vector<int32_t>* y = nullptr;
  if (prefetch_) {
    const Batch& batch = prefetch_->next();
    PDNN_CHECK(batch.index == b && batch.epoch == epoch_,
               "classifier task: batch %lld of epoch %d asked, the loader has batch %lld of "
               "epoch %lld (batches must be taken in order)",
               static_cast<long long>(b), epoch_ + 1, static_cast<long long>(batch.index),
               static_cast<long long>(batch.epoch + 1));
    x = &batch.x;
    y = &batch.y;
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    sync_->load(b, x_, label_vec_);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sync_stats_.prepare_s += s;
    sync_stats_.wait_s += s;  // the trainer waited for all of it
    ++sync_stats_.batches;
    x = &x_;
    y = &label_vec_;
  }
  const int64_t nb = static_cast<int64_t>(y->size());
  labels_.resize(Shape{nb});
  std::memcpy(labels_.data<int32_t>(), y->data(), y->size() * sizeof(int32_t));
  trainer_.step(ctx, *x, labels_);
  if (b + 1 == batches_) {
    epoch_stats_ = minus(loader_stats(), epoch_start_stats_);
    // The next epoch's first batches are packed while the test set is evaluated.
    if (prefetch_) {
      prefetch_->start_epoch(epoch_ + 1);
      prefetched_epoch_ = epoch_ + 1;
    }
  }
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
  last_eval_ = evaluator_.run(ctx, model_);
  std::vector<double> v = {last_eval_.loss, last_eval_.acc};
  if (o_.per_class)
    for (int k = 0; k < last_eval_.classes; ++k) v.push_back(last_eval_.class_acc(k));
  if (o_.resources) {
    v.push_back(static_cast<double>(peak_resident_bytes()) / 1e6);
    v.push_back(static_cast<double>(ctx.device_alloc_stats().peak_in_use) / 1e6);
    v.push_back(epoch_stats_.hidden_s());
    v.push_back(epoch_stats_.wait_s);
  }
  return v;
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
