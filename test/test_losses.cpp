// Losses: softmax cross-entropy (per sample and per pixel), binary cross-entropy (probabilities
// and logits) and the soft Dice loss against naive double-precision references, stability at
// extreme inputs, finite-difference gradients; the segmentation losses and confusion counts
// bit-identical at 1 and 2 threads.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "losses/binary_cross_entropy.h"
#include "losses/dice_loss.h"
#include "losses/softmax_cross_entropy.h"
#include "ops/loss.h"
#include "ops/metrics.h"
#include "testing.h"

using namespace pdnn;
using pdnn::testing::check_function_gradient;
using pdnn::testing::expect_close;
using pdnn::testing::GradCheckOptions;
using pdnn::testing::random_tensor;
namespace pt = pdnn::testing;

namespace {

// Mean losses have gradients of order 1/numel, far below the layer checks' default atol, so the
// checks here are tighter: a larger step (the losses are smooth) keeps the float loss's rounding
// (~1e-7 relative) from swamping the difference, while eps^2 times the third derivative stays
// below atol.
GradCheckOptions loss_check(double eps, double atol) {
  GradCheckOptions o;
  o.eps = eps;
  o.atol = atol;
  o.rtol = 1e-3;
  return o;
}

std::vector<int32_t> random_labels(int64_t n, int64_t k, Rng& rng) {
  std::vector<int32_t> l(static_cast<size_t>(n));
  for (auto& v : l) v = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(k));
  return l;
}

// Textbook softmax and mean -log p[label], in double, no max subtraction.
double naive_softmax_ce(const Tensor& z, const std::vector<int32_t>& labels, Tensor* probs) {
  const int64_t n = z.shape(0), k = z.numel() / n;
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    double sum = 0.0;
    for (int64_t j = 0; j < k; ++j) sum += std::exp(static_cast<double>(z[i * k + j]));
    for (int64_t j = 0; j < k; ++j)
      if (probs) (*probs)[i * k + j] = static_cast<float>(std::exp(double(z[i * k + j])) / sum);
    total += -std::log(std::exp(static_cast<double>(z[i * k + labels[i]])) / sum);
  }
  return total / static_cast<double>(n);
}

}  // namespace

TEST(SoftmaxCrossEntropy, ForwardMatchesNaiveReference) {
  Context ctx(1);
  Rng rng(11);
  for (Shape s : {Shape{1, 10}, Shape{7, 5}, Shape{13, 101}, Shape{6, 4, 1, 1}}) {
    Tensor z = random_tensor(s, rng, -4.f, 4.f);
    auto labels = random_labels(s[0], s[1], rng);
    Tensor ref_probs(Shape{s[0], s[1]});
    const double ref = naive_softmax_ce(z, labels, &ref_probs);
    SoftmaxCrossEntropy ce;
    const float loss = ce.forward(ctx, z, labels.data());
    EXPECT_NEAR(loss, ref, 1e-6 + 1e-6 * ref) << s.str();
    expect_close(ce.probs(), ref_probs, 1e-7, 1e-5, "softmax probs " + s.str());
  }
}

TEST(SoftmaxCrossEntropy, HugeLogitsStayFinite) {
  Context ctx(1);
  Rng rng(12);
  // Shifting every logit of a row by 1000 changes nothing mathematically, but exp(1000)
  // overflows even a double: the shifted loss must equal the naive loss of the unshifted row.
  Tensor z = random_tensor(Shape{5, 6}, rng, -3.f, 3.f);
  auto labels = random_labels(5, 6, rng);
  Tensor ref_probs(Shape{5, 6});
  const double ref = naive_softmax_ce(z, labels, &ref_probs);
  Tensor big = z.clone();
  for (int64_t i = 0; i < big.numel(); ++i) big[i] += 1000.f;
  SoftmaxCrossEntropy ce;
  const float loss = ce.forward(ctx, big, labels.data());
  // 1000 + z rounds z to float's spacing at 1000 (6e-5), hence the looser absolute tolerance.
  EXPECT_NEAR(loss, ref, 2e-4);
  expect_close(ce.probs(), ref_probs, 2e-4, 1e-3, "probs of shifted logits");

  // A spread of 2000: the label's probability underflows to 0 in float, the loss is exactly
  // 1000 - (-1000) = 2000 by log-sum-exp, and the gradient is finite.
  Tensor wide(Shape{1, 3});
  wide[0] = 1000.f;
  wide[1] = 0.f;
  wide[2] = -1000.f;
  const int32_t lab = 2;
  EXPECT_FLOAT_EQ(ce.forward(ctx, wide, &lab), 2000.f);
  Tensor d;
  ce.backward(ctx, d);
  EXPECT_FLOAT_EQ(d[0], 1.f);
  EXPECT_FLOAT_EQ(d[1], 0.f);
  EXPECT_FLOAT_EQ(d[2], -1.f);
}

TEST(SoftmaxCrossEntropy, GradientMatchesFiniteDifferences) {
  Context ctx(1);
  Rng rng(13);
  for (Shape s : {Shape{1, 4}, Shape{5, 3}, Shape{9, 10}, Shape{3, 7, 1, 1}}) {
    Tensor z = random_tensor(s, rng, -2.f, 2.f);
    auto labels = random_labels(s[0], s[1], rng);
    SoftmaxCrossEntropy ce;
    ce.forward(ctx, z, labels.data());
    Tensor dz(s);
    dz.fill(std::nanf(""));  // every element must be written
    ce.backward(ctx, dz);
    ASSERT_EQ(dz.shape(), s);
    SoftmaxCrossEntropy probe;
    auto f = [&](const Tensor& x) { return double(probe.forward(ctx, x, labels.data())); };
    check_function_gradient(f, z, dz, loss_check(1e-2, 3e-5), "softmax CE dlogits " + s.str());
  }
}

TEST(SoftmaxCrossEntropy, CountCorrectTiesGoToLowestIndex) {
  // Rows: argmax 2; tie between 1 and 2 -> 1; all equal -> 0; argmax 0.
  const float v[] = {0.f, 1.f, 5.f, 0.f, 3.f, 3.f, 2.f, 2.f, 2.f, 9.f, -1.f, 8.f};
  Tensor z(Shape{4, 3});
  for (int i = 0; i < 12; ++i) z[i] = v[i];
  const int32_t right[] = {2, 1, 0, 0};
  EXPECT_EQ(count_correct(z, right), 4);
  const int32_t wrong_ties[] = {2, 2, 1, 0};
  EXPECT_EQ(count_correct(z, wrong_ties), 2);
  const int32_t none[] = {0, 0, 2, 2};
  EXPECT_EQ(count_correct(z, none), 0);
  EXPECT_EQ(count_correct(z.reshape(Shape{4, 3, 1, 1}), right), 4);
}

TEST(SoftmaxCrossEntropy, BadLabelsAndShapesThrow) {
  Context ctx(1);
  Tensor z = Tensor::zeros(Shape{3, 4});
  SoftmaxCrossEntropy ce;
  for (int32_t bad : {-1, 4, 100}) {
    const int32_t labels[] = {0, bad, 1};
    try {
      ce.forward(ctx, z, labels);
      FAIL() << "label " << bad << " must throw";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("label " + std::to_string(bad)), std::string::npos) << msg;
      EXPECT_NE(msg.find("K = 4"), std::string::npos) << msg;
    }
    EXPECT_THROW(count_correct(z, labels), Error);
  }
  const int32_t ok[] = {0, 1, 2};
  EXPECT_THROW(ce.forward(ctx, Tensor::zeros(Shape{3, 4, 2, 2}), ok), Error);
  EXPECT_THROW(ce.forward(ctx, Tensor::zeros(Shape{12}), ok), Error);
  SoftmaxCrossEntropy fresh;
  Tensor d;
  EXPECT_THROW(fresh.backward(ctx, d), Error);
}

namespace {

double naive_bce(const Tensor& p, const Tensor& t) {
  double s = 0.0;
  for (int64_t i = 0; i < p.numel(); ++i) {
    const double lp = std::max(std::log(double(p[i])), -100.0);
    const double lq = std::max(std::log(1.0 - double(p[i])), -100.0);
    s += -(t[i] * lp + (1.0 - t[i]) * lq);
  }
  return s / static_cast<double>(p.numel());
}

// Textbook form through the sigmoid, in double (fine for |z| well below 700).
double naive_bce_logits(const Tensor& z, const Tensor& t) {
  double s = 0.0;
  for (int64_t i = 0; i < z.numel(); ++i) {
    const double sig = 1.0 / (1.0 + std::exp(-double(z[i])));
    s += -(t[i] * std::log(sig) + (1.0 - t[i]) * std::log(1.0 - sig));
  }
  return s / static_cast<double>(z.numel());
}

}  // namespace

// Forward, then the mean loss (the losses keep their parts on the device until asked).
template <class L>
float loss_of(Context& ctx, L& l, const Tensor& x, const Tensor& t) {
  l.forward(ctx, x, t);
  return l.loss(ctx);
}

TEST(BinaryCrossEntropy, ForwardMatchesNaiveReference) {
  Context ctx(1);
  Rng rng(21);
  // The last shape spans several reduction chunks.
  for (Shape s : {Shape{1, 1}, Shape{7, 1}, Shape{4, 3, 5, 5}, Shape{3, 5000}}) {
    Tensor p = random_tensor(s, rng, 0.01f, 0.99f);
    Tensor t = random_tensor(s, rng, 0.f, 1.f);
    BinaryCrossEntropy bce;
    const double ref = naive_bce(p, t);
    EXPECT_NEAR(loss_of(ctx, bce, p, t), ref, 1e-6 * (1.0 + ref)) << s.str();
    Tensor z = random_tensor(s, rng, -6.f, 6.f);
    BinaryCrossEntropyWithLogits bcel;
    const double refl = naive_bce_logits(z, t);
    EXPECT_NEAR(loss_of(ctx, bcel, z, t), refl, 1e-6 * (1.0 + refl)) << s.str();
  }
}

TEST(BinaryCrossEntropy, ClampingKeepsZeroAndOneFinite) {
  Context ctx(1);
  // p = 0 and p = 1 with both targets: log clamps at -100, so the wrong ones cost 100 each.
  Tensor p(Shape{4, 1}), t(Shape{4, 1});
  const float pv[] = {0.f, 0.f, 1.f, 1.f}, tv[] = {0.f, 1.f, 0.f, 1.f};
  for (int i = 0; i < 4; ++i) {
    p[i] = pv[i];
    t[i] = tv[i];
  }
  BinaryCrossEntropy bce;
  EXPECT_FLOAT_EQ(loss_of(ctx, bce, p, t), 200.f / 4.f);
  Tensor d;
  bce.backward(ctx, d);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(std::isfinite(d[i])) << i << ": " << d[i];
  EXPECT_EQ(d[0], 0.f);  // right answers get no push
  EXPECT_EQ(d[3], 0.f);
  EXPECT_LT(d[1], 0.f);  // p should rise towards t = 1
  EXPECT_GT(d[2], 0.f);

  // Logits far beyond exp's range: max(z,0) - z t + log1p(exp(-|z|)).
  Tensor z(Shape{4, 1});
  const float zv[] = {200.f, -200.f, 200.f, -200.f};
  const float tz[] = {0.f, 1.f, 1.f, 0.f};
  for (int i = 0; i < 4; ++i) {
    z[i] = zv[i];
    t[i] = tz[i];
  }
  BinaryCrossEntropyWithLogits bcel;
  EXPECT_FLOAT_EQ(loss_of(ctx, bcel, z, t), 400.f / 4.f);
  bcel.backward(ctx, d);
  const float want[] = {0.25f, -0.25f, 0.f, 0.f};
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(d[i], want[i]) << i;
}

TEST(BinaryCrossEntropy, GradientsMatchFiniteDifferences) {
  Context ctx(1);
  Rng rng(22);
  for (Shape s : {Shape{1, 1}, Shape{5, 3}, Shape{2, 3, 3, 3}}) {
    Tensor t = random_tensor(s, rng, 0.f, 1.f);
    // Away from 0 and 1, where the clamp and the 1e-12 guard would change the derivative and
    // the third derivative of -log p (2/p^3) would dominate the finite-difference error.
    Tensor p = random_tensor(s, rng, 0.2f, 0.8f);
    BinaryCrossEntropy bce, probe;
    loss_of(ctx, bce, p, t);
    Tensor dp(s);
    dp.fill(std::nanf(""));
    bce.backward(ctx, dp);
    check_function_gradient([&](const Tensor& x) { return double(loss_of(ctx, probe, x, t)); }, p,
                            dp, loss_check(3e-3, 5e-5), "BCE dp " + s.str());

    Tensor z = random_tensor(s, rng, -4.f, 4.f);
    BinaryCrossEntropyWithLogits bcel, probel;
    loss_of(ctx, bcel, z, t);
    Tensor dz(s);
    dz.fill(std::nanf(""));
    bcel.backward(ctx, dz);
    check_function_gradient([&](const Tensor& x) { return double(loss_of(ctx, probel, x, t)); }, z,
                            dz, loss_check(1e-2, 2e-5), "BCE-with-logits dz " + s.str());
  }
}

TEST(BinaryCrossEntropy, LogitsFormEqualsProbabilityFormOfSigmoid) {
  Context ctx(1);
  Rng rng(23);
  const Shape s{6, 7};
  Tensor z = random_tensor(s, rng, -5.f, 5.f);
  Tensor t = random_tensor(s, rng, 0.f, 1.f);
  Tensor p(s);
  for (int64_t i = 0; i < z.numel(); ++i) p[i] = 1.f / (1.f + std::exp(-z[i]));
  BinaryCrossEntropy bce;
  BinaryCrossEntropyWithLogits bcel;
  const float lp = loss_of(ctx, bce, p, t);
  const float lz = loss_of(ctx, bcel, z, t);
  EXPECT_NEAR(lz, lp, 1e-5 * (1.0 + lp));
  // Chain rule: dL/dz = dL/dp * p (1 - p).
  Tensor dp, dz;
  bce.backward(ctx, dp);
  bcel.backward(ctx, dz);
  Tensor chained(s);
  for (int64_t i = 0; i < p.numel(); ++i) chained[i] = dp[i] * p[i] * (1.f - p[i]);
  expect_close(dz, chained, 1e-6, 1e-4, "dz vs dp * sigmoid'");
}

TEST(BinaryCrossEntropy, RejectsBadInputs) {
  Context ctx(1);
  Tensor p = Tensor::zeros(Shape{2, 2}), t = Tensor::zeros(Shape{2, 2});
  BinaryCrossEntropy bce;
  BinaryCrossEntropyWithLogits bcel;
  EXPECT_THROW(loss_of(ctx, bce, p, Tensor::zeros(Shape{4, 1})), Error);
  p[1] = 1.5f;
  EXPECT_THROW(loss_of(ctx, bce, p, t), Error);
  EXPECT_NO_THROW(loss_of(ctx, bcel, p, t));  // logits may be any real
  t[2] = -0.5f;
  EXPECT_THROW(loss_of(ctx, bcel, p, t), Error);
  t[2] = std::nanf("");
  EXPECT_THROW(loss_of(ctx, bcel, p, t), Error);
}

TEST(Losses, ThreadCountDoesNotChangeTheLoss) {
  Rng rng(24);
  const Shape s{64, 2048};  // above the parallel threshold, many reduction chunks
  Tensor z = random_tensor(s, rng, -3.f, 3.f);
  Tensor t = random_tensor(s, rng, 0.f, 1.f);
  auto labels = random_labels(64, 2048, rng);
  float bl[2], cl[2];
  Tensor bd[2], cd[2];
  for (int k = 0; k < 2; ++k) {
    Context ctx(k + 1);
    BinaryCrossEntropyWithLogits bcel;
    bl[k] = loss_of(ctx, bcel, z, t);
    bcel.backward(ctx, bd[k]);
    SoftmaxCrossEntropy ce;
    cl[k] = ce.forward(ctx, z, labels.data());
    ce.backward(ctx, cd[k]);
  }
  EXPECT_EQ(bl[0], bl[1]);
  EXPECT_EQ(cl[0], cl[1]);
  expect_close(bd[1], bd[0], 0, 0, "BCE gradient 1 vs 2 threads");
  expect_close(cd[1], cd[0], 0, 0, "CE gradient 1 vs 2 threads");
}

// ---- per pixel: the segmentation losses ----

namespace {

Tensor random_labels(const Shape& s, int k, Rng& r) {
  Tensor t(s, DType::I32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<int32_t>()[i] = static_cast<int32_t>(r.next() % k);
  return t;
}

// Softmax over the class axis of z (n,k,p) at pixel (b, q), in double.
std::vector<double> softmax_at(const Tensor& z, int64_t b, int64_t q) {
  const int64_t k = z.shape(1), p = z.numel() / (z.shape(0) * k);
  std::vector<double> e(static_cast<size_t>(k));
  double m = -1e300, s = 0;
  for (int64_t j = 0; j < k; ++j) m = std::max(m, double(z[(b * k + j) * p + q]));
  for (int64_t j = 0; j < k; ++j) s += e[static_cast<size_t>(j)] = std::exp(double(z[(b * k + j) * p + q]) - m);
  for (double& v : e) v /= s;
  return e;
}

TEST(PixelCrossEntropy, MatchesTheFormulaAndFiniteDifferences) {
  Context ctx(1, 1);
  Rng r(3);
  const Shape s{2, 4, 3, 5};
  const Tensor z = pt::random_tensor(s, r, -3.f, 3.f);
  const Tensor labels = random_labels(Shape{2, 3, 5}, 4, r);
  SoftmaxCrossEntropy ce;
  ce.forward(ctx, z, labels);
  double want = 0;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t q = 0; q < 15; ++q)
      want -= std::log(softmax_at(z, b, q)[static_cast<size_t>(labels.data<int32_t>()[b * 15 + q])]);
  want /= 30;
  EXPECT_NEAR(ce.loss(ctx), want, 1e-6 * std::fabs(want));
  EXPECT_EQ(ce.probs().shape(), s);
  Tensor dz;
  ce.backward(ctx, dz);
  ASSERT_EQ(dz.shape(), s);
  auto f = [&](const Tensor& v) {
    SoftmaxCrossEntropy c;
    c.forward(ctx, v, labels);
    return static_cast<double>(c.loss(ctx));
  };
  pt::GradCheckOptions o;
  o.atol = 1e-4;
  pt::check_function_gradient(f, z, dz, o, "pixel cross-entropy");
  // Pixel accuracy in the metrics; labels that are not one per pixel are refused.
  Tensor acc = Tensor::zeros(Shape{3}, DType::F64);
  ce.accumulate_metrics(ctx, z, acc);
  EXPECT_EQ(acc.data<double>()[2], 30.0);
  EXPECT_NEAR(acc.data<double>()[0], want * 30, 1e-4);
  pt::expect_error_mentions([&] { ce.forward(ctx, z, random_labels(Shape{2}, 4, r)); },
                            {"30 int32 values", "pixel"});
  // A data-parallel share: mean_over 4 rows of which this holds 2 halves the gradient.
  Tensor half;
  ce.forward(ctx, z, labels);
  ce.backward(ctx, half, 4);
  for (int64_t i = 0; i < dz.numel(); ++i) ASSERT_EQ(half[i], dz[i] * 0.5f) << i;
}

// A map of 3 x 50 x 50 pixels: its metrics are summed in two chunks of kLossChunk rows (the
// second partial); the totals are the naive sums, and the same at one and two threads.
TEST(PixelCrossEntropy, MetricsOverSeveralChunksEqualTheNaiveSums) {
  Rng r(5);
  const Shape s{3, 3, 50, 50};
  const int64_t rows = 3 * 50 * 50, plane = 50 * 50;
  ASSERT_GT(rows, kLossChunk);
  ASSERT_LT(rows, 2 * kLossChunk);
  const Tensor z = pt::random_tensor(s, r, -3.f, 3.f);
  const Tensor labels = random_labels(Shape{3, 50, 50}, 3, r);
  double want_loss = 0, want_correct = 0;
  double got[2][3];
  for (int t = 0; t < 2; ++t) {
    Context ctx(t + 1);
    SoftmaxCrossEntropy ce;
    ce.forward(ctx, z, labels);
    Tensor acc = Tensor::zeros(Shape{3}, DType::F64);
    ce.accumulate_metrics(ctx, z, acc);
    for (int i = 0; i < 3; ++i) got[t][i] = acc.data<double>()[i];
  }
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t q = 0; q < plane; ++q) {
      const std::vector<double> p = softmax_at(z, b, q);
      const int32_t l = labels.data<int32_t>()[b * plane + q];
      want_loss -= std::log(p[static_cast<size_t>(l)]);
      size_t best = 0;
      for (size_t j = 1; j < 3; ++j)
        if (z[(b * 3 + static_cast<int64_t>(j)) * plane + q] >
            z[(b * 3 + static_cast<int64_t>(best)) * plane + q])
          best = j;
      want_correct += static_cast<int32_t>(best) == l ? 1 : 0;
    }
  // Each row's loss is a float32 (log-sum-exp less a logit: within 1e-6 as the test above).
  EXPECT_NEAR(got[0][0], want_loss, 1e-6 * want_loss);
  EXPECT_EQ(got[0][1], want_correct);
  EXPECT_EQ(got[0][2], static_cast<double>(rows));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(got[1][i], got[0][i]) << "1 vs 2 threads, slot " << i;
}

// 1 - (1/K) sum_c (2 I_c + s) / (P_c + G_c + s), in double.
double dice_reference(const Tensor& z, const Tensor& labels, double smooth) {
  const int64_t n = z.shape(0), k = z.shape(1), p = z.numel() / (n * k);
  std::vector<double> in(static_cast<size_t>(k)), ps(in), gs(in);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t q = 0; q < p; ++q) {
      const std::vector<double> pr = softmax_at(z, b, q);
      const int32_t l = labels.data<int32_t>()[b * p + q];
      for (int64_t c = 0; c < k; ++c) {
        ps[static_cast<size_t>(c)] += pr[static_cast<size_t>(c)];
        if (l == c) in[static_cast<size_t>(c)] += pr[static_cast<size_t>(c)], gs[static_cast<size_t>(c)] += 1;
      }
    }
  double d = 0;
  for (int64_t c = 0; c < k; ++c)
    d += (2 * in[static_cast<size_t>(c)] + smooth) / (ps[static_cast<size_t>(c)] + gs[static_cast<size_t>(c)] + smooth);
  return 1 - d / static_cast<double>(k);
}

// What a memory plan counts for the Dice loss (DiceLoss::buffer_bytes) is what a forward
// leaves it holding: maps and plain (N,K) logits, chunks of pixels of one and of several.
TEST(DiceLoss, BufferBytesAreWhatAForwardHolds) {
  Context ctx(2, 1);
  Rng rng(12);
  for (const Shape& s : {Shape{2, 3, 5, 7}, Shape{4, 2}, Shape{1, 2, 256, 256}}) {
    SCOPED_TRACE(s.str());
    const Tensor z = random_tensor(s, rng);
    Tensor labels(s.rank() == 4 ? Shape{s[0], s[2], s[3]} : Shape{s[0]}, DType::I32);
    for (int64_t i = 0; i < labels.numel(); ++i)
      labels.data<int32_t>()[i] = static_cast<int32_t>(i % s[1]);
    DiceLoss d;
    d.forward(ctx, z, labels);
    int64_t want = 0;
    for (const int64_t b : DiceLoss::buffer_bytes(s)) want += b;
    EXPECT_EQ(d.held_bytes(), want);
  }
}

TEST(DiceLoss, MatchesTheFormulaAndFiniteDifferences) {
  Context ctx(1, 1);
  Rng r(5);
  // 2 x 3 x 48 x 48 pixels: 4608, two chunks of the sums.
  const Shape s{2, 3, 48, 48};
  const Tensor z = pt::random_tensor(s, r, -2.f, 2.f);
  const Tensor labels = random_labels(Shape{2, 48, 48}, 3, r);
  for (float smooth : {1.f, 0.f}) {
    DiceLoss dice(smooth);
    dice.forward(ctx, z, labels);
    const double want = dice_reference(z, labels, smooth);
    EXPECT_NEAR(dice.loss(ctx), want, 1e-6) << "smoothing " << smooth;
    const std::vector<double> st = dice.stats(ctx);
    ASSERT_EQ(st.size(), 10u);
    EXPECT_EQ(st[6] + st[7] + st[8], 2.0 * 48 * 48);  // G: every pixel has one class
    Tensor dz;
    dice.backward(ctx, dz, 1.f);
    auto f = [&](const Tensor& v) { return dice_reference(v, labels, smooth); };
    pt::GradCheckOptions o;
    o.max_checks = 60;
    o.atol = 1e-6;  // the loss moves by ~1e-4 per unit of one logit among 13824
    o.rtol = 1e-3;
    pt::check_function_gradient(f, z, dz, o, "dice, smoothing " + std::to_string(smooth));
    // Added to a gradient already there, with a weight.
    Tensor acc = dz.clone();
    dice.backward(ctx, acc, 0.5f, /*add=*/true);
    for (int64_t i = 0; i < dz.numel(); i += 97) EXPECT_NEAR(acc[i], dz[i] * 1.5f, 1e-9f + 1e-6f * std::fabs(dz[i]));
  }
  // Perfect predictions score 0.
  Tensor sure(Shape{1, 2, 4, 4});
  Tensor l(Shape{1, 4, 4}, DType::I32);
  for (int64_t q = 0; q < 16; ++q) {
    const int32_t c = static_cast<int32_t>(q % 2);
    l.data<int32_t>()[q] = c;
    sure[c * 16 + q] = 40.f;
    sure[(1 - c) * 16 + q] = -40.f;
  }
  DiceLoss d;
  d.forward(ctx, sure, l);
  EXPECT_NEAR(d.loss(ctx), 0.0, 1e-6);
  Tensor acc = Tensor::zeros(Shape{2}, DType::F64);
  d.accumulate(ctx, acc, 1);
  EXPECT_NEAR(acc.data<double>()[1], 0.0, 1e-6);
}

TEST(SegmentationLosses, BitIdenticalAtOneAndTwoThreads) {
  Rng r(7);
  const Shape s{3, 4, 40, 40};
  const Tensor z = pt::random_tensor(s, r, -2.f, 2.f);
  const Tensor labels = random_labels(Shape{3, 40, 40}, 4, r);
  std::vector<Tensor> out[2];
  for (int t = 0; t < 2; ++t) {
    Context ctx(t + 1, 1);
    SoftmaxCrossEntropy ce;
    DiceLoss dice;
    ce.forward(ctx, z, labels);
    dice.forward(ctx, z, labels);
    Tensor dz;
    ce.backward(ctx, dz);
    dice.backward(ctx, dz, 0.7f, true);
    Tensor counts = Tensor::zeros(Shape{16}, DType::I64);
    ops::segmentation_confusion(ctx, z, labels, counts);
    Tensor losses(Shape{2 + 16});
    losses[0] = ce.loss(ctx);
    losses[1] = dice.loss(ctx);
    for (int i = 0; i < 16; ++i) losses[2 + i] = static_cast<float>(counts.data<int64_t>()[i]);
    out[t] = {ce.probs().clone(), dz.clone(), losses};
  }
  for (size_t i = 0; i < 3; ++i)
    pt::expect_close(out[1][i], out[0][i], 0, 0, "2 vs 1 threads, output " + std::to_string(i));
}


}  // namespace
