// The OpenBLAS core without being told (run/blas_core.h): the decision with the detected core
// and the CPU's flags faked, and the re-execution end to end on this machine's OpenBLAS, with a
// misdetection pretended by the test driver bin/blas_core_probe (OpenBLAS reads CPUID, which a
// test cannot fake). OPENBLAS_CORETYPE is unset only in those child processes' environments.
#include <gtest/gtest.h>

#include <string>

#include "run/blas_core.h"
#include "testing.h"

namespace pdnn {
namespace {

// /proc/cpuinfo flags of three machines: an AVX-512 one with BF16 (this development machine,
// an AMD EPYC), a Skylake-SP without it, an AVX2 Zen 2, and an old SSE-only one.
const char* kFlagsBf16 =
    "fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 bmi2 avx512f avx512dq avx512ifma avx512cd "
    "avx512bw avx512vl avx_vnni avx512_bf16 avx512vbmi avx512_vnni";
const char* kFlagsSkx = "fpu sse sse2 ssse3 fma sse4_1 avx avx2 avx512f avx512dq avx512cd avx512bw "
                        "avx512vl";
const char* kFlagsZen2 = "fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 bmi2 sha_ni";
const char* kFlagsSse = "fpu sse sse2 pni ssse3 sse4_1";

BlasCoreInputs inputs(const char* env_core, const char* detected, const char* running,
                      const char* flags) {
  return {env_core, detected, running, cpu_features_from_flags(flags)};
}

TEST(BlasCore, CoreNamesByInstructionTier) {
  EXPECT_EQ(blas_core_isa("Prescott"), BlasIsa::Sse);
  EXPECT_EQ(blas_core_isa("Nehalem"), BlasIsa::Sse);
  EXPECT_EQ(blas_core_isa("Sandybridge"), BlasIsa::Avx);
  EXPECT_EQ(blas_core_isa("Haswell"), BlasIsa::Avx2);
  EXPECT_EQ(blas_core_isa("Zen"), BlasIsa::Avx2);
  EXPECT_EQ(blas_core_isa("SkylakeX"), BlasIsa::Avx512);
  EXPECT_EQ(blas_core_isa("cooperlake"), BlasIsa::Avx512);  // OpenBLAS ignores the case
  EXPECT_EQ(blas_core_isa("LoongsonX"), BlasIsa::Unknown);
}

TEST(BlasCore, CpuFeaturesFromFlags) {
  EXPECT_EQ(cpu_features_from_flags(kFlagsBf16).isa, BlasIsa::Avx512);
  EXPECT_TRUE(cpu_features_from_flags(kFlagsBf16).avx512_bf16);
  EXPECT_EQ(cpu_features_from_flags(kFlagsSkx).isa, BlasIsa::Avx512);
  EXPECT_FALSE(cpu_features_from_flags(kFlagsSkx).avx512_bf16);
  EXPECT_EQ(cpu_features_from_flags(kFlagsZen2).isa, BlasIsa::Avx2);
  EXPECT_EQ(cpu_features_from_flags(kFlagsSse).isa, BlasIsa::Sse);
  EXPECT_EQ(cpu_features_from_flags("").isa, BlasIsa::Sse);
  // AVX-512F alone (Knights Landing: no BW/VL) cannot run SkylakeX's kernels; AVX2 without FMA
  // cannot run Haswell's; "avx512f" is a whole word, not a prefix of another flag.
  EXPECT_EQ(cpu_features_from_flags("avx avx2 fma avx512f avx512cd").isa, BlasIsa::Avx2);
  EXPECT_EQ(cpu_features_from_flags("avx avx2").isa, BlasIsa::Avx);
  EXPECT_EQ(cpu_features_from_flags("avx2 fma avx512fx").isa, BlasIsa::Avx2);
  EXPECT_EQ(best_blas_core(cpu_features_from_flags(kFlagsBf16)), "Cooperlake");
  EXPECT_EQ(best_blas_core(cpu_features_from_flags(kFlagsSkx)), "SkylakeX");
  EXPECT_EQ(best_blas_core(cpu_features_from_flags(kFlagsZen2)), "Haswell");
  EXPECT_EQ(best_blas_core(cpu_features_from_flags("avx")), "Sandybridge");
  EXPECT_EQ(best_blas_core(cpu_features_from_flags(kFlagsSse)), "");
}

// The machine: OpenBLAS 0.3.21 did not know the CPU and ran Prescott's SSE3 kernels.
TEST(BlasCore, MisdetectedCoreIsReplacedByTheBestTheCpuRuns) {
  EXPECT_EQ(decide_blas_core(inputs("", "", "Prescott", kFlagsSkx)).set_core, "SkylakeX");
  EXPECT_EQ(decide_blas_core(inputs("", "", "Prescott", kFlagsBf16)).set_core, "Cooperlake");
  EXPECT_EQ(decide_blas_core(inputs("", "", "Prescott", kFlagsZen2)).set_core, "Haswell");
  EXPECT_EQ(decide_blas_core(inputs("", "", "Sandybridge", kFlagsZen2)).set_core, "Haswell");
  // An AVX2 core on an AVX-512 CPU lacks a tier too.
  EXPECT_EQ(decide_blas_core(inputs("", "", "Haswell", kFlagsSkx)).set_core, "SkylakeX");
}

TEST(BlasCore, AGoodDetectionIsLeftAlone) {
  for (auto [running, flags] : {std::pair{"SkylakeX", kFlagsSkx}, {"SkylakeX", kFlagsBf16},
                                {"Cooperlake", kFlagsBf16}, {"Zen", kFlagsZen2},
                                {"Haswell", kFlagsZen2}, {"Prescott", kFlagsSse},
                                {"LoongsonX", kFlagsSkx}}) {
    const BlasCoreDecision d = decide_blas_core(inputs("", "", running, flags));
    EXPECT_EQ(d.set_core, "") << running;
    EXPECT_EQ(d.text, running);
  }
}

// A machine that sets OPENBLAS_CORETYPE does so on purpose (older OpenBLAS builds misbehave
// on CPUs they misdetect): kept, even where the CPU could run more.
TEST(BlasCore, TheEnvironmentsCoreIsKept) {
  BlasCoreDecision d = decide_blas_core(inputs("Haswell", "", "Haswell", kFlagsBf16));
  EXPECT_EQ(d.set_core, "");
  EXPECT_EQ(d.text, "Haswell (OPENBLAS_CORETYPE from the environment; the CPU has AVX-512)");
  d = decide_blas_core(inputs("Prescott", "", "Prescott", kFlagsSkx));
  EXPECT_EQ(d.set_core, "");
  d = decide_blas_core(inputs("SkylakeX", "", "SkylakeX", kFlagsSkx));
  EXPECT_EQ(d.text, "SkylakeX (OPENBLAS_CORETYPE from the environment)");
  d = decide_blas_core(inputs("Bogus", "", "Cooperlake", kFlagsBf16));
  EXPECT_EQ(d.set_core, "");
  EXPECT_EQ(d.text,
            "Cooperlake (OPENBLAS_CORETYPE from the environment: Bogus, which this OpenBLAS does "
            "not run)");
}

// After the re-execution (or under a make target that exported pdnn's choice) the marker says
// what OpenBLAS had detected, and nothing is done twice.
TEST(BlasCore, TheReexecutedProcessSaysWhatHappened) {
  BlasCoreDecision d = decide_blas_core(inputs("SkylakeX", "Prescott", "SkylakeX", kFlagsSkx));
  EXPECT_EQ(d.set_core, "");
  EXPECT_EQ(d.text,
            "SkylakeX (OpenBLAS detected Prescott on an AVX-512 CPU; OPENBLAS_CORETYPE set)");
  d = decide_blas_core(inputs("Cooperlake", "Prescott", "SkylakeX", kFlagsBf16));
  EXPECT_EQ(d.text,
            "SkylakeX (OpenBLAS detected Prescott on an AVX-512 CPU; OPENBLAS_CORETYPE set to "
            "Cooperlake, which this OpenBLAS does not run)");
  // The exec failed: the variable was taken back, the marker stays, nothing is tried again.
  d = decide_blas_core(inputs("", "Prescott", "Prescott", kFlagsZen2));
  EXPECT_EQ(d.set_core, "");
  EXPECT_EQ(d.text,
            "Prescott (OpenBLAS detected it on an AVX2 CPU; OPENBLAS_CORETYPE=Haswell runs its "
            "kernels)");
}

TEST(BlasCore, EnvAssignmentsOnlyWhenPdnnMadeThem) {
  EXPECT_EQ(blas_core_env(inputs("SkylakeX", "Prescott", "SkylakeX", kFlagsSkx)),
            "OPENBLAS_CORETYPE=SkylakeX PDNN_OPENBLAS_DETECTED=Prescott");
  EXPECT_EQ(blas_core_env(inputs("Haswell", "", "Haswell", kFlagsSkx)), "");
  EXPECT_EQ(blas_core_env(inputs("", "", "Cooperlake", kFlagsBf16)), "");
  EXPECT_EQ(blas_core_env(inputs("", "Prescott", "Prescott", kFlagsBf16)), "");
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

const std::string kProbe = std::string(PDNN_BIN_DIR) + "/blas_core_probe";

// End to end: a process whose OpenBLAS (pretendedly) picked Prescott executes itself once more
// and then runs the best core this CPU has, for real.
TEST(BlasCore, ReexecutionRunsTheBestCoreForReal) {
  const std::string best = best_blas_core(cpu_features());
  if (best.empty()) GTEST_SKIP() << "this CPU has no AVX: OpenBLAS's own choice stands";
  const std::string isa = blas_isa_name(cpu_features().isa);
  const auto r = testing::run_command("env -u OPENBLAS_CORETYPE -u PDNN_OPENBLAS_DETECTED " +
                                      kProbe + " --pretend-detected Prescott");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("execs 2\n"), std::string::npos) << r.output;
  EXPECT_NE(lower(r.output).find("running " + lower(best) + "\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("BLAS " + best + " (OpenBLAS detected Prescott on an " + isa +
                          " CPU; OPENBLAS_CORETYPE set)"),
            std::string::npos)
      << r.output;
}

TEST(BlasCore, ReexecutionLeavesTheEnvironmentsCoreAlone) {
  const auto r = testing::run_command("env -u PDNN_OPENBLAS_DETECTED OPENBLAS_CORETYPE=Prescott " +
                                      kProbe + " --pretend-detected Prescott");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("execs 1\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("running Prescott\n"), std::string::npos) << r.output;
}

// What the make targets export for their Python side: the app prints pdnn's assignments.
TEST(BlasCore, AppPrintsTheAssignmentsItMade) {
  const std::string app = std::string(PDNN_BIN_DIR) + "/blas_core";
  auto r = testing::run_command("env OPENBLAS_CORETYPE=Prescott PDNN_OPENBLAS_DETECTED=Katmai " +
                                app + " --env");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, "OPENBLAS_CORETYPE=Prescott PDNN_OPENBLAS_DETECTED=Katmai\n");
  r = testing::run_command("env -u PDNN_OPENBLAS_DETECTED OPENBLAS_CORETYPE=Prescott " + app +
                           " --env");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, "");
  r = testing::run_command("env -u PDNN_OPENBLAS_DETECTED OPENBLAS_CORETYPE=Prescott " + app);
  EXPECT_EQ(r.output.rfind("BLAS Prescott (OPENBLAS_CORETYPE from the environment", 0), 0u)
      << r.output;
}

}  // namespace
}  // namespace pdnn
