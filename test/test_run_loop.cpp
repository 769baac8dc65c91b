// The shared run loop (lib/train/run_loop.h), in process, on the W2 model at 8x8 over a tiny
// generated data set: outputs checked before any work and nothing left behind when a check
// fails; divergence (mid-epoch, in an epoch's last step, in the optimizer state) stops the run
// with the epoch and step, writes no row and keeps the last good checkpoint; resume drops the
// row of an epoch whose checkpoint never landed; stale temporaries are removed; checkpoint
// fields are range-checked.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/fault_hook.h"
#include "data/dataset.h"
#include "data/idx.h"
#include "model/checkpoint.h"
#include "workloads/classifier/mnist_models.h"
#include "workloads/model_zoo.h"
#include "testing.h"
#include "workloads/classifier/classifier_task.h"
#include "run/csv.h"
#include "train/run_loop.h"

namespace pdnn {
namespace {

namespace fs = std::filesystem;

// A ClassifierTask that can be made to diverge: before step `at` (or after it, with `after`)
// of epoch `epoch` it sets a weight, or an optimizer state value, to `value`.
class PoisonedTask : public ClassifierTask {
 public:
  using ClassifierTask::ClassifierTask;
  struct Poison {
    int epoch = -1;
    int64_t at = -1;
    bool after = false, in_optimizer = false;
    float value = std::numeric_limits<float>::quiet_NaN();
  };
  void set(Sequential* m, Optimizer* o, Poison p) {
    model_ = m, opt_ = o, poison_ = p;
  }
  int64_t begin_epoch(Context& ctx, int epoch, uint64_t data_seed) override {
    epoch_ = epoch;
    return ClassifierTask::begin_epoch(ctx, epoch, data_seed);
  }
  int64_t train_batch(Context& ctx, int64_t b) override {
    const bool now = epoch_ == poison_.epoch && b == poison_.at;
    if (now && !poison_.after) apply();
    const int64_t n = ClassifierTask::train_batch(ctx, b);
    if (now && poison_.after) apply();
    return n;
  }

 private:
  void apply() {
    // The last layer's bias: straight into the logits (a NaN in the first conv's weights would
    // be zeroed by the ReLU after it, and only the state check would see it).
    Tensor* t = poison_.in_optimizer ? opt_->state().back().second : model_->params().back().value;
    t->data()[0] = poison_.value;
  }
  Sequential* model_ = nullptr;
  Optimizer* opt_ = nullptr;
  Poison poison_;
  int epoch_ = 0;
};

// The rows a ClassifierTask run writes.
std::vector<std::string> csv_columns() {
  return {"app",        "model",     "dataset",   "device",   "gpu",    "threads",      "batch",
          "epoch",      "train_loss", "train_acc", "test_loss", "test_acc",     "seconds",
          "images_per_s", "git_rev",  "host",      "timestamp"};
}

class RunLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pdnn_run_loop_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    const std::string data = dir_ + "/data";
    fs::create_directories(data);
    testing::write_idx_squares(data, "train", 48, 8, 1);  // 6 batches of 8
    testing::write_idx_squares(data, "t10k", 16, 8, 2);
    data_ = load_idx_dataset(data, "squares", 4);
    train_set_ = std::make_unique<TensorDataset>(data_.train, 4);
    test_set_ = std::make_unique<TensorDataset>(data_.test, 4);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A fresh model, optimizer and task (seed 3), the way the mnist app builds them.
  struct Run {
    Context ctx{1, 3};
    Sequential model;
    std::unique_ptr<Optimizer> opt;
    std::unique_ptr<PoisonedTask> task;
  };
  std::unique_ptr<Run> make_run() {
    auto r = std::make_unique<Run>();
    r->model = make_mnist_model("small", 8, 4);
    r->model.reset_parameters(r->ctx.rng());
    r->opt = make_model_optimizer("small", "", r->model.parameters(), -1.f);
    r->task = std::make_unique<PoisonedTask>(r->ctx, r->model, *r->opt, *train_set_, *test_set_,
                                             task_options());
    r->task->set(&r->model, r->opt.get(), {});
    return r;
  }
  // Batches of 8, the test set in batches of 16 (as the mnist app sets them).
  static ClassifierTaskOptions task_options() {
    ClassifierTaskOptions o;
    o.train.batch = 8;
    o.eval.batch = 16;
    return o;
  }
  RunConfig config(int epochs) const {
    RunConfig c;
    c.app = "test";
    c.model = "small";
    c.dataset = "squares";
    c.batch = 8;
    c.epochs = epochs;
    c.seed = 3;
    c.out = dir_ + "/r.csv";
    c.checkpoint = dir_ + "/c.ckpt";
    c.inputs = data_.files;
    c.must_match = {{"batch", 8}};
    return c;
  }
  int train(const RunConfig& c, Run& r) {
    RunLoop loop(r.ctx, c, *r.task);
    return loop.run();
  }
  std::vector<std::string> listing() const {
    std::vector<std::string> v;
    for (const auto& e : fs::recursive_directory_iterator(dir_)) v.push_back(e.path().string());
    std::sort(v.begin(), v.end());
    return v;
  }
  std::vector<std::string> epochs_in_csv() const {
    std::vector<std::string> e;
    for (const auto& row : CsvWriter(dir_ + "/r.csv", csv_columns()).rows()) e.push_back(row[7]);
    return e;
  }
  // The checkpoint's epoch, loaded into a fresh model (so it is whole and valid).
  int64_t checkpoint_epoch() {
    auto r = make_run();
    return load_checkpoint(dir_ + "/c.ckpt", r->model, r->opt.get()).epoch;
  }

  std::string dir_;
  ImageDataset data_;
  std::unique_ptr<TensorDataset> train_set_, test_set_;
};

TEST_F(RunLoopTest, OutputsAreCheckedBeforeAnyWorkAndNothingIsLeftBehind) {
  auto r = make_run();
  fs::create_hard_link(data_.files[0], dir_ + "/link.gz");  // the training images, another name
  const std::vector<std::string> before = listing();
  auto refused = [&](RunConfig c, const std::vector<std::string>& parts) {
    testing::expect_error_mentions([&] { RunLoop loop(r->ctx, c, *r->task); }, parts);
    EXPECT_EQ(listing(), before) << parts[0];
  };
  RunConfig c = config(1);
  c.checkpoint = c.out;
  refused(c, {"--out", "--checkpoint", "are the same file"});
  c = config(1);
  c.out = dir_ + "/new/sub/../r.csv";  // the same file by another name, in folders to create
  c.checkpoint = dir_ + "/new/r.csv";
  refused(c, {"are the same file"});
  c = config(1);
  c.save_init = c.checkpoint;
  refused(c, {"--save-init", "same file"});
  c = config(1);
  c.profile = true;
  c.profile_out = c.out;
  refused(c, {"--profile-out", "same file"});
  c = config(1);
  c.out = data_.files[1];  // a training label file
  refused(c, {"is the input file", data_.files[1]});
  c = config(1);
  c.checkpoint = dir_ + "/link.gz";
  refused(c, {"is the input file"});
  c = config(1);
  c.out = data_.files[0] + "/r.csv";  // inside a file
  refused(c, {"is a file, not a folder"});
  c.out = data_.files[0] + "/deeper/r.csv";
  refused(c, {"'" + data_.files[0] + "' is a file, not a folder"});
  c = config(1);
  c.out = dir_ + "/data";
  refused(c, {"--out", "not a regular file (a folder)"});
  ASSERT_EQ(mkfifo((dir_ + "/fifo").c_str(), 0600), 0);
  const std::vector<std::string> with_fifo = listing();
  c = config(1);
  c.checkpoint = dir_ + "/fifo";
  testing::expect_error_mentions([&] { RunLoop loop(r->ctx, c, *r->task); },
                                 {"--checkpoint", "a FIFO"});
  c = config(1);
  c.out = "/dev/null";
  testing::expect_error_mentions([&] { RunLoop loop(r->ctx, c, *r->task); }, {"a device"});
  EXPECT_EQ(listing(), with_fifo);
  // A resume that cannot load writes nothing either (no header-only CSV).
  c = config(1);
  c.resume = true;
  testing::expect_error_mentions([&] { RunLoop loop(r->ctx, c, *r->task); },
                                 {c.checkpoint, "cannot open"});
  EXPECT_EQ(listing(), with_fifo);
}

// Issue 24: --save-init follows --checkpoint's rule: a file this run did not write is refused
// (in training and in --steps runs) and left as it was, with nothing else written, unless
// --overwrite; then it holds the run's initial weights, written under a temporary name and
// renamed (nothing left beside it). --overwrite alone, with neither file, is refused.
TEST_F(RunLoopTest, SaveInitRefusesAnExistingFileUnlessOverwrite) {
  auto r = make_run();
  const std::string init = dir_ + "/init.ckpt";
  std::ofstream(init) << "a trained run";
  const std::vector<std::string> before = listing();
  RunConfig c = config(1);
  c.save_init = init;
  const std::string message = "--save-init " + init +
                              " already exists and this run would replace it: name another "
                              "path, or --overwrite to replace it";
  testing::expect_error_mentions([&] { RunLoop loop(r->ctx, c, *r->task); }, {message});
  EXPECT_EQ(listing(), before);
  c.steps = 2;
  testing::expect_error_mentions([&] { RunLoop loop(r->ctx, c, *r->task); }, {message});
  EXPECT_EQ(listing(), before);
  EXPECT_EQ(testing::slurp(init), "a trained run");

  RunConfig plain = config(1);
  plain.checkpoint.clear();
  plain.overwrite = true;
  testing::expect_error_mentions([&] { RunLoop loop(r->ctx, plain, *r->task); },
                                 {"--overwrite lets a fresh run replace an existing --checkpoint, "
                                  "--save-init or --save-weights file: give one of them"});

  c.steps = 0;
  c.overwrite = true;
  ASSERT_EQ(train(c, *r), 0);
  for (const std::string& f : listing()) EXPECT_EQ(f.find(".tmp."), std::string::npos) << f;
  auto fresh = make_run();  // the same seed: the initial weights the run started from
  auto loaded = make_run();
  loaded->model.parameters().values().fill(0.f);  // so that only the file can restore them
  EXPECT_EQ(load_checkpoint(init, loaded->model, nullptr).epoch, 0);
  testing::expect_close(loaded->model.parameters().values(), fresh->model.parameters().values(),
                        0, 0, "initial weights");
}

// --save-weights (the trained weights alone, after the last epoch) follows the same rule: a file
// this run did not write (another run's judge, say) is refused before any work, unless
// --overwrite; with it the run writes the weights in its place.
TEST_F(RunLoopTest, SaveWeightsRefusesAnExistingFileUnlessOverwrite) {
  auto r = make_run();
  const std::string w = dir_ + "/judge.weights";
  std::ofstream(w) << "another run's weights";
  const std::vector<std::string> before = listing();
  RunConfig c = config(1);
  c.checkpoint.clear();
  c.save_weights = w;
  testing::expect_error_mentions(
      [&] { RunLoop loop(r->ctx, c, *r->task); },
      {"--save-weights " + w +
       " already exists and this run would replace it: name another path, or --overwrite to "
       "replace it"});
  EXPECT_EQ(listing(), before);
  EXPECT_EQ(testing::slurp(w), "another run's weights");
  c.overwrite = true;
  ASSERT_EQ(train(c, *r), 0);
  auto loaded = make_run();
  loaded->model.parameters().values().fill(0.f);
  load_checkpoint(w, loaded->model, nullptr);
  testing::expect_close(loaded->model.parameters().values(), r->model.parameters().values(), 0,
                        0, "trained weights");
}

TEST_F(RunLoopTest, DivergenceMidEpochNamesTheStepAndKeepsTheLastGoodEpoch) {
  auto r = make_run();
  r->task->set(&r->model, r->opt.get(), {/*epoch=*/1, /*at=*/3});
  testing::expect_error_mentions([&] { train(config(3), *r); },
                                 {"training diverged: train_loss became nan at step 4 of epoch 2",
                                  "nothing was written for epoch 2", "keeps epoch 1"});
  EXPECT_EQ(epochs_in_csv(), std::vector<std::string>{"1"});
  EXPECT_EQ(checkpoint_epoch(), 1);
}

// With the status column (the dcgan app's CSV) a diverged epoch gets a row saying so, with its
// values as far as they were read, and no checkpoint; finished epochs say "ok"; a resumed run
// drops the diverged row and redoes the epoch.
TEST_F(RunLoopTest, StatusColumnRecordsDivergenceAndResumeDropsTheRow) {
  auto r = make_run();
  r->task->set(&r->model, r->opt.get(), {/*epoch=*/1, /*at=*/3});
  RunConfig c = config(3);
  c.status_column = true;
  testing::expect_error_mentions(
      [&] { train(c, *r); },
      {"training diverged: train_loss became nan at step 4 of epoch 2",
       c.out + " has a row saying so for epoch 2", "keeps epoch 1"});
  std::vector<std::string> cols = csv_columns();
  cols.insert(cols.begin() + 12, "status");
  std::vector<std::vector<std::string>> rows = CsvWriter(c.out, cols).rows();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0][7], "1");
  EXPECT_EQ(rows[0][12], "ok");
  EXPECT_EQ(rows[1][7], "2");
  EXPECT_EQ(rows[1][8], "nan");        // train_loss as read
  EXPECT_EQ(rows[1][10], "");          // no evaluation
  EXPECT_EQ(rows[1][12], "diverged: train_loss became nan at step 4 of 6");
  EXPECT_EQ(checkpoint_epoch(), 1);

  auto again = make_run();
  c.resume = true;
  EXPECT_EQ(train(c, *again), 0);
  rows = CsvWriter(c.out, cols).rows();
  ASSERT_EQ(rows.size(), 3u);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i][7], std::to_string(i + 1));
    EXPECT_EQ(rows[i][12], "ok");
  }
}

// The update of an epoch's last step makes the weights NaN while that step's loss (computed
// before the update) is finite: the evaluation catches it before anything is written.
TEST_F(RunLoopTest, DivergenceInTheLastStepIsCaughtBeforeTheRowAndCheckpoint) {
  auto r = make_run();
  r->task->set(&r->model, r->opt.get(), {/*epoch=*/1, /*at=*/5, /*after=*/true});
  testing::expect_error_mentions(
      [&] { train(config(3), *r); },
      {"training diverged in the last steps of epoch 2: after it the evaluation gives "
       "test_loss = nan",
       "keeps epoch 1"});
  EXPECT_EQ(epochs_in_csv(), std::vector<std::string>{"1"});
  EXPECT_EQ(checkpoint_epoch(), 1);
  // Infinite optimizer state with finite weights and evaluation: not saved either.
  fs::remove(dir_ + "/r.csv");
  fs::remove(dir_ + "/c.ckpt");
  r = make_run();
  r->task->set(&r->model, r->opt.get(),
               {/*epoch=*/0, /*at=*/5, /*after=*/true, /*in_optimizer=*/true,
                std::numeric_limits<float>::infinity()});
  testing::expect_error_mentions([&] { train(config(2), *r); },
                                 {"epoch 1: the weights or optimizer state hold non-finite values",
                                  "keeps epoch 0"});
  EXPECT_FALSE(fs::exists(dir_ + "/r.csv"));
  EXPECT_EQ(checkpoint_epoch(), 0);
}

TEST_F(RunLoopTest, ResumeDropsRowsOfEpochsWhoseCheckpointNeverLanded) {
  auto r = make_run();
  ASSERT_EQ(train(config(2), *r), 0);
  // Rows another run wrote earlier stay; so does the last row when it is not this run's.
  CsvWriter csv(dir_ + "/r.csv", csv_columns());
  std::vector<std::string> row = csv.rows()[1];
  row[7] = "3";  // the epoch column: as if killed between epoch 3's row and its checkpoint
  csv.row(row);
  r = make_run();
  RunConfig c = config(3);
  c.resume = true;
  ASSERT_EQ(train(c, *r), 0);
  EXPECT_EQ(epochs_in_csv(), (std::vector<std::string>{"1", "2", "3"}));
  EXPECT_EQ(checkpoint_epoch(), 3);

  std::vector<std::string> other = csv.rows()[0];
  other[1] = "keras";  // another model's row, last in the file: never dropped
  other[7] = "9";  // the epoch column
  csv.row(other);
  r = make_run();
  c.epochs = 4;
  ASSERT_EQ(train(c, *r), 0);
  EXPECT_EQ(epochs_in_csv(), (std::vector<std::string>{"1", "2", "3", "9", "4"}));
}

// The points a test's fault hook (core/fault_hook.h) sees: every training step, counted over the
// run, and every epoch's row, before its checkpoint (which is still the previous epoch's then).
TEST_F(RunLoopTest, FaultHookSeesEveryStepAndEveryRowBeforeItsCheckpoint) {
  struct Recorder : FaultHook {
    std::function<int64_t()> checkpoint;
    std::vector<std::string> seen;
    std::vector<int64_t> checkpoint_at_row;
    bool reached(const char* point, int64_t count) override {
      seen.push_back(std::string(point) + ":" + std::to_string(count));
      if (std::string(point) == "after_row") checkpoint_at_row.push_back(checkpoint());
      return false;
    }
  } hook;
  hook.checkpoint = [this] { return checkpoint_epoch(); };
  auto r = make_run();
  r->ctx.set_fault_hook(&hook);
  ASSERT_EQ(train(config(2), *r), 0);
  std::vector<std::string> want;
  for (int s = 1; s <= 6; ++s) want.push_back("train_step:" + std::to_string(s));
  want.push_back("after_row:1");
  for (int s = 7; s <= 12; ++s) want.push_back("train_step:" + std::to_string(s));
  want.push_back("after_row:2");
  EXPECT_EQ(hook.seen, want);
  EXPECT_EQ(hook.checkpoint_at_row, (std::vector<int64_t>{0, 1}));
}

// A task's own files (samples, plots) are named in extra_outputs, checked with the loop's, and
// written in end_epoch (after the epoch's row and checkpoint) and finish.
class HookTask : public ClassifierTask {
 public:
  using ClassifierTask::ClassifierTask;
  std::string csv, sample;
  std::vector<std::pair<int, size_t>> ends;  // (epoch, rows in the CSV then)
  int finished = 0;
  void end_epoch(Context&, int epoch) override {
    ends.push_back({epoch, CsvWriter(csv, csv_columns()).rows().size()});
    AtomicFile f(sample);
    f.stream() << "epoch " << epoch + 1 << "\n";
    f.commit();
  }
  void finish(Context&) override { ++finished; }
};

TEST_F(RunLoopTest, TaskFilesAreCheckedUpFrontAndWrittenAfterEachEpoch) {
  auto r = make_run();
  HookTask task(r->ctx, r->model, *r->opt, *train_set_, *test_set_, task_options());
  task.csv = dir_ + "/r.csv";
  task.sample = dir_ + "/sample.txt";
  RunConfig c = config(2);
  c.extra_outputs = {{"samples", c.out}};
  testing::expect_error_mentions([&] { RunLoop loop(r->ctx, c, task); },
                                 {"--out", "samples", "same file"});
  c.extra_outputs = {{"samples", task.sample}};
  RunLoop loop(r->ctx, c, task);
  ASSERT_EQ(loop.run(), 0);
  EXPECT_EQ(task.ends, (std::vector<std::pair<int, size_t>>{{0, 1}, {1, 2}}));
  EXPECT_EQ(task.finished, 1);
  std::ifstream in(task.sample);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "epoch 2");
}

TEST_F(RunLoopTest, StaleTemporariesOfKilledRunsAreRemoved) {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  waitpid(child, nullptr, 0);  // a process that no longer runs
  const std::string out = dir_ + "/r.csv";
  const std::string dead = out + ".tmp." + std::to_string(child);
  const std::string live = out + ".tmp." + std::to_string(getppid());
  const std::string other = dir_ + "/x.csv.tmp." + std::to_string(child);
  for (const std::string& p : {dead, live, other}) std::ofstream(p) << "half";
  auto r = make_run();
  ASSERT_EQ(train(config(1), *r), 0);
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(live));   // another process may be writing it right now
  EXPECT_TRUE(fs::exists(other));  // not a temporary of this run's files
}

TEST_F(RunLoopTest, CheckpointFieldsAreRangeCheckedOnResume) {
  auto r = make_run();
  const std::string ck = dir_ + "/c.ckpt";
  RunConfig c = config(5);
  c.resume = true;
  save_checkpoint(ck, r->model, r->opt.get(), 1000000000, {{"seed", 3}, {"rng_counter", 0}});
  testing::expect_error_mentions([&] { RunLoop loop(r->ctx, c, *r->task); },
                                 {ck, "field epoch = 1000000000 is out of range 0..100000"});
  save_checkpoint(ck, r->model, r->opt.get(), 1, {{"rng_counter", 0}});
  testing::expect_error_mentions([&] { RunLoop loop(r->ctx, c, *r->task); },
                                 {ck, "no seed / rng_counter"});
  save_checkpoint(ck, r->model, r->opt.get(), 1, {{"seed", 3}, {"rng_counter", 0}, {"batch", 16}});
  testing::expect_error_mentions([&] { RunLoop loop(r->ctx, c, *r->task); },
                                 {"was made with batch 16, this run has 8"});
  r->model.params()[0].value->data()[3] = std::numeric_limits<float>::infinity();
  save_checkpoint(ck, r->model, r->opt.get(), 1, {{"seed", 3}, {"rng_counter", 0}});
  testing::expect_error_mentions([&] { RunLoop loop(r->ctx, c, *r->task); },
                                 {ck, "holds non-finite weights"});
  EXPECT_FALSE(fs::exists(c.out));
}

}  // namespace
}  // namespace pdnn
