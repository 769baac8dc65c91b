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
#include "model/model.h"

namespace pdnn {
namespace testing {

// For GPU tests that compare two Contexts bit for bit: every Context passed here reads and
// writes one algorithm cache file of this test process, so the second makes the first one's
// convolution choices instead of timing its own (timing noise could pick another kernel, whose
// other summation order is a real but irrelevant difference).
void share_conv_choices(Context& ctx);

// Uniform in [lo, hi).
Tensor random_tensor(const Shape& s, Rng& rng, float lo = -1.f, float hi = 1.f);
// A host int32 tensor (n) holding the labels.
Tensor labels_tensor(const std::vector<int32_t>& labels);

// Fails the current test (with the first bad index and the count of bad elements) unless
// |a[i]-ref[i]| <= atol + rtol*|ref[i]| for every i.
void expect_close(const Tensor& a, const Tensor& ref, double atol, double rtol,
                  const std::string& what);

// ||a - ref|| / ||ref|| over all elements (host float32 tensors of one size), in double.
double rel_error(const Tensor& a, const Tensor& ref);

// The largest |a_i - b_i| over every parameter of two models of one architecture, after
// loading checkpoint file pa into a and pb into b (how far a run moved its weights, or how far
// apart two runs ended: the twin tests' bounds).
double max_checkpoint_difference(const std::string& pa, Model& a, const std::string& pb, Model& b);

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

// The same for a whole model (a graph): L = sum(y * g) against model.backward's dL/dx and
// every parameter gradient, the model in its current mode. An element whose +-eps forward
// changes the model's ReLU masks or its pools' maxima (model_kinks) sits at a kink of L and is
// skipped; at most max_skipped_share of the checked ones may be (the check must still check).
void check_model_gradients(Context& ctx, Model& model, const Tensor& x,
                           const GradCheckOptions& opt = {}, double max_skipped_share = 0.2);
// The discrete choices of the model's last forward: per ReLU node its output's signs, per
// MaxPool2d node the position of each window's maximum in its input.
std::string model_kinks(const Model& model);

// Runs forward and backward of `layer` on x (and a fixed random dy) at 1 and at 2 threads and
// expects y, dx and every parameter gradient to agree within atol + rtol*|ref| (0, 0 for
// kernels without thread-dependent reductions). Parameter gradients are zeroed before each run.
void expect_same_at_one_and_two_threads(Layer& layer, const Tensor& x, double atol = 0,
                                        double rtol = 0);

// Expects f to throw pdnn::Error whose message contains every one of `parts` (e.g. both shapes).
void expect_error_mentions(const std::function<void()>& f, const std::vector<std::string>& parts);
// The message of the pdnn::Error f throws (a failure, and "", where it throws none): for what
// a message must not say as well as what it must.
std::string error_text(const std::function<void()>& f);

// The same check for any scalar function of one tensor, given its analytic gradient.
void check_function_gradient(const std::function<double(const Tensor&)>& f, Tensor x,
                             const Tensor& grad, const GradCheckOptions& opt,
                             const std::string& what);

// A small 4-class IDX split for end-to-end tests: class c (= index % 4) is a bright square in
// quadrant c on faint noise, at a random offset: trivially separable by a CNN, yet no two
// images alike. Writes dir/<prefix>-images-idx3-ubyte.gz and dir/<prefix>-labels-idx1-ubyte.
void write_idx_squares(const std::string& dir, const std::string& prefix, int64_t n,
                       int64_t side, uint64_t seed);

// For the tests that run the apps: a shell command line's exit status (-1 when it did not
// exit normally), its stdout and stderr together, and its wall time.
struct CommandResult {
  int status;
  std::string output;
  double seconds = 0;
};
CommandResult run_command(const std::string& cmd);
// Whether a file or folder exists.
bool exists(const std::string& path);
// A whole file ("" when it cannot be read).
std::string slurp(const std::string& path);
// A CSV file's lines split at every comma (the apps' rows quote nothing the tests look at).
std::vector<std::vector<std::string>> read_csv(const std::string& path);

// A fixture with a fresh folder under /tmp (dir_), removed after the test, and the small file
// chores tests do in it; rel is relative to dir_.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  std::string path(const std::string& rel) const { return dir_ + "/" + rel; }
  void mkdir(const std::string& rel) const;                         // with parents
  void spit(const std::string& rel, const std::string& bytes) const;  // write a whole file
  std::string slurp(const std::string& rel) const { return testing::slurp(path(rel)); }

  std::string dir_;
};

}  // namespace testing
}  // namespace pdnn
