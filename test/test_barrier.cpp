// SpinYieldBarrier (core/barrier.h): no thread leaves before all arrived, and what each wrote
// before the barrier is seen by all after it, round after round, at 2 to 4 threads (more
// threads than this machine's cores: the yielding path runs too).
#include <gtest/gtest.h>
#include <omp.h>

#include <vector>

#include "core/barrier.h"

namespace pdnn {
namespace {

TEST(SpinYieldBarrier, EveryWriteIsSeenAfterTheBarrier) {
  for (int threads : {2, 3, 4}) {
    const int rounds = 20000;
    std::vector<int> slot(64 * threads, -1);  // a cache line apart
    int bad = 0, team = 0;
    SpinYieldBarrier barrier;
#pragma omp parallel num_threads(threads) reduction(+ : bad)
    {
#pragma omp single
      {
        team = omp_get_num_threads();
        barrier.set_threads(team);
      }
      const int me = omp_get_thread_num();
      for (int r = 0; r < rounds; ++r) {
        slot[64 * me] = r;
        barrier.wait();
        for (int t = 0; t < team; ++t) bad += slot[64 * t] != r;
        barrier.wait();  // nobody writes round r+1 before all have read round r
      }
    }
    EXPECT_EQ(bad, 0) << threads << " threads";
    EXPECT_EQ(team, threads);
  }
}

}  // namespace
}  // namespace pdnn
