// ClassifierTask (classifier_task.h).
#include "workloads/classifier/classifier_task.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/fault_hook.h"
#include "dist/communicator.h"
#include "dist/fingerprint.h"
#include "dist/grad_sync.h"
#include "ops/basic.h"

namespace pdnn {

namespace {

LoaderStats minus(const LoaderStats& a, const LoaderStats& b) {
  LoaderStats d;
  d.batches = a.batches - b.batches;
  d.prepare_s = a.prepare_s - b.prepare_s;
  d.wait_s = a.wait_s - b.wait_s;
  return d;
}

// The test set's evaluation: per_class asks for the confusion matrix.
EvalOptions eval_options(const ClassifierTaskOptions& o) {
  EvalOptions e = o.eval;
  e.confusion = o.per_class;
  return e;
}

}  // namespace

std::string column_safe(const std::string& name) {
  std::string s = name;
  for (char& ch : s) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.';
    if (!ok) ch = '_';
  }
  return s;
}

size_t peak_resident_bytes() {
  struct rusage ru;
  if (::getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return static_cast<size_t>(ru.ru_maxrss) * 1024;  // Linux: kilobytes
}

ClassifierTask::ClassifierTask(Context& ctx, Model& model, Optimizer& opt,
                               const Dataset& train, const Dataset& test,
                               const ClassifierTaskOptions& options)
    : SingleModelTask(ctx, model, opt),
      train_(train),
      test_(test),
      o_(options),
      trainer_(model, opt, options.cuda_graph, options.overlap_batch_copy),
      batches_(train, options.train, options.prefetch, "classifier task"),
      evaluator_(std::make_unique<Evaluator>(ctx, test, eval_options(options))) {
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

LoaderStats ClassifierTask::loader_stats() const { return batches_.stats(); }

int64_t ClassifierTask::begin_epoch(Context& ctx, int epoch, uint64_t data_seed) {
  const int64_t n = batches_.begin_epoch(ctx, epoch, data_seed);
  epoch_start_stats_ = loader_stats();
  model_.train(true);
  trainer_.reset_metrics(ctx);
  return n;
}

int64_t ClassifierTask::train_batch(Context& ctx, int64_t b) {
  // A test's hook may kill or hang this process here, or have one of its weights changed,
  // which the ranks' weight check at the epoch's end must catch.
  FaultHook* faults = ctx.fault_hook();
  if (faults && faults->reached("train_step", ++steps_)) {
    Tensor w = model_.parameters().values().slice(0, Shape{1});
    ops::fill(ctx, w, 0.5f);
  }
  // rows: in the whole batch (data-parallel: the loaders pack this rank's shard)
  const EpochBatches::Taken t = batches_.take(b);
  const int64_t rows = t.rows;
  const int64_t nb = static_cast<int64_t>(t.y->size());
  labels_.resize(Shape{nb});
  std::memcpy(labels_.data<int32_t>(), t.y->data(), t.y->size() * sizeof(int32_t));
  if (!comm_) {
    trainer_.step(ctx, *t.x, labels_);
  } else {
    // This rank's rows of the global batch; dropout draws what one process would for them.
    const int64_t lo = shard_rows(rows, comm_->rank(), comm_->size()).first;
    ctx.rng().set_row_shard({lo, nb, rows});
    try {
      trainer_.step(ctx, *t.x, labels_, rows);
    } catch (...) {
      ctx.rng().set_row_shard({});
      throw;
    }
    ctx.rng().set_row_shard({});
  }
  if (b + 1 == batches_.batches()) epoch_stats_ = minus(loader_stats(), epoch_start_stats_);
  batches_.trained(b);
  return rows;
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
    last_eval_ = evaluator_->run(ctx, model_);
  } else {
    // Buffers (BatchNorm's running statistics) follow each rank's own shards: averaged over
    // the ranks here, so that evaluation, the weight check and the checkpoint see one set.
    for (const Param& p : model_.buffers()) {
      Tensor h = p.value->device() == Device::CPU ? *p.value : p.value->to(Device::CPU, ctx);
      comm_->sum(h.data(), h.numel(), "the buffer average");
      for (int64_t i = 0; i < h.numel(); ++i) h.data()[i] /= static_cast<float>(comm_->size());
      if (p.value->device() != Device::CPU) copy_into(*p.value, h, ctx);
    }
    // This rank's part of the test set; the totals (and the confusion matrix) over all ranks.
    EvalResult r = evaluator_->run(ctx, model_);
    std::vector<double> v = {r.loss_sum, r.correct, static_cast<double>(r.count)};
    for (int64_t c : r.confusion) v.push_back(static_cast<double>(c));
    comm_->sum(v.data(), static_cast<int64_t>(v.size()), "the evaluation");
    r.loss_sum = v[0];
    r.correct = v[1];
    r.count = static_cast<int64_t>(v[2]);
    r.loss = r.count > 0 ? r.loss_sum / static_cast<double>(r.count) : 0.0;
    r.acc = r.count > 0 ? r.correct / static_cast<double>(r.count) : 0.0;
    for (size_t i = 0; i < r.confusion.size(); ++i)
      r.confusion[i] = static_cast<int64_t>(v[3 + i]);
    last_eval_ = std::move(r);
  }
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

void ClassifierTask::distribute(Context& ctx, Communicator& comm) {
  PDNN_CHECK(!batches_.started(), "classifier task: distribute() after training began");
  const int n = comm.size();
  // The batch sizes of an epoch (the order does not change them).
  LoaderOptions plain = o_.train;
  plain.shuffle = false;
  const EpochPlan plan(train_, plain, 0);
  const int64_t b = o_.train.batch, last = plan.batch_rows(plan.num_batches() - 1);
  // Every rank needs at least one image of every batch, the last (smaller) one included.
  // (Every rank sees the same sizes, so every rank fails here together.)
  if (b < n || last < n) Communicator::set_collective_error();
  PDNN_CHECK(b >= n, "--distributed: batch %lld over %d ranks: every rank needs at least one "
             "image of each batch (use a batch of at least %d)", static_cast<long long>(b), n, n);
  PDNN_CHECK(last >= n,
             "--distributed: the last batch of an epoch has %lld images (%lld training images "
             "per epoch, batch %lld), fewer than the %d ranks: every rank needs at least one "
             "image of each batch (pick a batch that leaves a remainder of 0 or at least %d)",
             static_cast<long long>(last), static_cast<long long>(plan.images()),
             static_cast<long long>(b), n, n);
  comm_ = &comm;
  o_.train.shard = comm.rank();
  o_.train.shards = n;
  batches_.set_shard(comm.rank(), n);  // the loaders, made at the first epoch, pack its rows
  if (model_.device() != Device::CPU) comm.open_device();
  trainer_.distribute(comm, ctx);
  const auto [lo, hi] = shard_rows(test_.size(), comm.rank(), n);
  evaluator_.reset();
  test_shard_ = std::make_unique<DatasetRange>(test_, lo, hi);
  evaluator_ = std::make_unique<Evaluator>(ctx, *test_shard_, eval_options(o_));
}

std::vector<std::pair<std::string, std::string>> ClassifierTask::fingerprint(Context& ctx) {
  const Shape s = train_.sample_shape();
  const Shape in{o_.train.batch, s[0], s[1], s[2]};
  return {{"the training data", dataset_hash(train_)},
          {"the test data", dataset_hash(test_)},
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
  const GradSync::Stats st = g->stats();
  if (st.steps == 0) return "";
  const double comm = st.comm_ms / st.steps, wait = st.wait_ms / st.steps;
  return strprintf("all-reduce per step (rank 0): %.2f MB in %.2f ms, %.2f ms of it not hidden "
                   "behind backward (%.0f%% hidden)",
                   g->bytes_per_step() / 1e6, comm, wait,
                   comm > 0 ? 100.0 * std::max(0.0, comm - wait) / comm : 0.0);
}

}  // namespace pdnn
