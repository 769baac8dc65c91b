// DcganTask: the run loop's task (run_loop.h) for W5, the DCGAN: each epoch the first
// images_per_epoch images of a fresh seeded permutation of the training images (2,944 = 46
// batches of 64, the PyCUDA study's epoch), GanTrainer's iteration per batch, and per epoch:
//   - the CSV values train_d_loss (mean over iterations of D's BCE on the real plus the fake
//     batch), train_g_loss, train_d_x (mean D(x)), train_d_g_z (mean D(G(z)) in the D step) and
//     train_s_per_iter (seconds per iteration);
//   - one row per iteration in the iterations CSV (the same four values; written before the
//     epoch's row and checkpoint, so a resumed run drops the rows of epochs it redoes);
//   - after the checkpoint, an 8x8 grid of G's samples (evaluation mode, BatchNorm's running
//     statistics) from a fixed noise batch, samples_dir/epoch_NNN.png;
//   - the status column: a warning when every batch mean of D(x) and of D(G(z)) stayed within
//     stuck_eps of 0 or 1 all epoch (the discriminator won: G's gradients vanish); a
//     non-finite loss stops the run with a "diverged" row (run_loop.h).
// The checkpoint holds both models and both optimizers (format version 2: "G.", "D.").
// Optionally, `samples` generated images as an IDX file for the quality score (apps/gan_score):
// grey 64x64 (the mean of the channels: data that is grey as RGB) or colour 3 x 64 x 64
// (photos), after the last epoch, or after each epoch of samples_epochs (the file's name then
// has the epoch for "{epoch}", three digits: the progression of the quality over a run).
//
// Data-parallel (--distributed, distribute()): every rank plans the same epochs and packs its
// rows of each batch (shard_rows); GanTrainer sums both models' gradients over the ranks and
// draws each rank's noise rows as one process would; BatchNorm's statistics are each rank's
// (its running statistics averaged over the ranks at each epoch's end, before the grid and
// the checkpoint); the metrics and the iteration rows are the global batch's means; the
// "stuck" status judges every rank's shard means. Rank 0 writes the files. G's update waits for
// the next step (GanTrainer's deferred update, unless defer_g is off): evaluate(), which every
// rank calls first at an epoch's end, applies it, before the checks, the checkpoint and the
// files (rank 0's alone, where a sum over the ranks cannot run), which check that none pends.
//
// Random streams, all from the run's seed s (scripts/twins/torch_reference.py reproduces them):
// initial weights and every iteration's noise z from the run's stream (G's weights, D's, then
// 2 x batch x nz values per iteration); the data order of epoch e from
// Rng(at(data_seed, e + 1)) with data_seed = at(s, 0) (BatchLoader::epoch_rng); the fixed
// noise of the grids from Rng(at(data_seed, 0)); the scored samples' noise from
// Rng(at(data_seed, 2^62)).
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/dataset_loader.h"
#include "dist/communicator.h"
#include "model/model.h"
#include "optim/optimizer.h"
#include "workloads/dcgan/gan_trainer.h"
#include "train/run_loop.h"

namespace pdnn {

class CsvWriter;

struct DcganTaskOptions {
  int64_t batch = 64;
  int64_t images_per_epoch = 2944;  // 0: the whole set
  int64_t nz = 100;
  bool cuda_graph = true;
  bool overlap_batch_copy = true;  // the real batch's copy beside the iteration before (GPU)
  // Data-parallel: G's update under the next D step (gan_trainer.h's set_defer_g).
  GanTrainer::DeferG defer_g = GanTrainer::DeferG::kAuto;
  std::string model = "dcgan", dataset;  // the identifying columns of the iteration rows
  std::string samples_dir;     // epoch_NNN.png grids; "" writes none
  std::string iterations_csv;  // one row per iteration; "" writes none
  int64_t grid_samples = 64;   // the grid's images (8 per row)
  std::string samples_out;     // generated images as IDX (.gz ok); "{epoch}" -> "050"
  int64_t samples = 0;         // how many (with samples_out)
  std::vector<int> samples_epochs;  // 1-based; empty: after the last epoch
  bool colour_samples = false;      // C x 64 x 64 bytes; false: one grey plane
  double stuck_eps = 0.01;
};

// Noise stream positions of dcgan_task.h (for the app and the reference script).
constexpr uint64_t kGridNoiseIndex = 0;
constexpr uint64_t kSampleNoiseIndex = uint64_t{1} << 62;

class DcganTask : public TrainTask {
 public:
  // All references must outlive the task; the optimizers built over their models' parameters,
  // the models on the device they train on, initialised. data: (C,64,64) samples in [-1,1].
  DcganTask(Context& ctx, Model& g, Model& d, Optimizer& opt_g, Optimizer& opt_d,
            const Dataset& data, DcganTaskOptions opt);
  ~DcganTask() override;

  std::vector<std::string> train_columns() const override {
    return {"train_d_loss", "train_g_loss", "train_d_x", "train_d_g_z", "train_s_per_iter"};
  }
  int64_t begin_epoch(Context& ctx, int epoch, uint64_t data_seed) override;
  int64_t train_batch(Context& ctx, int64_t b) override;
  std::vector<double> train_metrics(Context& ctx) override;
  std::string step_mode() const override;
  // Writes the epoch's iteration rows (before its row and checkpoint); no values of its own.
  std::vector<double> evaluate(Context& ctx) override;
  std::string epoch_status(Context& ctx) override;
  bool state_finite(Context& ctx) override;
  void save_checkpoint(const std::string& path, int64_t epoch,
                       const std::map<std::string, int64_t>& values) override;
  CheckpointInfo load_checkpoint(const std::string& path) override;
  void save_weights(const std::string& path) override;
  void end_epoch(Context& ctx, int epoch) override;
  void finish(Context& ctx) override;
  void distribute(Context& ctx, Communicator& comm) override;
  std::vector<std::pair<std::string, std::string>> fingerprint(Context& ctx) override;
  uint64_t state_hash(Context& ctx) override;
  std::string distributed_summary() const override;

  // The grid file of an epoch (1-based): samples_dir/epoch_NNN.png.
  std::string grid_path(int epoch) const;
  // The sample file written after an epoch (1-based): samples_out, "{epoch}" replaced.
  std::string samples_path(int epoch) const;
  bool samples_after(int epoch) const;
  // n images from G in evaluation mode for n noise vectors drawn from `noise` (advancing it),
  // in batches, on the host (N,C,64,64) in [-1,1]. G is back in training mode afterwards.
  Tensor generate(Context& ctx, Rng& noise, int64_t n);
  const GanTrainer& trainer() const { return trainer_; }

 private:
  void write_grid(Context& ctx, int epoch);
  void write_samples(Context& ctx, const std::string& path);
  // The epoch's metrics over all ranks (collective when distributed).
  GanMetrics global_metrics(Context& ctx);
  bool root() const { return comm_ == nullptr || comm_->root(); }
  // Reading G or opt_g where only some ranks run: the update must have been applied already.
  void check_g_current(const char* what) const;

  Context& ctx_;
  Model& g_;
  Model& d_;
  Optimizer& opt_g_;
  Optimizer& opt_d_;
  const Dataset& data_;
  DcganTaskOptions opt_;
  GanTrainer trainer_;
  std::unique_ptr<DatasetLoader> loader_;
  uint64_t data_seed_ = 0;
  bool have_seed_ = false;
  int epoch_ = 0;
  int resumed_epoch_ = -1;  // the checkpoint's epoch after a resume, until its grid is checked
  Tensor x_;                // the batch in (pinned) host memory
  Tensor z_dev_;            // generate()'s noise on the device
  std::vector<int32_t> labels_;
  std::unique_ptr<CsvWriter> iterations_;
  std::chrono::steady_clock::time_point t_epoch_;
  Communicator* comm_ = nullptr;
};

}  // namespace pdnn
