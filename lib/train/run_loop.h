// The run loop every training app shares: epochs over a TrainTask (the app's training step,
// evaluation and checkpoint contents), with resume, checkpoints, one CSV row per epoch, the
// benchmark row (--steps), the per-layer profile, the progress line and divergence checks.
//
// Guarantees, whatever the flags and whenever the process dies:
// - Every file the run will write is checked before any work (output_files.h); a run that
//   fails early writes nothing, and stale "<file>.tmp.<pid>" files of killed runs are removed.
// - Nothing non-finite is persisted: training metrics are checked as they are read, and at an
//   epoch's end the evaluation and the whole trained state are checked before its row and
//   checkpoint are written; a diverged run stops with an error naming the epoch and step, and
//   the checkpoint keeps the last good epoch.
// - The CSV and the checkpoint agree after a SIGKILL at any point: an epoch's row is written
//   just before its checkpoint, so a run killed between the two has one row too many at the
//   end of its CSV. A resumed run first drops such trailing rows (same model, data set and
//   batch, epoch past the checkpoint's), then redoes that epoch. When the checkpoint cannot be
//   written (disk full) the row is taken back out and the run stops with that error. A fresh
//   run with a checkpoint path saves an epoch-0 checkpoint before training, so there is always
//   one to resume from; it refuses a path that exists (a trained run's checkpoint would be
//   lost) unless told --overwrite, and so does --save-init (the initial weights). Both are
//   written under a temporary name, then renamed (save_checkpoint).
//   (Two runs of the same model, data and batch appending to one CSV at once can fool the
//   trailing-row rule: give concurrent runs their own --out.)
// - Resuming gives the same weights as never stopping (the data order of epoch e depends on the
//   seed and e only; the RNG position is saved).
//
// Data-parallel (RunConfig::comm, the --distributed flag; lib/dist/communicator.h): every rank
// runs this loop over the same epochs and batches; the task trains on its shard of every
// global batch and reduces its metrics over the ranks. Before anything else all ranks must
// agree on the flags, the data and the model (Communicator::check_same); rank 0 alone checks
// and writes the output files and prints; at every epoch's end the ranks check that they hold
// the same weights. Metrics are read at the same steps on every rank (every check_every steps
// and at an epoch's last batch), with rank 0 deciding whether a progress line is due.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/context.h"
#include "model/checkpoint.h"
#include "run/run_config.h"

namespace pdnn {

class Communicator;

// What an app supplies to the run loop.
class TrainTask {
 public:
  virtual ~TrainTask() = default;

  // Names of the values train_metrics() and evaluate() return, as CSV columns ("train_loss",
  // "train_acc"; "test_loss", "test_acc"). They go between the identifying columns (app,
  // model, dataset, device, threads, batch, epoch) and the timing ones (seconds, images_per_s,
  // git_rev, host, timestamp).
  virtual std::vector<std::string> train_columns() const = 0;
  virtual std::vector<std::string> eval_columns() const { return {}; }

  // Starts epoch `epoch` (0-based): its data order from (data_seed, epoch) only, so a resumed
  // run sees the same order, and the running metrics reset. Returns its number of batches.
  virtual int64_t begin_epoch(Context& ctx, int epoch, uint64_t data_seed) = 0;
  // One training step on batch b of the epoch; returns the examples it held. Need not read
  // anything back to the host: the loop asks for train_metrics() when it needs them.
  virtual int64_t train_batch(Context& ctx, int64_t b) = 0;
  // Running means of the epoch's training metrics so far, one per train_columns(). Called
  // every RunConfig::check_every steps, at progress lines and at the epoch's end.
  virtual std::vector<double> train_metrics(Context& ctx) = 0;
  // How steps run, for the benchmark row: "graph" (replayed CUDA graph), "eager" or "" (CPU).
  virtual std::string step_mode() const { return ""; }
  // At an epoch's end: one value per eval_columns().
  virtual std::vector<double> evaluate(Context& ctx) {
    (void)ctx;
    return {};
  }
  // False when any trained value (parameters, buffers, optimizer state) is not finite.
  virtual bool state_finite(Context& ctx) = 0;

  // Everything a resumed run needs, with the loop's `values`, written atomically to path.
  virtual void save_checkpoint(const std::string& path, int64_t epoch,
                               const std::map<std::string, int64_t>& values) = 0;
  // Restores what save_checkpoint wrote; validates the whole file before changing anything.
  virtual CheckpointInfo load_checkpoint(const std::string& path) = 0;
  // The weights alone (--save-init: the initial weights, for scripts/twins/torch_reference.py).
  virtual void save_weights(const std::string& path) = 0;

  // After epoch `epoch` (0-based) is finished, its row and checkpoint written: the task's own
  // per-epoch files (samples, plots), named in RunConfig::extra_outputs and written atomically.
  // Data-parallel: called on rank 0 only (so is finish()); no collectives here.
  virtual void end_epoch(Context& ctx, int epoch) {
    (void)ctx;
    (void)epoch;
  }
  // After the last epoch (not after a benchmark): the task's final files (confusion matrix).
  virtual void finish(Context& ctx) { (void)ctx; }

  // With RunConfig::status_column: at an epoch's end, after evaluate(), what its row's status
  // says when the epoch finished but something is wrong that does not stop the run (a GAN whose
  // discriminator stayed certain all epoch); "" for "ok". The loop prints it too.
  virtual std::string epoch_status(Context& ctx) {
    (void)ctx;
    return "";
  }
  // Data-parallel training (--distributed): from now on this rank trains on its shard of every
  // global batch, train_batch() returns the global batch's size, and train_metrics() and
  // evaluate() give the values over all ranks (collectives: every rank calls them at the same
  // points). Called once, before anything is loaded or trained. A task that cannot says so.
  virtual void distribute(Context& ctx, Communicator& comm);
  // What every rank must agree on besides the flags, as (name, value) pairs compared across
  // ranks at start-up: e.g. hashes of the training data and of the initial weights.
  virtual std::vector<std::pair<std::string, std::string>> fingerprint(Context& ctx) {
    (void)ctx;
    return {};
  }
  // A hash of the trained state (weights, buffers, optimizer state): the ranks compare it at
  // each epoch's end. 0: the task has none to compare.
  virtual uint64_t state_hash(Context& ctx) {
    (void)ctx;
    return 0;
  }
  // One line on how the ranks communicate, for the run's header, and one on what the
  // communication cost, printed at the end ("" when not distributed).
  virtual std::string distributed_summary() const { return ""; }
  virtual std::string distributed_stats() const { return ""; }
};



class CsvWriter;

// One training run in two phases, so an app can print its banner between them:
//   RunLoop loop(ctx, cfg, task);   // checks every output, resumes: can fail, writes nothing
//   print the banner (loop.seed() is the run's seed, the checkpoint's when resumed)
//   return loop.run();               // trains, writes rows, checkpoints, bench row, profile
// Errors, divergence included, are thrown as pdnn::Error after the files of finished epochs
// are in place.
class RunLoop {
 public:
  RunLoop(Context& ctx, RunConfig cfg, TrainTask& task);
  ~RunLoop();
  RunLoop(const RunLoop&) = delete;
  RunLoop& operator=(const RunLoop&) = delete;

  uint64_t seed() const { return seed_; }
  int start_epoch() const { return start_epoch_; }
  // Returns the exit status (0).
  int run();

 private:
  struct Session;  // what one run() keeps across its epochs
  struct Epoch;    // one epoch as it trains

  void reconcile_csv();
  void save(int epoch);
  bool root() const;
  // run(), by mode: training epochs (rows, checkpoints) or the benchmark (--steps), between a
  // shared start and end.
  void begin_run();
  void start_session(Session& s);
  void run_epochs(Session& s);
  void run_bench(Session& s);
  void end_run(Session& s);
  // Either mode's epoch: the training steps, their timing and the running metrics' checks.
  void train_steps(Session& s, Epoch& e);
  void end_block(Session& s);
  void read_metrics(Session& s, Epoch& e, int64_t done);
  void check_divergence(Session& s, Epoch& e, const std::vector<double>& m, int64_t done);
  // A training epoch's end: its results checked, then its row, checkpoint and files.
  void end_epoch(Session& s, Epoch& e);
  std::vector<double> checked_evaluation(const Epoch& e);
  void check_state(Session& s, const Epoch& e, const std::vector<double>& train);
  std::string kept_text(int epoch) const;
  void save_or_drop_row(const Session& s, int epoch);
  void write_row(Session& s, int epoch, const std::vector<double>& vals,
                 const std::string& status, double secs, int64_t seen);
  void report_bench(Session& s);

  Context& ctx_;
  RunConfig cfg_;
  TrainTask& task_;
  std::vector<std::string> columns_, train_cols_, eval_cols_;
  std::unique_ptr<CsvWriter> csv_, bench_csv_;
  std::vector<std::string> notes_;  // printed when run() starts
  uint64_t seed_ = 0;
  int start_epoch_ = 0;
};

// True when every parameter and buffer of model and every state tensor of opt (if given) is
// finite: what a TrainTask's state_finite() checks for each of its models. Device tensors are
// copied to the host for it (once per epoch, or on resume).
bool all_finite(Context& ctx, Model& model, Optimizer* opt);
// A hash of the same values (state_hash() of a task with this model and optimizer).
uint64_t state_hash_of(Context& ctx, Model& model, Optimizer* opt, uint64_t seed = 0);

// A task that trains one model with one optimizer (the classifier, the segmentation): its
// divergence check, checkpoint, weights and state hash, written once. The GAN (two models and
// two optimizers) has its own.
class SingleModelTask : public TrainTask {
 public:
  // All three must outlive the task; opt built over model.parameters().
  SingleModelTask(Context& ctx, Model& model, Optimizer& opt)
      : ctx_(ctx), model_(model), opt_(opt) {}
  bool state_finite(Context& ctx) override { return all_finite(ctx, model_, &opt_); }
  void save_checkpoint(const std::string& path, int64_t epoch,
                       const std::map<std::string, int64_t>& values) override;
  CheckpointInfo load_checkpoint(const std::string& path) override;
  void save_weights(const std::string& path) override;
  uint64_t state_hash(Context& ctx) override { return state_hash_of(ctx, model_, &opt_); }

 protected:
  Context& ctx_;
  Model& model_;
  Optimizer& opt_;
};

}  // namespace pdnn
