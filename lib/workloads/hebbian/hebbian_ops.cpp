// W6 Hebbian reservoir, CPU kernels and the ops:: dispatch over Tensors (contracts in
// hebbian.h). The row loops are written once (oja_row_dot and friends) and shared by the
// single-step ops and the fused run, so both do the same arithmetic per element.
#include "workloads/hebbian/hebbian_ops.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/barrier.h"
#include "core/error.h"
#include "core/parallel.h"
#include "ops/dispatch.h"
#include "ops/simd_tanh.h"

namespace pdnn {

template <typename T>
HebbianParams<T> hebbian_params(int64_t n, double lr, double leak) {
  PDNN_CHECK(n >= 1, "hebbian: n = %lld units, need at least 1", static_cast<long long>(n));
  PDNN_CHECK(leak >= 0.0 && leak <= 1.0,
             "hebbian: leak = %g, need 0 (W6 as written, not leaky) or a rate in (0, 1]", leak);
  PDNN_CHECK(std::isfinite(lr) && lr >= 0.0, "hebbian: Oja rate lr = %g, need a finite lr >= 0",
             lr);
  HebbianParams<T> p;
  p.n = n;
  p.lr = static_cast<T>(lr);
  p.keep = leak == 0.0 ? T(1) : static_cast<T>(1.0 - leak);
  p.gain = leak == 0.0 ? T(1) : static_cast<T>(leak);
  return p;
}

template HebbianParams<float> hebbian_params<float>(int64_t, double, double);
template HebbianParams<double> hebbian_params<double>(int64_t, double, double);

namespace cpu {
namespace {

// Oja's update of one element, w + lr (x_i x_j - x_i^2 w) with b = lr x_i, d = lr x_i^2, as two
// fused multiply-adds: (w + b x_j) - d w. Each rounds at w's scale, so an element takes two
// roundings of about u |w| per step (the literal formula takes one): 30% less arithmetic where
// W sits in L2 and the loop is compute-bound (n = 500, one thread: 29 instead of 42 us a step).
// Not folded into w (1 - lr x_i^2) + b x_j: that would round the factor to float, an error of
// up to 3e-8 relative in every element and of one sign along a row.
template <typename T>
inline T oja(T w, T xj, T b, T d) {
#if defined(__FMA__) || defined(__aarch64__)
  return std::fma(-d, w, std::fma(b, xj, w));
#else  // no FMA instruction (a build without -march): std::fma would be a library call
  return (w + b * xj) - d * w;
#endif
}

// Accumulator lanes per row loop: four 256-bit registers, so four independent FMA chains hide
// the FMA latency (one chain made the N=1000 step latency-bound at ~190 us). The lane sums are
// added in one fixed order, so a row's result does not depend on the thread that computes it.
template <typename T>
constexpr int kLanes = 128 / static_cast<int>(sizeof(T));

template <typename T>
inline T sum_lanes(const T* a) {
  T s = 0;
  for (int k = 0; k < kLanes<T>; ++k) s += a[k];
  return s;
}

// sum_j w[j] x[j].
template <typename T>
inline T dot_row(const T* __restrict w, const T* __restrict x, int64_t n) {
  T a[kLanes<T>] = {};
  int64_t j = 0;
  for (; j + kLanes<T> <= n; j += kLanes<T>) {
#pragma omp simd
    for (int k = 0; k < kLanes<T>; ++k) a[k] += w[j + k] * x[j + k];
  }
  for (int k = 0; j + k < n; ++k) a[k] += w[j + k] * x[j + k];
  return sum_lanes(a);
}

// Row i of W updated by Oja's rule (b = lr x_i, d = lr x_i^2), then its dot product with x:
// one pass over the row.
template <typename T>
inline T oja_row_dot(T* __restrict w, const T* __restrict x, int64_t n, T b, T d) {
  T a[kLanes<T>] = {};
  int64_t j = 0;
  for (; j + kLanes<T> <= n; j += kLanes<T>) {
#pragma omp simd
    for (int k = 0; k < kLanes<T>; ++k) {
      const T v = oja(w[j + k], x[j + k], b, d);
      w[j + k] = v;
      a[k] += v * x[j + k];
    }
  }
  for (int k = 0; j + k < n; ++k) {
    const T v = oja(w[j + k], x[j + k], b, d);
    w[j + k] = v;
    a[k] += v * x[j + k];
  }
  return sum_lanes(a);
}

template <typename T>
inline void oja_row(T* __restrict w, const T* __restrict x, int64_t n, T b, T d) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) w[j] = oja(w[j], x[j], b, d);
}

// True when every w[j] is finite: z = sum w[j] * 0 stays 0 and turns NaN at the first inf or
// NaN (inf * 0 = NaN); without -ffinite-math-only the compiler may not fold w * 0 to 0.
template <typename T>
inline bool row_finite(const T* w, int64_t n) {
  T z = 0;
#pragma omp simd reduction(+ : z)
  for (int64_t j = 0; j < n; ++j) z += w[j] * T(0);
  return z == T(0);
}

template <typename T>
inline bool has_zero(const T* x, int64_t n) {
  bool zero = false;
  for (int64_t j = 0; j < n; ++j) zero |= x[j] == T(0);
  return zero;
}

template <typename T>
inline T recur(T x, T pre, T keep, T gain) {
  return keep * x + gain * simd_tanh(pre);
}

// x_out[i] = recur(x[i], pre[i]) for i in [i0, i1): a vector loop (x_out may be pre).
template <typename T>
inline void recur_range(T* x_out, const T* x, const T* pre, int64_t i0, int64_t i1, T keep,
                        T gain) {
#pragma omp simd
  for (int64_t i = i0; i < i1; ++i) x_out[i] = recur(x[i], pre[i], keep, gain);
}

void check_exec(const char* what, int64_t n, CpuExec e) {
  PDNN_CHECK(n >= 0, "%s: size %lld is negative", what, static_cast<long long>(n));
  PDNN_CHECK(e.threads >= 1, "%s: threads = %d, need at least 1", what, e.threads);
}

// Rows [first, last) of thread tid out of nt: contiguous, the same split every call.
inline void row_range(int64_t n, int tid, int nt, int64_t* first, int64_t* last) {
  *first = n * tid / nt;
  *last = n * (tid + 1) / nt;
}

// Below this many elements of W a parallel region costs more than it saves.
constexpr int64_t kParallelMinWork = 1 << 14;

inline int threads_for(int64_t work, CpuExec e) {
  return work >= kParallelMinWork ? e.threads : 1;
}

void atomic_min(std::atomic<int64_t>& a, int64_t v) {
  int64_t cur = a.load(std::memory_order_relaxed);
  while (v < cur && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

}  // namespace

template <typename T>
void gemv(T* y, const T* A, const T* x, int64_t m, int64_t n, CpuExec e) {
  check_exec("gemv", std::min(m, n), e);
  parallel_for(e, m, m * n >= kParallelMinWork,
               [=](int64_t i) { y[i] = dot_row(A + i * n, x, n); });
}

template <typename T>
void reservoir_update(T* x_out, const T* x, const T* pre, const T* win, const T* u,
                      const HebbianParams<T>& p, CpuExec e) {
  check_exec("reservoir_update", p.n, e);
  const T ut = *u;
  // tanh costs a few ns: worth threads from a few thousand units on.
#pragma omp parallel num_threads(threads_for(p.n * 8, e))
  {
    observe_team();
#pragma omp for simd schedule(static) nowait
    for (int64_t i = 0; i < p.n; ++i) x_out[i] = recur(x[i], pre[i] + win[i] * ut, p.keep, p.gain);
  }
}

template <typename T>
void oja_update(T* W, const T* x, T lr, int64_t n, CpuExec e) {
  check_exec("oja_update", n, e);
  parallel_for(e, n, n * n >= kParallelMinWork, [=](int64_t i) {
    const T b = lr * x[i];
    oja_row(W + i * n, x, n, b, b * x[i]);
  });
}

template <typename T>
void first_nonfinite(int64_t* index, const T* v, int64_t n, CpuExec e) {
  check_exec("first_nonfinite", n, e);
  int64_t first = n;
  // Each thread scans its own contiguous part and stops at its first hit; the minimum wins.
#pragma omp parallel num_threads(threads_for(n, e)) reduction(min : first)
  {
    observe_team();
    int64_t i0, i1;
    row_range(n, omp_get_thread_num(), omp_get_num_threads(), &i0, &i1);
    for (int64_t i = i0; i < i1; ++i)
      if (!std::isfinite(v[i])) {
        first = i;
        break;
      }
  }
  *index = first < n ? first : -1;
}

template <typename T>
void hebbian_run(T* W, T* x, int64_t* first_nonfinite_step, const T* win, const T* u,
                 int64_t steps, const HebbianParams<T>& p, T* x_scratch, CpuExec e) {
  const int64_t n = p.n;
  check_exec("hebbian_run", n, e);
  PDNN_CHECK(n >= 1 && steps >= 0, "hebbian_run: n = %lld, steps = %lld: need n >= 1, steps >= 0",
             static_cast<long long>(n), static_cast<long long>(steps));
  PDNN_CHECK(W && x && first_nonfinite_step && win && (u || steps == 0) && x_scratch,
             "hebbian_run: a null pointer");
  PDNN_CHECK(x_scratch != x, "hebbian_run: x_scratch must not be x (x is double-buffered)");
  *first_nonfinite_step = -1;
  if (steps == 0) return;

  // Pass k (0 .. steps) walks W once: pass 0 computes step 1 from (W_0, x_0); pass k in
  // 1 .. steps-1 makes W_k = oja(W_{k-1}, x_k) and step k+1 from it; pass `steps` makes W_T.
  // x_k lives in buf[k % 2]. A thread that finds a non-finite value records
  // key = 2 pass + (0: in W_pass | 1: in x_{pass+1}); the minimum key is the first bad step
  // (key/2 + key%2), and after the barrier every thread sees the same verdict for this pass
  // (keys written meanwhile by faster threads belong to later passes), so all stop together.
  //
  // Checking W costs nothing extra: an inf or NaN in row i times a nonzero x_j makes the row's
  // dot product inf or NaN, so only rows whose sum is not finite (a NaN/inf in W, or a sum that
  // overflowed from finite terms) are scanned again. Where x has an exact zero (x_0 = 0 at
  // pass 0) that argument fails, and every row is scanned.
  T* buf[2] = {x, x_scratch};
  std::atomic<int64_t> key{std::numeric_limits<int64_t>::max()};
  const int threads = static_cast<int>(std::min<int64_t>(e.threads, n));
  SpinYieldBarrier barrier;  // not `omp barrier`: see core/barrier.h
#pragma omp parallel num_threads(threads)
  {
    observe_team();
#pragma omp single
    barrier.set_threads(omp_get_num_threads());
    int64_t i0, i1;
    row_range(n, omp_get_thread_num(), omp_get_num_threads(), &i0, &i1);
    for (int64_t pass = 0; pass <= steps; ++pass) {
      const T* xc = buf[pass & 1];
      T* xn = buf[(pass + 1) & 1];
      bool w_bad = false, x_bad = false;
      if (pass == steps) {
        for (int64_t i = i0; i < i1; ++i) {
          T* wi = W + i * n;
          const T b = p.lr * xc[i];
          oja_row(wi, xc, n, b, b * xc[i]);
          w_bad |= !row_finite(wi, n);  // the row is in L1: a cheap second look, once per run
          if (xc != x) x[i] = xc[i];    // x_T ends in x; nobody reads x in this pass
        }
      } else {
        const bool scan_all = has_zero(xc, n);
        for (int64_t i = i0; i < i1; ++i) {
          T* wi = W + i * n;
          const T b = p.lr * xc[i];
          const T acc = pass == 0 ? dot_row(wi, xc, n) : oja_row_dot(wi, xc, n, b, b * xc[i]);
          if (scan_all || !std::isfinite(acc)) w_bad |= !row_finite(wi, n);
          xn[i] = acc + win[i] * u[pass];
        }
        // tanh over the thread's rows at once, vectorised, after the row loop.
        recur_range(xn, xc, xn, i0, i1, p.keep, p.gain);
        x_bad = !row_finite(xn + i0, i1 - i0);
      }
      if (w_bad || x_bad) atomic_min(key, 2 * pass + (w_bad ? 0 : 1));
      if (pass == steps) break;
      barrier.wait();
      if ((key.load(std::memory_order_relaxed) >> 1) <= pass) break;
    }
  }
  const int64_t k = key.load();
  if (k != std::numeric_limits<int64_t>::max()) *first_nonfinite_step = (k >> 1) + (k & 1);
}

#define PDNN_HEBBIAN_CPU(T)                                                                    \
  template void gemv<T>(T*, const T*, const T*, int64_t, int64_t, CpuExec);                   \
  template void reservoir_update<T>(T*, const T*, const T*, const T*, const T*,               \
                                    const HebbianParams<T>&, CpuExec);                        \
  template void oja_update<T>(T*, const T*, T, int64_t, CpuExec);                             \
  template void first_nonfinite<T>(int64_t*, const T*, int64_t, CpuExec);                     \
  template void hebbian_run<T>(T*, T*, int64_t*, const T*, const T*, int64_t,                 \
                               const HebbianParams<T>&, T*, CpuExec);
PDNN_HEBBIAN_CPU(float)
PDNN_HEBBIAN_CPU(double)
#undef PDNN_HEBBIAN_CPU

}  // namespace cpu

namespace ops {
namespace {

// pdnn::Error "<op>: <name> is float32 (4,4), need float64 (4,4)" unless t has `dtype` and `shape`.
void check_tensor(const char* op, const char* name, const Tensor& t, DType dtype,
                  const Shape& shape) {
  PDNN_CHECK(t.dtype() == dtype && t.shape() == shape, "%s: %s is %s %s, need %s %s", op, name,
             dtype_name(t.dtype()), t.shape().str().c_str(), dtype_name(dtype),
             shape.str().c_str());
}

template <typename T>
void check_tensor(const char* op, const char* name, const Tensor& t, const Shape& shape) {
  check_tensor(op, name, t, dtype_of<T>(), shape);
}

// W (n,n) with n >= 1: its n.
int64_t square_side(const char* op, const Tensor& W) {
  PDNN_CHECK(W.rank() == 2 && W.shape(0) == W.shape(1) && W.shape(0) >= 1,
             "%s: W is %s, need a square (n,n) matrix with n >= 1", op, W.shape().str().c_str());
  return W.shape(0);
}

}  // namespace

template <typename T>
void gemv(Context& ctx, Tensor& y, const Tensor& A, const Tensor& x) {
  const Device d = op_device("gemv", {&y, &A, &x});
  PDNN_CHECK(A.rank() == 2, "gemv: A is %s, need a matrix (m,n)", A.shape().str().c_str());
  const int64_t m = A.shape(0), n = A.shape(1);
  check_tensor<T>("gemv", "A", A, A.shape());
  check_tensor<T>("gemv", "x", x, Shape{n});
  check_tensor<T>("gemv", "y", y, Shape{m});
  PDNN_DISPATCH(ctx, d, gemv, y.data<T>(), A.data<T>(), x.data<T>(), m, n);
}

template <typename T>
void reservoir_update(Context& ctx, Tensor& x_out, const Tensor& x, const Tensor& pre,
                      const Tensor& win, const Tensor& u, const HebbianParams<T>& p) {
  const Device d = op_device("reservoir_update", {&x_out, &x, &pre, &win, &u});
  PDNN_CHECK(p.n >= 1, "reservoir_update: n = %lld units, need at least 1",
             static_cast<long long>(p.n));
  const Shape vec{p.n};
  check_tensor<T>("reservoir_update", "x_out", x_out, vec);
  check_tensor<T>("reservoir_update", "x", x, vec);
  check_tensor<T>("reservoir_update", "pre", pre, vec);
  check_tensor<T>("reservoir_update", "win", win, vec);
  check_tensor<T>("reservoir_update", "u (this step's input)", u, Shape{1});
  PDNN_DISPATCH(ctx, d, reservoir_update, x_out.data<T>(), x.data<T>(), pre.data<T>(),
                win.data<T>(), u.data<T>(), p);
}

template <typename T>
void oja_update(Context& ctx, Tensor& W, const Tensor& x, T lr) {
  const Device d = op_device("oja_update", {&W, &x});
  const int64_t n = square_side("oja_update", W);
  check_tensor<T>("oja_update", "W", W, W.shape());
  check_tensor<T>("oja_update", "x", x, Shape{n});
  PDNN_DISPATCH(ctx, d, oja_update, W.data<T>(), x.data<T>(), lr, n);
}

template <typename T>
void first_nonfinite(Context& ctx, Tensor& index, const Tensor& v) {
  const Device d = op_device("first_nonfinite", {&index, &v});
  check_tensor("first_nonfinite", "index", index, DType::I64, Shape{1});
  check_tensor<T>("first_nonfinite", "v", v, v.shape());
  // An empty tensor has no storage (data() throws), but holds no non-finite value either.
  const T* vp = v.numel() > 0 ? v.data<T>() : nullptr;
  PDNN_DISPATCH(ctx, d, first_nonfinite, index.data<int64_t>(), vp, v.numel());
}

template <typename T>
void hebbian_run(Context& ctx, Tensor& W, Tensor& x, Tensor& first_nonfinite_step,
                 const Tensor& win, const Tensor& u, int64_t first, int64_t steps,
                 const HebbianParams<T>& p, Tensor& x_scratch) {
  const Device d = op_device("hebbian_run", {&W, &x, &first_nonfinite_step, &win, &u, &x_scratch});
  const int64_t n = square_side("hebbian_run", W);
  PDNN_CHECK(p.n == n, "hebbian_run: W is %s, but the parameters are for n = %lld units",
             W.shape().str().c_str(), static_cast<long long>(p.n));
  check_tensor<T>("hebbian_run", "W", W, W.shape());
  check_tensor<T>("hebbian_run", "x", x, Shape{n});
  check_tensor<T>("hebbian_run", "win", win, Shape{n});
  check_tensor<T>("hebbian_run", "x_scratch", x_scratch, Shape{n});
  check_tensor("hebbian_run", "first_nonfinite_step", first_nonfinite_step, DType::I64, Shape{1});
  PDNN_CHECK(u.rank() == 1 && u.dtype() == dtype_of<T>(), "hebbian_run: u is %s %s, need %s (steps)",
             dtype_name(u.dtype()), u.shape().str().c_str(), dtype_name(dtype_of<T>()));
  PDNN_CHECK(first >= 0 && steps >= 0 && first + steps <= u.numel(),
             "hebbian_run: steps %lld .. %lld need inputs u[%lld .. %lld], u holds %lld",
             static_cast<long long>(first + 1), static_cast<long long>(first + steps),
             static_cast<long long>(first), static_cast<long long>(first + steps - 1),
             static_cast<long long>(u.numel()));
  PDNN_CHECK(!x_scratch.same_data(x), "hebbian_run: x_scratch must not be x (x is double-buffered)");
  const T* up = u.numel() > 0 ? u.data<T>() + first : nullptr;
  PDNN_DISPATCH(ctx, d, hebbian_run, W.data<T>(), x.data<T>(),
                first_nonfinite_step.data<int64_t>(), win.data<T>(), up, steps, p,
                x_scratch.data<T>());
}

template <typename T>
bool hebbian_w_on_chip(const Context& ctx, const HebbianParams<T>& p) {
#if PDNN_HAVE_CUDA
  return ctx.device() == Device::CUDA && cuda::hebbian_w_on_chip(p);
#else
  (void)ctx;
  (void)p;
  return false;
#endif
}

#define PDNN_HEBBIAN_OPS(T)                                                                    \
  template void gemv<T>(Context&, Tensor&, const Tensor&, const Tensor&);                     \
  template void reservoir_update<T>(Context&, Tensor&, const Tensor&, const Tensor&,          \
                                    const Tensor&, const Tensor&, const HebbianParams<T>&);   \
  template void oja_update<T>(Context&, Tensor&, const Tensor&, T);                           \
  template void first_nonfinite<T>(Context&, Tensor&, const Tensor&);                         \
  template void hebbian_run<T>(Context&, Tensor&, Tensor&, Tensor&, const Tensor&,            \
                               const Tensor&, int64_t, int64_t, const HebbianParams<T>&,      \
                               Tensor&);                                                      \
  template bool hebbian_w_on_chip<T>(const Context&, const HebbianParams<T>&);
PDNN_HEBBIAN_OPS(float)
PDNN_HEBBIAN_OPS(double)
#undef PDNN_HEBBIAN_OPS

}  // namespace ops
}  // namespace pdnn
