// Elementwise activations (ReLU, LeakyReLU, Sigmoid, Tanh): forward against naive double
// formulas, gradients by finite differences away from the ReLU kink, thread-count independence.
#include <cmath>
#include <functional>
#include <memory>

#include "core/error.h"
#include "layers/activation.h"
#include "testing.h"

using namespace pdnn;
namespace pt = pdnn::testing;

namespace {

// Random values in [-3, 3) with |x| >= 0.05, so a finite difference never straddles 0.
Tensor away_from_zero(const Shape& s, Rng& rng) {
  Tensor x = pt::random_tensor(s, rng, -3.f, 3.f);
  for (int64_t i = 0; i < x.numel(); ++i)
    if (std::fabs(x[i]) < 0.05f) x[i] = x[i] < 0.f ? x[i] - 0.1f : x[i] + 0.1f;
  return x;
}

struct Case {
  std::function<std::unique_ptr<Layer>()> make;
  std::function<double(double)> f;  // reference formula
};

std::vector<Case> cases() {
  return {
      {[] { return std::make_unique<ReLU>(); }, [](double v) { return v > 0 ? v : 0.0; }},
      {[] { return std::make_unique<LeakyReLU>(); }, [](double v) { return v > 0 ? v : 0.01 * v; }},
      {[] { return std::make_unique<LeakyReLU>(0.2f); },
       [](double v) { return v > 0 ? v : 0.2 * v; }},
      {[] { return std::make_unique<Sigmoid>(); },
       [](double v) { return 1.0 / (1.0 + std::exp(-v)); }},
      {[] { return std::make_unique<Tanh>(); }, [](double v) { return std::tanh(v); }},
  };
}

}  // namespace

TEST(Activation, ForwardMatchesReference) {
  Context ctx(1, 7);
  Rng rng(1);
  // The large shape is above the parallel threshold, so it also runs the OpenMP branch.
  for (const Shape& s : {Shape{3, 17}, Shape{2, 3, 5, 7}, Shape{4, 8, 33, 40}}) {
    Tensor x = pt::random_tensor(s, rng, -10.f, 10.f);
    for (auto& c : cases()) {
      auto layer = c.make();
      Tensor y(layer->output_shape(x.shape()));
      layer->forward(ctx, x, y);
      Tensor ref(s);
      for (int64_t i = 0; i < x.numel(); ++i) ref[i] = static_cast<float>(c.f(x[i]));
      pt::expect_close(y, ref, 1e-6, 1e-6, layer->describe() + " forward " + s.str());
      EXPECT_EQ(layer->flops(s), static_cast<double>(s.numel()));
    }
  }
}

TEST(Activation, GradientsMatchFiniteDifferences) {
  Context ctx(1, 7);
  Rng rng(2);
  for (const Shape& s : {Shape{1, 1}, Shape{1, 3, 5, 7}, Shape{4, 9}, Shape{2, 2, 3, 3}}) {
    Tensor x = away_from_zero(s, rng);
    for (auto& c : cases()) {
      auto layer = c.make();
      pt::check_layer_gradients(ctx, *layer, x);
    }
  }
}

TEST(Activation, SameResultAtOneAndTwoThreads) {
  Rng rng(3);
  const Shape s{8, 16, 32, 32};  // 131072 elements: parallel at 2 threads
  Tensor x = pt::random_tensor(s, rng, -4.f, 4.f);
  // Elementwise: no reductions, so the results must be bit-identical.
  for (auto& c : cases()) pt::expect_same_at_one_and_two_threads(*c.make(), x);
}

TEST(Activation, SaturatesWithoutNaN) {
  Context ctx(1);
  Tensor x(Shape{1, 4});
  x[0] = -200.f;
  x[1] = 200.f;
  x[2] = -90.f;
  x[3] = 90.f;
  Sigmoid sig;
  Tanh th;
  Tensor y(x.shape());
  sig.forward(ctx, x, y);
  EXPECT_EQ(y[0], 0.f);
  EXPECT_EQ(y[1], 1.f);
  EXPECT_FALSE(std::isnan(y[2]));
  th.forward(ctx, x, y);
  EXPECT_EQ(y[0], -1.f);
  EXPECT_EQ(y[1], 1.f);
}

TEST(Activation, ShapeMismatchThrowsNamingBoth) {
  Context ctx(1);
  ReLU relu;
  Tensor x(Shape{2, 5}), y(Shape{2, 6});
  pt::expect_error_mentions([&] { relu.forward(ctx, x, y); }, {"ReLU", "(2,5)", "(2,6)"});
  EXPECT_THROW(LeakyReLU(std::nanf("")), Error);
}
