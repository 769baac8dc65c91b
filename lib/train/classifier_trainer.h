// ClassifierTrainer: one training step of a classifier, the sequence every app and test repeats:
// forward, softmax cross-entropy, zero_grad, backward, optimizer update, metrics. On the GPU the
// batch is copied into the trainer's device buffers (the only transfer of a step), the loss and
// the correct count are added to device accumulators (read back only when asked), and from the
// second step of a batch shape on the whole step is one CUDA graph, replayed every step.
#pragma once
#include <cstdint>
#include <memory>

struct CUevent_st;

#include "data/idx.h"
#include "losses/softmax_cross_entropy.h"
#include "model/sequential.h"
#include "optim/optimizer.h"

namespace pdnn {

class CudaGraph;
class Communicator;
class GradSync;

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
  // makes the copy asynchronous) or on the model's device. Data-parallel (distribute()): x is
  // this rank's shard of a global batch of global_batch rows (ctx.rng()'s row shard says which
  // rows), the loss gradient is its share of the global mean and the gradients are summed
  // over the ranks before the update, so every rank applies the global batch's update.
  void step(Context& ctx, const Tensor& x, const Tensor& labels, int64_t global_batch = 0);
  // Makes the steps data-parallel over comm (the model already on its device, NCCL open for a
  // GPU model): gradients are all-reduced in buckets during backward (grad_sync.h).
  void distribute(Communicator& comm, Context& ctx);
  const GradSync* grad_sync() const { return sync_.get(); }
  // Waits until the last step's batch has been copied off the host tensors it came from: call
  // it before refilling a pinned buffer that step() may still be reading asynchronously.
  void wait_inputs_free(Context& ctx);
  // Totals since the last reset (reads them back: a sync on the GPU; call it when printing).
  ClassifierMetrics metrics(Context& ctx);
  void reset_metrics(Context& ctx);
  // The logits of the last step, on the model's device (valid until the model's next forward).
  const Tensor& logits() const { return *logits_; }
  // Steps run as a replayed graph, and graphs captured, so far.
  int64_t graph_replays() const { return replays_; }
  int64_t graph_captures() const { return captures_; }

 private:
  void run_step(Context& ctx);  // the step itself, on x_ and y_
  bool graph_step(Context& ctx);

  Sequential& model_;
  Optimizer& opt_;
  bool use_graph_;
  SoftmaxCrossEntropy loss_;
  Tensor x_, y_;       // the batch on the model's device (GPU: the graph's fixed inputs)
  Tensor dlogits_, acc_;
  const Tensor* logits_ = nullptr;
  std::unique_ptr<CudaGraph> graph_;
  // What a captured step is specific to: the batch shape and, data-parallel, the rows of the
  // global batch this rank holds (the dropout draw's offsets are baked into the graph).
  struct StepKey {
    Shape shape;
    int64_t row0 = 0, total = 0;
    bool operator==(const StepKey& o) const {
      return shape == o.shape && row0 == o.row0 && total == o.total;
    }
    bool operator!=(const StepKey& o) const { return !(*this == o); }
  };
  StepKey key_, graph_shape_, warm_shape_;
  std::unique_ptr<GradSync> sync_;
  int64_t global_batch_ = 0;
  uint64_t graph_frees_ = 0;      // device frees seen when the graph was captured
  uint64_t warm_frees_ = 0;       // ... and after the last eager warm-up step
  int graph_failures_ = 0;        // captures in a row that saw memory change hands
  static constexpr int kMaxGraphFailures = 3;
  float graph_lr_ = 0.f;
  int64_t step_delta_ = 0;        // per replay: optimizer steps and RNG draws on the host side
  uint64_t rng_delta_ = 0;
  int64_t replays_ = 0, captures_ = 0;
  CUevent_st* staged_ = nullptr;  // recorded after the last step's host-to-device copies
  bool staged_pending_ = false;
};

// Mean softmax cross-entropy and accuracy over a whole split, in stored order, in evaluation
// mode (the model is put back in training mode afterwards), on the model's device.
struct EvalResult {
  double loss = 0, acc = 0;
  double loss_sum = 0, correct = 0;  // the totals behind them
};
EvalResult evaluate_classifier(Context& ctx, Sequential& model, const LabeledImages& data,
                               int64_t batch);

}  // namespace pdnn
