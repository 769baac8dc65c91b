// Test helpers shared by every test file: random tensors, tolerance comparison
// |a-b| <= atol + rtol*|ref| per element, and the finite-difference gradient check.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/tensor.h"
#include "layers/layer.h"

namespace pdnn {
namespace testing {

// Uniform in [lo, hi).
Tensor random_tensor(const Shape& s, Rng& rng, float lo = -1.f, float hi = 1.f);

// Fails the current test (with the first bad index and the count of bad elements) unless
// |a[i]-ref[i]| <= atol + rtol*|ref[i]| for every i.
void expect_close(const Tensor& a, const Tensor& ref, double atol, double rtol,
                  const std::string& what);

struct GradCheckOptions {
  double eps = 1e-3;    // central difference step
  double atol = 1e-3;
  double rtol = 1e-2;
  int max_checks = 200; // elements checked per tensor (random subset; all if fewer)
  uint64_t seed = 1234;
};

// Central finite differences of L = sum(y * g) (g fixed random, accumulated in double) against
// the layer's backward: dL/dx and every parameter gradient. The layer must be deterministic
// between calls (dropout is checked on its own). Input kinks (ReLU at 0, max ties) are the
// caller's to avoid by choosing x.
void check_layer_gradients(Context& ctx, Layer& layer, const Tensor& x,
                           const GradCheckOptions& opt = {});

// Runs forward and backward of `layer` on x (and a fixed random dy) at 1 and at 2 threads and
// expects y, dx and every parameter gradient to agree within atol + rtol*|ref| (0, 0 for
// kernels without thread-dependent reductions). Parameter gradients are zeroed before each run.
void expect_same_at_one_and_two_threads(Layer& layer, const Tensor& x, double atol = 0,
                                        double rtol = 0);

// Expects f to throw pdnn::Error whose message contains every one of `parts` (e.g. both shapes).
void expect_error_mentions(const std::function<void()>& f, const std::vector<std::string>& parts);

// The same check for any scalar function of one tensor, given its analytic gradient.
void check_function_gradient(const std::function<double(const Tensor&)>& f, Tensor x,
                             const Tensor& grad, const GradCheckOptions& opt,
                             const std::string& what);

// ---- running the apps (end-to-end tests) ----
struct Result {
  int status;          // exit status, -1 if the command did not exit normally
  std::string output;  // stdout and stderr together
};
// Runs a shell command line.
Result run(const std::string& cmd);
bool exists(const std::string& path);
std::string slurp(const std::string& path);
// A CSV file's rows split at commas (no quoted fields: the results files have none).
std::vector<std::vector<std::string>> read_csv(const std::string& path);

}  // namespace testing
}  // namespace pdnn
