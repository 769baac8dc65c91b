// The run-loop flags every app shares (lib/run/run_flags.h): seeds are whole numbers 0..2^64-1
// (no wrap of -1, no saturation past 2^64), --lr must be positive and finite, epochs in range,
// --resume needs --checkpoint and excludes --save-init; every refusal is one readable line
// (no 309-digit DBL_MAX).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "run/run_flags.h"

namespace pdnn {
namespace {

struct Parsed {
  bool ok = false;
  std::string error;
  RunConfig cfg;
  float lr = 0;
};

Parsed parse(std::vector<std::string> args) {
  Parsed p;
  int threads = 0;
  RunFlagText text;
  CLI::App app{"test"};
  app.add_option("--lr", p.lr)->check(positive_finite_validator());
  add_run_flags(app, p.cfg, threads, text, "test");
  args.insert(args.begin(), "test");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
    finish_run_flags(app, p.cfg, text);
    p.ok = true;
  } catch (const CLI::ParseError& e) {
    p.error = e.what();
  }
  return p;
}

void expect_refused(const std::vector<std::string>& args, const std::string& part) {
  const Parsed p = parse(args);
  EXPECT_FALSE(p.ok) << args[0] << " " << args[1];
  EXPECT_NE(p.error.find(part), std::string::npos) << p.error;
  EXPECT_LT(p.error.size(), 160u) << p.error;
  EXPECT_EQ(p.error.find("179769"), std::string::npos) << p.error;
}

TEST(RunFlags, SeedsAreWholeNumbersWithoutWrapOrSaturation) {
  Parsed p = parse({"--seed", "18446744073709551615"});
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.cfg.seed, UINT64_MAX);
  EXPECT_TRUE(p.cfg.seed_given);
  p = parse({"--seed", "0"});
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.cfg.seed, 0u);
  p = parse({});
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.cfg.seed, 1u);
  EXPECT_FALSE(p.cfg.seed_given);
  for (const char* bad : {"-1", "18446744073709551616", "99999999999999999999999", "1e3", "abc",
                          "+5", " 7", ""})
    expect_refused({"--seed", bad}, "is not a whole number from 0 to 18446744073709551615");
}

TEST(RunFlags, LearningRateMustBePositiveAndFinite) {
  EXPECT_TRUE(parse({"--lr", "0.001"}).ok);
  EXPECT_TRUE(parse({"--lr", "1e30"}).ok);
  for (const char* bad : {"nan", "inf", "-inf", "-1", "0", "1e309"})
    expect_refused({"--lr", bad}, "must be a positive finite number");
  expect_refused({"--lr", "fast"}, "is not a number");
}

TEST(RunFlags, EpochsStepsAndFileCombinations) {
  EXPECT_EQ(parse({"--epochs", "100000"}).cfg.epochs, 100000);
  expect_refused({"--epochs", "0"}, "--epochs");
  expect_refused({"--epochs", "100001"}, "--epochs");
  expect_refused({"--epochs", "99999999999999999999"}, "--epochs");
  expect_refused({"--steps", "0"}, "--steps");
  expect_refused({"--resume"}, "--checkpoint");
  expect_refused({"--resume", "--checkpoint", "c", "--save-init", "i"}, "--save-init");
  expect_refused({"--bench-csv", "b.csv"}, "--steps");
  const Parsed p = parse({"--resume", "--checkpoint", "c.ckpt", "--out", "o.csv"});
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_TRUE(p.cfg.resume);
  EXPECT_EQ(p.cfg.checkpoint, "c.ckpt");
  EXPECT_EQ(p.cfg.out, "o.csv");
}

}  // namespace
}  // namespace pdnn
