// Parallel helpers. OpenMP on the outermost independent loop only, and only above a size
// threshold: below it a parallel region's fork/join (~1-2 us) costs more than the loop.
//
// Every region in lib/ names its team size from the CpuExec it was given (num_threads), never
// from the process's OpenMP setting: two Contexts with different thread counts may run in one
// process, and neither may change the other's threads. Each region's threads report their team
// size to observe_team(), so a test can check that (test_threads.cpp).
#pragma once
#include <omp.h>

#include <atomic>
#include <cstdint>

#include "core/exec.h"

namespace pdnn {

// Elements of simple elementwise work below which a loop stays serial.
constexpr int64_t kParallelMin = 1 << 15;

// Called by every thread of every parallel region in lib/ with the region's team size. For
// tests only (nullptr, the default, in every app); it must be thread-safe.
using TeamObserver = void (*)(int team_size);
void set_team_observer(TeamObserver f);

namespace detail {
extern std::atomic<TeamObserver> team_observer;
}

// First statement of every parallel region's body.
inline void observe_team() {
  if (TeamObserver f = detail::team_observer.load(std::memory_order_relaxed))
    f(omp_get_num_threads());
}

// body(i) for i in [0, n) on e.threads threads, statically scheduled (the partition of
// `parallel for schedule(static)`), or on the calling thread alone when !worth.
// For a long body: GCC 12 calls a lambda that long instead of inlining it, and a called body
// re-reads its captures from memory in its loops (a float store might change a captured float),
// which keeps them scalar. [=](int64_t i) PDNN_INLINE { ... } inlines it.
#define PDNN_INLINE __attribute__((always_inline))

// Each thread runs a copy of the closure: read through the shared one, its captures stay in
// memory and a load under a condition (relu_backward's dy[i]) keeps GCC 12 from vectorising.
template <typename F>
inline void parallel_for(CpuExec e, int64_t n, bool worth, const F& body) {
#pragma omp parallel num_threads(e.threads) if (worth && e.threads > 1)
  {
    observe_team();
    const F f = body;
#pragma omp for schedule(static) nowait
    for (int64_t i = 0; i < n; ++i) f(i);
  }
}

}  // namespace pdnn

// The usual `worth` argument of parallel_for: n elements of cheap work.
#define PDNN_PAR(n) ((n) >= ::pdnn::kParallelMin)
