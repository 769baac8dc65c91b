// W6 Hebbian reservoir: the CUDA twins against the naive reference and against their CPU twins,
// with W on chip and streamed, all through the ops:: over Tensors on Device::CUDA. Every test
// skips, saying why, in a build without CUDA or on a machine without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "core/cuda_state.h"
#include "hebbian_testing.h"

namespace pdnn {
namespace {

using namespace hebbian_testing;

#define PDNN_NEED_GPU()                                           \
  do {                                                            \
    std::string why;                                              \
    if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why; \
  } while (0)

// A run on the GPU through ops::hebbian_run, in one call or in calls of `chunk` steps.
template <typename T>
State<T> gpu_run(Context& ctx, const HebbianProblem& pb, int64_t steps, double lr, double leak,
                 bool on_chip, int64_t chunk = 0) {
  return ops_run<T>(ctx, Device::CUDA, pb, steps, lr, leak, on_chip, chunk);
}

template <typename T>
void expect_gpu_matches_reference(Context& ctx, int64_t n, int64_t steps, uint64_t seed, const Case& c, bool on_chip) {
  const HebbianProblem pb = make_hebbian_problem(n, steps, seed);
  const State<long double> ref = naive_run<long double>(pb, steps, c.lr, c.leak);
  const Tolerance tol = run_tolerance<T>(pb, steps, c.lr, c.leak, ref);
  const State<T> g = gpu_run<T>(ctx, pb, steps, c.lr, c.leak, on_chip);
  const std::string what = std::string(c.name) + (on_chip ? ", W on chip" : ", W streamed") +
                           ", n=" + std::to_string(n) + ", " + std::to_string(sizeof(T)) + "-byte";
  EXPECT_EQ(g.first_bad, -1) << what;
  EXPECT_LE(max_abs_diff(g.x, ref.x), tol.x) << what << " x, D = " << tol.dx_in_u << " u";
  EXPECT_LE(max_abs_diff(g.W, ref.W), tol.w) << what << " W, D = " << tol.dw_in_u << " u";
}

// The same check as the CPU's (test_hebbian.cpp: seed 12, n = 50, T = 100), both places of W.
TEST(HebbianCuda, RunMatchesNaiveReference) {
  PDNN_NEED_GPU();
  Context ctx(1, 0, Device::CUDA);
  for (const Case& c : kCases)
    for (bool on_chip : {true, false}) {
      expect_gpu_matches_reference<float>(ctx, 50, 100, 12, c, on_chip);
      expect_gpu_matches_reference<double>(ctx, 50, 100, 12, c, on_chip);
    }
}

// The benchmark's size: fp32 n = 2000 keeps W on chip (125 blocks of 16 rows, 136 KB each),
// fp64 n = 2000 does not fit and streams; fp32 streamed is asked for. 6 steps keep the long-
// double reference (and the tolerance's three perturbed runs) at a few seconds.
TEST(HebbianCuda, RunMatchesNaiveReferenceAtN2000) {
  PDNN_NEED_GPU();
  Context ctx(1, 0, Device::CUDA);
  for (const Case& c : kCases) {
    expect_gpu_matches_reference<float>(ctx, 2000, 6, 3, c, true);
    expect_gpu_matches_reference<float>(ctx, 2000, 6, 3, c, false);
    expect_gpu_matches_reference<double>(ctx, 2000, 6, 3, c, true);
  }
}

TEST(HebbianCuda, ChunkedRunEqualsOneCallAndZeroStepsChangeNothing) {
  PDNN_NEED_GPU();
  Context ctx(1, 0, Device::CUDA);
  const HebbianProblem pb = make_hebbian_problem(300, 60, 4);
  for (bool on_chip : {true, false}) {
    const State<float> whole = gpu_run<float>(ctx, pb, 60, 1e-3, 0.5, on_chip);
    const State<float> parts = gpu_run<float>(ctx, pb, 60, 1e-3, 0.5, on_chip, 7);
    EXPECT_TRUE(parts.x == whole.x) << "on_chip " << on_chip;
    EXPECT_TRUE(parts.W == whole.W) << "on_chip " << on_chip;
    const State<float> none = gpu_run<float>(ctx, pb, 0, 1e-3, 0.5, on_chip);
    EXPECT_EQ(none.first_bad, -1);
    EXPECT_TRUE(none.W == initial_state<float>(pb).W);
  }
}

TEST(HebbianCuda, FirstNonFiniteStep) {
  PDNN_NEED_GPU();
  Context ctx(1, 0, Device::CUDA);
  const int64_t n = 50, steps = 100;
  const HebbianProblem pb = make_hebbian_problem(n, 600, 8);
  for (bool on_chip : {true, false}) {
    HebbianProblem q = pb;
    q.W[17 * n + 3] = INFINITY;
    EXPECT_EQ(gpu_run<float>(ctx, q, steps, 1e-6, 0.5, on_chip).first_bad, 0) << "inf in W_0";
    q = pb;
    q.u[4] = NAN;
    EXPECT_EQ(gpu_run<double>(ctx, q, steps, 1e-6, 0.5, on_chip).first_bad, 5) << "NaN in u[4]";
    q = pb;
    q.u[steps - 1] = NAN;
    EXPECT_EQ(gpu_run<float>(ctx, q, steps, 1e-6, 0.0, on_chip).first_bad, steps) << "NaN in the last input";
    // The overflow of W6 at a large Oja rate, inside the exact run's window.
    const HebbianProblem o = make_hebbian_problem(n, 600, 9);
    const OverflowWindow wf = exact_overflow_window(o, 600, 1e-2, std::numeric_limits<float>::max());
    const OverflowWindow wd = exact_overflow_window(o, 600, 1e-2, std::numeric_limits<double>::max());
    const int64_t sf = gpu_run<float>(ctx, o, 600, 1e-2, 0.0, on_chip).first_bad;
    const int64_t sd = gpu_run<double>(ctx, o, 600, 1e-2, 0.0, on_chip).first_bad;
    EXPECT_GE(sf, wf.lo);
    EXPECT_LE(sf, wf.hi);
    EXPECT_GE(sd, wd.lo);
    EXPECT_LE(sd, wd.hi);
    EXPECT_EQ(gpu_run<float>(ctx, o, 600, 1e-2, 0.5, on_chip).first_bad, -1) << "leaky";
  }
}

// The single-step ops on the GPU against the same ops on the CPU (ops:: on host tensors): each
// is within its rounding bound of the exact value (test_hebbian.cpp), so the two are within
// twice that of each other.
template <typename T>
void check_single_ops_against_cpu(Context& ctx) {
  const Device gpu = Device::CUDA;
  const int64_t n = 203;
  const Shape vec{n}, mat{n, n}, one{1};
  const HebbianProblem pb = make_hebbian_problem(n, 1, 10);
  std::vector<T> W(pb.W.begin(), pb.W.end()), x(n), win(pb.win.begin(), pb.win.end());
  Rng rng(11);
  for (T& v : x) v = static_cast<T>(rng.uniform(-3.f, 3.f));
  const double u = std::numeric_limits<T>::epsilon() / 2;
  Tensor hW = tensor_of(ctx, W, mat), hx = tensor_of(ctx, x, vec), hwin = tensor_of(ctx, win, vec);
  Tensor dW = tensor_of(ctx, W, mat, gpu), dx = tensor_of(ctx, x, vec, gpu),
         dwin = tensor_of(ctx, win, vec, gpu), dy = Tensor::empty(vec, dtype_of<T>(), gpu, ctx),
         dxo = Tensor::empty(vec, dtype_of<T>(), gpu, ctx);

  Tensor hy(vec, dtype_of<T>());
  ops::gemv<T>(ctx, hy, hW, hx);
  ops::gemv<T>(ctx, dy, dW, dx);
  const std::vector<T> y = vector_of<T>(ctx, hy), gy = vector_of<T>(ctx, dy);
  for (int64_t i = 0; i < n; ++i) {
    double mag = 0;
    for (int64_t j = 0; j < n; ++j) mag += std::fabs(static_cast<double>(W[i * n + j]) * x[j]);
    EXPECT_LE(std::fabs(static_cast<double>(gy[i]) - y[i]), 2 * 1.01 * n * u * mag) << "gemv row " << i;
  }

  const HebbianParams<T> p = hebbian_params<T>(n, 1e-3, 0.3);
  const std::vector<T> ut = {T(0.7)};
  Tensor hu = tensor_of(ctx, ut, one), du = tensor_of(ctx, ut, one, gpu);
  Tensor hxo(vec, dtype_of<T>());
  ops::reservoir_update(ctx, hxo, hx, hy, hwin, hu, p);
  copy_into(dy, hy, ctx);  // the same pre-activations on both sides
  ops::reservoir_update(ctx, dxo, dx, dy, dwin, du, p);
  const std::vector<T> xo = vector_of<T>(ctx, hxo), gxo = vector_of<T>(ctx, dxo);
  for (int64_t i = 0; i < n; ++i)
    EXPECT_LE(std::fabs(static_cast<double>(gxo[i]) - xo[i]), 16 * u * (std::fabs(x[i]) + 1 + std::fabs(y[i])))
        << "reservoir_update " << i;

  ops::oja_update(ctx, hW, hx, p.lr);
  ops::oja_update(ctx, dW, dx, p.lr);
  const std::vector<T> W2 = vector_of<T>(ctx, hW), gW = vector_of<T>(ctx, dW);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const double w = W[i * n + j], lr = p.lr;
      const double terms = std::fabs(w) + 2 * lr * std::fabs(static_cast<double>(x[i]) * x[j]) + 2 * lr * x[i] * x[i] * std::fabs(w);
      EXPECT_LE(std::fabs(static_cast<double>(gW[i * n + j]) - W2[i * n + j]), 8 * u * terms) << "oja_update " << i << "," << j;
    }

  for (int64_t pos : {int64_t{-1}, int64_t{0}, int64_t{150}, n - 1}) {
    std::vector<T> v(n, T(1));
    if (pos >= 0) v[pos] = pos == 0 ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::quiet_NaN();
    if (pos == 150) v[n - 1] = -std::numeric_limits<T>::infinity();
    Tensor hidx(one, DType::I64), didx = Tensor::empty(one, DType::I64, gpu, ctx);
    ops::first_nonfinite<T>(ctx, didx, tensor_of(ctx, v, vec, gpu));
    ops::first_nonfinite<T>(ctx, hidx, tensor_of(ctx, v, vec));
    EXPECT_EQ(vector_of<int64_t>(ctx, didx)[0], vector_of<int64_t>(ctx, hidx)[0]) << "non-finite at " << pos;
  }
}

TEST(HebbianCuda, SingleStepOpsMatchTheCpu) {
  PDNN_NEED_GPU();
  Context ctx(1, 0, Device::CUDA);
  check_single_ops_against_cpu<float>(ctx);
  check_single_ops_against_cpu<double>(ctx);
}

}  // namespace
}  // namespace pdnn
