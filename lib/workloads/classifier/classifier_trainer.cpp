// ClassifierTrainer: forward, loss, backward, update, metrics inside the step shell; Evaluator.
#include "workloads/classifier/classifier_trainer.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/cuda_state.h"
#include "data/dataset_loader.h"
#include "data/prefetch_loader.h"
#include "dist/grad_sync.h"
#include "ops/basic.h"
#include "ops/metrics.h"
#include "train/copy_fence.h"
#include "train/step_shell.h"

namespace pdnn {

ClassifierTrainer::ClassifierTrainer(Model& model, Optimizer& opt, bool cuda_graph,
                                     bool overlap_copy)
    : model_(model), opt_(opt), shell_({&opt}, "trainer", cuda_graph, overlap_copy) {
  PDNN_CHECK(opt.updates(model.parameters()),
             "classifier trainer: the optimizer was not built over this model's parameters "
             "(make it from model.parameters())");
  // An update of offloaded optimizer state starts once backward has made its gradients.
  model_.set_grads_ready_hook([&opt](Context& c, size_t layer) { opt.grads_ready(c, layer); });
}

ClassifierTrainer::~ClassifierTrainer() { model_.set_grads_ready_hook(nullptr); }

void ClassifierTrainer::distribute(Communicator& comm, Context& ctx) {
  sync_ = std::make_unique<GradSync>(comm, model_, ctx);
  shell_.reset_graph();  // a graph captured before holds no all-reduce
}

TrainLoss parse_train_loss(const std::string& name, const char* flag) {
  if (name == "ce") return TrainLoss::CrossEntropy;
  if (name == "dice") return TrainLoss::Dice;
  if (name == "ce+dice") return TrainLoss::CrossEntropyAndDice;
  PDNN_FAIL("%s %s: unknown loss (ce, dice, ce+dice)", flag, name.c_str());
}

const char* train_loss_name(TrainLoss l) {
  return l == TrainLoss::CrossEntropy ? "ce" : l == TrainLoss::Dice ? "dice" : "ce+dice";
}

void ClassifierTrainer::set_loss(TrainLoss l) {
  PDNN_CHECK(shell_.graph_captures() == 0 || l == trained_,
             "trainer: the loss is set before the first step (a captured step keeps its own)");
  trained_ = l;
}

void ClassifierTrainer::run_step(Context& ctx) {
  const Tensor& x = shell_.batch(0);
  const Tensor& y = shell_.batch(1);
  const int64_t n = x.shape(0);
  const int64_t rows = model_.micro_batch() > 0 ? std::min(model_.micro_batch(), n) : n;
  const bool ce = trained_ != TrainLoss::Dice, dice = trained_ != TrainLoss::CrossEntropy;
  // dlogits: the cross-entropy's gradient (its mean over mean_over rows), the Dice loss's of
  // these rows weighted by their share of the mean_over, or their sum. The cross-entropy's
  // forward runs either way: the metrics' loss and correct count come from it.
  auto loss_grad = [&](const Tensor& ys, int64_t m, int64_t mean_over) {
    loss_.forward(ctx, *logits_, ys);
    if (ce) loss_.backward(ctx, dlogits_, mean_over);
    if (dice) {
      dice_.forward(ctx, *logits_, ys);
      const int64_t of = mean_over > 0 ? mean_over : m;
      dice_.backward(ctx, dlogits_, static_cast<float>(static_cast<double>(m) / of), ce);
      dice_.accumulate(ctx, acc_, 3);
    }
  };
  if (rows == n) {
    logits_ = &model_.forward(ctx, x);
    loss_grad(y, n, global_batch_);
    model_.zero_grad(ctx);
    if (sync_) sync_->begin(ctx);
    else opt_.begin_backward(ctx);  // (data-parallel: after the all-reduce, in step())
    model_.backward(ctx, dlogits_);
    if (sync_) sync_->finish(ctx);
    opt_.step(ctx);
    loss_.accumulate_metrics(ctx, *logits_, acc_);
    return;
  }
  // Micro-batches (a memory plan's): each slice of rows forward, loss and backward in turn,
  // the gradients summing up, each slice's loss gradient 1/N of the whole batch's mean (the
  // shell makes each slice a shard of the batch from the step's RNG position). Then one update.
  const int64_t mean_over = global_batch_ > 0 ? global_batch_ : n;
  shell_.micro_batches(ctx, rows, [&](int64_t r, int64_t m, bool last) {
    if (r == 0) model_.zero_grad(ctx);
    const Tensor xs = shell_.batch_rows(0, r, m);
    const Tensor ys = shell_.batch_rows(1, r, m);
    logits_ = &model_.forward(ctx, xs);
    loss_grad(ys, m, mean_over);
    if (sync_ && last) sync_->begin(ctx);
    if (!sync_ && last) opt_.begin_backward(ctx);
    model_.backward(ctx, dlogits_);
    if (sync_ && last) sync_->finish(ctx);
    loss_.accumulate_metrics(ctx, *logits_, acc_);
  });
  opt_.step(ctx);
}

void ClassifierTrainer::step(Context& ctx, const Tensor& x, const Tensor& labels,
                             int64_t global_batch) {
  PDNN_CHECK(labels.dtype() == DType::I32 && labels.rank() >= 1 && labels.shape(0) == x.shape(0),
             "trainer: labels %s (int32, one per image or per pixel: (N) or (N,H,W)) for a "
             "batch %s", labels.shape().str().c_str(), x.shape().str().c_str());
  PDNN_CHECK(global_batch == 0 || sync_,
             "trainer: a shard of a global batch (%lld) needs distribute() first",
             static_cast<long long>(global_batch));
  global_batch_ = global_batch;
  const Device dev = model_.device();
  if (acc_.empty() || acc_.device() != dev) {
    acc_ = Tensor::empty(Shape{4}, DType::F64, dev, ctx);
    ops::zero(ctx, acc_);
  }
  shell_.stage(ctx, dev, {{&x, DType::F32}, {&labels, DType::I32}});
  shell_.run(ctx, [this, &ctx] { run_step(ctx); });
  if (trained_ != TrainLoss::CrossEntropy)  // Dice losses added (a replayed graph's too)
    dice_terms_ += static_cast<double>(StepShell::slice_count(x.shape(0), model_.micro_batch()));
}

ClassifierMetrics ClassifierTrainer::metrics(Context& ctx) {
  if (acc_.empty()) return {};
  const Tensor h = acc_.device() == Device::CPU ? acc_ : acc_.to(Device::CPU, ctx);
  const double* a = h.data<double>();
  return ClassifierMetrics{a[0], a[1], a[2], a[3], dice_terms_, trained_};
}

void ClassifierTrainer::reset_metrics(Context& ctx) {
  if (!acc_.empty()) ops::zero(ctx, acc_);
  dice_terms_ = 0;
}

double EvalResult::class_acc(int k) const {
  PDNN_CHECK(k >= 0 && k < classes && !confusion.empty(),
             "evaluation: class %d of %d (per-class accuracy needs EvalOptions::confusion)", k,
             classes);
  int64_t n = 0;
  for (int j = 0; j < classes; ++j) n += confusion[static_cast<size_t>(k * classes + j)];
  return n > 0 ? static_cast<double>(confusion[static_cast<size_t>(k * classes + k)]) / n : 0.0;
}

Evaluator::Evaluator(Context& ctx, const Dataset& data, const EvalOptions& opt)
    : data_(data), opt_(opt) {
  PDNN_CHECK(opt.batch >= 1 && opt.threads >= 1 && opt.prefetch >= 0,
             "evaluation: batch %lld, %d threads, prefetch %d (need >= 1, >= 1, >= 0)",
             static_cast<long long>(opt.batch), opt.threads, opt.prefetch);
  LoaderOptions lo;
  lo.batch = opt.batch;
  lo.shuffle = false;
  lo.augment = false;
  lo.threads = opt.threads;
  labels_ = Tensor(Shape{opt.batch}, DType::I32, ctx.staging_allocator());
  if (data.size() == 0) return;
  if (opt.prefetch > 0) {
    prefetch_ = std::make_unique<PrefetchLoader>(data, lo, opt.prefetch, [&ctx](const Shape& s, DType t) {
      return Tensor(s, t, ctx.staging_allocator());
    });
  } else {
    sync_ = std::make_unique<DatasetLoader>(data, lo);
    const Shape s = data.sample_shape();
    x_ = Tensor(Shape{opt.batch, s[0], s[1], s[2]}, DType::F32, ctx.staging_allocator());
    const Shape t = data.target_shape();
    if (t.rank() > 0)
      target_ = Tensor(Shape{opt.batch, t[0], t[1]}, DType::I32, ctx.staging_allocator());
  }
}

Evaluator::~Evaluator() = default;

void Evaluator::run_batch(Context& ctx, Model& model, const Tensor& x,
                          const std::vector<int32_t>& y, const Tensor* target, EvalResult& r) {
  const Device dev = model.device();
  const int k = r.classes;
  const int64_t nb = static_cast<int64_t>(y.size());
  if (!target) {
    labels_.resize(Shape{nb});
    std::memcpy(labels_.data<int32_t>(), y.data(), y.size() * sizeof(int32_t));
  }
  const Tensor *xs = nullptr, *ys = nullptr;
  {
    MemoryRole role(ctx, "the evaluation batch");
    xs = &stage_tensor(ctx, x, DType::F32, dev, xd_);
    ys = &stage_tensor(ctx, target ? *target : labels_, DType::I32, dev, yd_);
  }
  CopyFence fence;
  if (dev == Device::CUDA) fence.record(ctx);
  // A memory plan's micro-batch bounds the rows of a forward here too.
  const int64_t rows = model.micro_batch() > 0 ? std::min(model.micro_batch(), nb) : nb;
  const Shape sample = xs->shape().with_n(1);
  const int64_t per_row = ys->numel() / nb;  // 1, or a map's pixels
  for (int64_t r0 = 0; r0 < nb; r0 += rows) {
    const int64_t m = std::min(rows, nb - r0);
    const Tensor xc = m == nb ? *xs : xs->slice(r0 * sample.numel(), xs->shape().with_n(m));
    const Tensor yc = m == nb ? *ys : ys->slice(r0 * per_row, ys->shape().with_n(m));
    const Tensor& logits = model.forward(ctx, xc);
    ce_.forward(ctx, logits, yc);
    ce_.accumulate_metrics(ctx, logits, acc_);
    if (opt_.confusion && target) {
      ops::segmentation_confusion(ctx, logits, yc, counts_);  // on the device, no read-back
    } else if (opt_.confusion) {
      const Tensor& lh = dev == Device::CPU ? logits : (logits_host_ = logits.to(Device::CPU, ctx));
      PDNN_CHECK(lh.rank() == 2 && lh.shape(0) == m && lh.shape(1) == k,
                 "evaluation: logits %s for %lld images of %d classes", lh.shape().str().c_str(),
                 static_cast<long long>(m), k);
      const float* z = lh.data();
      for (int64_t i = 0; i < m; ++i) {
        int best = 0;
        for (int j = 1; j < k; ++j)
          if (z[i * k + j] > z[i * k + best]) best = j;
        ++r.confusion[static_cast<size_t>(y[static_cast<size_t>(r0 + i)] * k + best)];
      }
    }
  }
  fence.wait();
}

EvalResult Evaluator::run(Context& ctx, Model& model) {
  const int k = data_.num_classes();
  EvalResult r;
  r.classes = k;
  r.count = data_.size();
  if (opt_.confusion) r.confusion.assign(static_cast<size_t>(k) * static_cast<size_t>(k), 0);
  if (data_.size() == 0) return r;
  model.train(false);
  struct TrainAgain {  // also when an error leaves the loop
    Model& m;
    ~TrainAgain() { m.train(true); }
  } train_again{model};

  const Device dev = model.device();
  if (acc_.empty() || acc_.device() != dev) acc_ = Tensor::empty(Shape{3}, DType::F64, dev, ctx);
  ops::zero(ctx, acc_);
  const bool map = data_.target_shape().rank() > 0;
  if (map && opt_.confusion) {
    if (counts_.empty() || counts_.device() != dev)
      counts_ = Tensor::empty(Shape{int64_t{k} * k}, DType::I64, dev, ctx);
    ops::zero(ctx, counts_);
  }
  if (prefetch_) {
    // Every epoch of a stored-order, unaugmented loader is the same sequence of batches. A
    // run that stopped part way (an error) left the loader there: it starts afresh.
    if (!fresh_) prefetch_->start_epoch(++epoch_);
    fresh_ = false;
    while (prefetch_->has_next()) {
      const Batch& b = prefetch_->next();
      run_batch(ctx, model, b.x, b.y, map ? &b.target : nullptr, r);
    }
    prefetch_->start_epoch(++epoch_);  // the next run's first batches, packed from now on
    fresh_ = true;
  } else {
    for (int64_t b = 0; b < sync_->num_batches(); ++b) {
      sync_->load(b, x_, y_, map ? &target_ : nullptr);
      run_batch(ctx, model, x_, y_, map ? &target_ : nullptr, r);
    }
  }
  const Tensor h = dev == Device::CPU ? acc_ : acc_.to(Device::CPU, ctx);
  const double* a = h.data<double>();
  r.loss_sum = a[0];
  r.correct = a[1];
  if (map) {
    r.count = static_cast<int64_t>(a[2]);  // pixels
    if (opt_.confusion) {
      const Tensor c = dev == Device::CPU ? counts_ : counts_.to(Device::CPU, ctx);
      r.confusion.assign(c.data<int64_t>(), c.data<int64_t>() + c.numel());
    }
  }
  r.loss = a[0] / static_cast<double>(r.count);
  r.acc = a[1] / static_cast<double>(r.count);
  return r;
}

EvalResult evaluate_classifier(Context& ctx, Model& model, const Dataset& data,
                               const EvalOptions& opt) {
  Evaluator e(ctx, data, opt);
  return e.run(ctx, model);
}

}  // namespace pdnn
