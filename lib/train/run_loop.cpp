// The shared run loop (run_loop.h).
#include "train/run_loop.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/fault_hook.h"
#include "dist/communicator.h"
#include "run/csv.h"
#include "run/output_files.h"
#include "train/profiler.h"
#include "run/progress.h"
#include "core/cuda_state.h"
#include "run/run_info.h"
#include "run/timing.h"

namespace pdnn {
namespace {

using Clock = std::chrono::steady_clock;

// Columns of the CSV row before and after the task's metrics.
const std::vector<std::string> kIdColumns = {"app", "model",   "dataset", "device",
                                             "gpu", "threads", "batch",   "epoch"};
const std::vector<std::string> kTimeColumns = {"seconds", "images_per_s", "git_rev", "host",
                                               "timestamp"};
const std::vector<std::string> kBenchColumns = {
    "app",   "model",  "dataset",   "device",  "gpu",  "mode",     "precision",
    "threads", "batch", "steps", "median_ms", "min_ms", "max_ms", "blas_core", "git_rev",
    "host",  "timestamp"};
// GPU steps are timed in blocks of this many ending in a synchronisation (a sync per step would
// time the launch latency, not the step).
constexpr int64_t kGpuBlock = 10;
// Values the loop keeps in every checkpoint (a task's must_match names must differ).
const char* const kSeed = "seed";
const char* const kRngCounter = "rng_counter";

// "loss 0.2100  acc 0.9400" from train_loss, train_acc; or, with group, "train loss 0.2100
// acc 0.9400  test loss ..." (the prefix before '_' printed once per run of columns).
std::string metrics_text(const std::vector<std::string>& cols, const std::vector<double>& v,
                         bool group) {
  std::string s, last;
  for (size_t i = 0; i < cols.size() && i < v.size(); ++i) {
    const size_t us = cols[i].find('_');
    const std::string prefix = us == std::string::npos ? "" : cols[i].substr(0, us);
    const std::string name = us == std::string::npos ? cols[i] : cols[i].substr(us + 1);
    const bool new_group = i == 0 || prefix != last;
    if (i > 0) s += group && !new_group ? " " : "  ";
    if (group && new_group && !prefix.empty()) s += prefix + " ";
    s += name + " " + fmt(v[i], 4);
    last = prefix;
  }
  return s;
}

// The first non-finite value, or -1.
int first_non_finite(const std::vector<double>& v) {
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i])) return static_cast<int>(i);
  return -1;
}

void check_count(const std::vector<double>& v, const std::vector<std::string>& cols,
                 const char* what) {
  PDNN_CHECK(v.size() == cols.size(), "run loop: the task's %s gave %zu values for %zu columns",
             what, v.size(), cols.size());
}

// Runs f; an error it throws is one every rank throws at the same point (it comes from values
// reduced over the ranks), so the job can end in order instead of being aborted.
template <class F>
auto on_every_rank(Communicator* comm, F f) -> decltype(f()) {
  try {
    return f();
  } catch (...) {
    if (comm) Communicator::set_collective_error();
    throw;
  }
}

}  // namespace

void TrainTask::distribute(Context& ctx, Communicator& comm) {
  (void)ctx;
  (void)comm;
  Communicator::set_collective_error();  // every rank runs the same task: all fail here
  PDNN_FAIL("--distributed: this app's training task does not support data-parallel training");
}

uint64_t state_hash_of(Context& ctx, Model& model, Optimizer* opt, uint64_t seed) {
  uint64_t h = seed;
  auto add = [&](const Tensor& t) {
    const Tensor c = t.device() == Device::CPU ? t : t.to(Device::CPU, ctx);
    h = hash_bytes(c.raw_data(), c.nbytes(), h);
  };
  add(model.parameters().values());
  for (const Param& p : model.buffers()) add(*p.value);
  if (opt)
    for (const auto& s : opt->state()) add(*s.second);
  return h;
}

bool all_finite(Context& ctx, Model& model, Optimizer* opt) {
  auto finite = [&ctx](const Tensor& t) {
    const Tensor h = t.device() == Device::CPU ? t : t.to(Device::CPU, ctx);
    const float* p = h.data();
    for (int64_t i = 0; i < h.numel(); ++i)
      if (!std::isfinite(p[i])) return false;
    return true;
  };
  for (const Param& p : model.params())
    if (!finite(*p.value)) return false;
  for (const Param& p : model.buffers())
    if (!finite(*p.value)) return false;
  if (opt)
    for (const auto& s : opt->state())
      if (!finite(*s.second)) return false;
  return true;
}

RunLoop::RunLoop(Context& ctx, RunConfig cfg, TrainTask& task)
    : ctx_(ctx), cfg_(std::move(cfg)), task_(task), seed_(cfg_.seed) {
  const RunConfig& c = cfg_;
  const bool bench = c.steps > 0;
  PDNN_CHECK(c.epochs >= 1 && c.epochs <= kMaxEpochs, "--epochs %d: must be 1..%d", c.epochs,
             kMaxEpochs);
  PDNN_CHECK(c.batch >= 1, "batch %lld: must be at least 1", static_cast<long long>(c.batch));
  PDNN_CHECK(!c.resume || !c.checkpoint.empty(), "--resume needs --checkpoint PATH");
  PDNN_CHECK(!(c.resume && !c.save_init.empty()),
             "--save-init writes a fresh run's initial weights: it cannot be combined with "
             "--resume");
  PDNN_CHECK(!c.overwrite || !c.checkpoint.empty() || !c.save_init.empty() ||
                 !c.save_weights.empty(),
             "--overwrite lets a fresh run replace an existing --checkpoint, --save-init or "
             "--save-weights file: give one of them");
  for (const auto& kv : c.must_match)
    PDNN_CHECK(kv.first != kSeed && kv.first != kRngCounter,
               "run loop: must_match value '%s' is a reserved name", kv.first.c_str());

  // 0. Data-parallel: the task takes its shard, then every rank must hold the same flags, data
  //    and model before anything is written or trained.
  if (Communicator* comm = c.comm.get()) {
    task_.distribute(ctx_, *comm);
    std::vector<std::pair<std::string, std::string>> items = {{"the flags", c.flags_text}};
    for (auto& kv : task_.fingerprint(ctx_)) items.push_back(std::move(kv));
    comm->check_same(items);
  }

  // 1. Every output checked before any work; stale temporaries of killed runs cleared (by
  //    rank 0 alone, which alone writes them).
  std::vector<OutputFile> outputs;
  if (!bench) {
    outputs.push_back({"--out", c.out});
    if (!c.checkpoint.empty()) outputs.push_back({"--checkpoint", c.checkpoint});
  } else if (!c.bench_csv.empty()) {
    outputs.push_back({"--bench-csv", c.bench_csv});
  }
  if (!c.save_init.empty()) outputs.push_back({"--save-init", c.save_init});
  if (!bench && !c.save_weights.empty()) outputs.push_back({"--save-weights", c.save_weights});
  if (c.profile) outputs.push_back({"--profile-out", c.profile_out});
  if (!bench) outputs.insert(outputs.end(), c.extra_outputs.begin(), c.extra_outputs.end());
  if (!root()) outputs.clear();
  check_output_files(outputs, c.inputs);
  // A fresh run writes its epoch-0 checkpoint before the first step: over a file it did not
  // write, that would destroy a trained run.
  PDNN_CHECK(bench || c.resume || c.overwrite || c.checkpoint.empty() || !root() ||
                 !std::filesystem::exists(c.checkpoint),
             "--checkpoint %s already exists and this fresh run would replace it: --resume to "
             "continue it, name another path, or --overwrite to replace it",
             c.checkpoint.c_str());
  // The same rule for the initial weights (a file this run did not write: another run's, or
  // a trained checkpoint given the wrong flag).
  PDNN_CHECK(c.overwrite || c.save_init.empty() || !root() ||
                 !std::filesystem::exists(c.save_init),
             "--save-init %s already exists and this run would replace it: name another path, "
             "or --overwrite to replace it",
             c.save_init.c_str());
  // And for the trained weights (another run's judge, say).
  PDNN_CHECK(bench || c.overwrite || c.save_weights.empty() || !root() ||
                 !std::filesystem::exists(c.save_weights),
             "--save-weights %s already exists and this run would replace it: name another "
             "path, or --overwrite to replace it",
             c.save_weights.c_str());
  for (const OutputFile& o : outputs)
    for (const std::string& t : remove_stale_temporaries(o.path))
      notes_.push_back(strprintf("removed %s (left by a run killed while writing %s)", t.c_str(),
                                 o.path.c_str()));

  train_cols_ = task_.train_columns();
  eval_cols_ = task_.eval_columns();
  columns_ = kIdColumns;
  columns_.insert(columns_.end(), train_cols_.begin(), train_cols_.end());
  columns_.insert(columns_.end(), eval_cols_.begin(), eval_cols_.end());
  if (c.status_column) columns_.push_back("status");
  columns_.insert(columns_.end(), kTimeColumns.begin(), kTimeColumns.end());
  for (const auto& kv : c.run_columns) columns_.push_back(kv.first);
  if (!bench && root()) csv_ = std::make_unique<CsvWriter>(c.out, columns_);
  if (bench && !c.bench_csv.empty() && root())
    bench_csv_ = std::make_unique<CsvWriter>(c.bench_csv, kBenchColumns);

  // 2. Resume: the whole checkpoint validated against this run before anything changes.
  if (!c.resume) return;
  const CheckpointInfo ck = task_.load_checkpoint(c.checkpoint);
  const char* cp = c.checkpoint.c_str();
  PDNN_CHECK(ck.epoch >= 0 && ck.epoch <= kMaxEpochs,
             "checkpoint '%s': field epoch = %lld is out of range 0..%d (damaged file?)", cp,
             static_cast<long long>(ck.epoch), kMaxEpochs);
  const auto s = ck.values.find(kSeed), n = ck.values.find(kRngCounter);
  PDNN_CHECK(s != ck.values.end() && n != ck.values.end(),
             "checkpoint '%s': not a %s training checkpoint (no seed / rng_counter values)", cp,
             c.app.c_str());
  // Seeds are uint64 stored in an int64 field: every bit pattern is a valid seed.
  const uint64_t ck_seed = static_cast<uint64_t>(s->second);
  PDNN_CHECK(!c.seed_given || ck_seed == c.seed, "%s was made with --seed %llu, not %llu", cp,
             static_cast<unsigned long long>(ck_seed), static_cast<unsigned long long>(c.seed));
  for (const auto& [key, now] : c.must_match) {
    const auto it = ck.values.find(key);
    PDNN_CHECK(it == ck.values.end() || it->second == now,
               "%s was made with %s %lld, this run has %lld", cp, key.c_str(),
               static_cast<long long>(it->second), static_cast<long long>(now));
  }
  PDNN_CHECK(task_.state_finite(ctx_),
             "checkpoint '%s' holds non-finite weights or optimizer state: it cannot be resumed",
             cp);
  seed_ = ck_seed;
  ctx_.rng().seed(seed_);
  ctx_.rng().set_counter(static_cast<uint64_t>(n->second));
  start_epoch_ = static_cast<int>(ck.epoch);
}

RunLoop::~RunLoop() = default;

bool RunLoop::root() const { return !cfg_.comm || cfg_.comm->root(); }

// A run killed between an epoch's row and its checkpoint left that row at the end of the CSV:
// drop the trailing rows of this model, data set and batch whose epoch is past the checkpoint's
// (they are redone), from the last row backwards, stopping at the first row that is not one.
void RunLoop::reconcile_csv() {
  const std::vector<std::vector<std::string>> rows = csv_->rows();
  const std::string batch = std::to_string(cfg_.batch);
  size_t first_dropped = rows.size();
  while (first_dropped > 0) {
    const std::vector<std::string>& f = rows[first_dropped - 1];
    auto col = [this](const char* name) {
      return static_cast<size_t>(
          std::find(columns_.begin(), columns_.end(), name) - columns_.begin());
    };
    const bool ours = f.size() == columns_.size() && f[col("app")] == "pdnn" &&
                      f[col("model")] == cfg_.model && f[col("dataset")] == cfg_.dataset &&
                      f[col("batch")] == batch && std::atoll(f[col("epoch")].c_str()) > start_epoch_;
    if (!ours) break;
    --first_dropped;
  }
  const size_t dropped =
      csv_->drop_rows([&](size_t i, const std::vector<std::string>&) { return i >= first_dropped; });
  if (dropped > 0)
    std::printf("dropped %zu row(s) at the end of %s: epochs past the checkpoint's %d, redone "
                "now\n",
                dropped, cfg_.out.c_str(), start_epoch_);
}

void RunLoop::save(int epoch) {
  if (!root()) return;
  std::map<std::string, int64_t> v = cfg_.must_match;
  v[kSeed] = static_cast<int64_t>(seed_);
  v[kRngCounter] = static_cast<int64_t>(ctx_.rng().counter());
  create_parent_folders(cfg_.checkpoint);
  task_.save_checkpoint(cfg_.checkpoint, epoch, v);
}

// What one run() keeps across its epochs.
struct RunLoop::Session {
  // The data order's own stream (value 0 of the run's stream, which draws never use, as they
  // count from 1): epoch e's order depends on the seed and e only, not on dropout's draws.
  uint64_t data_seed = 0;
  // The rows' threads and batch columns. A data-parallel run's say "ranks x threads per rank"
  // (e.g. 2x8).
  std::string threads, batch;
  Profiler profiler;
  RunInfo info;
  std::vector<double> step_ms, partial_ms;  // bench: full-batch steps, and the others
  int64_t steps = 0;                        // over the run
  int64_t block = 1;                        // steps per timed block
  Clock::time_point block_start;            // of the current block of timed steps
  int64_t in_block = 0;
  bool partial_in_block = false;
  std::vector<std::string> last_row;  // the row write_row wrote last
  // bench: where the run's time went (report_bench): the process's age at the first step, the
  // first block (steps and, on a GPU, the algorithms' timing and the graph's capture).
  double process_s_at_first = -1, first_block_s = -1;
  int64_t first_block_steps = 0;
  Clock::time_point first_step;
};

// One epoch as it trains.
struct RunLoop::Epoch {
  Epoch(int index, int epochs, int64_t batches)
      : index(index), batches(batches), progress(index, epochs, batches) {}
  int index;  // 0-based
  int64_t batches;
  Progress progress;
  Clock::time_point t0 = Clock::now();
  int64_t seen = 0, checked = 0;  // images so far; steps whose metrics were finite
  double secs = 0;                // of its training steps, once they are done
};

int RunLoop::run() {
  begin_run();
  const bool bench = cfg_.steps > 0;
  if (!bench && start_epoch_ >= cfg_.epochs) {
    std::printf("nothing to do: the checkpoint has %d epochs, --epochs is %d\n", start_epoch_,
                cfg_.epochs);
    return 0;
  }
  // A fresh run's epoch-0 checkpoint: a run killed in its first epoch can be resumed too.
  if (!bench && !cfg_.checkpoint.empty() && !cfg_.resume) save(0);
  Session s;
  struct Detach {  // the context never keeps a pointer to this run's profiler
    Context& c;
    ~Detach() { c.set_profile_hook(nullptr); }
  } detach{ctx_};
  start_session(s);
  if (bench)
    run_bench(s);
  else
    run_epochs(s);
  end_run(s);
  return 0;
}

void RunLoop::begin_run() {
  Communicator* comm = cfg_.comm.get();
  for (const std::string& n : notes_) std::printf("%s\n", n.c_str());
  if (comm)
    std::printf("distributed: %d ranks x %d threads, %s; global batch %lld (%lld..%lld per rank); "
                "%s\n",
                comm->size(), ctx_.threads(), comm->describe().c_str(),
                static_cast<long long>(cfg_.batch),
                static_cast<long long>(cfg_.batch / comm->size()),
                static_cast<long long>((cfg_.batch + comm->size() - 1) / comm->size()),
                task_.distributed_summary().c_str());
  if (cfg_.resume) {
    std::printf("resumed from %s after epoch %d\n", cfg_.checkpoint.c_str(), start_epoch_);
    if (csv_) reconcile_csv();
  } else if (!cfg_.save_init.empty() && root()) {
    create_parent_folders(cfg_.save_init);
    task_.save_weights(cfg_.save_init);
  }
}

void RunLoop::start_session(Session& s) {
  Communicator* comm = cfg_.comm.get();
  s.data_seed = Rng::at(seed_, 0);
  s.threads =
      comm ? strprintf("%dx%d", comm->size(), ctx_.threads()) : std::to_string(ctx_.threads());
  s.batch = std::to_string(cfg_.batch);
  if (cfg_.profile) ctx_.set_profile_hook(&s.profiler);
  s.info = run_info(ctx_);
  if (comm && !s.info.gpu.empty()) s.info.gpu = strprintf("%dx ", comm->size()) + s.info.gpu;
  s.block = ctx_.has_cuda() ? kGpuBlock : 1;
}

// Training mode: --epochs epochs from the checkpoint's, each ending in its row and checkpoint.
void RunLoop::run_epochs(Session& s) {
  for (int epoch = start_epoch_; epoch < cfg_.epochs; ++epoch) {
    Epoch e(epoch, cfg_.epochs, task_.begin_epoch(ctx_, epoch, s.data_seed));
    train_steps(s, e);
    end_epoch(s, e);
  }
  if (root() && !cfg_.save_weights.empty()) {
    create_parent_folders(cfg_.save_weights);
    task_.save_weights(cfg_.save_weights);
  }
  if (root()) task_.finish(ctx_);
}

// Benchmark mode (--steps): that many timed steps, over as many epochs as they take; no rows,
// no checkpoints; the step time's statistics at the end.
void RunLoop::run_bench(Session& s) {
  for (int epoch = start_epoch_; s.steps < cfg_.steps; ++epoch) {
    Epoch e(epoch, cfg_.epochs, task_.begin_epoch(ctx_, epoch, s.data_seed));
    train_steps(s, e);
  }
  report_bench(s);
}

void RunLoop::train_steps(Session& s, Epoch& e) {
  const bool bench = cfg_.steps > 0;
  s.block_start = Clock::now();
  s.in_block = 0;
  s.partial_in_block = false;
  for (int64_t b = 0; b < e.batches; ++b) {
    if (cfg_.profile) s.profiler.begin_step(ctx_);
    if (s.steps == 0) {
      s.process_s_at_first = process_seconds();
      s.first_step = Clock::now();
    }
    int64_t rows = 0;
    {
      Communicator::Watch w(cfg_.comm.get(), "a training step");
      rows = task_.train_batch(ctx_, b);
    }
    e.seen += rows;
    if (cfg_.profile) s.profiler.end_step(ctx_);
    ++s.steps;
    // As the step times (report_bench): the first two steps of a longer benchmark fault in
    // buffers and warm caches, so the profile leaves them out too.
    if (cfg_.profile && bench && cfg_.steps > 4 && s.steps == 2) s.profiler.reset();
    s.partial_in_block |= rows < cfg_.batch;
    const bool last = b + 1 == e.batches || (bench && s.steps >= cfg_.steps);
    if (++s.in_block == s.block || last) end_block(s);
    read_metrics(s, e, b + 1);
    if (bench && s.steps >= cfg_.steps) break;
  }
  e.secs = std::chrono::duration<double>(Clock::now() - e.t0).count();
  e.progress.finish();
}

// Closes a block of timed steps: its mean step time.
void RunLoop::end_block(Session& s) {
  Communicator::Watch w(cfg_.comm.get(), "a training step");  // on the GPU the step's wait is here
  ctx_.synchronize();
  const double block_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - s.block_start).count();
  const double ms = block_ms / static_cast<double>(s.in_block);
  if (s.first_block_s < 0) {
    s.first_block_s = block_ms / 1e3;
    s.first_block_steps = s.in_block;
  }
  // An epoch's smaller last batch is a shorter step, not a faster one: timed with the
  // full steps it was the "min" of every W2 b128 benchmark (64 of 128 images on
  // MNIST-npm10k's 8,000: 1.8 ms against 3.5), which read as a bimodal step time.
  (s.partial_in_block ? s.partial_ms : s.step_ms).push_back(ms);
  s.block_start = Clock::now();
  s.in_block = 0;
  s.partial_in_block = false;
}

// After step `done` (1-based) of the epoch. Metrics are reduced over the ranks, so every rank
// reads them at the same steps; rank 0's clock decides whether a line is printed.
void RunLoop::read_metrics(Session& s, Epoch& e, int64_t done) {
  Communicator* comm = cfg_.comm.get();
  const bool periodic = cfg_.check_every > 0 && done % cfg_.check_every == 0;
  const bool read = comm ? periodic || done == e.batches : e.progress.due(done) || periodic;
  if (!read) return;
  const bool show = comm ? comm->any(comm->root() && e.progress.due(done), "the progress line")
                         : e.progress.due(done);
  const std::vector<double> m = task_.train_metrics(ctx_);
  on_every_rank(comm, [&] { check_divergence(s, e, m, done); });
  if (show) e.progress.print(done, e.seen, metrics_text(train_cols_, m, false));
}

// Divergence: which metric went non-finite, and between which steps of the epoch.
void RunLoop::check_divergence(Session& s, Epoch& e, const std::vector<double>& m, int64_t done) {
  check_count(m, train_cols_, "train_metrics()");
  const int bad = first_non_finite(m);
  if (bad >= 0) {
    const std::string where =
        done == e.checked + 1
            ? strprintf("at step %lld", static_cast<long long>(done))
            : strprintf("between steps %lld and %lld", static_cast<long long>(e.checked + 1),
                        static_cast<long long>(done));
    const bool row = cfg_.status_column && csv_ != nullptr;
    if (row) {
      if (done < e.batches) e.progress.finish();
      write_row(s, e.index, m,
                strprintf("diverged: %s became %s %s of %lld",
                          train_cols_[static_cast<size_t>(bad)].c_str(),
                          fmt(m[static_cast<size_t>(bad)], 4).c_str(), where.c_str(),
                          static_cast<long long>(e.batches)),
                std::chrono::duration<double>(Clock::now() - e.t0).count(), e.seen);
    }
    PDNN_FAIL(
        "training diverged: %s became %s %s of epoch %d (%lld steps); %s epoch %d%s (try a "
        "lower learning rate)",
        train_cols_[static_cast<size_t>(bad)].c_str(), fmt(m[static_cast<size_t>(bad)], 4).c_str(),
        where.c_str(), e.index + 1, static_cast<long long>(e.batches),
        row ? (cfg_.out + " has a row saying so for").c_str() : "nothing was written for",
        e.index + 1,
        cfg_.checkpoint.empty() || cfg_.steps > 0
            ? ""
            : strprintf(", %s keeps epoch %d", cfg_.checkpoint.c_str(), e.index).c_str());
  }
  e.checked = done;
}

// One CSV row: the identifying columns, the values (eval ones may be missing: left empty),
// the status when the run has that column, the timing ones.
void RunLoop::write_row(Session& s, int epoch, const std::vector<double>& vals,
                        const std::string& status, double secs, int64_t seen) {
  std::vector<std::string> row = {"pdnn",     cfg_.model, cfg_.dataset, device_name(ctx_.device()),
                                  s.info.gpu, s.threads,  s.batch,      std::to_string(epoch + 1)};
  const size_t n_vals = train_cols_.size() + eval_cols_.size();
  for (size_t i = 0; i < n_vals; ++i) row.push_back(i < vals.size() ? fmt(vals[i], 6) : "");
  if (cfg_.status_column) row.push_back(status);
  for (const std::string& v : {fmt(secs, 3), fmt(seen / secs, 1), s.info.git_rev, s.info.host,
                               iso8601_utc_now()})
    row.push_back(v);
  for (const auto& kv : cfg_.run_columns) row.push_back(kv.second);
  if (csv_) csv_->row(row);  // data-parallel: rank 0 alone writes the CSV
  s.last_row = std::move(row);
}

// An epoch's checkpoint after its row; when it cannot be written (disk full) the row is taken
// back out, so the CSV holds no epoch the checkpoint does not.
void RunLoop::save_or_drop_row(const Session& s, int epoch) {
  try {
    save(epoch + 1);
  } catch (const Error& e) {
    std::string row_fate = "its row stays in " + cfg_.out + " (a --resume drops it)";
    try {
      if (csv_ && csv_->drop_rows([&](size_t, const std::vector<std::string>& f) {
            return f == s.last_row;
          }) > 0)
        row_fate = "its row was taken back out of " + cfg_.out;
    } catch (const Error&) {
    }
    PDNN_FAIL("%s; epoch %d is not saved: %s, and %s keeps epoch %d", e.what(), epoch + 1,
              row_fate.c_str(), cfg_.checkpoint.c_str(), epoch);
  }
}

// The epoch's results, all checked before anything of it is written; then its row, checkpoint
// and the task's own files.
void RunLoop::end_epoch(Session& s, Epoch& e) {
  const std::vector<double> train = task_.train_metrics(ctx_);
  on_every_rank(cfg_.comm.get(), [&] { check_divergence(s, e, train, e.batches); });
  const std::vector<double> eval = checked_evaluation(e);
  check_state(s, e, train);
  std::vector<std::string> cols = train_cols_;
  cols.insert(cols.end(), eval_cols_.begin(), eval_cols_.end());
  std::vector<double> vals = train;
  vals.insert(vals.end(), eval.begin(), eval.end());
  const std::string status = cfg_.status_column ? task_.epoch_status(ctx_) : "";
  std::printf("epoch %d/%d  %s  %s  %.1f s  %.0f img/s%s\n", e.index + 1, cfg_.epochs,
              cfg_.dataset.c_str(), metrics_text(cols, vals, true).c_str(), e.secs,
              e.seen / e.secs,
              status.empty() ? "" : ("\nepoch " + std::to_string(e.index + 1) + ": WARNING: " +
                                     status).c_str());
  std::fflush(stdout);
  write_row(s, e.index, vals, status.empty() ? "ok" : status, e.secs, e.seen);
  // A test's hook may kill the process here, a window too narrow for a timed kill.
  if (FaultHook* f = ctx_.fault_hook()) f->reached("after_row", e.index + 1);
  if (!cfg_.checkpoint.empty()) save_or_drop_row(s, e.index);
  if (root()) task_.end_epoch(ctx_, e.index);  // the task's own files: rank 0 writes them
}

// "; <checkpoint> keeps epoch N" for the error of a run that diverged in epoch N+1.
std::string RunLoop::kept_text(int epoch) const {
  return cfg_.checkpoint.empty()
             ? ""
             : strprintf("; %s keeps epoch %d", cfg_.checkpoint.c_str(), epoch);
}

std::vector<double> RunLoop::checked_evaluation(const Epoch& e) {
  Communicator* comm = cfg_.comm.get();
  std::vector<double> eval;
  {
    Communicator::Watch w(comm, "the evaluation");
    eval = task_.evaluate(ctx_);
  }
  check_count(eval, eval_cols_, "evaluate()");
  const int bad = first_non_finite(eval);
  if (bad >= 0 && comm) Communicator::set_collective_error();
  PDNN_CHECK(bad < 0,
             "training diverged in the last steps of epoch %d: after it the evaluation gives "
             "%s = %s; nothing was written for epoch %d%s (try a lower learning rate)",
             e.index + 1, eval_cols_[static_cast<size_t>(std::max(bad, 0))].c_str(),
             fmt(eval[static_cast<size_t>(std::max(bad, 0))], 4).c_str(), e.index + 1,
             kept_text(e.index).c_str());
  return eval;
}

// The trained state: finite, and (data-parallel) the same on every rank.
void RunLoop::check_state(Session& s, const Epoch& e, const std::vector<double>& train) {
  Communicator* comm = cfg_.comm.get();
  bool finite = task_.state_finite(ctx_);
  if (comm) {
    finite = comm->all(finite, "the divergence check");
    if (!finite) Communicator::set_collective_error();
    // Every rank must hold the same weights: the same updates from the same start.
    comm->check_same({{strprintf("the weights and optimizer state after epoch %d", e.index + 1),
                       hash_hex(task_.state_hash(ctx_))}});
  }
  if (finite) return;
  const bool row = cfg_.status_column;
  if (row)
    write_row(s, e.index, train, "diverged: non-finite weights or optimizer state at the end",
              e.secs, e.seen);
  PDNN_FAIL("training diverged in the last steps of epoch %d: the weights or optimizer state "
            "hold non-finite values; %s epoch %d%s (try a lower learning rate)",
            e.index + 1, row ? (cfg_.out + " has a row saying so for").c_str()
                             : "nothing was written for",
            e.index + 1, kept_text(e.index).c_str());
}

void RunLoop::report_bench(Session& s) {
  // The first steps fault in buffers and warm caches, and on a GPU the first block also times
  // the convolution algorithms: left out of the statistics, so that even a run of 2 blocks
  // (W4 at 1344 px, a second a step) reports steady-state steps only (issue 33).
  if (s.step_ms.empty()) s.step_ms = s.partial_ms;  // no full batch at all (a set smaller than one)
  const size_t n = s.step_ms.size();
  const size_t skip = n > 4 ? 2 : n > 1 ? 1 : 0;
  const std::vector<double> timed(s.step_ms.begin() + static_cast<long>(skip), s.step_ms.end());
  const TimingStats st = timing_stats(timed);
  const std::string mode = task_.step_mode();
  const std::string precision =
      ctx_.has_cuda() ? arithmetic_name(ctx_.precision(), ctx_.conv_transforms()) : "";
  // On the GPU the "steps" are blocks of kGpuBlock (each value a block's mean per step).
  std::printf("step_ms model=%s batch=%lld threads=%s steps=%zu median=%.4f min=%.4f max=%.4f%s\n",
              cfg_.model.c_str(), static_cast<long long>(cfg_.batch), s.threads.c_str(),
              timed.size(), st.median, st.min, st.max,
              ctx_.has_cuda() ? (" device=cuda mode=" + mode + " precision=" + precision).c_str()
                              : "");
  // One block timed is the first: on a GPU its steps include the algorithms' timing and the
  // graph's capture (a U-Net side of 5792 on an H200: 8,398 ms a step against 4,205 steady),
  // on the CPU the buffers' first allocation.
  if (skip == 0 && n > 0)
    std::printf("step_ms: the first block only (%s in it), not a steady step: give --steps past "
                "the first block (%lld step%s here)\n",
                ctx_.has_cuda() ? "the algorithms' timing and the graph's capture"
                                : "the buffers' first allocation",
                static_cast<long long>(s.first_block_steps), s.first_block_steps == 1 ? "" : "s");
  // Where the run's time went: a benchmark command that must fit a time limit (a GPU visit's
  // memory table, issue 33) is set up mostly before its steady steps.
  const double all_s = std::chrono::duration<double>(Clock::now() - s.first_step).count();
  std::printf("bench time: %s; the first block %.1f s (%lld step%s%s), the other %lld steps "
              "%.1f s\n",
              s.process_s_at_first < 0
                  ? "the process's start unknown"
                  : strprintf("the first step began %.1f s after the process started (data, "
                              "model, plan)", s.process_s_at_first).c_str(),
              s.first_block_s, static_cast<long long>(s.first_block_steps),
              s.first_block_steps == 1 ? "" : "s",
              ctx_.has_cuda() ? "; on a GPU also the algorithms' timing and the graph's capture"
                              : "",
              static_cast<long long>(s.steps - s.first_block_steps),
              std::max(0.0, all_s - s.first_block_s));
  if (bench_csv_)
    bench_csv_->row({"pdnn", cfg_.model, cfg_.dataset, device_name(ctx_.device()), s.info.gpu,
                     mode, precision, s.threads, s.batch, std::to_string(timed.size()),
                     fmt(st.median, 4), fmt(st.min, 4), fmt(st.max, 4), s.info.blas_core,
                     s.info.git_rev, s.info.host, iso8601_utc_now()});
}

// Either mode's end: the communication cost, the profile, where the rows went.
void RunLoop::end_run(Session& s) {
  if (cfg_.comm && !task_.distributed_stats().empty())
    std::printf("%s\n", task_.distributed_stats().c_str());
  if (cfg_.profile && root()) {
    std::printf("%s", s.profiler.table().c_str());
    create_parent_folders(cfg_.profile_out);
    s.profiler.write_csv(cfg_.profile_out,
                         ctx_.has_cuda() ? static_cast<int64_t>(ctx_.workspace_limit(Device::CUDA) *
                                                                sizeof(float))
                                         : 0);
    std::printf("profile written to %s\n", cfg_.profile_out.c_str());
  }
  if (csv_) std::printf("results in %s\n", csv_->path().c_str());
}

void SingleModelTask::save_checkpoint(const std::string& path, int64_t epoch,
                                      const std::map<std::string, int64_t>& values) {
  pdnn::save_checkpoint(path, model_, &opt_, epoch, values, &ctx_);
}

CheckpointInfo SingleModelTask::load_checkpoint(const std::string& path) {
  return pdnn::load_checkpoint(path, model_, &opt_, &ctx_);
}

void SingleModelTask::save_weights(const std::string& path) {
  pdnn::save_checkpoint(path, model_, nullptr, 0, {}, &ctx_);
}

}  // namespace pdnn
