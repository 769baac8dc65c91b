// ClassifierTrainer: one training step of a classifier, the sequence every app and test repeats:
// forward, softmax cross-entropy, zero_grad, backward, optimizer update, metrics. On the GPU the
// batch is copied into the trainer's device buffers (the only transfer of a step), the loss and
// the correct count are added to device accumulators (read back only when asked), and from the
// second step of a batch shape on the whole step is one CUDA graph, replayed every step.
#pragma once
#include <cstdint>

#include "data/idx.h"
#include "losses/softmax_cross_entropy.h"
#include "model/sequential.h"
#include "optim/optimizer.h"
#include "train/step_graph.h"

namespace pdnn {

// Totals over the steps since reset_metrics().
struct ClassifierMetrics {
  double loss_sum = 0, correct = 0, count = 0;
  double loss() const { return count > 0 ? loss_sum / count : 0.0; }
  double acc() const { return count > 0 ? correct / count : 0.0; }
};

class ClassifierTrainer {
 public:
  // `opt` must have been built over model.parameters(); both must outlive the trainer.
  // cuda_graph: capture and replay the step on the GPU (ignored on the CPU, and while a
  // profiler is attached, which times layers one by one).
  ClassifierTrainer(Sequential& model, Optimizer& opt, bool cuda_graph = true);
  ~ClassifierTrainer();

  // One step on a batch: x (N,...) float32 and labels (N) int32, on the host (pinned memory
  // makes the copy asynchronous) or on the model's device.
  void step(Context& ctx, const Tensor& x, const Tensor& labels);
  // Totals since the last reset (reads them back: a sync on the GPU; call it when printing).
  ClassifierMetrics metrics(Context& ctx);
  void reset_metrics(Context& ctx);
  // The logits of the last step, on the model's device (valid until the model's next forward).
  const Tensor& logits() const { return *logits_; }
  // Steps run as a replayed graph, and graphs captured, so far.
  int64_t graph_replays() const { return graph_.replays(); }
  int64_t graph_captures() const { return graph_.captures(); }

 private:
  void run_step(Context& ctx);  // the step itself, on x_ and y_

  Sequential& model_;
  Optimizer& opt_;
  bool use_graph_;
  SoftmaxCrossEntropy loss_;
  Tensor x_, y_;       // the batch on the model's device (GPU: the graph's fixed inputs)
  Tensor dlogits_, acc_;
  const Tensor* logits_ = nullptr;
  StepGraph graph_;
};

// Mean softmax cross-entropy and accuracy over a whole split, in stored order, in evaluation
// mode (the model is put back in training mode afterwards), on the model's device.
struct EvalResult {
  double loss = 0, acc = 0;
};
EvalResult evaluate_classifier(Context& ctx, Sequential& model, const LabeledImages& data,
                               int64_t batch);

}  // namespace pdnn
