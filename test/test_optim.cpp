// Optimizers: SGD (momentum, dampening, Nesterov, weight decay), Adagrad, Adadelta and Adam
// against the update formulas written out in double here, against numbers from PyTorch 1.13,
// checkpoint state round trips, thread independence and the by-name factory.
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "optim/adadelta.h"
#include "optim/adagrad.h"
#include "optim/adam.h"
#include "optim/registry.h"
#include "ops/optim.h"
#include "ops/optim_formula.h"
#include "optim/sgd.h"
#include "testing.h"

using namespace pdnn;
using pdnn::testing::expect_close;
using pdnn::testing::random_tensor;

namespace {

using Vec = std::vector<double>;

// One parameter of 5 elements and the gradients of three steps (also in the torch script below).
const Vec kW0 = {0.5, -1.0, 2.0, 0.0, -0.25};
const std::vector<Vec> kGrads = {
    {0.1, -0.2, 0.3, 0.0, 1.5}, {0.05, 0.4, -0.3, 0.2, 1.0}, {-0.1, 0.1, 0.3, -0.5, 0.5}};

Tensor tensor_of(const Vec& v) {
  Tensor t(Shape{static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t[static_cast<int64_t>(i)] = static_cast<float>(v[i]);
  return t;
}

// Weight and gradient for one optimizer under test, gathered into a flat ParamSet (w and g
// become views of its buffers; write gradients into g element by element).
struct Weight {
  Tensor w = tensor_of(kW0);
  Tensor g = Tensor::zeros(Shape{static_cast<int64_t>(kW0.size())});
  ParamSet ps;
  Weight() { ps.build({Param{"w", &w, &g}}); }
  Weight(const Weight&) = delete;
  ParamSet& params() { return ps; }
  void set_grad(const Vec& v) {
    for (size_t i = 0; i < v.size(); ++i) g[static_cast<int64_t>(i)] = static_cast<float>(v[i]);
  }
  void set_w(const Tensor& v) {
    for (int64_t i = 0; i < v.numel(); ++i) w[i] = v[i];
  }
};

// Steps `opt` through kGrads, comparing w after every step with want[step] (tolerance per the
// caller: double references differ from float updates by rounding only).
void expect_trajectory(Optimizer& opt, Weight& p, const std::vector<Vec>& want, double atol,
                       double rtol, const std::string& what) {
  Context ctx(1);
  for (size_t s = 0; s < want.size(); ++s) {
    p.set_grad(kGrads[s]);
    opt.step(ctx);
    expect_close(p.w, tensor_of(want[s]), atol, rtol,
                 what + " after step " + std::to_string(s + 1));
  }
}

// ---- the update formulas in double, element by element (torch/optim/*.py, PyTorch 1.13) ----

std::vector<Vec> ref_sgd(double lr, double momentum, double wd, double dampening, bool nesterov) {
  Vec w = kW0, buf(w.size(), 0.0);
  std::vector<Vec> out;
  for (size_t s = 0; s < kGrads.size(); ++s) {
    for (size_t i = 0; i < w.size(); ++i) {
      double d = kGrads[s][i] + wd * w[i];
      if (momentum != 0.0) {
        buf[i] = s == 0 ? d : momentum * buf[i] + (1.0 - dampening) * d;
        d = nesterov ? d + momentum * buf[i] : buf[i];
      }
      w[i] -= lr * d;
    }
    out.push_back(w);
  }
  return out;
}

std::vector<Vec> ref_adagrad(double lr, double lr_decay, double wd, double init_acc, double eps) {
  Vec w = kW0, sum(w.size(), init_acc);
  std::vector<Vec> out;
  for (size_t s = 0; s < kGrads.size(); ++s) {
    const double clr = lr / (1.0 + static_cast<double>(s) * lr_decay);
    for (size_t i = 0; i < w.size(); ++i) {
      const double d = kGrads[s][i] + wd * w[i];
      sum[i] += d * d;
      w[i] -= clr * d / (std::sqrt(sum[i]) + eps);
    }
    out.push_back(w);
  }
  return out;
}

std::vector<Vec> ref_adadelta(double lr, double rho, double eps, double wd) {
  Vec w = kW0, sq(w.size(), 0.0), acc(w.size(), 0.0);
  std::vector<Vec> out;
  for (size_t s = 0; s < kGrads.size(); ++s) {
    for (size_t i = 0; i < w.size(); ++i) {
      const double d = kGrads[s][i] + wd * w[i];
      sq[i] = rho * sq[i] + (1.0 - rho) * d * d;
      const double delta = std::sqrt(acc[i] + eps) / std::sqrt(sq[i] + eps) * d;
      acc[i] = rho * acc[i] + (1.0 - rho) * delta * delta;
      w[i] -= lr * delta;
    }
    out.push_back(w);
  }
  return out;
}

std::vector<Vec> ref_adam(double lr, double b1, double b2, double eps, double wd) {
  Vec w = kW0, m(w.size(), 0.0), v(w.size(), 0.0);
  std::vector<Vec> out;
  for (size_t s = 0; s < kGrads.size(); ++s) {
    const double t = static_cast<double>(s + 1);
    const double bc1 = 1.0 - std::pow(b1, t), bc2 = 1.0 - std::pow(b2, t);
    for (size_t i = 0; i < w.size(); ++i) {
      const double d = kGrads[s][i] + wd * w[i];
      m[i] = b1 * m[i] + (1.0 - b1) * d;
      v[i] = b2 * v[i] + (1.0 - b2) * d * d;
      w[i] -= (lr / bc1) * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + eps);
    }
    out.push_back(w);
  }
  return out;
}

// float updates vs double formulas: a few float roundings per step on values of order 1.
constexpr double kAtol = 1e-6, kRtol = 1e-6;

}  // namespace

TEST(Optim, FirstStepByHand) {
  // Element 0: w = 0.5, g = 0.1, written out without the reference functions.
  Context ctx(1);
  {
    Weight p;  // SGD: 0.5 - 0.1 * 0.1
    Sgd opt(p.params(), 0.1);
    p.set_grad(kGrads[0]);
    opt.step(ctx);
    EXPECT_NEAR(p.w[0], 0.49, 1e-7);
  }
  {
    Weight p;  // SGD, weight decay 0.5: d = 0.1 + 0.5 * 0.5 = 0.35; buf = d on step 1.
    Sgd opt(p.params(), 0.1, 0.9, 0.5);
    p.set_grad(kGrads[0]);
    opt.step(ctx);
    EXPECT_NEAR(p.w[0], 0.5 - 0.035, 1e-7);
  }
  {
    Weight p;  // Adagrad: sum = 0.01, w -= 0.01 * 0.1 / (0.1 + 1e-10)
    Adagrad opt(p.params());
    p.set_grad(kGrads[0]);
    opt.step(ctx);
    EXPECT_NEAR(p.w[0], 0.5 - 0.01 * 0.1 / (0.1 + 1e-10), 1e-7);
  }
  {
    Weight
        p;  // Adadelta: square_avg = 0.1 * 0.01 = 1e-3; delta = sqrt(1e-6)/sqrt(1e-3 + 1e-6) * 0.1
    Adadelta opt(p.params());
    p.set_grad(kGrads[0]);
    opt.step(ctx);
    EXPECT_NEAR(p.w[0], 0.5 - 1e-3 / std::sqrt(1.001e-3) * 0.1, 1e-7);
  }
  {
    Weight p;  // Adam: m/bc1 = 0.1, sqrt(v/bc2) = 0.1, so w -= 1e-3 * 0.1 / (0.1 + 1e-8)
    Adam opt(p.params());
    p.set_grad(kGrads[0]);
    opt.step(ctx);
    EXPECT_NEAR(p.w[0], 0.5 - 1e-3 * 0.1 / (0.1 + 1e-8), 1e-7);
  }
}

TEST(Optim, SgdMatchesFormulas) {
  struct Case {
    double lr, momentum, wd, dampening;
    bool nesterov;
    const char* name;
  };
  for (const Case& c :
       {Case{0.1, 0, 0, 0, false, "plain"}, Case{0.1, 0.9, 0, 0, false, "momentum"},
        Case{0.05, 0.9, 0.01, 0.1, false, "momentum+wd+dampening"},
        Case{0.1, 0.9, 0.01, 0, true, "nesterov+wd"}, Case{0.2, 0, 0.1, 0, false, "wd"}}) {
    Weight p;
    Sgd opt(p.params(), c.lr, c.momentum, c.wd, c.dampening, c.nesterov);
    expect_trajectory(opt, p, ref_sgd(c.lr, c.momentum, c.wd, c.dampening, c.nesterov), kAtol,
                      kRtol, std::string("sgd ") + c.name);
  }
}

TEST(Optim, AdagradMatchesFormulas) {
  {
    Weight p;
    Adagrad opt(p.params());
    expect_trajectory(opt, p, ref_adagrad(0.01, 0, 0, 0, 1e-10), kAtol, kRtol, "adagrad default");
  }
  {
    Weight p;
    Adagrad opt(p.params(), 0.1, 0.5, 0.01, 0.1, 1e-10);
    expect_trajectory(opt, p, ref_adagrad(0.1, 0.5, 0.01, 0.1, 1e-10), kAtol, kRtol,
                      "adagrad lr_decay+wd+initial_accumulator");
  }
}

TEST(Optim, AdadeltaMatchesFormulas) {
  {
    Weight p;
    Adadelta opt(p.params());
    expect_trajectory(opt, p, ref_adadelta(1.0, 0.9, 1e-6, 0), kAtol, kRtol, "adadelta default");
  }
  {
    Weight p;
    Adadelta opt(p.params(), 0.5, 0.95, 1e-6, 0.01);
    expect_trajectory(opt, p, ref_adadelta(0.5, 0.95, 1e-6, 0.01), kAtol, kRtol,
                      "adadelta rho 0.95 + wd");
  }
}

TEST(Optim, AdamMatchesFormulas) {
  {
    Weight p;
    Adam opt(p.params());
    expect_trajectory(opt, p, ref_adam(1e-3, 0.9, 0.999, 1e-8, 0), kAtol, kRtol, "adam default");
  }
  {
    Weight p;
    Adam opt(p.params(), 2e-4, 0.5, 0.999, 1e-8, 0.01);
    expect_trajectory(opt, p, ref_adam(2e-4, 0.5, 0.999, 1e-8, 0.01), kAtol, kRtol,
                      "adam beta1 0.5 + wd");
  }
  {
    // Steps of 0.1 instead of 1e-3: a small error in the bias corrections shows above rounding.
    Weight p;
    Adam opt(p.params(), 0.1, 0.8, 0.99, 1e-8, 0.1);
    expect_trajectory(opt, p, ref_adam(0.1, 0.8, 0.99, 1e-8, 0.1), kAtol, kRtol,
                      "adam lr 0.1, betas (0.8, 0.99) + wd");
  }
}

// Weights after each of the three steps, from PyTorch 1.13 (torch.optim, float32, CPU) by:
//   import torch
//   w0 = [0.5, -1.0, 2.0, 0.0, -0.25]
//   gs = [[0.1, -0.2, 0.3, 0.0, 1.5], [0.05, 0.4, -0.3, 0.2, 1.0], [-0.1, 0.1, 0.3, -0.5, 0.5]]
//   cases = {"adam_default": lambda p: torch.optim.Adam([p]),
//     "adam_dcgan_wd": lambda p: torch.optim.Adam([p], lr=2e-4, betas=(0.5, 0.999),
//     weight_decay=0.01), "adadelta_default": lambda p: torch.optim.Adadelta([p]),
//     "adadelta_rho95_wd": lambda p: torch.optim.Adadelta([p], lr=1.0, rho=0.95, eps=1e-6,
//     weight_decay=0.01), "adagrad_decay_wd": lambda p: torch.optim.Adagrad([p], lr=0.1,
//     lr_decay=0.5, weight_decay=0.01,
//                                                       initial_accumulator_value=0.1),
//     "sgd_nesterov_wd": lambda p: torch.optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.01,
//     nesterov=True)}
//   for name, make in cases.items():
//       p = torch.tensor(w0, dtype=torch.float32, requires_grad=True); opt = make(p); print(name)
//       for g in gs:
//           p.grad = torch.tensor(g, dtype=torch.float32); opt.step()
//           print("  {" + ", ".join("%.9gf" % v for v in p.detach().tolist()) + "},")
TEST(Optim, MatchesPyTorch113) {
  struct Case {
    const char* name;
    std::function<std::unique_ptr<Optimizer>(ParamSet&)> make;
    std::vector<Vec> want;
  };
  const std::vector<Case> cases = {
      {"adam_default",
       [](ParamSet& ps) { return std::make_unique<Adam>(ps); },
       {{0.499000013f, -0.999000013f, 1.99899995f, 0.f, -0.250999987f},
        {0.498067826f, -0.999366105f, 1.99905264f, -0.000744136749f, -0.251970351f},
        {0.497957051f, -0.999781728f, 1.99871683f, -0.000364511536f, -0.252863973f}}},
      {"adam_dcgan_wd",
       [](ParamSet& ps) {
         return std::make_unique<Adam>(ps, 2e-4, 0.5, 0.999, 1e-8, 0.01);
       },
       {{0.499799997f, -0.999800026f, 1.99979997f, 0.f, -0.250200003f},
        {0.499628961f, -0.999921322f, 1.99985313f, -0.000188514619f, -0.250383019f},
        {0.499682724f, -1.00002313f, 1.99975646f, -4.15452087e-05f, -0.250528395f}}},
      {"adadelta_default",
       [](ParamSet& ps) { return std::make_unique<Adadelta>(ps); },
       {{0.496839315f, -0.996838093f, 1.99683785f, 0.f, -0.253162265f},
        {0.494755596f, -1.00087833f, 2.00008202f, -0.00316188275f, -0.25573355f},
        {0.498140872f, -1.00225484f, 1.99678135f, 0.00101899332f, -0.257201225f}}},
      {"adadelta_rho95_wd",
       [](ParamSet& ps) { return std::make_unique<Adadelta>(ps, 1.0, 0.95, 1e-6, 0.01); },
       {{0.495531917f, -0.995528877f, 1.99552834f, 0.f, -0.254472107f},
        {0.492543399f, -1.0011282f, 1.99975324f, -0.00447101844f, -0.258040518f},
        {0.496991873f, -1.00284863f, 1.99510431f, 0.00142066693f, -0.260035396f}}},
      {"adagrad_decay_wd",
       [](ParamSet& ps) { return std::make_unique<Adagrad>(ps, 0.1, 0.5, 0.01, 0.1); },
       {{0.468487799f, -0.94467932f, 1.92887127f, 0.f, -0.347842246f},
        {0.457691014f, -0.992485046f, 1.96416211f, -0.0356348343f, -0.384217918f},
        {0.471288472f, -1.00064349f, 1.93834996f, 0.00440743938f, -0.397326112f}}},
      {"sgd_nesterov_wd",
       [](ParamSet& ps) { return std::make_unique<Sgd>(ps, 0.1, 0.9, 0.01, 0.0, true); },
       {{0.480049998f, -0.960099995f, 1.93920004f, 0.f, -0.534524977f},
        {0.461132914f, -1.0172658f, 1.96659553f, -0.0379999988f, -0.84480685f},
        {0.467163414f, -1.05064631f, 1.90526021f, 0.0408721939f, -1.12793648f}}},
  };
  for (const Case& c : cases) {
    Weight p;
    auto opt = c.make(p.params());
    // Same formulas in the same float order: within about one ulp of |w| <= 2.
    expect_trajectory(*opt, p, c.want, 1e-7, 3e-7, std::string("vs torch ") + c.name);
  }
}

TEST(Optim, StateRoundTripResumesIdentically) {
  // A checkpoint holds steps() and state(); restoring them into a fresh optimizer over a copy
  // of the weights must continue bit for bit (SGD's first-step rule depends on steps()).
  Context ctx(1);
  using Make = std::function<std::unique_ptr<Optimizer>(ParamSet&)>;
  const std::vector<std::pair<Make, std::vector<std::string>>> makers = {
      {[](ParamSet& ps) { return std::make_unique<Sgd>(ps, 0.1, 0.9); },
       {"0.momentum_buffer"}},
      {[](ParamSet& ps) { return std::make_unique<Adagrad>(ps); }, {"0.sum"}},
      {[](ParamSet& ps) { return std::make_unique<Adadelta>(ps); },
       {"0.square_avg", "0.acc_delta"}},
      {[](ParamSet& ps) { return std::make_unique<Adam>(ps); },
       {"0.exp_avg", "0.exp_avg_sq"}},
  };
  for (const auto& mk : makers) {
    Weight a;
    auto opt_a = mk.first(a.params());
    for (int s = 0; s < 2; ++s) {
      a.set_grad(kGrads[s]);
      opt_a->step(ctx);
    }
    Weight b;
    b.set_w(a.w);
    auto opt_b = mk.first(b.params());
    auto sa = opt_a->state(), sb = opt_b->state();
    ASSERT_EQ(sa.size(), mk.second.size()) << opt_a->kind();
    ASSERT_EQ(sb.size(), sa.size());
    for (size_t k = 0; k < sa.size(); ++k) {
      EXPECT_EQ(sa[k].first, mk.second[k]) << opt_a->kind();
      copy_into(*sb[k].second, *sa[k].second, ctx);  // into b's flat state
    }
    opt_b->set_steps(opt_a->steps());
    a.set_grad(kGrads[2]);
    b.set_grad(kGrads[2]);
    opt_a->step(ctx);
    opt_b->step(ctx);
    expect_close(b.w, a.w, 0, 0, opt_a->kind() + " resumed from its state");
  }
  Weight plain;
  EXPECT_TRUE(Sgd(plain.params(), 0.1).state().empty());  // no momentum: no buffers, as PyTorch
}

TEST(Optim, ThreadCountDoesNotChangeTheUpdate) {
  Rng rng(31);
  const Shape s{1 << 16};  // above the parallel threshold
  Tensor w0 = random_tensor(s, rng), g = random_tensor(s, rng);
  Tensor out[2];
  for (int k = 0; k < 2; ++k) {
    Context ctx(k + 1);
    Tensor w = w0.clone(), gk = g.clone();
    ParamSet ps;
    ps.build({Param{"w", &w, &gk}});
    Adam opt(ps, 1e-2, 0.9, 0.999, 1e-8, 0.01);
    for (int i = 0; i < 3; ++i) opt.step(ctx);
    out[k] = w.clone();
  }
  expect_close(out[1], out[0], 0, 0, "adam 1 vs 2 threads");
}

TEST(Optim, RejectsBadSettingsAndParams) {
  Weight p;
  EXPECT_THROW(Sgd(p.params(), -0.1), Error);
  EXPECT_THROW(Sgd(p.params(), 0.1, 0.0, 0.0, 0.0, true), Error);  // nesterov without momentum
  EXPECT_THROW(Sgd(p.params(), 0.1, 0.9, 0.0, 0.1, true), Error);  // nesterov with dampening
  EXPECT_THROW(Adam(p.params(), 1e-3, 1.0), Error);
  EXPECT_THROW(Adadelta(p.params(), 1.0, 1.5), Error);
  EXPECT_THROW(Adagrad(p.params(), 0.01, -1.0), Error);
  // A gradient of another shape is refused when the parameters are gathered.
  Tensor w = Tensor::zeros(Shape{3}), g = Tensor::zeros(Shape{4});
  ParamSet mismatched;
  try {
    mismatched.build({Param{"w", &w, &g}});
    FAIL() << "a gradient of another shape must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(4)"), std::string::npos) << e.what();
  }
}

TEST(Optim, FactoryByName) {
  Weight p;
  const std::vector<std::pair<std::string, float>> defaults = {
      {"adagrad", 1e-2f}, {"adadelta", 1.0f}, {"adam", 1e-3f}};
  for (const auto& d : defaults) {
    auto opt = make_optimizer(d.first, p.params(), -1.f);
    EXPECT_EQ(opt->kind(), d.first);
    EXPECT_FLOAT_EQ(opt->lr(), d.second) << d.first << " default lr";
    EXPECT_FLOAT_EQ(make_optimizer(d.first, p.params(), 0.25f)->lr(), 0.25f) << d.first;
  }
  EXPECT_EQ(make_optimizer("sgd", p.params(), 0.1f)->kind(), "sgd");
  EXPECT_THROW(make_optimizer("sgd", p.params(), -1.f), Error);  // PyTorch's SGD has no default
  try {
    make_optimizer("rmsprop", p.params(), 0.1f);
    FAIL() << "unknown optimizer must throw";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const char* n : {"rmsprop", "sgd", "adagrad", "adadelta", "adam"})
      EXPECT_NE(msg.find(n), std::string::npos) << msg;
  }
}

// Steps `opt` through kGrads and returns w after each step.
std::vector<Tensor> trajectory(Optimizer& opt, Weight& p) {
  Context ctx(1);
  std::vector<Tensor> out;
  for (const Vec& g : kGrads) {
    p.set_grad(g);
    opt.step(ctx);
    out.push_back(p.w.clone());
  }
  return out;
}

TEST(Optim, RegistryDefaultsMatchConstructors) {
  // The registry's table repeats the constructors' default arguments (so --help can list
  // them): both ways must build the same optimizer, bit for bit.
  using Make = std::function<std::unique_ptr<Optimizer>(ParamSet&)>;
  const std::vector<std::tuple<std::string, HyperValues, Make>> cases = {
      {"adagrad", {}, [](ParamSet& ps) { return std::make_unique<Adagrad>(ps); }},
      {"adadelta", {}, [](ParamSet& ps) { return std::make_unique<Adadelta>(ps); }},
      {"adam", {}, [](ParamSet& ps) { return std::make_unique<Adam>(ps); }},
      {"sgd", {{"lr", 0.1}}, [](ParamSet& ps) { return std::make_unique<Sgd>(ps, 0.1); }},
      {"sgd",
       {{"lr", 0.1}, {"momentum", 0.9}, {"weight_decay", 0.01}, {"nesterov", 1}},
       [](ParamSet& ps) { return std::make_unique<Sgd>(ps, 0.1, 0.9, 0.01, 0.0, true); }},
      {"adam",
       {{"lr", 2e-4}, {"beta1", 0.5}, {"weight_decay", 0.01}},
       [](ParamSet& ps) { return std::make_unique<Adam>(ps, 2e-4, 0.5, 0.999, 1e-8, 0.01); }},
  };
  for (const auto& [name, hp, make] : cases) {
    Weight a, b;
    auto by_name = make_optimizer(name, a.params(), hp);
    auto direct = make(b.params());
    EXPECT_EQ(by_name->kind(), name);
    const auto ta = trajectory(*by_name, a), tb = trajectory(*direct, b);
    for (size_t s = 0; s < ta.size(); ++s)
      for (int64_t i = 0; i < ta[s].numel(); ++i)
        EXPECT_EQ(ta[s][i], tb[s][i]) << name << " step " << s + 1 << " element " << i;
  }
}

TEST(Optim, RegistryRejectsUnknownHyperParameterAndListsHelp) {
  Weight p;
  pdnn::testing::expect_error_mentions(
      [&] { make_optimizer("adam", p.params(), HyperValues{{"rho", 0.9}}); }, {"adam", "rho"});
  pdnn::testing::expect_error_mentions([&] { make_optimizer("sgd", p.params(), HyperValues{}); },
                                 {"sgd", "lr", "--lr"});
  const std::string help = optimizer_help();
  for (const std::string& n : optimizer_name_list())
    EXPECT_NE(help.find(n + ": "), std::string::npos) << help;
  EXPECT_NE(help.find("lr required"), std::string::npos) << help;  // sgd
  EXPECT_NE(help.find("beta2 0.999"), std::string::npos) << help;
}

// The host's update (the CPU kernels, vectorised by the compiler, on two threads: the update of
// optimizer state a memory plan moved off the GPU) is the GPU kernels' per-element formula
// (ops/optim_formula.h, which optim.cu calls element by element) bit for bit: over odd lengths
// (vector tails), with weight decay, decayed rates, Adam's constants, and values from 1e-30 to
// 1e+3 with zeros among them.
TEST(Optim, HostUpdateIsTheDeviceFormulaBitForBit) {
  Rng r(17);
  const int64_t n = 4099;
  auto values = [&](float scale) {
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) {
      const double e = r.uniform() * 33 - 30;  // magnitudes 1e-30 .. 1e3
      x = static_cast<float>((r.uniform() < 0.5 ? -1 : 1) * std::pow(10.0, e) * scale);
    }
    for (int64_t i = 0; i < n; i += 97) v[static_cast<size_t>(i)] = 0.f;
    return v;
  };
  const CpuExec two{2};
  const int64_t step = 3;
  {  // Adagrad
    const AdagradArgs a{0.1, 0.5, 0.01f, 1e-10f};
    std::vector<float> g = values(1), w = values(1), s = values(1), w2 = w, s2 = s;
    for (auto& x : s) x = std::fabs(x);
    s2 = s;
    cpu::adagrad_update(n, a, &step, g.data(), w.data(), s.data(), two);
    const float clr = formula::adagrad_rate(a.lr, a.lr_decay, step);
    for (int64_t i = 0; i < n; ++i)
      formula::adagrad(w2[static_cast<size_t>(i)], s2[static_cast<size_t>(i)], g[static_cast<size_t>(i)], clr,
                       a.weight_decay, a.eps);
    EXPECT_EQ(0, std::memcmp(w.data(), w2.data(), w.size() * 4));
    EXPECT_EQ(0, std::memcmp(s.data(), s2.data(), s.size() * 4));
  }
  {  // Adam
    const AdamArgs a{1e-2, 0.5, 0.999, 1e-8f, 0.01f};
    std::vector<float> g = values(1), w = values(1), m = values(1), v = values(1);
    for (auto& x : v) x = std::fabs(x);
    std::vector<float> w2 = w, m2 = m, v2 = v;
    cpu::adam_update(n, a, &step, g.data(), w.data(), m.data(), v.data(), two);
    const double bc1 = 1.0 - std::pow(a.beta1, 3.0), bc2 = 1.0 - std::pow(a.beta2, 3.0);
    const float c[6] = {static_cast<float>(a.lr / bc1), static_cast<float>(std::sqrt(bc2)),
                        static_cast<float>(a.beta1), static_cast<float>(1.0 - a.beta1),
                        static_cast<float>(a.beta2), static_cast<float>(1.0 - a.beta2)};
    for (size_t i = 0; i < w.size(); ++i) formula::adam(w2[i], m2[i], v2[i], g[i], c, a.weight_decay, a.eps);
    EXPECT_EQ(0, std::memcmp(w.data(), w2.data(), w.size() * 4));
    EXPECT_EQ(0, std::memcmp(m.data(), m2.data(), m.size() * 4));
    EXPECT_EQ(0, std::memcmp(v.data(), v2.data(), v.size() * 4));
  }
  {  // SGD with Nesterov momentum
    const SgdArgs a{0.1f, 0.9f, 1.f, 0.01f, true, true};
    std::vector<float> g = values(1), w = values(1), b = values(1), w2 = w, b2 = b;
    cpu::sgd_update(n, a, &step, g.data(), w.data(), b.data(), two);
    for (size_t i = 0; i < w.size(); ++i)
      formula::sgd(w2[i], &b2[i], g[i], false, a.lr, a.momentum, a.keep, a.weight_decay, a.nesterov);
    EXPECT_EQ(0, std::memcmp(w.data(), w2.data(), w.size() * 4));
    EXPECT_EQ(0, std::memcmp(b.data(), b2.data(), b.size() * 4));
  }
  {  // Adadelta
    const AdadeltaArgs a{1.f, 0.95f, 0.05f, 1e-6f, 0.01f};
    std::vector<float> g = values(1), w = values(1), sq = values(1), acc = values(1);
    for (auto& x : sq) x = std::fabs(x);
    for (auto& x : acc) x = std::fabs(x);
    std::vector<float> w2 = w, sq2 = sq, acc2 = acc;
    cpu::adadelta_update(n, a, g.data(), w.data(), sq.data(), acc.data(), two);
    for (size_t i = 0; i < w.size(); ++i)
      formula::adadelta(w2[i], sq2[i], acc2[i], g[i], a.lr, a.rho, a.keep, a.eps, a.weight_decay);
    EXPECT_EQ(0, std::memcmp(w.data(), w2.data(), w.size() * 4));
    EXPECT_EQ(0, std::memcmp(acc.data(), acc2.data(), acc.size() * 4));
  }
  // The fused forms are what decides the bits: the plain expression differs somewhere.
  int differ = 0;
  for (int i = 0; i < 1000; ++i) {
    const float d = static_cast<float>(r.uniform(-1.f, 1.f)), sum = static_cast<float>(r.uniform(0.f, 1.f));
    volatile float dd = d * d;  // rounded on its own
    differ += static_cast<float>(sum + dd) != std::fmaf(d, d, sum);
  }
  EXPECT_GT(differ, 0);
}
