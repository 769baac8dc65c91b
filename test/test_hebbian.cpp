// W6 Hebbian reservoir kernels (lib/workloads/hebbian/hebbian_ops.h) against a naive reference: the fused run and
// the single-step ops in float32 and float64, leaky and not, non-finite detection, threads, the
// ops:: over Tensors that dispatch to them, and (test_hebbian_cuda.cpp) the CUDA twins.
#include "hebbian_testing.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "ops/simd_tanh.h"
#include "testing.h"

namespace pdnn {
namespace hebbian_testing {

// Tolerances for a run of `steps` steps against the exact (long double) run, in units of the
// working precision's unit roundoff u, times max|ref|:
//   tol = (8 D + 2 steps) u max|ref|.
// Rounding perturbs a run by about u per step. D says how much this recurrence amplifies one
// such perturbation by the end of the run: the largest divergence, in u times max|ref|, of
// exact runs whose W_0 was perturbed by +-2u relative (three draws). It depends on the data:
// over seeds 1-12 at n = 50, T = 100 it ran from 4 u to 55,000 u (the reservoir is chaotic in
// places), and the kernels' errors, float32 and float64, stayed below 2.4 D. 8 D leaves a margin;
// 2 steps u covers W's own rounding, which piles up once per step even where nothing amplifies it.
template <typename T>
Tolerance run_tolerance(const HebbianProblem& pb, int64_t steps, double lr, double leak,
                        const State<long double>& ref) {
  const double u = std::numeric_limits<T>::epsilon() / 2;
  const double sx = max_abs(ref.x), sw = max_abs(ref.W);
  double dx = 0, dw = 0;
  for (uint64_t k = 1; k <= 3; ++k) {
    // In long double: a float W_0 cannot hold a 2u change of float64's u (it rounded back,
    // giving D = 0 for float64 runs).
    std::vector<long double> w0(pb.W.begin(), pb.W.end());
    Rng r(1000 + k);
    for (long double& v : w0) v *= 1.0L + (r.uniform() < 0.5 ? -2.0L : 2.0L) * u;
    const State<long double> p = naive_run<long double>(pb, steps, lr, leak, &w0);
    dx = std::max(dx, max_abs_diff(p.x, ref.x) / (sx * u));
    dw = std::max(dw, max_abs_diff(p.W, ref.W) / (sw * u));
  }
  Tolerance t;
  t.dx_in_u = dx;
  t.dw_in_u = dw;
  t.x = (8 * dx + 2 * steps) * u * sx;
  t.w = (8 * dw + 2 * steps) * u * sw;
  return t;
}
template Tolerance run_tolerance<float>(const HebbianProblem&, int64_t, double, double,
                                        const State<long double>&);
template Tolerance run_tolerance<double>(const HebbianProblem&, int64_t, double, double,
                                         const State<long double>&);

OverflowWindow exact_overflow_window(const HebbianProblem& pb, int64_t steps, double lr_d,
                                     long double limit) {
  using R = long double;
  const int64_t n = pb.n;
  const R lr = lr_d;
  State<R> s = initial_state<R>(pb);
  std::vector<R> pre(static_cast<size_t>(n));
  OverflowWindow win;
  for (int64_t t = 1; t <= steps && win.hi < 0; ++t) {
    bool inter = false, value = false;
    for (int64_t i = 0; i < n; ++i) {
      R acc = 0, mag = 0;
      for (int64_t j = 0; j < n; ++j) {
        acc += s.W[i * n + j] * s.x[j];
        mag += std::fabs(s.W[i * n + j] * s.x[j]);
      }
      inter |= mag > limit;
      pre[i] = acc + static_cast<R>(pb.win[i]) * pb.u[t - 1];
    }
    for (int64_t i = 0; i < n; ++i) {
      s.x[i] += std::tanh(pre[i]);
      value |= std::fabs(s.x[i]) > limit;
    }
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        R& w = s.W[i * n + j];
        inter |= std::fabs(lr * s.x[i] * s.x[i] * w) > limit;
        w += lr * (s.x[i] * s.x[j] - s.x[i] * s.x[i] * w);
        value |= std::fabs(w) > limit;
      }
    if ((inter || value) && win.lo < 0) win.lo = t;
    if (value) win.hi = t;
  }
  return win;
}

}  // namespace hebbian_testing

namespace {

using namespace hebbian_testing;

// Seed 12 is well conditioned at n = 50, T = 100 (D below 100 u in both cases), so the
// tolerances stay tight; the test checks that it still is.
constexpr uint64_t kSeed = 12;
constexpr int64_t kN = 50, kSteps = 100;

template <typename T>
void expect_matches_reference(const Case& c, int threads) {
  const HebbianProblem pb = make_hebbian_problem(kN, kSteps, kSeed);
  const State<long double> ref = naive_run<long double>(pb, kSteps, c.lr, c.leak);
  const Tolerance tol = run_tolerance<T>(pb, kSteps, c.lr, c.leak, ref);
  ASSERT_LT(std::max(tol.dx_in_u, tol.dw_in_u), 1000) << c.name << ": seed no longer well conditioned";
  ASSERT_EQ(ref.first_bad, -1);
  // The test has teeth: Oja's rule moved W by far more than the tolerance.
  ASSERT_GT(max_abs_diff(ref.W, pb.W), 1000 * tol.w) << c.name;

  const State<T> k = cpu_run<T>(pb, kSteps, c.lr, c.leak, threads);
  EXPECT_EQ(k.first_bad, -1);
  EXPECT_LE(max_abs_diff(k.x, ref.x), tol.x) << c.name << " x, D = " << tol.dx_in_u << " u";
  EXPECT_LE(max_abs_diff(k.W, ref.W), tol.w) << c.name << " W, D = " << tol.dw_in_u << " u";
}

TEST(HebbianCpu, RunMatchesNaiveReferenceFloat32) {
  for (const Case& c : kCases) expect_matches_reference<float>(c, 1);
}

TEST(HebbianCpu, RunMatchesNaiveReferenceFloat64) {
  for (const Case& c : kCases) expect_matches_reference<double>(c, 1);
}

TEST(HebbianCpu, RunMatchesNaiveReferenceAtTwoThreads) {
  for (const Case& c : kCases) {
    expect_matches_reference<float>(c, 2);
    expect_matches_reference<double>(c, 2);
  }
}

// Rows are split statically and each row's sums run in one fixed order, so the thread count
// changes nothing, to the bit. n = 203 leaves uneven row bands.
template <typename T>
void expect_same_bits_at_any_thread_count() {
  for (int64_t n : {int64_t{50}, int64_t{203}}) {
    const HebbianProblem pb = make_hebbian_problem(n, kSteps, 3);
    for (const Case& c : kCases) {
      const State<T> one = cpu_run<T>(pb, kSteps, c.lr, c.leak, 1);
      for (int threads : {2, 3}) {
        const State<T> many = cpu_run<T>(pb, kSteps, c.lr, c.leak, threads);
        EXPECT_EQ(many.first_bad, one.first_bad);
        EXPECT_TRUE(many.x == one.x) << c.name << " n=" << n << " threads=" << threads;
        EXPECT_TRUE(many.W == one.W) << c.name << " n=" << n << " threads=" << threads;
      }
    }
  }
}

TEST(HebbianCpu, ThreadCountChangesNoBit) {
  expect_same_bits_at_any_thread_count<float>();
  expect_same_bits_at_any_thread_count<double>();
}

// A run cut into calls gives what one call gives: a call ends with W_t = oja(W_{t-1}, x_t)
// alone, the next begins with W_t x_t alone, and both do the same element operations in the
// same order as the fused pass.
template <typename T>
void expect_chunks_equal_one_call() {
  const HebbianProblem pb = make_hebbian_problem(kN, kSteps, 4);
  for (const Case& c : kCases) {
    const State<T> whole = cpu_run<T>(pb, kSteps, c.lr, c.leak, 2);
    const HebbianParams<T> p = hebbian_params<T>(kN, c.lr, c.leak);
    State<T> s = initial_state<T>(pb);
    std::vector<T> win(pb.win.begin(), pb.win.end()), u(pb.u.begin(), pb.u.end()), xs(kN);
    for (int64_t first : {int64_t{0}, int64_t{1}, int64_t{40}}) {
      const int64_t len = first == 0 ? 1 : first == 1 ? 39 : kSteps - 40;
      cpu::hebbian_run(s.W.data(), s.x.data(), &s.first_bad, win.data(), u.data() + first, len, p,
                       xs.data(), CpuExec{1});
      ASSERT_EQ(s.first_bad, -1);
    }
    EXPECT_TRUE(s.x == whole.x) << c.name;
    EXPECT_TRUE(s.W == whole.W) << c.name;
  }
}

TEST(HebbianCpu, ChunkedRunEqualsOneCall) {
  expect_chunks_equal_one_call<float>();
  expect_chunks_equal_one_call<double>();
}

// ops::hebbian_run over host tensors reaches the CPU kernel with the context's threads and the
// inputs from u[first]: whole or in chunks, it gives the kernel's bits, and a non-finite step is
// counted from the start of the chunk.
template <typename T>
void expect_ops_run_equals_kernel() {
  Context ctx(2);
  const HebbianProblem pb = make_hebbian_problem(kN, kSteps, 4);
  for (const Case& c : kCases) {
    const State<T> kernel = cpu_run<T>(pb, kSteps, c.lr, c.leak, 1);
    for (int64_t chunk : {int64_t{0}, int64_t{7}}) {
      const State<T> s = ops_run<T>(ctx, Device::CPU, pb, kSteps, c.lr, c.leak, true, chunk);
      EXPECT_EQ(s.first_bad, -1) << c.name << " chunk " << chunk;
      EXPECT_TRUE(s.x == kernel.x) << c.name << " chunk " << chunk;
      EXPECT_TRUE(s.W == kernel.W) << c.name << " chunk " << chunk;
    }
  }
  HebbianProblem q = pb;
  q.u[4] = NAN;
  EXPECT_EQ(ops_run<T>(ctx, Device::CPU, q, kSteps, 1e-6, 0.5, true, 3).first_bad, 5);
}

TEST(HebbianCpu, OpsRunOverTensorsEqualsTheKernel) {
  expect_ops_run_equals_kernel<float>();
  expect_ops_run_equals_kernel<double>();
}

// The single-step ops, called one after another (through ops:: over host tensors, at two
// threads), make the same run as the fused kernel: they share its row loops, so the same
// operations happen in the same order.
template <typename T>
void expect_ops_compose_to_run() {
  Context ctx(2);
  const HebbianProblem pb = make_hebbian_problem(kN, kSteps, 5);
  for (const Case& c : kCases) {
    const HebbianParams<T> p = hebbian_params<T>(kN, c.lr, c.leak);
    const State<T> s0 = initial_state<T>(pb);
    Tensor W = tensor_of(ctx, s0.W, Shape{kN, kN}), x = tensor_of(ctx, s0.x, Shape{kN}),
           win = tensor_of(ctx, std::vector<T>(pb.win.begin(), pb.win.end()), Shape{kN}),
           u = tensor_of(ctx, std::vector<T>(pb.u.begin(), pb.u.end()), Shape{kSteps}),
           pre(Shape{kN}, dtype_of<T>());
    for (int64_t t = 0; t < kSteps; ++t) {
      ops::gemv<T>(ctx, pre, W, x);
      ops::reservoir_update(ctx, x, x, pre, win, u.slice(t, Shape{1}), p);
      ops::oja_update(ctx, W, x, p.lr);
    }
    const State<T> fused = cpu_run<T>(pb, kSteps, c.lr, c.leak, 1);
    EXPECT_TRUE(vector_of<T>(ctx, x) == fused.x) << c.name;
    EXPECT_TRUE(vector_of<T>(ctx, W) == fused.W) << c.name;
  }
}

TEST(HebbianCpu, SingleStepOpsComposeToTheFusedRun) {
  expect_ops_compose_to_run<float>();
  expect_ops_compose_to_run<double>();
}

TEST(HebbianCpu, LeakyStateStaysBoundedWhileW6Grows) {
  const HebbianProblem pb = make_hebbian_problem(kN, kSteps, 6);
  for (double leak : {0.1, 0.5, 1.0}) {
    const State<float> s = cpu_run<float>(pb, kSteps, 1e-6, leak, 1);
    EXPECT_LE(max_abs(s.x), 1.0) << "leak " << leak;  // a mean of values in [-1, 1]
  }
  // Not leaky, x gains up to 1 per step, and tanh saturates: |x| nears the step count.
  const State<float> w6 = cpu_run<float>(pb, kSteps, 1e-6, 0.0, 1);
  EXPECT_GT(max_abs(w6.x), 50.0);
  // leak 1: x = tanh(pre) after every step, pre = W x + win u
  const State<double> one = cpu_run<double>(pb, 1, 0.0, 1.0, 1);
  for (int64_t i = 0; i < kN; ++i)
    EXPECT_EQ(one.x[i], simd_tanh(static_cast<double>(pb.win[i]) * pb.u[0]));
}

TEST(HebbianCpu, ParamsFromLeak) {
  const HebbianParams<float> w6 = hebbian_params<float>(10, 1e-6, 0.0);
  EXPECT_EQ(w6.keep, 1.f);
  EXPECT_EQ(w6.gain, 1.f);
  EXPECT_EQ(w6.lr, 1e-6f);
  const HebbianParams<double> l = hebbian_params<double>(10, 1e-3, 0.25);
  EXPECT_EQ(l.keep, 0.75);
  EXPECT_EQ(l.gain, 0.25);
  testing::expect_error_mentions([] { hebbian_params<float>(10, 1e-6, 1.5); }, {"leak", "1.5"});
  testing::expect_error_mentions([] { hebbian_params<float>(10, 1e-6, -0.1); }, {"leak"});
  testing::expect_error_mentions([] { hebbian_params<float>(0, 1e-6, 0); }, {"n = 0"});
  testing::expect_error_mentions([] { hebbian_params<float>(10, NAN, 0); }, {"lr"});
}

TEST(HebbianCpu, RejectsBadArguments) {
  std::vector<float> W(4), x(2), win(2), u(3);
  int64_t bad;
  const HebbianParams<float> p = hebbian_params<float>(2, 1e-6, 0);
  testing::expect_error_mentions(
      [&] { cpu::hebbian_run(W.data(), x.data(), &bad, win.data(), u.data(), 3, p, x.data(), CpuExec{1}); },
      {"x_scratch"});
  testing::expect_error_mentions(
      [&] { cpu::hebbian_run(W.data(), x.data(), &bad, win.data(), u.data(), -1, p, u.data(), CpuExec{1}); },
      {"steps = -1"});
  testing::expect_error_mentions(
      [&] { cpu::hebbian_run(W.data(), x.data(), &bad, win.data(), u.data(), 3, p, u.data(), CpuExec{0}); },
      {"threads = 0"});
  // steps = 0 leaves the state alone
  W = {1, 2, 3, 4};
  cpu::hebbian_run(W.data(), x.data(), &bad, win.data(), u.data(), 0, p, u.data(), CpuExec{1});
  EXPECT_EQ(bad, -1);
  EXPECT_EQ(W, (std::vector<float>{1, 2, 3, 4}));
}

// The ops over Tensors name the op and the tensor that does not fit.
TEST(HebbianCpu, OpsRejectBadTensors) {
  Context ctx(1);
  const HebbianParams<float> p = hebbian_params<float>(2, 1e-6, 0);
  Tensor W(Shape{2, 2}), x(Shape{2}), xs(Shape{2}), win(Shape{2}), u(Shape{3}),
      bad(Shape{1}, DType::I64), y64(Shape{2}, DType::F64), W23(Shape{2, 3}), u2(Shape{2}),
      idx32(Shape{1}, DType::I32);
  testing::expect_error_mentions([&] { ops::gemv<float>(ctx, y64, W, x); },
                                 {"gemv", "y", "float64"});
  testing::expect_error_mentions([&] { ops::gemv<double>(ctx, y64, W, x); },
                                 {"gemv", "A", "float32"});
  testing::expect_error_mentions([&] { ops::gemv<float>(ctx, x, W23, x); }, {"gemv", "x", "(3)"});
  testing::expect_error_mentions([&] { ops::oja_update(ctx, W23, x, 1e-3f); },
                                 {"oja_update", "(2,3)", "square"});
  testing::expect_error_mentions([&] { ops::reservoir_update(ctx, x, x, x, win, u2, p); },
                                 {"reservoir_update", "u", "(2)"});
  testing::expect_error_mentions([&] { ops::first_nonfinite<float>(ctx, idx32, x); },
                                 {"first_nonfinite", "index", "int32"});
  testing::expect_error_mentions(
      [&] { ops::hebbian_run(ctx, W, x, bad, win, u, 2, 2, p, xs); },
      {"hebbian_run", "u[2 .. 3]", "u holds 3"});
  testing::expect_error_mentions([&] { ops::hebbian_run(ctx, W, x, bad, win, u, 0, 3, p, x); },
                                 {"hebbian_run", "x_scratch"});
  testing::expect_error_mentions(
      [&] { ops::hebbian_run(ctx, W, x, bad, win, u, 0, 3, hebbian_params<float>(3, 1e-6, 0), xs); },
      {"hebbian_run", "n = 3"});
  testing::expect_error_mentions([&] { ops::hebbian_run(ctx, W, x, idx32, win, u, 0, 3, p, xs); },
                                 {"hebbian_run", "first_nonfinite_step", "int32"});
  EXPECT_FALSE(ops::hebbian_w_on_chip(ctx, p));  // a CPU context keeps nothing on chip
}

// ---- non-finite detection --------------------------------------------------------------------

template <typename T>
void expect_first_bad(const HebbianProblem& pb, int64_t steps, double lr, double leak,
                      int64_t want, const std::string& what) {
  for (int threads : {1, 2}) {
    const State<T> s = cpu_run<T>(pb, steps, lr, leak, threads);
    EXPECT_EQ(s.first_bad, want) << what << ", threads " << threads;
  }
}

TEST(HebbianCpu, FirstNonFiniteStepOfInjectedValues) {
  HebbianProblem pb = make_hebbian_problem(kN, kSteps, 8);
  {  // W_0 holds an infinity: step 0 (found while x_0 = 0, where W x cannot show it)
    HebbianProblem q = pb;
    q.W[17 * kN + 3] = INFINITY;
    expect_first_bad<float>(q, kSteps, 1e-6, 0.5, 0, "inf in W_0");
    expect_first_bad<double>(q, kSteps, 1e-6, 0.5, 0, "inf in W_0");
  }
  {  // NaN in the input at step 5: x_5 is NaN
    HebbianProblem q = pb;
    q.u[4] = NAN;
    expect_first_bad<float>(q, kSteps, 1e-6, 0.5, 5, "NaN in u[4]");
    expect_first_bad<double>(q, kSteps, 1e-6, 0.5, 5, "NaN in u[4]");
  }
  {  // NaN in the input of the last step: found in the last pass too
    HebbianProblem q = pb;
    q.u[kSteps - 1] = NAN;
    expect_first_bad<float>(q, kSteps, 1e-6, 0.0, kSteps, "NaN in the last input");
  }
  {  // a NaN in one element of win reaches only row 9 of x, at step 1
    HebbianProblem q = pb;
    q.win[9] = NAN;
    expect_first_bad<float>(q, kSteps, 1e-6, 0.0, 1, "NaN in win[9]");
  }
}

// W6 as written with a large Oja rate: x grows by up to 1 a step, and once lr x_i^2 > 2 the
// factor (1 - lr x_i^2) on W grows each step (here x saturates near 26 and W grows ~5x a step),
// so W overflows: float32 within ~80 steps, float64 within ~430. The kernels must stop inside
// the exact run's window (above), at 1 and 2 threads.
template <typename T>
void expect_overflow_in_window(const HebbianProblem& pb, int64_t steps, double lr) {
  const OverflowWindow w = exact_overflow_window(pb, steps, lr, std::numeric_limits<T>::max());
  ASSERT_GT(w.lo, 10);
  ASSERT_GE(w.hi, w.lo);
  for (int threads : {1, 2}) {
    const State<T> s = cpu_run<T>(pb, steps, lr, 0.0, threads);
    EXPECT_GE(s.first_bad, w.lo) << sizeof(T) << "-byte overflow, threads " << threads;
    EXPECT_LE(s.first_bad, w.hi) << sizeof(T) << "-byte overflow, threads " << threads;
  }
}

TEST(HebbianCpu, FirstNonFiniteStepOfAnOverflow) {
  const int64_t steps = 600;
  const HebbianProblem pb = make_hebbian_problem(kN, steps, 9);
  expect_overflow_in_window<float>(pb, steps, 1e-2);
  expect_overflow_in_window<double>(pb, steps, 1e-2);
  // The leaky variant at the same rate stays finite.
  expect_first_bad<float>(pb, steps, 1e-2, 0.5, -1, "leaky");
}

// ---- the single-step ops against plain loops ------------------------------------------------

template <typename T>
void check_single_ops(int threads) {
  const int64_t n = 203;  // rows split unevenly, a tail after the vector lanes
  const HebbianProblem pb = make_hebbian_problem(n, 1, 10);
  std::vector<T> W(pb.W.begin(), pb.W.end()), x(n), y(n), win(pb.win.begin(), pb.win.end());
  Rng rng(11);
  for (T& v : x) v = static_cast<T>(rng.uniform(-3.f, 3.f));
  const double u = std::numeric_limits<T>::epsilon() / 2;

  // gemv: |computed - exact| <= gamma_n sum_j |W_ij x_j| (any summation order), gamma_n ~ n u.
  cpu::gemv(y.data(), W.data(), x.data(), n, n, CpuExec{threads});
  for (int64_t i = 0; i < n; ++i) {
    long double exact = 0, mag = 0;
    for (int64_t j = 0; j < n; ++j) {
      exact += static_cast<long double>(W[i * n + j]) * x[j];
      mag += std::fabs(static_cast<long double>(W[i * n + j]) * x[j]);
    }
    EXPECT_LE(std::fabs(y[i] - exact), 1.01 * n * u * mag) << "gemv row " << i;
  }

  // reservoir_update: x' = keep x + gain tanh(pre + win u); a few roundings of values <= |x|+1.
  const HebbianParams<T> p = hebbian_params<T>(n, 1e-3, 0.3);
  const T ut = T(0.7);
  std::vector<T> xo(n);
  cpu::reservoir_update(xo.data(), x.data(), y.data(), win.data(), &ut, p, CpuExec{threads});
  for (int64_t i = 0; i < n; ++i) {
    const long double want = 0.7L * x[i] + 0.3L * std::tanh(static_cast<long double>(y[i]) + static_cast<long double>(win[i]) * 0.7L);
    EXPECT_LE(std::fabs(xo[i] - want), 8 * u * (std::fabs(x[i]) + 1 + std::fabs(y[i]))) << "reservoir_update " << i;
  }

  // oja_update: W + lr (x_i x_j - x_i^2 W) with at most a few roundings of values <= |W| + |dW|.
  std::vector<T> W2 = W;
  cpu::oja_update(W2.data(), x.data(), p.lr, n, CpuExec{threads});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const long double w = W[i * n + j], lr = p.lr;
      const long double d = lr * (static_cast<long double>(x[i]) * x[j] - static_cast<long double>(x[i]) * x[i] * w);
      const long double terms = std::fabs(w) + std::fabs(d) + lr * std::fabs(static_cast<long double>(x[i]) * x[j]) +
                                lr * x[i] * x[i] * std::fabs(w);
      EXPECT_LE(std::fabs(W2[i * n + j] - (w + d)), 4 * u * terms)
          << "oja_update " << i << "," << j;
    }
}

TEST(HebbianCpu, SingleStepOpsMatchPlainLoops) {
  for (int threads : {1, 2}) {
    check_single_ops<float>(threads);
    check_single_ops<double>(threads);
  }
}

TEST(HebbianCpu, FirstNonFiniteOp) {
  for (int threads : {1, 2}) {
    for (int64_t n : {int64_t{0}, int64_t{7}, int64_t{100000}}) {
      std::vector<float> v(n, 1.f);
      int64_t idx = 42;
      cpu::first_nonfinite(&idx, v.data(), n, CpuExec{threads});
      EXPECT_EQ(idx, -1) << "n=" << n;
      if (n == 0) continue;
      // in the second thread's half, then an earlier one in the first half
      v[n - 1] = -INFINITY;
      cpu::first_nonfinite(&idx, v.data(), n, CpuExec{threads});
      EXPECT_EQ(idx, n - 1);
      v[n / 3] = NAN;
      cpu::first_nonfinite(&idx, v.data(), n, CpuExec{threads});
      EXPECT_EQ(idx, n / 3);
    }
    std::vector<double> d = {0, FLT_MAX, DBL_MAX, -DBL_MAX, INFINITY};
    int64_t idx = 0;
    cpu::first_nonfinite(&idx, d.data(), 5, CpuExec{threads});
    EXPECT_EQ(idx, 4);
  }
}

// ops::first_nonfinite over a tensor of any shape, the index in an int64 tensor.
TEST(HebbianCpu, FirstNonFiniteOpOverTensors) {
  Context ctx(2);
  Tensor idx(Shape{1}, DType::I64);
  std::vector<double> d(3 * 7 * 1000, 1.0);
  ops::first_nonfinite<double>(ctx, idx, tensor_of(ctx, d, Shape{3, 7, 1000}));
  EXPECT_EQ(vector_of<int64_t>(ctx, idx)[0], -1);
  d[5 * 1000 + 3] = -INFINITY;
  d[20000] = NAN;
  ops::first_nonfinite<double>(ctx, idx, tensor_of(ctx, d, Shape{3, 7, 1000}));
  EXPECT_EQ(vector_of<int64_t>(ctx, idx)[0], 5003);
  const std::vector<float> f = {1.f, NAN};
  ops::first_nonfinite<float>(ctx, idx, tensor_of(ctx, f, Shape{2}));
  EXPECT_EQ(vector_of<int64_t>(ctx, idx)[0], 1);
}

// ---- simd_tanh ---------------------------------------------------------------------------------

template <typename T>
double max_ulp_error(double lo, double hi, int points) {
  double worst = 0;
  for (int k = 0; k <= points; ++k) {
    const T x = static_cast<T>(lo + (hi - lo) * k / points);
    const long double want = std::tanh(static_cast<long double>(x));
    const T w = static_cast<T>(want);
    const long double ulp = std::nextafter(std::fabs(w), std::numeric_limits<T>::infinity()) - std::fabs(w);
    worst = std::max(worst, static_cast<double>(std::fabs(simd_tanh(x) - want) / ulp));
  }
  return worst;
}

// Measured: 1.4 ulp (float) and 1.3 ulp (double) at most, near the branch point 0.625.
TEST(SimdTanh, WithinTwoUlpOfTheExactValue) {
  const std::vector<std::pair<double, double>> ranges = {{-1, 1}, {-0.7, 0.7}, {-12, 12}, {-25, 25}, {1e-6, 1e-3}};
  for (const auto& range : ranges) {
    EXPECT_LE(max_ulp_error<float>(range.first, range.second, 200001), 2.0) << range.first << ".." << range.second;
    EXPECT_LE(max_ulp_error<double>(range.first, range.second, 200001), 2.0) << range.first << ".." << range.second;
  }
}

TEST(SimdTanh, SpecialValues) {
  EXPECT_EQ(simd_tanh(0.0), 0.0);
  EXPECT_EQ(simd_tanh(1e-300), 1e-300);
  EXPECT_EQ(simd_tanh(1e-30f), 1e-30f);
  EXPECT_EQ(simd_tanh(INFINITY), 1.0);
  EXPECT_EQ(simd_tanh(-INFINITY), -1.0);
  EXPECT_EQ(simd_tanh(1e30f), 1.f);
  EXPECT_EQ(simd_tanh(-1e300), -1.0);
  EXPECT_TRUE(std::isnan(simd_tanh(NAN)));
  EXPECT_TRUE(std::isnan(simd_tanh(static_cast<float>(NAN))));
}

}  // namespace
}  // namespace pdnn
