// Helpers shared by the W6 kernel tests (test_hebbian.cpp, test_hebbian_cuda.cpp): the naive
// reference run, the CPU run, the run through ops::hebbian_run on either device, tensors from
// and to host vectors, error measures and the tolerance of a run against the reference.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "workloads/hebbian/hebbian_problem.h"
#include "core/context.h"
#include "core/error.h"
#include "core/tensor.h"
#include "workloads/hebbian/hebbian_ops.h"

namespace pdnn {
namespace hebbian_testing {

template <typename T>
struct State {
  std::vector<T> W, x;
  int64_t first_bad = -1;
};

template <typename T>
State<T> initial_state(const HebbianProblem& pb) {
  State<T> s;
  s.W.assign(pb.W.begin(), pb.W.end());
  s.x.assign(static_cast<size_t>(pb.n), T(0));
  return s;
}

// The recurrence exactly as SPEC.md writes it, in R arithmetic, one plain loop per operation
// (std::tanh). It stops after the first step whose x or W holds a non-finite value, as the
// kernels do.
// w0: the initial W in R (a perturbed W_0 finer than float can hold); pb.W when null.
template <typename R>
State<R> naive_run(const HebbianProblem& pb, int64_t steps, double lr_d, double leak,
                   const std::vector<R>* w0 = nullptr) {
  const int64_t n = pb.n;
  const R lr = static_cast<R>(lr_d);
  const R keep = leak == 0 ? R(1) : static_cast<R>(1 - leak);
  const R gain = leak == 0 ? R(1) : static_cast<R>(leak);
  State<R> s = initial_state<R>(pb);
  if (w0) s.W = *w0;
  std::vector<R> pre(static_cast<size_t>(n));
  for (int64_t t = 1; t <= steps; ++t) {
    for (int64_t i = 0; i < n; ++i) {
      R acc = 0;
      for (int64_t j = 0; j < n; ++j) acc += s.W[i * n + j] * s.x[j];
      pre[i] = acc + static_cast<R>(pb.win[i]) * static_cast<R>(pb.u[t - 1]);
    }
    for (int64_t i = 0; i < n; ++i) s.x[i] = keep * s.x[i] + gain * std::tanh(pre[i]);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        s.W[i * n + j] += lr * (s.x[i] * s.x[j] - s.x[i] * s.x[i] * s.W[i * n + j]);
    bool bad = false;
    for (R v : s.x) bad |= !std::isfinite(v);
    for (R v : s.W) bad |= !std::isfinite(v);
    if (bad) {
      s.first_bad = t;
      break;
    }
  }
  return s;
}

template <typename T>
State<T> cpu_run(const HebbianProblem& pb, int64_t steps, double lr, double leak, int threads) {
  State<T> s = initial_state<T>(pb);
  std::vector<T> scratch(static_cast<size_t>(pb.n)), win(pb.win.begin(), pb.win.end()),
      u(pb.u.begin(), pb.u.end());
  cpu::hebbian_run(s.W.data(), s.x.data(), &s.first_bad, win.data(), u.data(), steps,
                   hebbian_params<T>(pb.n, lr, leak), scratch.data(), CpuExec{threads});
  return s;
}

// h as a tensor of `shape` on `dev` (through Tensor::to when that is the GPU).
template <typename T>
Tensor tensor_of(Context& ctx, const std::vector<T>& h, const Shape& shape,
                 Device dev = Device::CPU) {
  PDNN_CHECK(static_cast<int64_t>(h.size()) == shape.numel(), "tensor_of: %zu values for %s",
             h.size(), shape.str().c_str());
  Tensor t(shape, dtype_of<T>());
  std::copy(h.begin(), h.end(), t.data<T>());
  return dev == Device::CPU ? t : t.to(dev, ctx);
}

// t's values, copied to the host.
template <typename T>
std::vector<T> vector_of(Context& ctx, const Tensor& t) {
  const Tensor h = t.to(Device::CPU, ctx);
  return std::vector<T>(h.data<T>(), h.data<T>() + h.numel());
}

// A run through ops::hebbian_run on tensors on `dev`, in one call or in calls of `chunk` steps
// (reading the non-finite verdict back after each, as the app does).
template <typename T>
State<T> ops_run(Context& ctx, Device dev, const HebbianProblem& pb, int64_t steps, double lr,
                 double leak, bool on_chip = true, int64_t chunk = 0) {
  const int64_t n = pb.n;
  State<T> s = initial_state<T>(pb);
  HebbianParams<T> p = hebbian_params<T>(n, lr, leak);
  p.w_on_chip = on_chip;
  Tensor W = tensor_of(ctx, s.W, Shape{n, n}, dev), x = tensor_of(ctx, s.x, Shape{n}, dev),
         win = tensor_of(ctx, std::vector<T>(pb.win.begin(), pb.win.end()), Shape{n}, dev),
         u = tensor_of(ctx, std::vector<T>(pb.u.begin(), pb.u.end()),
                       Shape{static_cast<int64_t>(pb.u.size())}, dev),
         xs = Tensor::empty(Shape{n}, dtype_of<T>(), dev, ctx),
         bad = Tensor::empty(Shape{1}, DType::I64, dev, ctx);
  if (chunk <= 0) chunk = std::max<int64_t>(steps, 1);
  for (int64_t first = 0; first < steps || first == 0; first += chunk) {
    const int64_t len = std::min(chunk, steps - first);
    ops::hebbian_run(ctx, W, x, bad, win, u, first, len, p, xs);
    const int64_t b = vector_of<int64_t>(ctx, bad)[0];
    if (b >= 0) {
      s.first_bad = first + b;
      break;
    }
    if (len <= 0) break;
  }
  s.W = vector_of<T>(ctx, W);
  s.x = vector_of<T>(ctx, x);
  return s;
}

struct Case {
  const char* name;
  double lr, leak;
};
// W6 as written, and a leaky run with a rate large enough that Oja's term moves W visibly.
inline constexpr Case kCases[] = {{"W6 lr=1e-6 not leaky", 1e-6, 0.0},
                                  {"leak 0.5 lr=1e-3", 1e-3, 0.5}};

struct Tolerance {
  double x, w;              // absolute, on x and on W
  double dx_in_u, dw_in_u;  // the amplification D it came from (see run_tolerance)
};

// How far a correct run in T arithmetic may be from the exact run `ref` (test_hebbian.cpp says
// why: (8 D + 2 steps) u max|ref|).
template <typename T>
Tolerance run_tolerance(const HebbianProblem& pb, int64_t steps, double lr, double leak,
                        const State<long double>& ref);

// When a run in a type whose largest value is `limit` must first hold a non-finite value,
// from the exact run (W6 not leaky): no earlier than `lo`, the first step where an intermediate
// can overflow (sum_j |W_ij x_j|, which bounds every partial sum of W x, or lr x_i^2 W_ij of
// Oja's update; a dot product whose partial sums overflow with both signs gives inf - inf = NaN
// in x), and no later than `hi`, the first step where a value of x or W itself is beyond
// `limit`. -1 where none within `steps`.
struct OverflowWindow {
  int64_t lo = -1, hi = -1;
};
OverflowWindow exact_overflow_window(const HebbianProblem& pb, int64_t steps, double lr,
                                     long double limit);

}  // namespace hebbian_testing
}  // namespace pdnn
