// ClassifierTrainer: forward, loss, backward, update; on the GPU as a CUDA graph.
#include "train/classifier_trainer.h"

#include "core/error.h"
#include "data/loader.h"
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
    : model_(model), opt_(opt), use_graph_(cuda_graph), graph_({&opt}, "trainer") {}

ClassifierTrainer::~ClassifierTrainer() = default;

void ClassifierTrainer::run_step(Context& ctx) {
  logits_ = &model_.forward(ctx, x_);
  loss_.forward(ctx, *logits_, y_);
  loss_.backward(ctx, dlogits_);
  model_.zero_grad(ctx);
  model_.backward(ctx, dlogits_);
  optimizer_step(ctx, opt_, model_);
  loss_.accumulate_metrics(ctx, *logits_, acc_);
}

void ClassifierTrainer::step(Context& ctx, const Tensor& x, const Tensor& labels) {
  PDNN_CHECK(labels.dtype() == DType::I32 && labels.numel() == x.shape(0),
             "trainer: %lld labels (int32) for a batch %s", static_cast<long long>(labels.numel()),
             x.shape().str().c_str());
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
  }
  if (dev == Device::CUDA && use_graph_ && !ctx.profiler()) {
    graph_.run(ctx, x_.shape(), [&] { run_step(ctx); });
    return;
  }
  run_step(ctx);  // the CPU, --cuda-graph off, a profiled run
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
  return {a[0] / data.size(), a[1] / data.size()};
}

}  // namespace pdnn
