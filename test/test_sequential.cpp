// Sequential: forward/backward equal composing the layers by hand, parameter naming, the
// summary table, and buffer reuse across steps.
#include <cmath>
#include <string>

#include "core/error.h"
#include "layers/activation.h"
#include "layers/batchnorm2d.h"
#include "layers/conv2d.h"
#include "layers/conv_transpose2d.h"
#include "layers/dense.h"
#include "layers/dropout.h"
#include "layers/flatten.h"
#include "layers/maxpool2d.h"
#include "model/sequential.h"
#include "testing.h"
#include "toy_layers.h"

namespace pdnn {

namespace {

Sequential make_mlp(Rng& rng) {
  Sequential m;
  m.emplace<toy::Linear>(5, 4);
  m.emplace<toy::Tanh>();
  m.emplace<toy::Linear>(4, 3);
  m.reset_parameters(rng);
  return m;
}

void expect_equal(const Tensor& a, const Tensor& b, const std::string& what) {
  testing::expect_close(a, b, 0.0, 0.0, what);
}

}  // namespace

TEST(Sequential, ForwardBackwardEqualComposingByHand) {
  Context ctx(1, 7);
  Rng rng(11);
  Sequential m = make_mlp(rng);
  const Tensor x = testing::random_tensor(Shape{6, 5}, rng);
  const Tensor dy = testing::random_tensor(Shape{6, 3}, rng);

  const Tensor& y = m.forward(ctx, x);
  m.zero_grad(ctx);
  m.backward(ctx, dy, /*want_input_grad=*/true);

  // By hand, with our own buffers, through the same layer objects.
  Tensor h1(Shape{6, 4}), h2(Shape{6, 4}), yy(Shape{6, 3});
  m.layer(0).forward(ctx, x, h1);
  m.layer(1).forward(ctx, h1, h2);
  m.layer(2).forward(ctx, h2, yy);
  expect_equal(y, yy, "output");

  std::vector<Tensor> grads_model;
  for (const Param& p : m.params()) grads_model.push_back(p.grad->clone());
  m.zero_grad(ctx);
  Tensor g2(Shape{6, 4}), g1(Shape{6, 4}), g0(Shape{6, 5});
  m.layer(2).backward(ctx, h2, yy, dy, &g2);
  m.layer(1).backward(ctx, h1, h2, g2, &g1);
  m.layer(0).backward(ctx, x, h1, g1, &g0);
  const std::vector<Param> ps = m.params();
  ASSERT_EQ(ps.size(), grads_model.size());
  for (size_t i = 0; i < ps.size(); ++i) expect_equal(grads_model[i], *ps[i].grad, ps[i].name);
  expect_equal(m.input_grad(), g0, "input gradient");
}

TEST(Sequential, FirstLayerGetsNoInputGradUnlessAsked) {
  Context ctx(1, 7);
  Rng rng(3);
  Sequential m = make_mlp(rng);
  auto& first = static_cast<toy::Linear&>(m.layer(0));
  auto& last = static_cast<toy::Linear&>(m.layer(2));
  const Tensor x = testing::random_tensor(Shape{2, 5}, rng);
  const Tensor dy = testing::random_tensor(Shape{2, 3}, rng);
  m.forward(ctx, x);
  m.backward(ctx, dy);
  EXPECT_FALSE(first.got_dx());
  EXPECT_TRUE(last.got_dx());
  m.backward(ctx, dy, true);
  EXPECT_TRUE(first.got_dx());
  EXPECT_EQ(m.input_grad().shape(), x.shape());
}

TEST(Sequential, ParameterGradientsAccumulateAcrossBackwards) {
  Context ctx(1, 7);
  Rng rng(5);
  Sequential m = make_mlp(rng);
  const Tensor x = testing::random_tensor(Shape{3, 5}, rng);
  const Tensor dy = testing::random_tensor(Shape{3, 3}, rng);
  m.forward(ctx, x);
  m.zero_grad(ctx);
  m.backward(ctx, dy);
  const Tensor once = m.params()[0].grad->clone();
  m.backward(ctx, dy);
  Tensor twice_ref = once.clone();
  for (int64_t i = 0; i < twice_ref.numel(); ++i) twice_ref[i] = 2.f * once[i];
  testing::expect_close(*m.params()[0].grad, twice_ref, 1e-6, 1e-6, "0.weight after two");
}

TEST(Sequential, ParamNamesAndOwners) {
  Rng rng(1);
  Sequential m = make_mlp(rng);
  const std::vector<Param> ps = m.params();
  ASSERT_EQ(ps.size(), 4u);
  EXPECT_EQ(ps[0].name, "0.weight");
  EXPECT_EQ(ps[1].name, "0.bias");
  EXPECT_EQ(ps[2].name, "2.weight");
  EXPECT_EQ(ps[3].name, "2.bias");
  EXPECT_EQ(m.param_layers(), (std::vector<size_t>{0, 0, 2, 2}));
  const std::vector<Param> bs = m.buffers();
  ASSERT_EQ(bs.size(), 2u);
  EXPECT_EQ(bs[1].name, "2.seen");
  EXPECT_EQ(m.num_params(), 5 * 4 + 4 + 4 * 3 + 3);
  EXPECT_EQ(m.output_shape(Shape{9, 5}), (Shape{9, 3}));
  EXPECT_DOUBLE_EQ(m.flops(Shape{9, 5}), 2.0 * 9 * 5 * 4 + 9 * 4 + 2.0 * 9 * 4 * 3);
}

TEST(Sequential, SummaryListsLayersShapesAndParameterCounts) {
  Sequential m;
  m.emplace<toy::Linear>(300, 1000);
  m.emplace<toy::Tanh>();
  m.emplace<toy::Linear>(1000, 7);
  const std::string s = m.summary(Shape{16, 300});
  EXPECT_NE(s.find("ToyLinear(300->1000)"), std::string::npos) << s;
  EXPECT_NE(s.find("ToyTanh"), std::string::npos) << s;
  EXPECT_NE(s.find("ToyLinear(1000->7)"), std::string::npos) << s;
  EXPECT_NE(s.find("(16,1000)"), std::string::npos) << s;
  EXPECT_NE(s.find("(16,7)"), std::string::npos) << s;
  EXPECT_NE(s.find("301,000"), std::string::npos) << s;  // 300*1000 + 1000
  EXPECT_NE(s.find("7,007"), std::string::npos) << s;
  EXPECT_NE(s.find("Total params: 308,007"), std::string::npos) << s;
  // forward MFLOPs of the first layer: 2*16*300*1000 = 9.6 M
  EXPECT_NE(s.find("9.60"), std::string::npos) << s;
  // A shape the first layer cannot take is reported, not printed.
  EXPECT_THROW(m.summary(Shape{16, 299}), Error);
}

TEST(Sequential, BuffersAreReusedAcrossSteps) {
  Context ctx(1, 7);
  Rng rng(9);
  Sequential m = make_mlp(rng);
  const Tensor dy = testing::random_tensor(Shape{8, 3}, rng);
  std::vector<const float*> first;
  const float* first_dx = nullptr;
  for (int step = 0; step < 3; ++step) {
    const Tensor x = testing::random_tensor(Shape{8, 5}, rng);  // a fresh input every step
    m.forward(ctx, x);
    m.backward(ctx, dy, true);
    if (step == 0) {
      for (size_t i = 0; i < m.size(); ++i) first.push_back(m.activation(i).data());
      first_dx = m.input_grad().data();
    } else {
      for (size_t i = 0; i < m.size(); ++i) EXPECT_EQ(m.activation(i).data(), first[i]) << i;
      EXPECT_EQ(m.input_grad().data(), first_dx);
    }
  }
  // A smaller batch (the last one of an epoch) fits in the same buffers.
  const Tensor x = testing::random_tensor(Shape{3, 5}, rng);
  m.forward(ctx, x);
  for (size_t i = 0; i < m.size(); ++i) EXPECT_EQ(m.activation(i).data(), first[i]) << i;
  EXPECT_EQ(m.activation(2).shape(), (Shape{3, 3}));
}

TEST(Sequential, MisuseThrows) {
  Context ctx(1, 7);
  Rng rng(2);
  Sequential m = make_mlp(rng);
  const Tensor dy = testing::random_tensor(Shape{2, 3}, rng);
  EXPECT_THROW(m.backward(ctx, dy), Error);  // before forward
  m.forward(ctx, testing::random_tensor(Shape{4, 5}, rng));
  EXPECT_THROW(m.backward(ctx, dy), Error);  // dy of the wrong batch
  EXPECT_THROW(m.forward(ctx, testing::random_tensor(Shape{4, 6}, rng)), Error);
  Sequential empty;
  EXPECT_THROW(empty.forward(ctx, dy), Error);
  // a layer is replaced before the first forward only (fusion is decided there), never by null
  EXPECT_THROW(m.replace(0, std::make_unique<ReLU>()), Error);
  Sequential fresh = make_mlp(rng);
  EXPECT_THROW(fresh.replace(0, nullptr), Error);
  EXPECT_THROW(fresh.replace(fresh.size(), std::make_unique<ReLU>()), Error);
  const std::string old_kind = fresh.layer(1).kind();
  EXPECT_EQ(fresh.replace(1, std::make_unique<ReLU>())->kind(), old_kind);
  EXPECT_EQ(fresh.layer(1).kind(), "ReLU");
}


// Fusion: activations taken over by the layer before them give the same numbers as running
// every layer on its own (forward output, input gradient, every parameter gradient), across
// conv, dense and BatchNorm, ReLU and LeakyReLU, with two steps so the skipped layers'
// gradient buffers are reused.
TEST(Sequential, FusedActivationsGiveTheSameNumbers) {
  auto build = [](bool fuse) {
    Sequential m;
    m.emplace<Conv2d>(2, 4, 3, 1, 1);
    m.emplace<ReLU>();
    m.emplace<Conv2d>(4, 6, 4, 2, 1);
    m.emplace<BatchNorm2d>(6);
    m.emplace<LeakyReLU>(0.2f);
    m.emplace<Conv2d>(6, 5, 3);
    m.emplace<LeakyReLU>(0.1f);
    m.emplace<Flatten>();
    m.emplace<Dense>(5 * 2 * 2, 7);
    m.emplace<ReLU>();
    m.emplace<Dense>(7, 3);
    m.emplace<LeakyReLU>(-0.5f);  // a negative slope cannot be fused: it runs on its own
    m.set_fusion(fuse);
    Rng init(3);
    m.reset_parameters(init);
    return m;
  };
  Sequential a = build(false), b = build(true);
  Context ctx(1, 2);
  Rng r(8);
  for (int step = 0; step < 2; ++step) {
    const Tensor x = testing::random_tensor(Shape{3, 2, 8, 8}, r);
    const Tensor dy = testing::random_tensor(Shape{3, 3}, r);
    const Tensor ya = a.forward(ctx, x).clone();
    const Tensor& yb = b.forward(ctx, x);
    expect_equal(yb, ya, "output");
    a.zero_grad(ctx);
    b.zero_grad(ctx);
    a.backward(ctx, dy, true);
    b.backward(ctx, dy, true);
    expect_equal(b.input_grad(), a.input_grad(), "input gradient");
    expect_equal(b.parameters().grads(), a.parameters().grads(), "parameter gradients");
  }
  for (size_t i : {1, 4, 6, 9}) EXPECT_TRUE(b.absorbed(i)) << i;
  for (size_t i : {0, 2, 3, 5, 7, 8, 10, 11}) EXPECT_FALSE(b.absorbed(i)) << i;
  for (size_t i = 0; i < a.size(); ++i) EXPECT_FALSE(a.absorbed(i)) << i;
  EXPECT_NE(b.layer(0).describe().find("+ ReLU"), std::string::npos) << b.layer(0).describe();
  // The first ReLU's derivative is folded into the second convolution's dx; BatchNorm, Flatten
  // and Dense do not fold one, so those layers keep their own.
  EXPECT_TRUE(dynamic_cast<Conv2d&>(b.layer(0)).activation_grad_taken());
  EXPECT_EQ(dynamic_cast<Conv2d&>(b.layer(2)).folded_input_activation().kind, FusedAct::ReLU);
  EXPECT_FALSE(dynamic_cast<Conv2d&>(b.layer(5)).activation_grad_taken());
  EXPECT_THROW(b.set_fusion(false), Error);
}

// A fused activation's derivative folded into the next layer (Layer::fold_input_activation):
// a convolution writes its dx through it, a pooling multiplies dy by it at the argmax (with and
// without a fused dropout), so the layer before reads no output of its own in backward. The
// same numbers as every layer on its own, for ReLU and LeakyReLU, over training steps.
TEST(Sequential, ActivationDerivativeFoldedIntoTheNextLayer) {
  auto build = [](bool fuse) {
    Sequential m;
    m.emplace<Conv2d>(2, 4, 3, 1, 1);
    m.emplace<LeakyReLU>(0.2f);
    m.emplace<Conv2d>(4, 4, 3, 1, 1);
    m.emplace<ReLU>();
    m.emplace<MaxPool2d>(2);
    m.emplace<Conv2d>(4, 6, 3, 1, 1);
    m.emplace<LeakyReLU>(0.1f);
    m.emplace<MaxPool2d>(2);
    m.emplace<Dropout>(0.25f);
    m.emplace<Flatten>();
    m.emplace<Dense>(6 * 2 * 2, 3);
    m.set_fusion(fuse);
    Rng init(5);
    m.reset_parameters(init);
    return m;
  };
  Sequential a = build(false), b = build(true);
  Context ca(2, 7), cb(2, 7);
  Rng r(9);
  for (int step = 0; step < 2; ++step) {
    const Tensor x = testing::random_tensor(Shape{3, 2, 8, 8}, r);
    const Tensor dy = testing::random_tensor(Shape{3, 3}, r);
    const Tensor ya = a.forward(ca, x).clone();
    expect_equal(b.forward(cb, x), ya, "output");
    a.zero_grad(ca);
    b.zero_grad(cb);
    a.backward(ca, dy, true);
    b.backward(cb, dy, true);
    expect_equal(b.input_grad(), a.input_grad(), "input gradient");
    expect_equal(b.parameters().grads(), a.parameters().grads(), "parameter gradients");
  }
  for (size_t i : {0, 2, 5})
    EXPECT_TRUE(dynamic_cast<Conv2d&>(b.layer(i)).activation_grad_taken()) << i;
  EXPECT_EQ(dynamic_cast<Conv2d&>(b.layer(2)).folded_input_activation().kind, FusedAct::LeakyReLU);
  EXPECT_TRUE(b.absorbed(8));  // the dropout, in the second pooling
  for (size_t i = 0; i < a.size(); ++i) EXPECT_FALSE(a.absorbed(i)) << i;
  for (size_t i : {0, 2, 5})
    EXPECT_FALSE(dynamic_cast<Conv2d&>(a.layer(i)).activation_grad_taken()) << i;
}

// A Dropout after a MaxPool2d is taken over by the pool (W3's order): the same outputs,
// gradients and RNG position as running both, in training and evaluation.
TEST(Sequential, FusedPoolDropoutGivesTheSameNumbers) {
  auto build = [](bool fuse) {
    Sequential m;
    m.emplace<Conv2d>(2, 4, 3, 1, 1);
    m.emplace<ReLU>();
    m.emplace<MaxPool2d>(2);
    m.emplace<Dropout>(0.25f);
    m.emplace<Flatten>();
    m.emplace<Dense>(4 * 4 * 4, 3);
    m.set_fusion(fuse);
    Rng init(4);
    m.reset_parameters(init);
    return m;
  };
  Sequential a = build(false), b = build(true);
  Context ca(2, 6), cb(2, 6);
  Rng r(8);
  for (int step = 0; step < 3; ++step) {
    const bool training = step < 2;
    a.train(training);
    b.train(training);
    const Tensor x = testing::random_tensor(Shape{5, 2, 8, 8}, r);
    const Tensor dy = testing::random_tensor(Shape{5, 3}, r);
    const Tensor ya = a.forward(ca, x).clone();
    const Tensor& yb = b.forward(cb, x);
    expect_equal(yb, ya, "output");
    EXPECT_EQ(cb.rng().counter(), ca.rng().counter());
    a.zero_grad(ca);
    b.zero_grad(cb);
    a.backward(ca, dy, true);
    b.backward(cb, dy, true);
    expect_equal(b.input_grad(), a.input_grad(), "input gradient");
    expect_equal(b.parameters().grads(), a.parameters().grads(), "parameter gradients");
  }
  EXPECT_TRUE(b.absorbed(3));
  EXPECT_NE(b.layer(2).describe().find("+ Dropout(0.25)"), std::string::npos)
      << b.layer(2).describe();
}

}  // namespace pdnn

namespace pdnn {
namespace {

// A discriminator in miniature: convolution, BatchNorm in training mode (its batch statistics
// belong to the last forward), LeakyReLU, dense head.
Sequential make_small_d() {
  Sequential m;
  m.set_name("D");
  m.emplace<Conv2d>(2, 3, 3, 1, 1);
  m.emplace<BatchNorm2d>(3);
  m.emplace<LeakyReLU>(0.2f);
  m.emplace<Flatten>();
  m.emplace<Dense>(3 * 4 * 4, 1);
  Rng init(21);
  m.reset_parameters(init);
  return m;
}

std::vector<Tensor> grads_of(Sequential& m) {
  std::vector<Tensor> g;
  for (const Param& p : m.params()) g.push_back(p.grad->clone());
  return g;
}

}  // namespace

// The real/fake ordering of a GAN's discriminator: forward + backward per batch gives the sum
// of each batch's gradients (as two separate models give them); a backward after a second
// forward, meant for the first one's output, would use the second batch's activations and
// BatchNorm statistics, and is refused.
TEST(Sequential, BackwardAgainstOverwrittenActivationsIsRefused) {
  Context ctx(1, 3);
  Rng rng(8);
  const Tensor real = testing::random_tensor(Shape{4, 2, 4, 4}, rng, 0.f, 1.f);
  const Tensor fake = testing::random_tensor(Shape{4, 2, 4, 4}, rng, -1.f, 0.f);
  const Tensor dy_real = testing::random_tensor(Shape{4, 1}, rng);
  const Tensor dy_fake = testing::random_tensor(Shape{4, 1}, rng);

  // The reference: each batch through its own copy.
  Sequential a = make_small_d(), b = make_small_d();
  a.zero_grad(ctx);
  b.zero_grad(ctx);
  a.forward(ctx, real);
  a.backward(ctx, dy_real);
  b.forward(ctx, fake);
  b.backward(ctx, dy_fake);
  const std::vector<Tensor> ga = grads_of(a), gb = grads_of(b);

  // The right order on one model: the sum.
  Sequential m = make_small_d();
  m.zero_grad(ctx);
  m.forward(ctx, real);
  m.backward(ctx, dy_real);
  m.forward(ctx, fake);
  m.backward(ctx, dy_fake);
  const std::vector<Tensor> gm = grads_of(m);
  for (size_t i = 0; i < gm.size(); ++i) {
    Tensor sum = ga[i].clone();
    for (int64_t k = 0; k < sum.numel(); ++k) sum[k] += gb[i][k];
    testing::expect_close(gm[i], sum, 1e-6, 1e-5, "gradient " + std::to_string(i));
  }

  // The wrong order is a real hazard: against the fake batch's activations and statistics the
  // real batch's dy gives other gradients...
  Sequential w = make_small_d();
  w.zero_grad(ctx);
  w.forward(ctx, fake);
  w.backward(ctx, dy_real);
  const std::vector<Tensor> gw = grads_of(w);
  double diff = 0;
  for (int64_t k = 0; k < gw[0].numel(); ++k) diff += std::fabs(gw[0][k] - ga[0][k]);
  EXPECT_GT(diff, 1e-3);
  // ... so after forward(real), forward(fake) the backward meant for the real batch is refused,
  // naming the model, and leaves the gradients alone.
  Sequential n = make_small_d();
  n.zero_grad(ctx);
  n.forward(ctx, real);
  n.forward(ctx, fake);
  testing::expect_error_mentions([&] { n.backward(ctx, dy_real); },
                                 {"model D", "2 forwards with no backward",
                                  "wrong activations", "real batch, then fake batch"});
  for (const Tensor& g : grads_of(n))
    for (int64_t k = 0; k < g.numel(); ++k) ASSERT_EQ(g[k], 0.f);
  // It stays refused until the pending forward is given up; then forward + backward works.
  EXPECT_THROW(n.backward(ctx, dy_fake), Error);
  n.forget_forward();
  n.forward(ctx, fake);
  n.backward(ctx, dy_fake);

  // A training-mode forward declared as needing no backward does not count ...
  Sequential f = make_small_d();
  f.forward(ctx, real);
  f.forget_forward();
  f.forward(ctx, fake);
  f.backward(ctx, dy_fake);
  // ... nor does one in evaluation mode (sampling, scoring) before a training step ...
  f.train(false);
  f.forward(ctx, real);
  f.train(true);
  f.forward(ctx, fake);
  f.backward(ctx, dy_fake);
  f.backward(ctx, dy_fake);  // a second backward of the same forward is fine (accumulates)
  // ... but an evaluation forward that overwrites a training forward's activations does.
  f.forward(ctx, real);
  f.train(false);
  f.forward(ctx, fake);
  f.train(true);
  EXPECT_THROW(f.backward(ctx, dy_real), Error);
}

// want_param_grads = false (a discriminator passing G its gradient): the same input gradient,
// and the convolutions and BatchNorm leave their parameter gradients alone.
TEST(Sequential, BackwardWithoutParameterGradients) {
  Context ctx(1, 3);
  Rng rng(5);
  const Tensor x = testing::random_tensor(Shape{4, 2, 4, 4}, rng);
  const Tensor dy = testing::random_tensor(Shape{4, 1}, rng);
  Sequential a = make_small_d(), b = make_small_d();
  for (Sequential* m : {&a, &b}) {
    m->zero_grad(ctx);
    m->forward(ctx, x);
  }
  a.backward(ctx, dy, true);
  b.backward(ctx, dy, true, /*want_param_grads=*/false);
  expect_equal(b.input_grad(), a.input_grad(), "dx");
  const std::vector<Tensor> gb = grads_of(b);
  for (size_t i = 0; i < 4; ++i)  // conv weight and bias, BatchNorm gamma and beta
    for (int64_t k = 0; k < gb[i].numel(); ++k) ASSERT_EQ(gb[i][k], 0.f) << b.params()[i].name;
  // The flag is per call: the next backward accumulates them again.
  b.forward(ctx, x);
  b.backward(ctx, dy, true);
  for (size_t i = 0; i < 4; ++i) expect_equal(grads_of(b)[i], grads_of(a)[i], b.params()[i].name);
  // A transposed convolution (with a bias) too.
  Sequential t;
  t.emplace<ConvTranspose2d>(2, 3, 4, 2, 1);
  Rng init(2);
  t.reset_parameters(init);
  t.zero_grad(ctx);
  t.forward(ctx, x);
  t.backward(ctx, testing::random_tensor(Shape{4, 3, 8, 8}, rng), true, false);
  for (const Tensor& g : grads_of(t))
    for (int64_t k = 0; k < g.numel(); ++k) ASSERT_EQ(g[k], 0.f);
}

}  // namespace pdnn
