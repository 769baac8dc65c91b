// Sequential: forward/backward equal composing the layers by hand, parameter naming, the
// summary table, and buffer reuse across steps.
#include <string>

#include "core/error.h"
#include "layers/activation.h"
#include "layers/batchnorm2d.h"
#include "layers/conv2d.h"
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
  EXPECT_THROW(b.set_fusion(false), Error);
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
