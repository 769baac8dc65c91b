// Timing statistics shared by the benchmarks, and the app guard.
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <thread>

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

// The process's age (Linux): not negative, and it grows as the wall clock does (both readings
// are in 10 ms ticks: a 200 ms sleep shows as 0.18 s or more).
TEST(ProcessSeconds, GrowsWithTheWallClock) {
  const double a = process_seconds();
  ASSERT_GE(a, 0.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const double b = process_seconds();
  EXPECT_GE(b - a, 0.18);
  EXPECT_LT(b - a, 60.0);  // a loaded machine may deschedule the test, not for a minute
}
