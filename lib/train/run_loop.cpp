// The shared run loop (run_loop.h).
#include "train/run_loop.h"

#include <signal.h>

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

// Fault injection for the crash-consistency test (test/test_crash_consistency.cpp): with
// PDNN_CRASH_AT=<point>:<epoch> the process kills itself (SIGKILL, no cleanup) when it gets
// there in that epoch, to hit windows too narrow for a timed kill.
void crash_point(const char* point, int epoch) {
  const char* at = std::getenv("PDNN_CRASH_AT");
  if (at && strprintf("%s:%d", point, epoch) == at) ::raise(SIGKILL);
}

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

uint64_t state_hash_of(Context& ctx, Sequential& model, Optimizer* opt, uint64_t seed) {
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

bool all_finite(Context& ctx, Sequential& model, Optimizer* opt) {
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

int RunLoop::run() {
  const RunConfig& cfg = cfg_;
  TrainTask& task = task_;
  Context& ctx = ctx_;
  const bool bench = cfg.steps > 0;
  const std::string& ck_path = cfg.checkpoint;
  Communicator* comm = cfg.comm.get();
  for (const std::string& n : notes_) std::printf("%s\n", n.c_str());
  if (comm)
    std::printf("distributed: %d ranks x %d threads, %s; global batch %lld (%lld..%lld per rank); "
                "%s\n",
                comm->size(), ctx.threads(), comm->describe().c_str(),
                static_cast<long long>(cfg.batch), static_cast<long long>(cfg.batch / comm->size()),
                static_cast<long long>((cfg.batch + comm->size() - 1) / comm->size()),
                task.distributed_summary().c_str());
  if (cfg.resume) {
    std::printf("resumed from %s after epoch %d\n", ck_path.c_str(), start_epoch_);
    if (csv_) reconcile_csv();
  } else if (!cfg.save_init.empty() && root()) {
    create_parent_folders(cfg.save_init);
    task.save_weights(cfg.save_init);
  }
  if (!bench && start_epoch_ >= cfg.epochs) {
    std::printf("nothing to do: the checkpoint has %d epochs, --epochs is %d\n", start_epoch_,
                cfg.epochs);
    return 0;
  }
  // A fresh run's epoch-0 checkpoint: a run killed in its first epoch can be resumed too.
  if (!bench && !ck_path.empty() && !cfg.resume) save(0);

  // The data order's own stream (value 0 of the run's stream, which draws never use, as they
  // count from 1): epoch e's order depends on the seed and e only, not on dropout's draws.
  const uint64_t data_seed = Rng::at(seed_, 0);
  // A data-parallel run's rows say "ranks x threads per rank" (e.g. 2x8) in the threads column.
  const std::string threads =
      comm ? strprintf("%dx%d", comm->size(), ctx.threads()) : std::to_string(ctx.threads());
  const std::string batch = std::to_string(cfg.batch);
  const std::vector<std::string>& train_cols = train_cols_;
  const std::vector<std::string>& eval_cols = eval_cols_;

  Profiler profiler;
  struct Detach {  // the context never keeps a pointer to this function's profiler
    Context& c;
    ~Detach() { c.set_profile_hook(nullptr); }
  } detach{ctx};
  if (cfg.profile) ctx.set_profile_hook(&profiler);

  RunInfo info = run_info(ctx);
  if (comm && !info.gpu.empty()) info.gpu = strprintf("%dx ", comm->size()) + info.gpu;
  std::vector<double> step_ms, partial_ms;  // bench: full-batch steps, and the others
  int64_t steps = 0;
  const int64_t block = ctx.has_cuda() ? kGpuBlock : 1;
  // One CSV row: the identifying columns, the values (eval ones may be missing: left empty),
  // the status when the run has that column, the timing ones.
  std::vector<std::string> last_row;  // the row write_row wrote last
  auto write_row = [&](int epoch, const std::vector<double>& vals, const std::string& status,
                       double secs, int64_t seen) {
    std::vector<std::string> row = {"pdnn",  cfg.model, cfg.dataset, device_name(ctx.device()),
                                    info.gpu, threads,   batch,       std::to_string(epoch + 1)};
    const size_t n_vals = train_cols.size() + eval_cols.size();
    for (size_t i = 0; i < n_vals; ++i) row.push_back(i < vals.size() ? fmt(vals[i], 6) : "");
    if (cfg.status_column) row.push_back(status);
    for (const std::string& s : {fmt(secs, 3), fmt(seen / secs, 1), info.git_rev, info.host,
                                 iso8601_utc_now()})
      row.push_back(s);
    for (const auto& kv : cfg.run_columns) row.push_back(kv.second);
    if (csv_) csv_->row(row);  // data-parallel: rank 0 alone writes the CSV
    last_row = std::move(row);
  };
  // An epoch's checkpoint after its row; when it cannot be written (disk full) the row is taken
  // back out, so the CSV holds no epoch the checkpoint does not.
  auto save_or_drop_row = [&](int epoch) {
    try {
      save(epoch + 1);
    } catch (const Error& e) {
      std::string row_fate = "its row stays in " + cfg.out + " (a --resume drops it)";
      try {
        if (csv_ && csv_->drop_rows([&](size_t, const std::vector<std::string>& f) {
              return f == last_row;
            }) > 0)
          row_fate = "its row was taken back out of " + cfg.out;
      } catch (const Error&) {
      }
      PDNN_FAIL("%s; epoch %d is not saved: %s, and %s keeps epoch %d", e.what(), epoch + 1,
                row_fate.c_str(), ck_path.c_str(), epoch);
    }
  };
  for (int epoch = start_epoch_; bench ? steps < cfg.steps : epoch < cfg.epochs; ++epoch) {
    const int64_t batches = task.begin_epoch(ctx, epoch, data_seed);
    Progress progress(epoch, cfg.epochs, batches);
    int64_t seen = 0, checked = 0;  // steps of this epoch whose metrics were finite
    const auto t0 = Clock::now();
    // Divergence: which metric went non-finite, and between which steps of the epoch.
    auto check = [&](const std::vector<double>& m, int64_t done) {
      check_count(m, train_cols, "train_metrics()");
      const int bad = first_non_finite(m);
      if (bad >= 0) {
        const std::string where =
            done == checked + 1
                ? strprintf("at step %lld", static_cast<long long>(done))
                : strprintf("between steps %lld and %lld", static_cast<long long>(checked + 1),
                            static_cast<long long>(done));
        const bool row = cfg.status_column && csv_ != nullptr;
        if (row) {
          if (done < batches) progress.finish();
          write_row(epoch, m,
                    strprintf("diverged: %s became %s %s of %lld",
                              train_cols[static_cast<size_t>(bad)].c_str(),
                              fmt(m[static_cast<size_t>(bad)], 4).c_str(), where.c_str(),
                              static_cast<long long>(batches)),
                    std::chrono::duration<double>(Clock::now() - t0).count(), seen);
        }
        PDNN_FAIL(
            "training diverged: %s became %s %s of epoch %d (%lld steps); %s epoch %d%s (try a "
            "lower learning rate)",
            train_cols[static_cast<size_t>(bad)].c_str(), fmt(m[static_cast<size_t>(bad)], 4).c_str(),
            where.c_str(), epoch + 1, static_cast<long long>(batches),
            row ? (cfg.out + " has a row saying so for").c_str() : "nothing was written for",
            epoch + 1,
            ck_path.empty() || bench
                ? ""
                : strprintf(", %s keeps epoch %d", ck_path.c_str(), epoch).c_str());
      }
      checked = done;
    };
    auto tb = Clock::now();  // start of the current block of timed steps
    int64_t in_block = 0;
    bool partial_in_block = false;
    for (int64_t b = 0; b < batches; ++b) {
      if (cfg.profile) profiler.begin_step(ctx);
      int64_t rows = 0;
      {
        Communicator::Watch w(comm, "a training step");
        rows = task.train_batch(ctx, b);
      }
      seen += rows;
      if (cfg.profile) profiler.end_step(ctx);
      ++steps;
      partial_in_block |= rows < cfg.batch;
      const bool last = b + 1 == batches || (bench && steps >= cfg.steps);
      if (++in_block == block || last) {
        Communicator::Watch w(comm, "a training step");  // on the GPU the step's wait is here
        ctx.synchronize();
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - tb).count() /
                          static_cast<double>(in_block);
        // An epoch's smaller last batch is a shorter step, not a faster one: timed with the
        // full steps it was the "min" of every W2 b128 benchmark (64 of 128 images on
        // MNIST-npm10k's 8,000: 1.8 ms against 3.5), which read as a bimodal step time.
        (partial_in_block ? partial_ms : step_ms).push_back(ms);
        tb = Clock::now();
        in_block = 0;
        partial_in_block = false;
      }
      // Metrics are reduced over the ranks, so every rank reads them at the same steps;
      // rank 0's clock decides whether a line is printed.
      const bool periodic = cfg.check_every > 0 && (b + 1) % cfg.check_every == 0;
      const bool read = comm ? periodic || b + 1 == batches : progress.due(b + 1) || periodic;
      if (read) {
        const bool show = comm ? comm->any(comm->root() && progress.due(b + 1), "the progress line")
                               : progress.due(b + 1);
        const std::vector<double> m = task.train_metrics(ctx);
        on_every_rank(comm, [&] { check(m, b + 1); });
        if (show) progress.print(b + 1, seen, metrics_text(train_cols, m, false));
      }
      if (bench && steps >= cfg.steps) break;
    }
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    progress.finish();
    if (bench) continue;

    // The epoch's results, all checked before anything of it is written.
    const std::vector<double> train = task.train_metrics(ctx);
    on_every_rank(comm, [&] { check(train, batches); });
    std::vector<double> eval;
    {
      Communicator::Watch w(comm, "the evaluation");
      eval = task.evaluate(ctx);
    }
    check_count(eval, eval_cols, "evaluate()");
    const std::string kept =
        ck_path.empty() ? "" : strprintf("; %s keeps epoch %d", ck_path.c_str(), epoch);
    const int bad = first_non_finite(eval);
    if (bad >= 0 && comm) Communicator::set_collective_error();
    PDNN_CHECK(bad < 0,
               "training diverged in the last steps of epoch %d: after it the evaluation gives "
               "%s = %s; nothing was written for epoch %d%s (try a lower learning rate)",
               epoch + 1, eval_cols[static_cast<size_t>(std::max(bad, 0))].c_str(),
               fmt(eval[static_cast<size_t>(std::max(bad, 0))], 4).c_str(), epoch + 1,
               kept.c_str());
    bool finite = task.state_finite(ctx);
    if (comm) {
      finite = comm->all(finite, "the divergence check");
      if (!finite) Communicator::set_collective_error();
      // Every rank must hold the same weights: the same updates from the same start.
      comm->check_same({{strprintf("the weights and optimizer state after epoch %d", epoch + 1),
                         hash_hex(task.state_hash(ctx))}});
    }
    if (!finite) {
      const bool row = cfg.status_column;
      if (row)
        write_row(epoch, train, "diverged: non-finite weights or optimizer state at the end",
                  secs, seen);
      PDNN_FAIL("training diverged in the last steps of epoch %d: the weights or optimizer state "
                "hold non-finite values; %s epoch %d%s (try a lower learning rate)",
                epoch + 1, row ? (cfg.out + " has a row saying so for").c_str()
                               : "nothing was written for",
                epoch + 1, kept.c_str());
    }
    std::vector<std::string> cols = train_cols;
    cols.insert(cols.end(), eval_cols.begin(), eval_cols.end());
    std::vector<double> vals = train;
    vals.insert(vals.end(), eval.begin(), eval.end());
    const std::string status = cfg.status_column ? task.epoch_status(ctx) : "";
    std::printf("epoch %d/%d  %s  %s  %.1f s  %.0f img/s%s\n", epoch + 1, cfg.epochs,
                cfg.dataset.c_str(), metrics_text(cols, vals, true).c_str(), secs, seen / secs,
                status.empty() ? "" : ("\nepoch " + std::to_string(epoch + 1) + ": WARNING: " +
                                       status).c_str());
    std::fflush(stdout);
    write_row(epoch, vals, status.empty() ? "ok" : status, secs, seen);
    crash_point("after_row", epoch + 1);
    if (!ck_path.empty()) save_or_drop_row(epoch);
    if (root()) task.end_epoch(ctx, epoch);  // the task's own files: rank 0 writes them
  }
  if (!bench && root()) task.finish(ctx);

  if (bench) {
    // The first steps fault in buffers and warm caches: left out of the statistics.
    if (step_ms.empty()) step_ms = partial_ms;  // no full batch at all (a set smaller than one)
    const size_t skip = step_ms.size() > 4 ? 2 : 0;
    const std::vector<double> timed(step_ms.begin() + static_cast<long>(skip), step_ms.end());
    const TimingStats st = timing_stats(timed);
    const std::string mode = task.step_mode();
    const std::string precision = !ctx.has_cuda() ? "" : ctx.cuda().tf32() ? "tf32" : "fp32";
    // On the GPU the "steps" are blocks of kGpuBlock (each value a block's mean per step).
    std::printf("step_ms model=%s batch=%lld threads=%s steps=%zu median=%.4f min=%.4f max=%.4f%s\n",
                cfg.model.c_str(), static_cast<long long>(cfg.batch), threads.c_str(),
                timed.size(), st.median, st.min, st.max,
                ctx.has_cuda() ? (" device=cuda mode=" + mode + " precision=" + precision).c_str()
                               : "");
    if (bench_csv_)
      bench_csv_->row({"pdnn", cfg.model, cfg.dataset, device_name(ctx.device()), info.gpu, mode,
                      precision, threads, batch, std::to_string(timed.size()), fmt(st.median, 4),
                      fmt(st.min, 4), fmt(st.max, 4), info.blas_core, info.git_rev, info.host,
                      iso8601_utc_now()});
  }
  if (comm && !task.distributed_stats().empty())
    std::printf("%s\n", task.distributed_stats().c_str());
  if (cfg.profile && root()) {
    std::printf("%s", profiler.table().c_str());
    create_parent_folders(cfg.profile_out);
    profiler.write_csv(cfg.profile_out);
    std::printf("profile written to %s\n", cfg.profile_out.c_str());
  }
  if (csv_) std::printf("results in %s\n", csv_->path().c_str());
  return 0;
}

}  // namespace pdnn
