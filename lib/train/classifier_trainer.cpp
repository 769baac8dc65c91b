// ClassifierTrainer: forward, loss, backward, update; on the GPU as a CUDA graph.
#include "train/classifier_trainer.h"

#include <cstdio>

#include "core/error.h"
#include "cuda/cuda_state.h"
#include "cuda/graph.h"
#include "data/loader.h"
#include "dist/grad_sync.h"
#include "ops/basic.h"
#include "train/optimizer_step.h"

namespace pdnn {

namespace {
// The batch in a buffer on `dev`: copied (counted) when it is elsewhere or, on the GPU, always,
// so that a captured graph always reads the same address.
void stage(Context& ctx, const Tensor& src, DType t, Device dev, Tensor& buf, const Tensor*& use) {
  if (dev == Device::CPU && src.device() == Device::CPU) {
    use = &src;
    return;
  }
  buf.resize(src.shape(), t, dev, ctx);
  copy_into(buf, src, ctx);
  use = &buf;
}
}  // namespace

ClassifierTrainer::ClassifierTrainer(Sequential& model, Optimizer& opt, bool cuda_graph)
    : model_(model), opt_(opt), use_graph_(cuda_graph), graph_(std::make_unique<CudaGraph>()) {}

ClassifierTrainer::~ClassifierTrainer() { cuda_event_destroy(staged_); }

void ClassifierTrainer::distribute(Communicator& comm, Context& ctx) {
  sync_ = std::make_unique<GradSync>(comm, model_, ctx);
  graph_->reset();  // a graph captured before holds no all-reduce
}

void ClassifierTrainer::wait_inputs_free(Context& ctx) {
  (void)ctx;
  if (staged_pending_) cuda_event_wait(staged_);
  staged_pending_ = false;
}

void ClassifierTrainer::run_step(Context& ctx) {
  logits_ = &model_.forward(ctx, x_);
  loss_.forward(ctx, *logits_, y_);
  loss_.backward(ctx, dlogits_, global_batch_);
  model_.zero_grad(ctx);
  if (sync_) sync_->begin(ctx);
  model_.backward(ctx, dlogits_);
  if (sync_) sync_->finish(ctx);
  optimizer_step(ctx, opt_, model_);
  loss_.accumulate_metrics(ctx, *logits_, acc_);
}

void ClassifierTrainer::step(Context& ctx, const Tensor& x, const Tensor& labels,
                             int64_t global_batch) {
  PDNN_CHECK(labels.dtype() == DType::I32 && labels.numel() == x.shape(0),
             "trainer: %lld labels (int32) for a batch %s", static_cast<long long>(labels.numel()),
             x.shape().str().c_str());
  PDNN_CHECK(global_batch == 0 || sync_,
             "trainer: a shard of a global batch (%lld) needs distribute() first",
             static_cast<long long>(global_batch));
  global_batch_ = global_batch;
  const Rng::RowShard& shard = ctx.rng().row_shard();
  key_ = StepKey{x.shape(), shard.row0, shard.total};
  const Device dev = model_.device();
  if (acc_.empty() || acc_.device() != dev) {
    acc_ = Tensor::empty(Shape{3}, DType::F64, dev, ctx);
    ops::zero(ctx, acc_);
  }
  const Tensor *xs = nullptr, *ys = nullptr;
  stage(ctx, x, DType::F32, dev, x_, xs);
  stage(ctx, labels, DType::I32, dev, y_, ys);
  if (dev == Device::CPU) {
    // No copies on the CPU: the step reads the caller's tensors (views, no data moved).
    x_ = *xs;
    y_ = *ys;
  } else if (x.device() == Device::CPU || labels.device() == Device::CPU) {
    // The copies out of (pinned) host memory are asynchronous: mark where they end, so the
    // caller can wait before it refills those buffers (wait_inputs_free).
    if (!staged_) staged_ = cuda_event_create();
    cuda_event_record_on(staged_, ctx.cuda().stream());
    staged_pending_ = true;
  }
  if (dev == Device::CUDA && use_graph_ && !ctx.profiler() && graph_step(ctx)) return;
  run_step(ctx);  // the CPU, --cuda-graph off, a profiled run, or a graph given up on
}

bool ClassifierTrainer::graph_step(Context& ctx) {
  if (graph_failures_ >= kMaxGraphFailures) return false;
  const AllocStats a0 = ctx.device_alloc_stats();
  const uint64_t frees = a0.frees;
  const bool valid = graph_->ready() && graph_shape_ == key_ && graph_frees_ == frees &&
                     graph_lr_ == opt_.lr();
  if (!valid) {
    // A step runs eagerly first whenever device memory changed hands since the graph was
    // made (an evaluation with a larger batch regrows buffers) or the shape is new: it sizes
    // every buffer and warms the caching allocator, so the capture that follows allocates and
    // frees nothing. A smaller last batch of an epoch runs eagerly and keeps the full-size graph.
    if (warm_shape_ != key_ || warm_frees_ != frees ||
        (graph_->ready() && graph_shape_ != key_)) {
      warm_shape_ = key_;
      run_step(ctx);
      warm_frees_ = ctx.device_alloc_stats().frees;
      return true;
    }
    // Capture: record the step without running it, then undo its host-side bookkeeping (the
    // optimizer's count and the RNG position moved on the host, their device copies did not).
    const int64_t steps0 = opt_.steps();
    const uint64_t rng0 = ctx.rng().counter();
    CUstream_st* s = ctx.cuda().stream();
    graph_->begin_capture(s);
    try {
      run_step(ctx);
      graph_->end_capture(s);
    } catch (...) {
      graph_->abort_capture(s);
      graph_->reset();
      throw;
    }
    step_delta_ = opt_.steps() - steps0;
    rng_delta_ = ctx.rng().counter() - rng0;
    opt_.set_host_steps(steps0);
    ctx.rewind_rng(rng0);
    const AllocStats a1 = ctx.device_alloc_stats();
    if (a1.frees != frees || a1.allocs != a0.allocs) {
      // Memory changed hands inside the step: a graph replaying it could touch freed blocks.
      // Drop it, run the step eagerly (the capture ran nothing), try again later; give up
      // after a few tries, with one line saying so.
      graph_->reset();
      warm_shape_ = StepKey{};
      if (++graph_failures_ == kMaxGraphFailures)
        std::fprintf(stderr,
                     "trainer: device memory was allocated or freed inside the training step "
                     "(%llu allocations, %llu frees during capture): running without a CUDA "
                     "graph from here on\n",
                     static_cast<unsigned long long>(a1.allocs - a0.allocs),
                     static_cast<unsigned long long>(a1.frees - a0.frees));
      run_step(ctx);
      return true;
    }
    graph_failures_ = 0;
    graph_shape_ = key_;
    graph_frees_ = frees;
    graph_lr_ = opt_.lr();
    ++captures_;
  }
  graph_->launch(ctx.cuda().stream());
  opt_.set_host_steps(opt_.steps() + step_delta_);
  ctx.mirror_rng_advance(rng_delta_);
  ++replays_;
  return true;
}

ClassifierMetrics ClassifierTrainer::metrics(Context& ctx) {
  if (acc_.empty()) return {};
  const Tensor h = acc_.device() == Device::CPU ? acc_ : acc_.to(Device::CPU, ctx);
  const double* a = h.data<double>();
  return ClassifierMetrics{a[0], a[1], a[2]};
}

void ClassifierTrainer::reset_metrics(Context& ctx) {
  if (!acc_.empty()) ops::zero(ctx, acc_);
}

EvalResult evaluate_classifier(Context& ctx, Sequential& model, const LabeledImages& data,
                               int64_t batch) {
  model.train(false);
  const Device dev = model.device();
  BatchLoader loader(data, batch);
  SoftmaxCrossEntropy ce;
  Tensor x, y, xd, yd;
  Tensor acc = Tensor::empty(Shape{3}, DType::F64, dev, ctx);
  ops::zero(ctx, acc);
  for (int64_t b = 0; b < loader.num_batches(); ++b) {
    loader.load(b, x, y);
    const Tensor *xs = nullptr, *ys = nullptr;
    stage(ctx, x, DType::F32, dev, xd, xs);
    stage(ctx, y, DType::I32, dev, yd, ys);
    const Tensor& logits = model.forward(ctx, *xs);
    ce.forward(ctx, logits, *ys);
    ce.accumulate_metrics(ctx, logits, acc);
  }
  model.train(true);
  const Tensor h = dev == Device::CPU ? acc : acc.to(Device::CPU, ctx);
  const double* a = h.data<double>();
  return {a[0] / data.size(), a[1] / data.size(), a[0], a[1]};
}

}  // namespace pdnn
