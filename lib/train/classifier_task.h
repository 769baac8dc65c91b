// ClassifierTask: the run loop's task (run_loop.h) for an image classifier trained with
// softmax cross-entropy: batches in a fresh seeded order each epoch, ClassifierTrainer's step,
// running train loss and accuracy, test loss and accuracy at each epoch's end, and a
// checkpoint holding the model and its optimizer. The mnist and caltech101 apps run it.
// Data-parallel (distribute()): rank r of N trains on rows [r*B/N, (r+1)*B/N) of every global
// batch B, in the epoch's seeded order (the same order on every rank), with ClassifierTrainer's
// gradient all-reduce; it evaluates rows [r*T/N, (r+1)*T/N) of the T test images; losses,
// correct counts and image counts are summed over the ranks before any mean is taken.
// Layers that normalise over the batch (BatchNorm2d) see the rank's shard only, as PyTorch DDP
// without SyncBatchNorm; their running statistics are averaged over the ranks before each
// evaluation.
#pragma once
#include <cstdint>
#include <vector>

#include "data/idx.h"
#include "data/loader.h"
#include "model/sequential.h"
#include "optim/optimizer.h"
#include "train/classifier_trainer.h"
#include "train/run_loop.h"

namespace pdnn {

class ClassifierTask : public TrainTask {
 public:
  // All references must outlive the task; opt built over model.parameters(), the model on the
  // device it trains on. Batches are assembled in host memory the GPU copies from
  // asynchronously (pinned); cuda_graph: replay the step as a CUDA graph on the GPU.
  ClassifierTask(Context& ctx, Sequential& model, Optimizer& opt, const LabeledImages& train,
                 const LabeledImages& test, int64_t batch, int64_t eval_batch,
                 bool cuda_graph = true);

  std::vector<std::string> train_columns() const override { return {"train_loss", "train_acc"}; }
  std::vector<std::string> eval_columns() const override { return {"test_loss", "test_acc"}; }
  int64_t begin_epoch(Context& ctx, int epoch, uint64_t data_seed) override;
  int64_t train_batch(Context& ctx, int64_t b) override;
  std::vector<double> train_metrics(Context& ctx) override;
  std::string step_mode() const override;
  std::vector<double> evaluate(Context& ctx) override;
  bool state_finite(Context& ctx) override { return all_finite(ctx, model_, &opt_); }
  void save_checkpoint(const std::string& path, int64_t epoch,
                       const std::map<std::string, int64_t>& values) override;
  CheckpointInfo load_checkpoint(const std::string& path) override;
  void save_weights(const std::string& path) override;
  void distribute(Context& ctx, Communicator& comm) override;
  std::vector<std::pair<std::string, std::string>> fingerprint(Context& ctx) override;
  uint64_t state_hash(Context& ctx) override { return state_hash_of(ctx, model_, &opt_); }
  std::string distributed_summary() const override;
  std::string distributed_stats() const override;

 private:
  Context& ctx_;
  Sequential& model_;
  Optimizer& opt_;
  const LabeledImages& train_;
  const LabeledImages& test_;
  Communicator* comm_ = nullptr;
  int64_t steps_ = 0;  // training steps of this run (data-parallel fault injection)
  LabeledImages test_shard_;  // data-parallel: this rank's rows of the test set (a view)
  int64_t eval_batch_;
  BatchLoader loader_;
  ClassifierTrainer trainer_;
  Tensor x_, y_;  // the batch in (pinned) host memory
};

}  // namespace pdnn
