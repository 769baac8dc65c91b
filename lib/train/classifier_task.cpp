// ClassifierTask (classifier_task.h).
#include "train/classifier_task.h"

#include <algorithm>

#include "core/error.h"
#include "dist/communicator.h"
#include "dist/grad_sync.h"
#include "ops/basic.h"

namespace pdnn {

namespace {
// Rows [lo, hi) of n rows that rank r of `size` takes: r*n/size .. (r+1)*n/size.
std::pair<int64_t, int64_t> shard(int64_t n, int rank, int size) {
  return {n * rank / size, n * (rank + 1) / size};
}

// Hash of a split's images and labels, for the ranks' agreement check.
std::string data_hash(const LabeledImages& d) {
  uint64_t h = hash_bytes(d.images.raw_data(), d.images.nbytes());
  h = hash_bytes(d.labels.data(), d.labels.size() * sizeof(int32_t), h);
  return strprintf("%s, %lld images, hash %s", d.images.shape().str().c_str(),
                   static_cast<long long>(d.size()), hash_hex(h).c_str());
}
}  // namespace

ClassifierTask::ClassifierTask(Context& ctx, Sequential& model, Optimizer& opt,
                               const LabeledImages& train, const LabeledImages& test,
                               int64_t batch, int64_t eval_batch, bool cuda_graph)
    : ctx_(ctx),
      model_(model),
      opt_(opt),
      train_(train),
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
  if (!comm_) {
    const int64_t nb = loader_.load(b, x_, y_);
    trainer_.step(ctx, x_, y_);
    return nb;
  }
  // Test hook (PDNN_DIST_FAULT): kill or hang this rank here, or change one of its weights,
  // which the ranks' weight check at the epoch's end must catch.
  if (comm_->fault_point(++steps_)) {
    Tensor w = model_.parameters().values().slice(0, Shape{1});
    ops::fill(ctx, w, 0.5f);
  }
  // This rank's rows of the global batch; dropout draws what one process would for them.
  const int64_t nb = loader_.rows_in(b);
  const auto [lo, hi] = shard(nb, comm_->rank(), comm_->size());
  loader_.load_rows(b, lo, hi - lo, x_, y_);
  ctx.rng().set_row_shard({lo, hi - lo, nb});
  try {
    trainer_.step(ctx, x_, y_, nb);
  } catch (...) {
    ctx.rng().set_row_shard({});
    throw;
  }
  ctx.rng().set_row_shard({});
  return nb;
}

std::vector<double> ClassifierTask::train_metrics(Context& ctx) {
  const ClassifierMetrics m = trainer_.metrics(ctx);
  if (!comm_) return {m.loss(), m.acc()};
  double v[3] = {m.loss_sum, m.correct, m.count};
  comm_->sum(v, 3, "the training metrics");
  const ClassifierMetrics all{v[0], v[1], v[2]};
  return {all.loss(), all.acc()};
}

std::string ClassifierTask::step_mode() const {
  if (model_.device() == Device::CPU) return "";
  return trainer_.graph_replays() > 0 ? "graph" : "eager";
}

std::vector<double> ClassifierTask::evaluate(Context& ctx) {
  if (!comm_) {
    const EvalResult r = evaluate_classifier(ctx, model_, test_, eval_batch_);
    return {r.loss, r.acc};
  }
  // Buffers (BatchNorm's running statistics) follow each rank's own shards: averaged over the
  // ranks here, so that evaluation, the weight check and the checkpoint see one set.
  for (const Param& p : model_.buffers()) {
    Tensor h = p.value->device() == Device::CPU ? *p.value : p.value->to(Device::CPU, ctx);
    comm_->sum(h.data(), h.numel(), "the buffer average");
    for (int64_t i = 0; i < h.numel(); ++i) h.data()[i] /= static_cast<float>(comm_->size());
    if (p.value->device() != Device::CPU) copy_into(*p.value, h, ctx);
  }
  double v[3] = {0, 0, static_cast<double>(test_shard_.size())};
  if (test_shard_.size() > 0) {
    const EvalResult r = evaluate_classifier(ctx, model_, test_shard_, eval_batch_);
    v[0] = r.loss_sum;
    v[1] = r.correct;
  }
  comm_->sum(v, 3, "the evaluation");
  return {v[2] > 0 ? v[0] / v[2] : 0.0, v[2] > 0 ? v[1] / v[2] : 0.0};
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

void ClassifierTask::distribute(Context& ctx, Communicator& comm) {
  const int n = comm.size();
  const int64_t b = loader_.batch_size(), last = loader_.rows_in(loader_.num_batches() - 1);
  // Every rank needs at least one image of every batch, the last (smaller) one included.
  // (Every rank sees the same sizes, so every rank fails here together.)
  if (b < n || last < n) Communicator::set_collective_error();
  PDNN_CHECK(b >= n, "--distributed: batch %lld over %d ranks: every rank needs at least one "
             "image of each batch (use a batch of at least %d)", static_cast<long long>(b), n, n);
  PDNN_CHECK(last >= n,
             "--distributed: the last batch of an epoch has %lld images (%lld training images, "
             "batch %lld), fewer than the %d ranks: every rank needs at least one image of each "
             "batch (pick a batch that leaves a remainder of 0 or at least %d)",
             static_cast<long long>(last), static_cast<long long>(loader_.size()),
             static_cast<long long>(b), n, n);
  comm_ = &comm;
  if (model_.device() != Device::CPU) comm.open_device();
  trainer_.distribute(comm, ctx);
  const auto [lo, hi] = shard(test_.size(), comm.rank(), n);
  const Shape s = test_.images.shape();
  test_shard_.images = test_.images.slice(lo * s.per_sample(), s.with_n(hi - lo));
  test_shard_.labels.assign(test_.labels.begin() + lo, test_.labels.begin() + hi);
}

std::vector<std::pair<std::string, std::string>> ClassifierTask::fingerprint(Context& ctx) {
  const Shape in = train_.images.shape().with_n(loader_.batch_size());
  return {{"the training data", data_hash(train_)},
          {"the test data", data_hash(test_)},
          {"the model", model_.summary(in)},
          {"the optimizer", strprintf("%s, lr %g", opt_.kind().c_str(), opt_.lr())},
          {"the initial weights", hash_hex(state_hash_of(ctx, model_, &opt_))}};
}

std::string ClassifierTask::distributed_summary() const {
  const GradSync* g = trainer_.grad_sync();
  return g ? "gradients: " + g->describe() : "";
}

std::string ClassifierTask::distributed_stats() const {
  const GradSync* g = trainer_.grad_sync();
  if (!g || model_.device() != Device::CPU) return "";
  const GradSync::Stats s = g->stats();
  if (s.steps == 0) return "";
  const double comm = s.comm_ms / s.steps, wait = s.wait_ms / s.steps;
  return strprintf("all-reduce per step (rank 0): %.2f MB in %.2f ms, %.2f ms of it not hidden "
                   "behind backward (%.0f%% hidden)",
                   g->bytes_per_step() / 1e6, comm, wait,
                   comm > 0 ? 100.0 * std::max(0.0, comm - wait) / comm : 0.0);
}

}  // namespace pdnn
