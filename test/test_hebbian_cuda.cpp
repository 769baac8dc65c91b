// W6 Hebbian reservoir: the CUDA twins against the naive reference and against their CPU twins,
// with W on chip and streamed. Every test skips, saying why, in a build without CUDA or on a
// machine without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "bench/cuda_probe.h"
#include "hebbian_testing.h"

#ifdef PDNN_HAVE_CUDA
#include <cuda_runtime.h>

#include "core/error.h"
#include "core/rng.h"
#endif

namespace pdnn {
namespace {

#define PDNN_SKIP_WITHOUT_GPU()                              \
  do {                                                       \
    const std::string why_ = cuda_unavailable_reason();                   \
    if (!why_.empty()) GTEST_SKIP() << "CUDA test skipped: " << why_; \
  } while (0)

#ifdef PDNN_HAVE_CUDA

using namespace hebbian_testing;

void cuda_check(cudaError_t err, const char* what) {
  PDNN_CHECK(err == cudaSuccess, "%s: %s", what, cudaGetErrorString(err));
}

// Device memory for a test (the library's CUDA allocator comes with the core refactor).
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) {
    cuda_check(cudaMalloc(reinterpret_cast<void**>(&p_), std::max<size_t>(n, 1) * sizeof(T)), "cudaMalloc");
  }
  explicit DeviceBuffer(const std::vector<T>& h) : DeviceBuffer(h.size()) { put(h); }
  ~DeviceBuffer() { cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void put(const std::vector<T>& h) {
    cuda_check(cudaMemcpy(p_, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
  }
  std::vector<T> get() const {
    std::vector<T> h(n_);
    cuda_check(cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
    return h;
  }
  T* data() { return p_; }

 private:
  T* p_ = nullptr;
  size_t n_;
};

// A run on the GPU, in one call or in calls of `chunk` steps.
template <typename T>
State<T> gpu_run(const HebbianProblem& pb, int64_t steps, double lr, double leak, bool on_chip,
                 int64_t chunk = 0) {
  State<T> s = initial_state<T>(pb);
  HebbianParams<T> p = hebbian_params<T>(pb.n, lr, leak);
  p.w_on_chip = on_chip;
  DeviceBuffer<T> W(s.W), x(s.x), xs(s.x.size()), win(std::vector<T>(pb.win.begin(), pb.win.end())),
      u(std::vector<T>(pb.u.begin(), pb.u.end()));
  DeviceBuffer<int64_t> bad(1);
  if (chunk <= 0) chunk = std::max<int64_t>(steps, 1);
  for (int64_t first = 0; first < steps || first == 0; first += chunk) {
    const int64_t len = std::min(chunk, steps - first);
    cuda::hebbian_run(W.data(), x.data(), bad.data(), win.data(), u.data() + first, len, p,
                      xs.data(), CudaExec{});
    cuda_check(cudaDeviceSynchronize(), "hebbian_run");
    const int64_t b = bad.get()[0];
    if (b >= 0) {
      s.first_bad = first + b;
      break;
    }
    if (len <= 0) break;
  }
  s.W = W.get();
  s.x = x.get();
  return s;
}

template <typename T>
void expect_gpu_matches_reference(int64_t n, int64_t steps, uint64_t seed, const Case& c, bool on_chip) {
  const HebbianProblem pb = make_hebbian_problem(n, steps, seed);
  const State<long double> ref = naive_run<long double>(pb, steps, c.lr, c.leak);
  const Tolerance tol = run_tolerance<T>(pb, steps, c.lr, c.leak, ref);
  const State<T> g = gpu_run<T>(pb, steps, c.lr, c.leak, on_chip);
  const std::string what = std::string(c.name) + (on_chip ? ", W on chip" : ", W streamed") +
                           ", n=" + std::to_string(n) + ", " + std::to_string(sizeof(T)) + "-byte";
  EXPECT_EQ(g.first_bad, -1) << what;
  EXPECT_LE(max_abs_diff(g.x, ref.x), tol.x) << what << " x, D = " << tol.dx_in_u << " u";
  EXPECT_LE(max_abs_diff(g.W, ref.W), tol.w) << what << " W, D = " << tol.dw_in_u << " u";
}

#endif  // PDNN_HAVE_CUDA

// The same check as the CPU's (test_hebbian.cpp: seed 12, n = 50, T = 100), both places of W.
TEST(HebbianCuda, RunMatchesNaiveReference) {
  PDNN_SKIP_WITHOUT_GPU();
#ifdef PDNN_HAVE_CUDA
  for (const Case& c : kCases)
    for (bool on_chip : {true, false}) {
      expect_gpu_matches_reference<float>(50, 100, 12, c, on_chip);
      expect_gpu_matches_reference<double>(50, 100, 12, c, on_chip);
    }
#endif
}

// The benchmark's size: fp32 n = 2000 keeps W on chip (125 blocks of 16 rows, 136 KB each),
// fp64 n = 2000 does not fit and streams; fp32 streamed is asked for. 6 steps keep the long-
// double reference (and the tolerance's three perturbed runs) at a few seconds.
TEST(HebbianCuda, RunMatchesNaiveReferenceAtN2000) {
  PDNN_SKIP_WITHOUT_GPU();
#ifdef PDNN_HAVE_CUDA
  for (const Case& c : kCases) {
    expect_gpu_matches_reference<float>(2000, 6, 3, c, true);
    expect_gpu_matches_reference<float>(2000, 6, 3, c, false);
    expect_gpu_matches_reference<double>(2000, 6, 3, c, true);
  }
#endif
}

TEST(HebbianCuda, ChunkedRunEqualsOneCallAndZeroStepsChangeNothing) {
  PDNN_SKIP_WITHOUT_GPU();
#ifdef PDNN_HAVE_CUDA
  const HebbianProblem pb = make_hebbian_problem(300, 60, 4);
  for (bool on_chip : {true, false}) {
    const State<float> whole = gpu_run<float>(pb, 60, 1e-3, 0.5, on_chip);
    const State<float> parts = gpu_run<float>(pb, 60, 1e-3, 0.5, on_chip, 7);
    EXPECT_TRUE(parts.x == whole.x) << "on_chip " << on_chip;
    EXPECT_TRUE(parts.W == whole.W) << "on_chip " << on_chip;
    const State<float> none = gpu_run<float>(pb, 0, 1e-3, 0.5, on_chip);
    EXPECT_EQ(none.first_bad, -1);
    EXPECT_TRUE(none.W == initial_state<float>(pb).W);
  }
#endif
}

TEST(HebbianCuda, FirstNonFiniteStep) {
  PDNN_SKIP_WITHOUT_GPU();
#ifdef PDNN_HAVE_CUDA
  const int64_t n = 50, steps = 100;
  const HebbianProblem pb = make_hebbian_problem(n, 600, 8);
  for (bool on_chip : {true, false}) {
    HebbianProblem q = pb;
    q.W[17 * n + 3] = INFINITY;
    EXPECT_EQ(gpu_run<float>(q, steps, 1e-6, 0.5, on_chip).first_bad, 0) << "inf in W_0";
    q = pb;
    q.u[4] = NAN;
    EXPECT_EQ(gpu_run<double>(q, steps, 1e-6, 0.5, on_chip).first_bad, 5) << "NaN in u[4]";
    q = pb;
    q.u[steps - 1] = NAN;
    EXPECT_EQ(gpu_run<float>(q, steps, 1e-6, 0.0, on_chip).first_bad, steps) << "NaN in the last input";
    // The overflow of W6 at a large Oja rate, inside the exact run's window.
    const HebbianProblem o = make_hebbian_problem(n, 600, 9);
    const OverflowWindow wf = exact_overflow_window(o, 600, 1e-2, std::numeric_limits<float>::max());
    const OverflowWindow wd = exact_overflow_window(o, 600, 1e-2, std::numeric_limits<double>::max());
    const int64_t sf = gpu_run<float>(o, 600, 1e-2, 0.0, on_chip).first_bad;
    const int64_t sd = gpu_run<double>(o, 600, 1e-2, 0.0, on_chip).first_bad;
    EXPECT_GE(sf, wf.lo);
    EXPECT_LE(sf, wf.hi);
    EXPECT_GE(sd, wd.lo);
    EXPECT_LE(sd, wd.hi);
    EXPECT_EQ(gpu_run<float>(o, 600, 1e-2, 0.5, on_chip).first_bad, -1) << "leaky";
  }
#endif
}

// The single-step ops against their CPU twins: each is within its rounding bound of the exact
// value (test_hebbian.cpp), so the two are within twice that of each other.
template <typename T>
void check_single_ops_against_cpu() {
#ifdef PDNN_HAVE_CUDA
  const int64_t n = 203;
  const HebbianProblem pb = make_hebbian_problem(n, 1, 10);
  std::vector<T> W(pb.W.begin(), pb.W.end()), x(n), win(pb.win.begin(), pb.win.end());
  Rng rng(11);
  for (T& v : x) v = static_cast<T>(rng.uniform(-3.f, 3.f));
  const double u = std::numeric_limits<T>::epsilon() / 2;
  DeviceBuffer<T> dW(W), dx(x), dy(n), dwin(win), dxo(n);

  std::vector<T> y(n);
  cpu::gemv(y.data(), W.data(), x.data(), n, n, CpuExec{1});
  cuda::gemv(dy.data(), dW.data(), dx.data(), n, n, CudaExec{});
  const std::vector<T> gy = dy.get();
  for (int64_t i = 0; i < n; ++i) {
    double mag = 0;
    for (int64_t j = 0; j < n; ++j) mag += std::fabs(static_cast<double>(W[i * n + j]) * x[j]);
    EXPECT_LE(std::fabs(static_cast<double>(gy[i]) - y[i]), 2 * 1.01 * n * u * mag) << "gemv row " << i;
  }

  const HebbianParams<T> p = hebbian_params<T>(n, 1e-3, 0.3);
  const std::vector<T> ut = {T(0.7)};
  DeviceBuffer<T> du(ut);
  std::vector<T> xo(n);
  cpu::reservoir_update(xo.data(), x.data(), y.data(), win.data(), ut.data(), p, CpuExec{1});
  dy.put(y);  // the same pre-activations on both sides
  cuda::reservoir_update(dxo.data(), dx.data(), dy.data(), dwin.data(), du.data(), p, CudaExec{});
  const std::vector<T> gxo = dxo.get();
  for (int64_t i = 0; i < n; ++i)
    EXPECT_LE(std::fabs(static_cast<double>(gxo[i]) - xo[i]), 16 * u * (std::fabs(x[i]) + 1 + std::fabs(y[i])))
        << "reservoir_update " << i;

  std::vector<T> W2 = W;
  cpu::oja_update(W2.data(), x.data(), p.lr, n, CpuExec{1});
  cuda::oja_update(dW.data(), dx.data(), p.lr, n, CudaExec{});
  const std::vector<T> gW = dW.get();
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
    DeviceBuffer<T> dv(v);
    DeviceBuffer<int64_t> idx(1);
    cuda::first_nonfinite(idx.data(), dv.data(), n, CudaExec{});
    int64_t want = 0;
    cpu::first_nonfinite(&want, v.data(), n, CpuExec{1});
    EXPECT_EQ(idx.get()[0], want) << "non-finite at " << pos;
  }
#endif
}

TEST(HebbianCuda, SingleStepOpsMatchTheCpu) {
  PDNN_SKIP_WITHOUT_GPU();
  check_single_ops_against_cpu<float>();
  check_single_ops_against_cpu<double>();
}

}  // namespace
}  // namespace pdnn
