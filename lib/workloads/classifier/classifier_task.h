// ClassifierTask: the run loop's task (run_loop.h) for an image classifier trained with
// softmax cross-entropy over Datasets (data/dataset.h): each epoch the training set in a fresh
// seeded order (optionally augmented, optionally only its first images_per_epoch images),
// ClassifierTrainer's step, running train loss and accuracy, the test set's loss and accuracy
// at each epoch's end, and a checkpoint holding the model and its optimizer. The mnist app
// runs it over its IDX sets (TensorDataset), the caltech101 app over image folders.
//
// Batches are packed (EpochBatches: DatasetLoader's load_batch) into host memory the GPU
// copies from asynchronously (pinned: ctx.staging_allocator()), either between steps on the
// training thread (prefetch 0) or ahead on a background thread (PrefetchLoader, prefetch >= 1:
// the next epoch's first batches are packed while the test set is evaluated); the batches are
// the same either way. Each is copied once into the trainer's device buffers.
//
// Optional columns: per-class test accuracy ("test_acc_<class>", with the confusion matrix of
// the last evaluation kept for the caller), and resources: peak resident memory of the
// process (getrusage), peak device memory in use (the CUDA allocator's; 0 on the CPU), and the
// time the epoch's training batches took to pack, split into the part hidden behind training
// and the part the trainer waited for ("loader_hidden_s", "loader_exposed_s").
//
// Data-parallel (distribute()): rank r of N trains on rows [r*B/N, (r+1)*B/N) of every global
// batch B, in the epoch's seeded order (the same order on every rank: the loaders pack only
// their rank's rows, LoaderOptions::shard), with ClassifierTrainer's gradient all-reduce; it
// evaluates samples [r*T/N, (r+1)*T/N) of the T test images (a DatasetRange); losses, correct
// counts, image counts and the confusion matrix are summed over the ranks before any mean is
// taken. Layers that normalise over the batch (BatchNorm2d) see the rank's shard only, as
// PyTorch DDP without SyncBatchNorm; their running statistics are averaged over the ranks
// before each evaluation. The resource columns are rank 0's.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/dataset.h"
#include "data/dataset_loader.h"
#include "data/prefetch_loader.h"
#include "model/model.h"
#include "optim/optimizer.h"
#include "train/run_loop.h"
#include "workloads/classifier/classifier_trainer.h"
#include "workloads/classifier/epoch_batches.h"

namespace pdnn {

struct ClassifierTaskOptions {
  // batch, augment, images_per_epoch, drop_last, threads of the training batches; shuffle is
  // on and the seed is the run's data seed (both set by the task).
  LoaderOptions train;
  int prefetch = 0;           // training batches packed ahead (PrefetchLoader depth); 0: none
  EvalOptions eval;           // the test set's batches (confusion is set by per_class)
  bool cuda_graph = true;     // replay the step as a CUDA graph on the GPU
  bool overlap_batch_copy = true;  // the batch's copy beside the step before (GPU)
  bool per_class = false;     // test_acc_<class> columns and confusion()
  bool resources = false;     // peak_rss_mb, peak_device_mb, loader_hidden_s, loader_exposed_s
};

class ClassifierTask : public SingleModelTask {
 public:
  // All references must outlive the task; opt built over model.parameters(), the model on the
  // device it trains on; train and test have the same sample shape and classes.
  ClassifierTask(Context& ctx, Model& model, Optimizer& opt, const Dataset& train,
                 const Dataset& test, const ClassifierTaskOptions& options);
  ~ClassifierTask() override;

  std::vector<std::string> train_columns() const override { return {"train_loss", "train_acc"}; }
  std::vector<std::string> eval_columns() const override;
  int64_t begin_epoch(Context& ctx, int epoch, uint64_t data_seed) override;
  int64_t train_batch(Context& ctx, int64_t b) override;
  std::vector<double> train_metrics(Context& ctx) override;
  std::string step_mode() const override;
  std::vector<double> evaluate(Context& ctx) override;
  void distribute(Context& ctx, Communicator& comm) override;
  std::vector<std::pair<std::string, std::string>> fingerprint(Context& ctx) override;
  std::string distributed_summary() const override;
  std::string distributed_stats() const override;

  // The last evaluation (with per_class: its confusion matrix), over all ranks.
  const EvalResult& last_eval() const { return last_eval_; }
  // Time spent packing training batches, over the run so far.
  LoaderStats loader_stats() const;

 protected:
  const Dataset& train_data() const { return train_; }
  const Dataset& test_data() const { return test_; }

 private:
  const Dataset& train_;
  const Dataset& test_;
  ClassifierTaskOptions o_;
  ClassifierTrainer trainer_;
  EpochBatches batches_;            // (data-parallel: this rank's rows of each)
  LoaderStats epoch_start_stats_, epoch_stats_;
  Tensor labels_;                   // labels of the current batch, int32 (pinned for a GPU)
  std::unique_ptr<Evaluator> evaluator_;  // the test set's (data-parallel: test_shard_'s)
  EvalResult last_eval_;
  Communicator* comm_ = nullptr;          // data-parallel: the ranks
  std::unique_ptr<DatasetRange> test_shard_;  // ... and this rank's part of the test set
  int64_t steps_ = 0;  // training steps of this run (FaultHook's "train_step")
};

// Peak resident memory of this process so far, in bytes (getrusage's ru_maxrss).
size_t peak_resident_bytes();
// A class name as part of a CSV column name: letters, digits, '-', '_' and '.' kept, anything
// else (a comma, a space) becomes '_'.
std::string column_safe(const std::string& name);

}  // namespace pdnn
