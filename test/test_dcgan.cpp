// The DCGAN (W5): the models' shapes, parameter names and counts against PyTorch's tutorial;
// DCGAN's initialisation drawn from the run's stream; gradients of whole G and D (input and
// parameters, training and evaluation mode) against directional finite differences; the noise,
// metric and history ops; one GanTrainer iteration against the recipe computed with separate
// copies of D for the real and the fake batch; a stuck discriminator reported in the CSV's
// status column.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/init.h"
#include "data/dataset.h"
#include "layers/batchnorm2d.h"
#include "layers/activation.h"
#include "layers/conv2d.h"
#include "layers/conv_transpose2d.h"
#include "losses/binary_cross_entropy.h"
#include "workloads/dcgan/dcgan_models.h"
#include "ops/basic.h"
#include "ops/metrics.h"
#include "ops/random.h"
#include "optim/adam.h"
#include "testing.h"
#include "run/csv.h"
#include "workloads/dcgan/dcgan_task.h"
#include "workloads/dcgan/gan_trainer.h"
#include "train/run_loop.h"

namespace pdnn {
namespace {

namespace fs = std::filesystem;

DcganConfig small_config() {
  DcganConfig c;
  c.nz = 6;
  c.ngf = 2;
  c.ndf = 2;
  return c;
}

// G then D from one stream, as the app draws them.
struct Gan {
  Sequential g, d;
  explicit Gan(const DcganConfig& c, uint64_t seed = 5) {
    g = make_dcgan_generator(c);
    d = make_dcgan_discriminator(c);
    Rng rng(seed);
    dcgan_init(g, rng);
    dcgan_init(d, rng);
  }
};

double sum_weighted(const Tensor& y, const Tensor& w) {
  double s = 0;
  for (int64_t i = 0; i < y.numel(); ++i) s += static_cast<double>(y[i]) * w[i];
  return s;
}

}  // namespace

TEST(Dcgan, ModelsMatchPyTorchsTutorial) {
  Sequential g = make_dcgan_generator(), d = make_dcgan_discriminator();
  EXPECT_EQ(g.output_shape(Shape{64, 100, 1, 1}), (Shape{64, 3, 64, 64}));
  EXPECT_EQ(d.output_shape(Shape{64, 3, 64, 64}), (Shape{64, 1, 1, 1}));
  // sum(p.numel() for p in netG.parameters()) of the tutorial: 3,576,704 and 2,765,568.
  EXPECT_EQ(g.num_params(), 3576704);
  EXPECT_EQ(d.num_params(), 2765568);
  // The tutorial's module indices: "main.<i>.weight" there, "<i>.weight" here.
  std::vector<std::string> names;
  for (const Param& p : g.params()) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "1.weight", "1.bias", "3.weight",
                                             "4.weight", "4.bias", "6.weight", "7.weight",
                                             "7.bias", "9.weight", "10.weight", "10.bias",
                                             "12.weight"}));
  names.clear();
  for (const Param& p : d.params()) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "2.weight", "3.weight", "3.bias",
                                             "5.weight", "6.weight", "6.bias", "8.weight",
                                             "9.weight", "9.bias", "11.weight"}));
  EXPECT_EQ(g.layer(12).describe(), "ConvTranspose2d(64->3, k4 s2 p1, no bias)");
  EXPECT_EQ(d.layer(1).describe(), "LeakyReLU(0.2)");
  // Forward FLOPs per image (SPEC.md: ~0.21 G each).
  EXPECT_NEAR(g.flops(Shape{1, 100, 1, 1}) / 1e9, 0.21, 0.03);
  EXPECT_NEAR(d.flops(Shape{1, 3, 64, 64}) / 1e9, 0.21, 0.03);
  testing::expect_error_mentions([] { make_dcgan_generator(DcganConfig{0, 64, 64, 3}); },
                                 {"nz 0"});
}

// Every convolution's weight N(0, 0.02), every BatchNorm's gamma N(1, 0.02) and beta 0, drawn
// in layer order as init::normal draws (so scripts/twins/torch_reference.py can redraw them).
TEST(Dcgan, InitialisationIsDcgansFromTheStream) {
  Sequential g = make_dcgan_generator();
  Rng rng(42);
  dcgan_init(g, rng);
  Rng again(42);
  Tensor first(Shape{100, 512, 4, 4});
  init::normal(first, 0.f, 0.02f, again);
  testing::expect_close(g.params()[0].value->clone(), first, 0, 0, "G 0.weight");
  Tensor gamma(Shape{512});
  init::normal(gamma, 1.f, 0.02f, again);
  testing::expect_close(g.params()[1].value->clone(), gamma, 0, 0, "G 1.weight (gamma)");
  for (const Param& p : g.params()) {
    const Tensor& t = *p.value;
    double mean = 0, sq = 0;
    for (int64_t i = 0; i < t.numel(); ++i) mean += t[i];
    mean /= static_cast<double>(t.numel());
    for (int64_t i = 0; i < t.numel(); ++i) sq += (t[i] - mean) * (t[i] - mean);
    const double sd = std::sqrt(sq / static_cast<double>(t.numel()));
    const bool beta = p.name.find("bias") != std::string::npos;
    const bool gamma_p = !beta && t.rank() == 1;
    SCOPED_TRACE(p.name);
    if (beta) {
      EXPECT_EQ(sd, 0.0);
      EXPECT_EQ(mean, 0.0);
    } else {
      EXPECT_NEAR(mean, gamma_p ? 1.0 : 0.0, 4 * 0.02 / std::sqrt(t.numel()) + 1e-9);
      EXPECT_NEAR(sd, 0.02, t.numel() > 1000 ? 0.001 : 0.006);
    }
  }
  // Two draws per value: the stream moved by 2 x the parameters of G that are drawn.
  int64_t drawn = 0;
  for (const Param& p : g.params())
    if (p.name.find("bias") == std::string::npos) drawn += p.value->numel();
  EXPECT_EQ(rng.counter(), static_cast<uint64_t>(2 * drawn));
}

TEST(Dcgan, NormalFillIsTheStreamsNormals) {
  Context ctx(2, 77);
  ctx.rng().set_counter(10);
  Tensor t(Shape{5001});
  ops::normal_fill(ctx, t, 0.5f, 2.f);
  EXPECT_EQ(ctx.rng().counter(), 10u + 2 * 5001);
  Rng r(77);
  r.set_counter(10);
  double mean = 0, sq = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    ASSERT_EQ(t[i], std::fmaf(2.f, static_cast<float>(r.normal()), 0.5f)) << i;
    mean += t[i];
    sq += (t[i] - 0.5) * (t[i] - 0.5);
  }
  EXPECT_NEAR(mean / 5001, 0.5, 0.1);
  EXPECT_NEAR(std::sqrt(sq / 5001), 2.0, 0.1);
  testing::expect_error_mentions([&] { ops::normal_fill(ctx, t, 0.f, -1.f); }, {"stddev"});
}

TEST(Dcgan, ProbabilityMeansAndHistoryRows) {
  Context ctx(1);
  Tensor acc = Tensor::zeros(Shape{3}, DType::F64);
  Tensor a(Shape{4}), b(Shape{4});
  for (int i = 0; i < 4; ++i) {
    a[i] = 0.1f * static_cast<float>(i + 1);   // mean 0.25: 0.25 from 0
    b[i] = 0.995f + 0.001f * static_cast<float>(i);  // mean 0.9965: 0.0035 from 1
  }
  ops::prob_mean_into(ctx, b, acc, 1);
  EXPECT_NEAR(acc.data<double>()[1], 0.9965, 1e-6);
  EXPECT_NEAR(acc.data<double>()[2], 0.0035, 1e-6);
  ops::prob_mean_into(ctx, a, acc, 1);
  EXPECT_NEAR(acc.data<double>()[1], 1.2465, 1e-6);
  EXPECT_NEAR(acc.data<double>()[2], 0.25, 1e-6);  // the farthest from 0 or 1 so far
  Tensor hist = Tensor::zeros(Shape{2, 3}, DType::F64), row = Tensor::zeros(Shape{1}, DType::I64);
  ops::append_row(ctx, acc, hist, row);
  acc.data<double>()[0] = 7;
  ops::append_row(ctx, acc, hist, row);
  ops::append_row(ctx, acc, hist, row);  // past the end: dropped, still counted
  EXPECT_EQ(row.data<int64_t>()[0], 3);
  EXPECT_EQ(hist.data<double>()[0], 0.0);
  EXPECT_EQ(hist.data<double>()[3], 7.0);
  EXPECT_NEAR(hist.data<double>()[4], 1.2465, 1e-6);
  testing::expect_error_mentions([&] { ops::prob_mean_into(ctx, a, acc, 2); }, {"slots"});
}

// The DCGAN's layer stacks (small widths) with Tanh in place of every ReLU and LeakyReLU: a
// finite difference through a whole model with BatchNorm in training mode moves thousands of
// coupled pre-activations, some always across a ReLU's kink, so the kink-free twin is what can
// be checked end to end; the real activations are checked on their own (test_activation.cpp),
// fused into BatchNorm (test_batchnorm2d.cpp) and here by fused == unfused on the real models.
Sequential smooth_generator(const DcganConfig& c) {
  Sequential g;
  const int64_t w = c.ngf;
  g.emplace<ConvTranspose2d>(c.nz, 8 * w, 4, 1, 0, false);
  for (int64_t k = 8 * w; k > w; k /= 2) {
    g.emplace<BatchNorm2d>(k);
    g.emplace<Tanh>();
    g.emplace<ConvTranspose2d>(k, k / 2, 4, 2, 1, false);
  }
  g.emplace<BatchNorm2d>(w);
  g.emplace<Tanh>();
  g.emplace<ConvTranspose2d>(w, c.nc, 4, 2, 1, false);
  g.emplace<Tanh>();
  return g;
}
Sequential smooth_discriminator(const DcganConfig& c) {
  Sequential d;
  const int64_t w = c.ndf;
  d.emplace<Conv2d>(c.nc, w, 4, 2, 1, false);
  d.emplace<Tanh>();
  for (int64_t k = w; k < 8 * w; k *= 2) {
    d.emplace<Conv2d>(k, 2 * k, 4, 2, 1, false);
    d.emplace<BatchNorm2d>(2 * k);
    d.emplace<Tanh>();
  }
  d.emplace<Conv2d>(8 * w, 1, 4, 1, 0, false);
  d.emplace<Sigmoid>();
  return d;
}

// Gradients of a whole float32 model by directional derivatives. Elementwise central
// differences are at the mercy of rounding: an element whose gradient is small next to L's
// rounding noise divided by the step (seen: -1.53e-05 against -1.72e-05) passes or fails by
// the CPU's kernels. Along a random direction v the signal <g, v> sums over every element,
// while the noise stays that of one evaluation of L.
//
// The bound. L = sum_i w_i y_i is summed in double; each output y_i of the float32 forward
// carries a rounding error of a few u |y_i| (u = 2^-24), independent across outputs, so L's
// error is below
//   delta = K * u * ||w o y||_2,   K = kNoiseK = 32,
// (measured on the models here: up to 10 u ||w o y|| for G, 3 for D; the test checks the
// premise where it runs: L at q + k*64u*v, k = 1..4, less its linear part, scatters within
// delta).
// With D(h) = (L(q+hv) - L(q-hv)) / 2h at h and h/2 and Richardson's R = (4 D(h/2) - D(h)) / 3
// (the h^2 terms cancel):
//   |R - <g,v>| <= 3 delta / h          rounding: (4 * 2delta/h + 2delta/2h) / 3
//                + |D(h) - D(h/2)| / 3   truncation: the h^2 error D(h/2) had, which bounds the
//                                        h^4 one left in R while h is in the Taylor range.
// v's elements are uniform in [-s, s], s each tensor's RMS (1 for an all-zero one, a bias), and
// h = 0.05 (scanned: R is best between 0.03 and 0.1; rounding dominates below, the h^4 term
// above; a quarter of it when every parameter moves at once). Rounding q + hv to float32 adds
// u * sum |g_i| (|q_i| + s_i) to delta.
constexpr double kU = 0x1p-24;
constexpr double kNoiseK = 32;
constexpr double kStep = 0.05;
// A real check: for the input and for all parameters together the bound must come out below
// 2% of |<g,v>| (it does at 0.1% .. 0.9%), so a vanishing gradient (a saturated sigmoid) cannot
// pass; BatchNorm's backward with dx or dgamma scaled by 1.01 fails it (tried).
constexpr double kResolve = 2e-2;

struct Direction {
  double analytic = 0, numeric = 0, bound = 0, scatter = 0, delta = 0;
};

// q's gradient g against the directional derivative of loss at q along v, v_i uniform in
// [-scale_i, scale_i]; rss = ||w o y||_2 of the model's output at q.
Direction directional_check(const std::function<double(const Tensor&)>& loss, const Tensor& q,
                            const Tensor& g, const Tensor& scale, double rss, Rng& rng,
                            double h = kStep) {
  Tensor v = testing::random_tensor(q.shape(), rng);
  Direction r;
  double in = 0;
  for (int64_t i = 0; i < q.numel(); ++i) {
    v[i] *= scale[i];
    r.analytic += double(g[i]) * v[i];
    in += std::fabs(double(g[i])) * (std::fabs(q[i]) + scale[i]);
  }
  Tensor qs = q.clone();
  auto at = [&](double step) {
    for (int64_t i = 0; i < q.numel(); ++i) qs[i] = float(double(q[i]) + step * v[i]);
    return loss(qs);
  };
  auto central = [&](double step) { return (at(step) - at(-step)) / (2 * step); };
  const double d1 = central(h), d2 = central(h / 2);
  r.numeric = (4 * d2 - d1) / 3;
  r.delta = kNoiseK * kU * rss + kU * in;
  r.bound = 3 * r.delta / h + std::fabs(d1 - d2) / 3;
  const double l0 = at(0);
  for (int k = 1; k <= 4; ++k)
    r.scatter = std::max(r.scatter, std::fabs(at(64 * k * kU) - l0 - 64 * k * kU * r.analytic));
  return r;
}

// Each element's scale for v: its tensor's RMS, or 1 when the tensor is all zero.
void fill_rms(const Tensor& t, float* out) {
  double ss = 0;
  for (int64_t i = 0; i < t.numel(); ++i) ss += double(t[i]) * t[i];
  const float s = ss > 0 ? float(std::sqrt(ss / double(t.numel()))) : 1.f;
  std::fill(out, out + t.numel(), s);
}

// dL/d(input), dL/d(each parameter) and dL/d(all parameters at once) of a whole model, L =
// sum(w * model(x)), with the model in the mode it is in, by directional_check.
void check_model(Context& ctx, Sequential& m, const Tensor& x, Rng& rng, const std::string& what) {
  const Tensor w = testing::random_tensor(m.output_shape(x.shape()), rng);
  m.zero_grad(ctx);
  const Tensor& y = m.forward(ctx, x);
  double rss = 0;
  for (int64_t i = 0; i < y.numel(); ++i) rss += double(y[i]) * w[i] * double(y[i]) * w[i];
  rss = std::sqrt(rss);
  m.backward(ctx, w, /*want_input_grad=*/true);
  const Tensor dx = m.input_grad().clone();
  auto loss = [&](const Tensor& v) {
    const double s = sum_weighted(m.forward(ctx, v), w);
    m.forget_forward();
    return s;
  };
  auto expect = [&](const Direction& r, const std::string& name, bool resolve) {
    const std::string at = what + " " + name + ": <g,v> " + std::to_string(r.analytic) +
                           ", finite differences " + std::to_string(r.numeric);
    EXPECT_LE(std::fabs(r.numeric - r.analytic), r.bound) << at;
    EXPECT_LE(r.scatter, r.delta) << at << ": L's rounding noise exceeds the bound's premise";
    if (resolve) EXPECT_LE(r.bound, kResolve * std::fabs(r.analytic)) << at;
  };
  Tensor sx(x.shape());
  fill_rms(x, sx.data());
  expect(directional_check(loss, x, dx, sx, rss, rng), "d(input)", true);

  // One parameter tensor at a time (no resolution asked: some have little signal), then all
  // of them as one vector.
  std::vector<Param> ps = m.params();
  int64_t total = 0;
  for (const Param& p : ps) total += p.value->numel();
  Tensor all(Shape{total}), all_grad(Shape{total}), all_scale(Shape{total});
  int64_t off = 0;
  for (const Param& p : ps) {
    const Tensor dp = p.grad->clone(), saved = p.value->clone();
    Tensor sp(saved.shape());
    fill_rms(saved, sp.data());
    std::copy(saved.data(), saved.data() + saved.numel(), all.data() + off);
    std::copy(dp.data(), dp.data() + dp.numel(), all_grad.data() + off);
    std::copy(sp.data(), sp.data() + sp.numel(), all_scale.data() + off);
    off += saved.numel();
    auto loss_p = [&](const Tensor& v) {
      std::copy(v.data(), v.data() + v.numel(), p.value->data());
      return loss(x);
    };
    expect(directional_check(loss_p, saved, dp, sp, rss, rng), "d" + p.name, false);
    std::copy(saved.data(), saved.data() + saved.numel(), p.value->data());
  }
  auto loss_all = [&](const Tensor& v) {
    int64_t o = 0;
    for (const Param& p : ps) {
      std::copy(v.data() + o, v.data() + o + p.value->numel(), p.value->data());
      o += p.value->numel();
    }
    return loss(x);
  };
  expect(directional_check(loss_all, all, all_grad, all_scale, rss, rng, kStep / 4),
         "d(all parameters)", true);
  loss_all(all);  // the weights back
}

// Whole stacks against directional finite differences, in training mode (BatchNorm's batch
// statistics couple every sample) and in evaluation mode (running statistics): the input
// gradients (D's is what G trains on), every parameter tensor's, and all of them together.
TEST(Dcgan, WholeModelGradientsMatchFiniteDifferences) {
  Context ctx(1, 3);
  const DcganConfig cfg = small_config();
  for (bool train : {true, false}) {
    SCOPED_TRACE(train ? "training mode" : "evaluation mode");
    Rng rng(9);
    Sequential d = smooth_discriminator(cfg), g = smooth_generator(cfg);
    dcgan_init(g, rng);
    dcgan_init(d, rng);
    // Running statistics of 150 batches (momentum 0.1: the initial variance 1 keeps a weight
    // of 0.9^150; with fewer, it dominates the small variances of DCGAN's N(0, 0.02) weights and
    // the evaluation-mode model computes next to nothing).
    for (int k = 0; k < 150; ++k) {
      d.forward(ctx, testing::random_tensor(Shape{3, 3, 64, 64}, rng));
      d.forget_forward();
      g.forward(ctx, testing::random_tensor(Shape{3, cfg.nz, 1, 1}, rng));
      g.forget_forward();
    }
    d.train(train);
    g.train(train);
    check_model(ctx, d, testing::random_tensor(Shape{3, 3, 64, 64}, rng), rng, "D");
    check_model(ctx, g, testing::random_tensor(Shape{3, cfg.nz, 1, 1}, rng), rng, "G");
  }
}

// The real models: with every ReLU/LeakyReLU fused into the BatchNorm or convolution before it
// (the default) the gradients equal those of the unfused model.
TEST(Dcgan, FusedModelsEqualUnfused) {
  Context ctx(1, 3);
  for (bool train : {true, false}) {
    Gan fused(small_config()), plain(small_config());
    plain.g.set_fusion(false);
    plain.d.set_fusion(false);
    Rng rng(4);
    const Tensor z = testing::random_tensor(Shape{4, 6, 1, 1}, rng);
    const Tensor dimg = testing::random_tensor(Shape{4, 3, 64, 64}, rng);
    const Tensor dp = testing::random_tensor(Shape{4, 1, 1, 1}, rng);
    for (Gan* m : {&fused, &plain}) {
      m->g.train(train);
      m->d.train(train);
      m->g.zero_grad(ctx);
      m->d.zero_grad(ctx);
      m->d.forward(ctx, m->g.forward(ctx, z));
      m->d.backward(ctx, dp, true);
      m->g.backward(ctx, dimg, true);
    }
    EXPECT_TRUE(fused.d.absorbed(4) && fused.g.absorbed(2));
    EXPECT_FALSE(plain.d.absorbed(4));
    const std::string mode = train ? " (training)" : " (evaluation)";
    testing::expect_close(fused.d.input_grad(), plain.d.input_grad(), 0, 0, "D dx" + mode);
    testing::expect_close(fused.g.input_grad(), plain.g.input_grad(), 0, 0, "G dz" + mode);
    testing::expect_close(fused.d.parameters().grads(), plain.d.parameters().grads(), 0, 0,
                          "D grads" + mode);
    testing::expect_close(fused.g.parameters().grads(), plain.g.parameters().grads(), 0, 0,
                          "G grads" + mode);
  }
}

// One iteration of the trainer equals the recipe computed by hand with separate copies of D for
// the real and the fake batch (so nothing rests on one model's buffers holding the right
// activations): D's gradient is the sum of the two batches', Adam on D, then G's gradient
// through the updated D; the metrics are those batches' losses and mean outputs.
TEST(Dcgan, TrainerIterationEqualsTheRecipeWithSeparateCopies) {
  const DcganConfig cfg = small_config();
  const int64_t n = 4;
  Rng data(12);
  const Tensor real = testing::random_tensor(Shape{n, 3, 64, 64}, data);

  Context ctx(1, 31);
  Gan gan(cfg);
  Adam opt_g(gan.g.parameters(), 2e-4, 0.5), opt_d(gan.d.parameters(), 2e-4, 0.5);
  GanTrainer tr(gan.g, gan.d, opt_g, opt_d, cfg.nz, 8);
  tr.step(ctx, real);
  const GanMetrics m = tr.metrics(ctx);

  // The reference, from the same initial weights and the same stream position.
  Context rctx(1, 31);
  Gan ref(cfg), d_real(cfg), d_fake(cfg);
  Tensor z(Shape{n, cfg.nz, 1, 1});
  ops::normal_fill(rctx, z);
  BinaryCrossEntropy bce;
  Tensor ones(Shape{n, 1, 1, 1}), zeros = Tensor::zeros(Shape{n, 1, 1, 1}), dp;
  ones.fill(1.f);
  d_real.d.zero_grad(rctx);
  const Tensor p_real = d_real.d.forward(rctx, real).clone();
  bce.forward(rctx, p_real, ones);
  const double loss_real = bce.loss(rctx);
  bce.backward(rctx, dp);
  d_real.d.backward(rctx, dp);
  const Tensor fake = ref.g.forward(rctx, z).clone();
  d_fake.d.zero_grad(rctx);
  const Tensor p_fake = d_fake.d.forward(rctx, fake).clone();
  bce.forward(rctx, p_fake, zeros);
  const double loss_fake = bce.loss(rctx);
  bce.backward(rctx, dp);
  d_fake.d.backward(rctx, dp);
  Adam ref_opt_d(ref.d.parameters(), 2e-4, 0.5), ref_opt_g(ref.g.parameters(), 2e-4, 0.5);
  Tensor& gd = ref.d.parameters().grads();
  for (int64_t i = 0; i < gd.numel(); ++i)
    gd[i] = d_real.d.parameters().grads()[i] + d_fake.d.parameters().grads()[i];
  ref_opt_d.step(rctx);
  ref.g.zero_grad(rctx);
  ref.d.zero_grad(rctx);
  bce.forward(rctx, ref.d.forward(rctx, fake), ones);
  const double loss_g = bce.loss(rctx);
  bce.backward(rctx, dp);
  ref.d.backward(rctx, dp, true);
  ref.g.backward(rctx, ref.d.input_grad());
  ref_opt_g.step(rctx);

  testing::expect_close(gan.d.parameters().values(), ref.d.parameters().values(), 1e-7, 1e-5,
                        "D after one iteration");
  testing::expect_close(gan.g.parameters().values(), ref.g.parameters().values(), 1e-7, 1e-5,
                        "G after one iteration");
  EXPECT_EQ(m.steps, 1);
  EXPECT_NEAR(m.d_loss, loss_real + loss_fake, 1e-5);
  EXPECT_NEAR(m.g_loss, loss_g, 1e-5);
  double mr = 0, mf = 0;
  for (int64_t i = 0; i < n; ++i) mr += p_real[i] / n, mf += p_fake[i] / n;
  EXPECT_NEAR(m.d_x, mr, 1e-6);
  EXPECT_NEAR(m.d_g_z, mf, 1e-6);
  EXPECT_EQ(ctx.rng().counter(), rctx.rng().counter());
  // History: the one step's values; a second step appends a second row of its own values.
  tr.step(ctx, real);
  const std::vector<GanIteration> h = tr.history(ctx);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_NEAR(h[0].d_loss, loss_real + loss_fake, 1e-5);
  EXPECT_NEAR(h[0].d_x, mr, 1e-6);
  const GanMetrics m2 = tr.metrics(ctx);
  EXPECT_NEAR(h[1].g_loss, m2.g_loss - m.g_loss, 1e-9);
  tr.reset_metrics(ctx);
  EXPECT_TRUE(tr.history(ctx).empty());
  EXPECT_EQ(tr.metrics(ctx).steps, 0);
}

// A discriminator certain of everything (its last convolution scaled up so D(x) = 1 for every
// image, real or fake, and a learning rate too small to change that) makes the epoch's row say
// "stuck" in its status column; the run goes on.
// G's update deferred into the next iteration (GanTrainer::DeferG, forced on one process: the
// reordering alone) trains both models exactly as the undeferred iterations: weights, BatchNorm
// buffers, Adam's state and step counts and the metrics agree bit for bit after flush(), across
// a smaller last batch and a sample forward of G in evaluation mode between "epochs" (the
// grid, after the flush). Before the flush G lags one update (the deferral did happen).
TEST(Dcgan, DeferredGUpdateTrainsBitForBitAsTheUndeferredOne) {
  const DcganConfig cfg = small_config();
  Rng data(21);
  std::vector<Tensor> batches;
  for (int i = 0; i < 4; ++i)
    batches.push_back(testing::random_tensor(Shape{i == 3 ? 3 : 5, 3, 64, 64}, data));
  const Tensor zs = testing::random_tensor(Shape{4, cfg.nz, 1, 1}, data);
  struct Run {
    Context ctx{1, 17};
    Gan gan{small_config()};
    Adam opt_g{gan.g.parameters(), 2e-4, 0.5}, opt_d{gan.d.parameters(), 2e-4, 0.5};
    GanTrainer tr{gan.g, gan.d, opt_g, opt_d, small_config().nz, 8};
    Tensor sample;
  };
  Run plain, deferred;
  plain.tr.set_defer_g(GanTrainer::DeferG::kNever);
  deferred.tr.set_defer_g(GanTrainer::DeferG::kAlways);
  EXPECT_FALSE(plain.tr.defers_g());
  EXPECT_TRUE(deferred.tr.defers_g());
  auto expect_same = [](Run& a, Run& b, const std::string& when) {
    for (auto [ma, mb, name] : {std::tuple<Sequential*, Sequential*, const char*>{
                                    &a.gan.g, &b.gan.g, "G"},
                                {&a.gan.d, &b.gan.d, "D"}}) {
      testing::expect_close(ma->parameters().values(), mb->parameters().values(), 0, 0,
                            std::string(name) + " weights " + when);
      const auto ba = ma->buffers(), bb = mb->buffers();
      for (size_t k = 0; k < ba.size(); ++k)
        testing::expect_close(*ba[k].value, *bb[k].value, 0, 0,
                              std::string(name) + " " + ba[k].name + " " + when);
    }
    for (auto [oa, ob] : {std::pair<Adam*, Adam*>{&a.opt_g, &b.opt_g}, {&a.opt_d, &b.opt_d}}) {
      EXPECT_EQ(oa->steps(), ob->steps()) << when;
      const StateList sa = oa->state(), sb = ob->state();
      ASSERT_EQ(sa.size(), sb.size());
      for (size_t k = 0; k < sa.size(); ++k)
        testing::expect_close(*sa[k].second, *sb[k].second, 0, 0, "Adam " + sa[k].first + " " + when);
    }
    const GanMetrics ma = a.tr.metrics(a.ctx), mb = b.tr.metrics(b.ctx);
    EXPECT_EQ(ma.d_loss, mb.d_loss) << when;
    EXPECT_EQ(ma.g_loss, mb.g_loss) << when;
    EXPECT_EQ(ma.d_x, mb.d_x) << when;
    EXPECT_EQ(ma.d_g_z, mb.d_g_z) << when;
    EXPECT_EQ(a.ctx.rng().counter(), b.ctx.rng().counter()) << when;
  };
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (Run* r : {&plain, &deferred}) {
      r->tr.reset_metrics(r->ctx);
      for (const Tensor& b : batches) r->tr.step(r->ctx, b);
    }
    EXPECT_FALSE(plain.tr.g_update_pending());
    ASSERT_TRUE(deferred.tr.g_update_pending());
    EXPECT_EQ(deferred.opt_g.steps() + 1, plain.opt_g.steps());
    EXPECT_NE(deferred.gan.g.parameters().values()[0], plain.gan.g.parameters().values()[0])
        << "G should lag one update before the flush";
    deferred.tr.flush(deferred.ctx);
    EXPECT_FALSE(deferred.tr.g_update_pending());
    deferred.tr.flush(deferred.ctx);  // nothing pends: nothing happens
    expect_same(plain, deferred, "after epoch " + std::to_string(epoch + 1));
    for (Run* r : {&plain, &deferred}) {  // the sample grid
      r->gan.g.train(false);
      r->sample = r->gan.g.forward(r->ctx, zs).clone();
      r->gan.g.train(true);
    }
    testing::expect_close(deferred.sample, plain.sample, 0, 0, "samples");
  }
  pdnn::testing::expect_error_mentions(
      [&] {
        deferred.tr.step(deferred.ctx, batches[0]);
        deferred.tr.set_defer_g(GanTrainer::DeferG::kNever);
      },
      {"set_defer_g()", "pending", "flush first"});
}

TEST(Dcgan, StuckDiscriminatorIsReportedInTheStatusColumn) {
  char tmpl[] = "/tmp/pdnn_dcgan_stuck_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const DcganConfig cfg = small_config();
  Context ctx(1, 3);
  Gan gan(cfg);
  // The last BatchNorm's beta large and positive (so every input of the last convolution is
  // about 50) and the last convolution's weights 1: every logit is in the thousands.
  Tensor& last = *gan.d.params().back().value;                      // 11.weight
  Tensor& beta = *gan.d.params()[gan.d.params().size() - 2].value;  // 9.bias
  for (int64_t i = 0; i < beta.numel(); ++i) beta[i] = 50.f;
  for (int64_t i = 0; i < last.numel(); ++i) last[i] = 1.f;
  Adam opt_g(gan.g.parameters(), 1e-12, 0.5), opt_d(gan.d.parameters(), 1e-12, 0.5);
  LabeledImages imgs{Tensor(Shape{16, 3, 64, 64}), std::vector<int32_t>(16, 0)};
  Rng r(4);
  imgs.images = testing::random_tensor(Shape{16, 3, 64, 64}, r);
  TensorDataset data(imgs, 1);
  DcganTaskOptions o;
  o.batch = 8;
  o.images_per_epoch = 16;
  o.nz = cfg.nz;
  o.dataset = "random";
  DcganTask task(ctx, gan.g, gan.d, opt_g, opt_d, data, o);
  RunConfig rc;
  rc.app = "test";
  rc.model = "dcgan";
  rc.dataset = "random";
  rc.batch = 8;
  rc.epochs = 1;
  rc.out = dir + "/r.csv";
  rc.status_column = true;
  RunLoop loop(ctx, rc, task);
  EXPECT_EQ(loop.run(), 0);
  std::vector<std::string> cols = {"app", "model", "dataset", "device", "gpu", "threads",
                                   "batch", "epoch", "train_d_loss", "train_g_loss", "train_d_x",
                                   "train_d_g_z", "train_s_per_iter", "status", "seconds", "images_per_s",
                                   "git_rev", "host", "timestamp"};
  const auto rows = CsvWriter(rc.out, cols).rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_NEAR(std::atof(rows[0][10].c_str()), 1.0, 1e-4);  // D(x)
  EXPECT_NEAR(std::atof(rows[0][11].c_str()), 1.0, 1e-4);  // D(G(z))
  EXPECT_NE(rows[0][13].find("stuck: every batch mean of D(x) was within 0.01 of 1 and of "
                             "D(G(z)) within 0.01 of 1 all epoch"),
            std::string::npos)
      << rows[0][13];
  fs::remove_all(dir);
}

}  // namespace pdnn
