// Timing statistics shared by the benchmarks, and the app guard.
#include <gtest/gtest.h>

#include <stdexcept>

#include "core/error.h"
#include "run/timing.h"

using namespace pdnn;

TEST(TimingStats, MedianMinMaxForOddAndEvenCounts) {
  const TimingStats odd = timing_stats({5.0, 1.0, 3.0});
  EXPECT_EQ(odd.median, 3.0);
  EXPECT_EQ(odd.min, 1.0);
  EXPECT_EQ(odd.max, 5.0);
  EXPECT_EQ(odd.n, 3u);
  EXPECT_EQ(timing_stats({4.0, 1.0, 2.0, 10.0}).median, 3.0);
  EXPECT_THROW(timing_stats({}), Error);
}

TEST(RunApp, ExceptionsBecomeExitStatusOne) {
  EXPECT_EQ(run_app("t", [](int, char**) { return 7; }, 0, nullptr), 7);
  testing::internal::CaptureStderr();
  EXPECT_EQ(run_app("t", [](int, char**) -> int { throw std::runtime_error("boom"); }, 0, nullptr),
            1);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "t: error: boom\n");
}
