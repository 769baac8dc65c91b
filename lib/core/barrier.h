// A barrier for the threads of one OpenMP region that spins briefly, then yields its core.
// For loops that meet at a barrier every few microseconds (the W6 reservoir: one per step).
// With a core to itself each thread arrives within microseconds and the spin catches it. On a
// machine shared with other work a partner may be descheduled; libgomp's barrier then spins
// through the waiting thread's time slice (its default policy spins ~300k times before it
// sleeps), which at 2 threads on a busy 2-core machine made a W6 step 10-20x slower than with
// OMP_WAIT_POLICY=passive. Yielding hands the core to whoever the waiter is waiting for.
#pragma once
#include <sched.h>

#include <atomic>

namespace pdnn {

// Inside the region: `#pragma omp single` then set_threads(omp_get_num_threads()) (the single's
// own barrier publishes it), as OpenMP may give fewer threads than num_threads asked for.
class SpinYieldBarrier {
 public:
  SpinYieldBarrier() = default;
  void set_threads(int threads) { threads_ = threads; }
  SpinYieldBarrier(const SpinYieldBarrier&) = delete;
  SpinYieldBarrier& operator=(const SpinYieldBarrier&) = delete;

  // Every thread's writes before wait() are visible to every thread after it: the arrivals
  // form a release sequence on count_ that the last arriver acquires, and its release of the
  // new generation is what the waiters acquire.
  void wait() {
    const unsigned gen = gen_.load(std::memory_order_acquire);
    if (count_.fetch_add(1, std::memory_order_acq_rel) + 1 == threads_) {
      count_.store(0, std::memory_order_relaxed);
      gen_.fetch_add(1, std::memory_order_release);
      return;
    }
    for (int spins = 0; gen_.load(std::memory_order_acquire) == gen; ++spins) {
      if (spins < kSpins) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      } else {
        sched_yield();
      }
    }
  }

 private:
  static constexpr int kSpins = 100;  // a few microseconds of pause instructions
  int threads_ = 1;
  alignas(64) std::atomic<int> count_{0};
  alignas(64) std::atomic<unsigned> gen_{0};
};

}  // namespace pdnn
