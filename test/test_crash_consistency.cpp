// Crash consistency of a training run (lib/train/run_loop.h), end to end through build/bin/mnist:
// the run is killed with SIGKILL at random points many times, each time resumed from its
// checkpoint, and after every kill the checkpoint must load and the CSV must hold exactly one
// row per finished epoch (plus at most the row of the epoch being checkpointed, which the next
// resume drops); at the end the rows are epochs 1..N once each, no temporary file is left, and
// the final checkpoint equals an uninterrupted run's byte for byte. The narrow window between
// an epoch's row and its checkpoint is also hit on purpose: build/bin/mnist_faults, the same app
// code with a fault hook (test/drivers/mnist_faults.cpp), kills itself there.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "model/checkpoint.h"
#include "workloads/classifier/mnist_models.h"
#include "workloads/model_zoo.h"
#include "testing.h"
#include "run/csv.h"

extern char** environ;

namespace pdnn {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const std::string kBin = std::string(PDNN_BIN_DIR) + "/mnist";
const std::string kFaults = std::string(PDNN_BIN_DIR) + "/mnist_faults";

// Starts argv with stdout and stderr to /dev/null.
pid_t spawn(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class CrashConsistency : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const std::string& bin : {kBin, kFaults})
      if (!fs::exists(bin)) GTEST_SKIP() << bin << " not built";
    char tmpl[] = "/tmp/pdnn_crash_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ + "/data");
    testing::write_idx_squares(dir_ + "/data", "train", 64, 8, 1);  // 8 steps per epoch
    testing::write_idx_squares(dir_ + "/data", "t10k", 16, 8, 2);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  // W3 (dropout: the RNG position must survive too) on 8x8 images, 6 epochs.
  std::vector<std::string> args(const std::string& name, bool resume) const {
    std::vector<std::string> a = {kBin,        "--model",   "keras",   "--data",    dir_ + "/data",
                                  "--epochs",  "6",         "--batch", "8",         "--threads",
                                  "1",         "--seed",    "5",       "--out",     dir_ + "/" + name + ".csv",
                                  "--checkpoint", dir_ + "/" + name + ".ckpt"};
    if (resume) a.push_back("--resume");
    return a;
  }
  // Epoch column of every row of name.csv.
  std::vector<int> csv_epochs(const std::string& name) const {
    std::vector<int> e;
    const std::string p = dir_ + "/" + name + ".csv";
    if (!fs::exists(p)) return e;
    std::ifstream in(p);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) e.push_back(std::stoi(csv_split(line)[7]));  // epoch
    return e;
  }
  // The checkpoint, loaded whole into a fresh model and optimizer; its epoch, or -1 if absent.
  int64_t checkpoint_epoch(const std::string& name) const {
    const std::string p = dir_ + "/" + name + ".ckpt";
    if (!fs::exists(p)) return -1;
    Sequential m = make_mnist_model("keras", 8, 10);
    auto opt = make_model_optimizer("keras", "", m.parameters(), -1.f);
    return load_checkpoint(p, m, opt.get()).epoch;  // throws if it does not load
  }
  // After any kill: a loadable checkpoint at epoch E (or none), rows 1..k with k = E or E+1.
  void expect_consistent(const std::string& name, const std::string& when) const {
    const int64_t e = checkpoint_epoch(name);
    const std::vector<int> rows = csv_epochs(name);
    for (size_t i = 0; i < rows.size(); ++i) ASSERT_EQ(rows[i], static_cast<int>(i) + 1) << when;
    const int64_t k = static_cast<int64_t>(rows.size());
    EXPECT_TRUE(k == std::max<int64_t>(e, 0) || k == e + 1)
        << when << ": checkpoint epoch " << e << ", " << k << " rows";
  }
  static int wait_status(pid_t pid) {
    int st = 0;
    waitpid(pid, &st, 0);
    return st;
  }

  std::string dir_;
};

TEST_F(CrashConsistency, KilledAtRandomPointsAndResumedEqualsAnUninterruptedRun) {
  const auto t0 = Clock::now();
  ASSERT_EQ(wait_status(spawn(args("ref", false))), 0);
  const double run_s = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_EQ(csv_epochs("ref"), (std::vector<int>{1, 2, 3, 4, 5, 6}));

  // Killed right after epoch 2's row, before its checkpoint: one row too many, for now.
  std::vector<std::string> faulted = args("run", false);
  faulted[0] = kFaults;
  faulted.insert(faulted.end(), {"--fault", "kill:after_row:2"});
  int st = wait_status(spawn(faulted));
  ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << st;
  EXPECT_EQ(csv_epochs("run"), (std::vector<int>{1, 2}));
  EXPECT_EQ(checkpoint_epoch("run"), 1);

  // Then killed at random points, resumed each time; a run that gets to its end before its
  // kill is compared with the uninterrupted one, and a new run starts from scratch.
  std::mt19937 gen(2024);
  std::uniform_real_distribution<double> when(0.0, 0.6 * run_s);
  const std::string ref = slurp(dir_ + "/ref.ckpt");
  ASSERT_GT(ref.size(), 1000u);
  auto expect_final = [&](const std::string& what) {
    EXPECT_EQ(csv_epochs("run"), (std::vector<int>{1, 2, 3, 4, 5, 6})) << what;
    EXPECT_TRUE(slurp(dir_ + "/run.ckpt") == ref)
        << what << ": the resumed run's final checkpoint differs from the uninterrupted one";
    for (const auto& e : fs::directory_iterator(dir_))
      EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  };
  int kills = 0, completed = 0;
  for (int i = 0; i < 40; ++i) {
    const pid_t pid = spawn(args("run", fs::exists(dir_ + "/run.ckpt")));
    ASSERT_GT(pid, 0);
    std::this_thread::sleep_for(std::chrono::duration<double>(when(gen)));
    kill(pid, SIGKILL);
    st = wait_status(pid);
    const std::string what = "attempt " + std::to_string(i);
    if (WIFSIGNALED(st)) {
      ++kills;
      expect_consistent("run", what);
    } else {
      ASSERT_EQ(WEXITSTATUS(st), 0) << what << ": a resumed run failed";
      expect_final(what);
      ++completed;
      fs::remove(dir_ + "/run.csv");
      fs::remove(dir_ + "/run.ckpt");
    }
    if (HasFatalFailure()) return;
  }
  if (fs::exists(dir_ + "/run.ckpt")) {
    ASSERT_EQ(wait_status(spawn(args("run", true))), 0);  // to the end, uninterrupted
    expect_final("last run");
    ++completed;
  }
  EXPECT_GE(kills, 15);
  EXPECT_GE(completed, 1);
  std::printf("%d kills, %d runs completed and compared, %.2f s per uninterrupted run\n", kills,
              completed, run_s);
}

}  // namespace
}  // namespace pdnn
