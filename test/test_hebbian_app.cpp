// End to end: build/bin/hebbian on a small grid. It must write the documented CSV (one row per
// point, a W6 run that overflows stopped and named at its step, the leaky one not), show the
// drift table, and refuse bad input with a non-zero exit and no CSV.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <map>
#include <string>
#include <vector>

#include "core/cuda_state.h"
#include "testing.h"

namespace pdnn {
namespace {

using testing::exists;
using testing::read_csv;
using Result = testing::CommandResult;
constexpr auto run = testing::run_command;


const std::string kBin = std::string(PDNN_BIN_DIR) + "/hebbian";

const std::vector<std::string> kHeader = {
    "app", "variant", "device", "dtype", "n", "steps", "threads", "leak", "lr", "seed",
    "repeat", "steps_run", "first_nonfinite_step", "seconds", "us_per_step", "us_min",
    "us_max", "w_gbps", "floor_gbps", "floor_us_per_step", "floor_us_min", "copy_gbps", "device_name",
    "cpu_model", "blas_core", "git_rev", "host", "timestamp"};

class HebbianApp : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!exists(kBin)) GTEST_SKIP() << kBin << " not built";
    char tmpl[] = "/tmp/pdnn_hebbian_app_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (!dir_.empty()) std::system(("rm -rf '" + dir_ + "'").c_str());
  }
  // Rows as column -> value maps.
  std::vector<std::map<std::string, std::string>> rows(const std::string& csv) {
    const auto r = read_csv(csv);
    EXPECT_FALSE(r.empty());
    if (r.empty()) return {};
    EXPECT_EQ(r[0], kHeader);
    std::vector<std::map<std::string, std::string>> out;
    for (size_t i = 1; i < r.size(); ++i) {
      std::map<std::string, std::string> m;
      for (size_t k = 0; k < r[i].size() && k < r[0].size(); ++k) m[r[0][k]] = r[i][k];
      EXPECT_EQ(r[i].size(), r[0].size()) << "row " << i;
      out.push_back(m);
    }
    return out;
  }
  std::string dir_;
};

TEST_F(HebbianApp, GridWritesOneRowPerPointAndNamesTheOverflowStep) {
  const std::string csv = dir_ + "/h.csv";
  // W6 as written: x grows ~1 a step, so at lr 1e-6 W overflows near step 1,770.
  const Result r = run(kBin + " --n 40,64 --t 30,2500 --dtype float32,float64 --threads 1,2 --out " + csv);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("not leaky (as written)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("non-finite x or W at step"), std::string::npos) << r.output;
  const auto rs = rows(csv);
  ASSERT_EQ(rs.size(), 16u);  // 2 n x 2 T x 2 dtypes x 2 thread counts
  for (const auto& m : rs) {
    const std::string what = m.at("n") + " " + m.at("steps") + " " + m.at("dtype") + " " + m.at("threads");
    EXPECT_EQ(m.at("app"), "pdnn");
    EXPECT_EQ(m.at("device"), "cpu");
    EXPECT_EQ(m.at("variant"), "fused");
    // w_gbps is W's traffic (read and written once a step) over the median step time, printed
    // with 4 significant digits (a fixed 2 decimals read 0.00 on a loaded machine); us_per_step
    // carries 2 decimals (+-0.005 us), so the two agree within those roundings.
    const double us = std::stod(m.at("us_per_step")), gbps = std::stod(m.at("w_gbps"));
    const double kb = 2e-3 * std::stod(m.at("n")) * std::stod(m.at("n")) *
                      (m.at("dtype") == "float32" ? 4 : 8);  // W's bytes / 1e3: GB/s per 1/us
    ASSERT_GT(us, 0.005) << what;
    EXPECT_GE(gbps, kb / (us + 0.005) * (1 - 5e-4)) << what;
    EXPECT_LE(gbps, kb / (us - 0.005) * (1 + 5e-4)) << what;
    EXPECT_GT(std::stod(m.at("floor_gbps")), 0) << what;
    EXPECT_FALSE(m.at("git_rev").empty());
    const int64_t bad = std::stoll(m.at("first_nonfinite_step")), run_steps = std::stoll(m.at("steps_run"));
    if (m.at("steps") == "30") {
      EXPECT_EQ(bad, -1) << what;
      EXPECT_EQ(run_steps, 30) << what;
    } else if (m.at("dtype") == "float32") {  // float64 holds on far longer
      EXPECT_GT(bad, 1000) << what;
      EXPECT_LT(bad, 2500) << what;
      EXPECT_EQ(run_steps, bad) << what;
    }
  }
  // The same thread count changes nothing, so 1 and 2 threads stop at the same step.
  EXPECT_EQ(rs[2].at("first_nonfinite_step"), rs[3].at("first_nonfinite_step"));
}

TEST_F(HebbianApp, LeakyRunStaysFinite) {
  const std::string csv = dir_ + "/h.csv";
  const Result r = run(kBin + " --n 50 --t 2500 --threads 1 --leak 0.5 --out " + csv);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("leaky, a = 0.5"), std::string::npos) << r.output;
  const auto rs = rows(csv);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].at("first_nonfinite_step"), "-1");
  EXPECT_EQ(rs[0].at("steps_run"), "2500");
  EXPECT_EQ(rs[0].at("leak"), "0.500");
}

TEST_F(HebbianApp, DriftTableAndCsv) {
  const std::string csv = dir_ + "/drift.csv";
  const Result r = run(kBin + " --drift --n 40 --t 5,50 --threads 1 --out " + csv);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("drift of cpu float32 from the CPU float64 run"), std::string::npos) << r.output;
  const auto rs = read_csv(csv);
  ASSERT_EQ(rs.size(), 3u);  // header + T = 5, 50
  EXPECT_EQ(rs[0][0], "device");
  EXPECT_EQ(rs[1][3], "5");
  EXPECT_EQ(rs[2][3], "50");
  // float32 against float64: a difference, small next to the state
  const double dx = std::stod(rs[2][7]), sx = std::stod(rs[2][8]);
  EXPECT_GT(dx, 0);
  EXPECT_LT(dx, 1e-2 * sx);
}

// scripts/report/plot.py draws the app's two CSV files (skipped without matplotlib).
TEST_F(HebbianApp, PlotsItsCsvFiles) {
  if (std::system("/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 lacks matplotlib (apt-get install python3-matplotlib)";
  const std::string res = dir_ + "/results/hebbian";
  Result r = run(kBin + " --n 30,60 --t 20 --threads 1 --leak 0.5 --out " + res + "/hebbian.csv");
  ASSERT_EQ(r.status, 0) << r.output;
  r = run(kBin + " --drift --n 30 --t 5,20 --threads 1 --out " + res + "/drift.csv");
  ASSERT_EQ(r.status, 0) << r.output;
  r = run("/usr/bin/python3 " PDNN_SOURCE_DIR "/scripts/report/plot.py --results " + dir_ + "/results --out " + dir_ + "/plots");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(exists(dir_ + "/plots/hebbian_leak0.5.png")) << r.output;
  EXPECT_TRUE(exists(dir_ + "/plots/hebbian_drift.png")) << r.output;
}

TEST_F(HebbianApp, RefusesBadInputWithoutWritingTheCsv) {
  const std::string csv = dir_ + "/h.csv";
  for (const std::string& args : {"--dtype float16", "--n 0", "--leak 2", "--t 0", "--threads 0",
                                  "--device tpu", "--bogus"}) {
    const Result r = run(kBin + " " + args + " --out " + csv);
    EXPECT_EQ(r.status, 2) << args << ": " << r.output;
    EXPECT_NE(r.output.find("hebbian:"), std::string::npos) << args << ": " << r.output;
    EXPECT_FALSE(exists(csv)) << args;
  }
  // --device cuda: one line saying why not where there is no GPU; rows on a GPU host
  std::string why;
  const bool gpu = cuda_usable(&why);
  const Result r = run(kBin + " --device cuda --n 64 --t 20 --out " + csv);
  if (!gpu) {
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find("hebbian: --device cuda: " + why), std::string::npos) << r.output;
    EXPECT_FALSE(exists(csv));
  } else {
    ASSERT_EQ(r.status, 0) << r.output;
    const auto rs = rows(csv);
    ASSERT_EQ(rs.size(), 1u);
    EXPECT_EQ(rs[0].at("device"), "cuda");
    EXPECT_EQ(rs[0].at("variant"), "w-on-chip");
  }
}

TEST_F(HebbianApp, RefusesACsvWithAnotherHeader) {
  const std::string csv = dir_ + "/h.csv";
  std::system(("printf 'a,b\\n1,2\\n' > " + csv).c_str());
  const Result r = run(kBin + " --n 20 --t 5 --threads 1 --out " + csv);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(csv), std::string::npos) << r.output;
  EXPECT_EQ(testing::slurp(csv), "a,b\n1,2\n");
}

}  // namespace
}  // namespace pdnn
