// The run-loop flags every app shares (lib/run/run_flags.h): seeds are whole numbers 0..2^64-1
// (no wrap of -1, no saturation past 2^64), --lr must be positive and finite, epochs in range,
// --resume needs --checkpoint and excludes --save-init; every refusal is one readable line
// (no 309-digit DBL_MAX).
#include <gtest/gtest.h>

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "ops/conv/conv2d_algo.h"
#include "run/run_flags.h"
#include "testing.h"

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
  add_memory_flags(app, p.cfg);
  args.insert(args.begin(), "test");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
    finish_run_flags(app, p.cfg, text);
    p.ok = true;
  } catch (const CLI::ParseError& e) {
    p.error = e.what();
  } catch (const Error& e) {  // finish_run_flags' refusals
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

// Issue 20: every app's --help says what a default that depends on the data or the machine
// becomes (threads 0 = all cores and how many here, an epoch's images, a batch too big).
// --precision is parsed once here for every app; --tf32 is its older spelling of tf32.
TEST(RunFlags, PrecisionAndItsTf32AliasGiveTheSameConfig) {
  Parsed p = parse({});
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.cfg.precision, Precision::Fp32);
  p = parse({"--precision", "fp32"});
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.cfg.precision, Precision::Fp32);
  const Parsed named = parse({"--precision", "tf32", "--device", "cuda"});
  const Parsed alias = parse({"--tf32", "--device", "cuda"});
  ASSERT_TRUE(named.ok) << named.error;
  ASSERT_TRUE(alias.ok) << alias.error;
  EXPECT_EQ(named.cfg.precision, Precision::Tf32);
  EXPECT_EQ(alias.cfg.precision, named.cfg.precision);
  EXPECT_EQ(run_device_text(alias.cfg, "G"), run_device_text(named.cfg, "G"));
  // The precision a Context then carries, and what its kernels are told.
  Context ctx(1, 1);
  apply_device_flags(ctx, alias.cfg);
  EXPECT_EQ(ctx.precision(), Precision::Tf32);
  for (const char* bad : {"fp16", "TF32", "bfloat16", ""})
    expect_refused({"--precision", bad}, "is not one of fp32, tf32, bf16");
  expect_refused({"--tf32", "--precision", "tf32"}, "excludes");
}

// --batch-copy: overlapped by default (train/step_shell.h), serial when asked, in the run header.
TEST(RunFlags, BatchCopyIsOverlappedUnlessAskedSerial) {
  const Parsed d = parse({"--device", "cuda"});
  ASSERT_TRUE(d.ok) << d.error;
  EXPECT_TRUE(d.cfg.overlap_batch_copy);
  EXPECT_NE(run_device_text(d.cfg, "G").find("batch copy overlapped"), std::string::npos);
  const Parsed s = parse({"--device", "cuda", "--batch-copy", "serial"});
  ASSERT_TRUE(s.ok) << s.error;
  EXPECT_FALSE(s.cfg.overlap_batch_copy);
  EXPECT_NE(run_device_text(s.cfg, "G").find("batch copy serial"), std::string::npos);
  EXPECT_TRUE(parse({"--batch-copy", "overlapped"}).cfg.overlap_batch_copy);
  expect_refused({"--batch-copy", "on"}, "--batch-copy: on not in {overlapped,serial}");
}

// bf16 runs on the GPU only: refused in one line on the CPU when the flags are read (never a
// silent fp32 run); a GPU run parses, under a memory plan too (--gpu-memory-limit, or its
// printout --memory-plan: the plan counts bf16 bytes, test_memory_plan.cpp).
TEST(RunFlags, Bf16IsRefusedInOneLineOnTheCpuAndRunsUnderAMemoryPlan) {
  const Parsed cpu = parse({"--precision", "bf16"});
  EXPECT_FALSE(cpu.ok);
  EXPECT_NE(cpu.error.find("--precision bf16: the CPU has no bf16 path"), std::string::npos)
      << cpu.error;
  EXPECT_EQ(cpu.error.find('\n'), std::string::npos) << cpu.error;
  EXPECT_LT(cpu.error.size(), 160u) << cpu.error;
  const Parsed planned =
      parse({"--precision", "bf16", "--device", "cuda", "--gpu-memory-limit", "1G"});
  EXPECT_TRUE(planned.ok) << planned.error;
  EXPECT_EQ(planned.cfg.gpu_memory_limit, int64_t{1} << 30);
  const Parsed printed = parse({"--precision", "bf16", "--device", "cuda", "--memory-plan"});
  EXPECT_TRUE(printed.ok) << printed.error;
  EXPECT_TRUE(printed.cfg.memory_plan);
  const Parsed gpu = parse({"--precision", "bf16", "--device", "cuda"});
  EXPECT_TRUE(gpu.ok) << gpu.error;
  EXPECT_EQ(gpu.cfg.precision, Precision::Bf16);
  // A RunConfig made without the flags is refused where the context takes it, too.
  RunConfig cfg;
  cfg.precision = Precision::Bf16;
  Context ctx(1, 1);
  EXPECT_THROW(apply_device_flags(ctx, cfg), Error);
  EXPECT_EQ(ctx.precision(), Precision::Fp32);
}

// The plan's times at the least workspace: --least-workspace makes the profile on a GPU and is
// refused on the CPU in one line (its convolutions share no workspace); --layer-times-least
// is that profile, read beside --layer-times only (as --layer-times-mid and --layer-times-wide).
TEST(RunFlags, LeastWorkspaceIsTheGpusAndItsProfileNeedsLayerTimes) {
  expect_refused({"--least-workspace"}, "--least-workspace: the CPU's convolutions have no shared workspace");
  const Parsed gpu = parse({"--least-workspace", "--device", "cuda"});
  EXPECT_TRUE(gpu.ok) << gpu.error;
  EXPECT_TRUE(gpu.cfg.least_workspace);
  EXPECT_FALSE(parse({"--device", "cuda"}).cfg.least_workspace);
  const std::string csv = ::testing::TempDir() + "pdnn_layer_times_" + std::to_string(::getpid()) + ".csv";
  std::ofstream(csv) << "layer,kind,output_shape,fwd_ms,bwd_ms,update_ms,share,gflops\n";
  expect_refused({"--layer-times-least", csv}, "--layer-times-least requires --layer-times");
  const Parsed both = parse({"--layer-times", csv, "--layer-times-least", csv});
  EXPECT_TRUE(both.ok) << both.error;
  EXPECT_EQ(both.cfg.layer_times_least, csv);
  // The mid profile: --workspace-held makes it (a GPU's flag, one workspace held, not under a
  // plan's limit), --layer-times-mid reads it beside --layer-times-least.
  expect_refused({"--workspace-held", "2G"}, "--workspace-held: the CPU's convolutions");
  expect_refused({"--workspace-held", "2G", "--least-workspace", "--device", "cuda"},
                 "--workspace-held and --least-workspace");
  expect_refused({"--workspace-held", "2G", "--gpu-memory-limit", "20G", "--device", "cuda"},
                 "--workspace-held and --gpu-memory-limit");
  expect_refused({"--workspace-held", "2Q", "--device", "cuda"}, "--workspace-held");
  // The copy rate a plan made on the CPU assumes: the CPU's flag, in range.
  expect_refused({"--plan-copy-gbs", "55", "--device", "cuda"}, "--plan-copy-gbs: for a plan made on the CPU");
  expect_refused({"--plan-copy-gbs", "0"}, "--plan-copy-gbs");
  // The CUDA context a plan made on the CPU counts: the CPU's flag, a positive size.
  expect_refused({"--plan-context", "606M", "--device", "cuda"}, "--plan-context: for a plan made on the CPU");
  expect_refused({"--plan-context", "0"}, "--plan-context");
  expect_refused({"--plan-context", "600MB"}, "--plan-context");
  const Parsed given = parse({"--plan-context", "606M"});
  ASSERT_TRUE(given.ok) << given.error;
  EXPECT_EQ(given.cfg.plan_context, int64_t{606} << 20);
  EXPECT_EQ(parse({}).cfg.plan_context, -1);
  const Parsed rate = parse({"--plan-copy-gbs", "55"});
  ASSERT_TRUE(rate.ok) << rate.error;
  EXPECT_DOUBLE_EQ(rate.cfg.plan_copy_gb_s, 55.0);
  const Parsed held = parse({"--workspace-held", "2G", "--device", "cuda"});
  ASSERT_TRUE(held.ok) << held.error;
  EXPECT_EQ(held.cfg.workspace_held, int64_t{2} << 30);
  expect_refused({"--layer-times", csv, "--layer-times-mid", csv},
                 "--layer-times-mid: also give --layer-times-least");
  const Parsed three = parse({"--layer-times", csv, "--layer-times-least", csv, "--layer-times-mid", csv});
  EXPECT_TRUE(three.ok) << three.error;
  EXPECT_EQ(three.cfg.layer_times_mid, csv);
  // The implicit GEMM's profile, for the layers past 32-bit images: beside --layer-times only.
  expect_refused({"--layer-times-wide", csv}, "--layer-times-wide requires --layer-times");
  const Parsed wide = parse({"--layer-times", csv, "--layer-times-wide", csv});
  EXPECT_TRUE(wide.ok) << wide.error;
  EXPECT_EQ(wide.cfg.layer_times_wide, csv);
  std::remove(csv.c_str());
  expect_refused({"--layer-times", csv, "--layer-times-least", csv}, "File does not exist");
}

// cuDNN's FFT and Winograd in fp32 (PyTorch's fp32 contract): a GPU flag, for fp32 only; the
// context carries it to the convolutions, and the run header says so.
TEST(RunFlags, ConvTransformsAreTheGpusAndFp32s) {
  expect_refused({"--conv-transforms"}, "--conv-transforms: a GPU flag");
  expect_refused({"--conv-transforms", "--device", "cuda", "--tf32"},
                 "--conv-transforms: for --precision fp32 only");
  expect_refused({"--conv-transforms", "--device", "cuda", "--precision", "bf16"},
                 "--conv-transforms: for --precision fp32 only");
  const Parsed gpu = parse({"--conv-transforms", "--device", "cuda"});
  ASSERT_TRUE(gpu.ok) << gpu.error;
  EXPECT_TRUE(gpu.cfg.conv_transforms);
  EXPECT_FALSE(parse({"--device", "cuda"}).cfg.conv_transforms);
  EXPECT_NE(run_device_text(gpu.cfg, "GPU").find("fp32 (convolutions may use FFT and Winograd)"),
            std::string::npos);
  EXPECT_EQ(run_device_text(parse({"--device", "cuda"}).cfg, "GPU").find("FFT"), std::string::npos);
  // The convolutions' key keeps the two fp32 contracts' choices apart (cuDNN's may differ).
  EXPECT_STREQ(gpu_conv_precision(false, false, true), "fp32+transforms");
  EXPECT_STREQ(gpu_conv_precision(false, false, false), "fp32");
  EXPECT_STREQ(gpu_conv_precision(false, true, true), "tf32");
  EXPECT_STREQ(gpu_conv_precision(true, false, true), "bf16");
}

TEST(AppHelp, SaysWhatDataAndMachineDependentDefaultsBecome) {
  const std::string here = std::to_string(omp_get_num_procs()) + " here";
  const std::vector<std::pair<std::string, std::vector<std::string>>> apps = {
      {"mnist", {"0 = all cores: " + here, "larger than the training set: one batch of all"}},
      {"caltech101",
       {"0 = all cores: " + here, "W4's 1,280 when the training split has that many, else all",
        "larger than an epoch: one batch of all of it",
        "with --device cuda all cores but two, 4 to 32: " +
            std::to_string(std::clamp(omp_get_num_procs() - 2, 4, 32)) + " here"}},
      {"dcgan",
       {"0 = all cores: " + here, "2,944 = 46 iterations of 64 when the set has that many, else "
        "the whole set", "larger than an epoch: one batch of all of it"}},
      {"gan_score", {"0: all cores, " + here}},
      {"hebbian", {"1..nproc: 1.." + here}},
      {"pi", {"1..nproc: 1.." + here}}};
  for (const auto& [app, parts] : apps) {
    const std::string bin = std::string(PDNN_BIN_DIR) + "/" + app;
    const testing::CommandResult r = testing::run_command(bin + " --help");
    if (r.status != 0 && !testing::exists(bin)) continue;  // not built here (no OpenCV, ...)
    EXPECT_EQ(r.status, 0) << app << "\n" << r.output;
    // CLI11 wraps long help texts: compare with the line breaks and indentation taken out.
    std::string flat;
    for (size_t i = 0; i < r.output.size(); ++i) {
      if (r.output[i] == '\n') {
        while (i + 1 < r.output.size() && r.output[i + 1] == ' ') ++i;
        flat += ' ';
      } else {
        flat += r.output[i];
      }
    }
    for (const std::string& part : parts)
      EXPECT_NE(flat.find(part), std::string::npos) << app << ": no \"" << part << "\" in\n"
                                                    << r.output;
  }
}

}  // namespace
}  // namespace pdnn
