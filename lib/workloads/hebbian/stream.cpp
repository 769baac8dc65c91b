// STREAM-like floors (stream.h).
#include "workloads/hebbian/stream.h"

#include <omp.h>

#include "core/barrier.h"
#include "core/error.h"
#include "core/parallel.h"

namespace pdnn {
namespace cpu {
namespace {

// `passes` times body(i0, i1) over each thread's contiguous band of [0, n), a barrier between
// (the Hebbian run's kind of barrier, so the floor pays what the run pays).
template <typename Body>
void each_pass(const char* what, int64_t n, int64_t passes, CpuExec e, Body body) {
  PDNN_CHECK(n >= 0 && passes >= 0 && e.threads >= 1, "%s: n = %lld, passes = %lld, threads = %d",
             what, static_cast<long long>(n), static_cast<long long>(passes), e.threads);
  SpinYieldBarrier barrier;
#pragma omp parallel num_threads(e.threads)
  {
    observe_team();
#pragma omp single
    barrier.set_threads(omp_get_num_threads());
    const int nt = omp_get_num_threads(), tid = omp_get_thread_num();
    const int64_t i0 = n * tid / nt, i1 = n * (tid + 1) / nt;
    for (int64_t p = 0; p < passes; ++p) {
      body(i0, i1);
      barrier.wait();
    }
  }
}

}  // namespace

template <typename T>
void stream_scale(T* a, T s, int64_t n, int64_t passes, CpuExec e) {
  each_pass("stream_scale", n, passes, e, [=](int64_t i0, int64_t i1) {
#pragma omp simd
    for (int64_t i = i0; i < i1; ++i) a[i] = s * a[i];
  });
}

template <typename T>
void stream_copy(T* dst, const T* src, int64_t n, int64_t passes, CpuExec e) {
  each_pass("stream_copy", n, passes, e, [=](int64_t i0, int64_t i1) {
#pragma omp simd
    for (int64_t i = i0; i < i1; ++i) dst[i] = src[i];
  });
}

template void stream_scale<float>(float*, float, int64_t, int64_t, CpuExec);
template void stream_scale<double>(double*, double, int64_t, int64_t, CpuExec);
template void stream_copy<float>(float*, const float*, int64_t, int64_t, CpuExec);
template void stream_copy<double>(double*, const double*, int64_t, int64_t, CpuExec);

}  // namespace cpu
}  // namespace pdnn
