// ClassifierTrainer: one training step of a classifier, the sequence every app and test repeats:
// forward, softmax cross-entropy, zero_grad, backward, optimizer update, metrics. Any model
// (model/model.h: a Sequential or a graph); a model whose logits are maps (N,K,H,W) with labels
// (N,H,W) trains with the per-pixel cross-entropy (a segmentation, the U-Net's step), its
// metrics per pixel. The step runs inside the step shell (train/step_shell.h): on the GPU the
// batch is copied into the shell's device buffers (the only transfer of a step) and, from the
// second step of a batch shape on, the whole step is one CUDA graph, replayed every step; the
// loss and the correct count are added to device accumulators (read back only when asked).
// Data-parallel (distribute()): each rank steps on its shard of a global batch and the
// gradients are summed over the ranks during backward (lib/dist/grad_sync.h), inside the graph.
// A model with a memory plan's micro-batch (Model::set_micro_batch) runs the batch in the
// shell's slices, the gradients summed, one update (the same CUDA graph).
// A segmentation may train on the soft Dice loss (losses/dice_loss.h) instead of the
// cross-entropy, or on their sum (set_loss): the gradients add in one buffer; the metrics keep
// the per-pixel accuracy, and the loss they report is the loss trained on.
// evaluate_classifier: loss, accuracy and (optionally) the confusion matrix over a Dataset.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/dataset_loader.h"
#include "data/prefetch_loader.h"
#include "losses/dice_loss.h"
#include "losses/softmax_cross_entropy.h"
#include "model/model.h"
#include "optim/optimizer.h"
#include "train/step_shell.h"

namespace pdnn {

class Communicator;
class GradSync;

// What a step's gradient comes from: the softmax cross-entropy (mean over the rows or pixels),
// the soft Dice loss of the batch (or of each micro-batch, data-parallel shard: Dice is not a
// sum over rows, so each is scored on its own and weighted by its share of the rows), or both
// added.
enum class TrainLoss { CrossEntropy, Dice, CrossEntropyAndDice };
// "ce", "dice", "ce+dice" (anything else: an error naming the flag and the choices).
TrainLoss parse_train_loss(const std::string& name, const char* flag);
const char* train_loss_name(TrainLoss l);

// Totals over the steps since reset_metrics().
struct ClassifierMetrics {
  double loss_sum = 0, correct = 0, count = 0;  // the cross-entropy's, over the rows or pixels
  double dice_sum = 0, dice_terms = 0;          // the Dice losses, one per batch or slice
  TrainLoss trained = TrainLoss::CrossEntropy;
  // The loss trained on: the cross-entropy's mean, the Dice losses' mean, or their sum.
  double cross_entropy() const { return count > 0 ? loss_sum / count : 0.0; }
  double dice() const { return dice_terms > 0 ? dice_sum / dice_terms : 0.0; }
  double loss() const {
    return trained == TrainLoss::CrossEntropy ? cross_entropy()
           : trained == TrainLoss::Dice       ? dice()
                                              : cross_entropy() + dice();
  }
  double acc() const { return count > 0 ? correct / count : 0.0; }
};

class ClassifierTrainer {
 public:
  // `opt` must have been built over model.parameters(); both must outlive the trainer.
  // cuda_graph: capture and replay the step on the GPU (ignored on the CPU, and while a
  // profiler is attached, which times layers one by one). overlap_copy: on the GPU, copy the
  // batch from the host beside the step before (train/step_shell.h; off: serially).
  ClassifierTrainer(Model& model, Optimizer& opt, bool cuda_graph = true, bool overlap_copy = true);
  ~ClassifierTrainer();

  // One step on a batch: x (N,...) float32 and labels (N) (or (N,H,W)) int32, on the host (pinned memory
  // makes the copy asynchronous) or on the model's device. The caller may refill x and labels
  // as soon as step() returns: on the GPU it waits until their copies have run (not for the
  // step itself, which stays queued), so a loader can pack the next batch into the same
  // host buffer while the device trains on this one.
  // Data-parallel (distribute()): x is this rank's shard of a global batch of global_batch
  // rows (ctx.rng()'s row shard says which rows), the loss gradient is its share of the global
  // mean and the gradients are summed over the ranks before the update, so every rank applies
  // the global batch's update.
  void step(Context& ctx, const Tensor& x, const Tensor& labels, int64_t global_batch = 0);
  // The loss the steps train on (before the first step; default the cross-entropy).
  void set_loss(TrainLoss l);
  TrainLoss loss() const { return trained_; }
  // Makes the steps data-parallel over comm (the model already on its device, NCCL open for a
  // GPU model): gradients are all-reduced in buckets during backward (grad_sync.h).
  void distribute(Communicator& comm, Context& ctx);
  const GradSync* grad_sync() const { return sync_.get(); }
  // Totals since the last reset (reads them back: a sync on the GPU; call it when printing).
  ClassifierMetrics metrics(Context& ctx);
  void reset_metrics(Context& ctx);
  // The logits of the last step, on the model's device (valid until the model's next forward).
  const Tensor& logits() const { return *logits_; }
  // Steps run as a replayed graph, and graphs captured, so far.
  int64_t graph_replays() const { return shell_.graph_replays(); }
  int64_t graph_captures() const { return shell_.graph_captures(); }

 private:
  void run_step(Context& ctx);  // the step itself, on the shell's staged batch

  Model& model_;
  Optimizer& opt_;
  SoftmaxCrossEntropy loss_;
  DiceLoss dice_;
  TrainLoss trained_ = TrainLoss::CrossEntropy;
  double dice_terms_ = 0;  // Dice losses added to acc_[3] since the last reset (host count)
  Tensor dlogits_, acc_;
  const Tensor* logits_ = nullptr;
  StepShell shell_;
  std::unique_ptr<GradSync> sync_;
  int64_t global_batch_ = 0;  // the loss's mean is over this many rows (0: the batch's own)
};

// Mean softmax cross-entropy and accuracy over a whole split, in stored order, without
// augmentation, in evaluation mode (the model is put back in training mode afterwards), on the
// model's device. Batches are packed in host memory the device copies from (pinned for a GPU:
// ctx.staging_allocator()). A split with per-pixel targets (Dataset::target_shape(): a
// segmentation) is scored per pixel: the means are over its pixels and the confusion matrix
// counts pixels, on the device (ops::segmentation_confusion), read back once per run.
struct EvalOptions {
  int64_t batch = 128;
  int threads = 1;        // threads packing a batch (LoaderOptions::threads)
  int prefetch = 0;       // batches packed ahead on a background thread (PrefetchLoader); 0: none
  bool confusion = false; // also count (true class, predicted class) pairs: reads the logits
                          // back per batch (a synchronisation per batch on the GPU)
};
struct EvalResult {
  double loss = 0, acc = 0;
  int64_t count = 0;                 // images (a segmentation's: pixels)
  double loss_sum = 0, correct = 0;  // the totals behind loss and acc (summed over ranks)
  // With EvalOptions::confusion: classes x classes counts, row = true class, column = the
  // predicted one (the first of equal maxima); empty otherwise.
  std::vector<int64_t> confusion;
  int classes = 0;
  // Accuracy within true class k (correct / images of class k; 0 for a class with none).
  double class_acc(int k) const;
};

// Evaluates models over one data set, again and again (a test set after every epoch), keeping
// what it needs between runs: the host batch buffers (pinned memory is costly to get and to
// give back), the batch's device buffers (so device memory does not change hands between
// epochs and a training step's CUDA graph stays valid) and, with prefetch, the loader thread,
// which packs the next run's first batches as soon as a run ends. `data` must outlive it.
class Evaluator {
 public:
  Evaluator(Context& ctx, const Dataset& data, const EvalOptions& opt = {});
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  EvalResult run(Context& ctx, Model& model);

 private:
  // target: a map's per-pixel targets (int32 (n,H,W), host), nullptr for labels y.
  void run_batch(Context& ctx, Model& model, const Tensor& x, const std::vector<int32_t>& y,
                 const Tensor* target, EvalResult& r);

  const Dataset& data_;
  EvalOptions opt_;
  std::unique_ptr<PrefetchLoader> prefetch_;
  std::unique_ptr<DatasetLoader> sync_;
  int64_t epoch_ = 0;   // prefetch_'s current epoch (any gives the same batches)
  bool fresh_ = true;   // no batch of it taken yet
  SoftmaxCrossEntropy ce_;
  Tensor x_, labels_;        // host: the synchronous path's batch, the labels (pinned for a GPU)
  Tensor xd_, yd_, acc_;     // on the model's device
  Tensor logits_host_;
  Tensor target_;            // host: the synchronous path's per-pixel targets (a map's)
  Tensor counts_;            // a map's confusion counts, on the model's device
  std::vector<int32_t> y_;
};

// One evaluation with a fresh Evaluator (tests, one-off evaluations).
EvalResult evaluate_classifier(Context& ctx, Model& model, const Dataset& data,
                               const EvalOptions& opt = {});

}  // namespace pdnn
