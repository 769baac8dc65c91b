// Graph models (model/model.h) and their joints (layers/merge.h): Concat and Add against naive
// loops and finite differences, a tensor read by two nodes (its gradients summed), the model's
// input read twice; the checks of a graph when it is built; bit-identical at 1 and 2 threads;
// a graph's checkpoint round trip and resume, its per-layer profile (its memory plan:
// test_memory_plan.cpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "layers/activation.h"
#include "layers/conv2d.h"
#include "layers/conv_transpose2d.h"
#include "layers/maxpool2d.h"
#include "layers/merge.h"
#include "model/checkpoint.h"
#include "model/model.h"
#include "model/sequential.h"
#include "optim/adam.h"
#include "testing.h"
#include "toy_layers.h"
#include "workloads/classifier/classifier_trainer.h"
#include "train/profiler.h"
#include "workloads/segmentation/unet.h"

namespace pdnn {
namespace {

namespace pt = testing;

// x (N,3,6,5) -> a = conv3x3(x) (2 ch), b = conv3x3(x) (4 ch), c = tanh(a) read by cat and add,
// cat(c, b) -> conv3x3 (2 ch) = d, add(d, c) -> out. The input is read by two nodes, c by two.
// (3x3 convolutions: their kernels' sums do not depend on the thread count.)
Model make_diamond() {
  Model m;
  m.node<Conv2d>("a", {"input"}, 3, 2, 3, 1, 1);
  m.node<Conv2d>("b", {"input"}, 3, 4, 3, 1, 1);
  m.node<Tanh>("c", {"a"});
  m.node<Concat>("cat", {"c", "b"});
  m.node<Conv2d>("d", {"cat"}, 6, 2, 3, 1, 1);
  m.node<Add>("out", {"d", "c"});
  return m;
}

TEST(Merge, ConcatAndAddAgainstNaiveLoops) {
  Context ctx(1, 1);
  Rng rng(3);
  const Tensor a = pt::random_tensor(Shape{2, 3, 4, 5}, rng), b = pt::random_tensor(Shape{2, 2, 4, 5}, rng);
  Concat cat;
  EXPECT_EQ(cat.merged_shape({a.shape(), b.shape()}), (Shape{2, 5, 4, 5}));
  Tensor y(Shape{2, 5, 4, 5});
  cat.forward_all(ctx, {&a, &b}, y);
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < 5; ++c)
      for (int64_t p = 0; p < 20; ++p) {
        const float want = c < 3 ? a[(n * 3 + c) * 20 + p] : b[(n * 2 + c - 3) * 20 + p];
        ASSERT_EQ(y[(n * 5 + c) * 20 + p], want) << n << " " << c << " " << p;
      }
  // Backward: each input's channels of dy, exactly; a gradient not wanted is skipped.
  const Tensor dy = pt::random_tensor(y.shape(), rng);
  Tensor da(a.shape()), db(b.shape());
  cat.backward_all(ctx, dy, {&da, &db});
  Tensor back(y.shape());
  cat.forward_all(ctx, {&da, &db}, back);
  pt::expect_close(back, dy, 0, 0, "concat backward");
  cat.backward_all(ctx, dy, {nullptr, &db});
  pt::expect_error_mentions([&] { cat.merged_shape({a.shape(), Shape{2, 2, 4, 4}}); },
                            {"concat", "(2,3,4,5)", "(2,2,4,4)"});
  // Rank 2 (features): along the feature axis.
  EXPECT_EQ(cat.merged_shape({Shape{3, 4}, Shape{3, 6}}), (Shape{3, 10}));

  Add add;
  const Tensor c = pt::random_tensor(a.shape(), rng), d = pt::random_tensor(a.shape(), rng);
  Tensor s(a.shape());
  add.forward_all(ctx, {&a, &c, &d}, s);
  for (int64_t i = 0; i < s.numel(); ++i) ASSERT_EQ(s[i], (a[i] + c[i]) + d[i]) << i;
  Tensor g0(a.shape()), g2(a.shape());
  add.backward_all(ctx, dy.slice(0, a.shape()), {&g0, nullptr, &g2});
  pt::expect_close(g0, dy.slice(0, a.shape()), 0, 0, "add backward 0");
  pt::expect_close(g2, dy.slice(0, a.shape()), 0, 0, "add backward 2");
  pt::expect_error_mentions([&] { add.merged_shape({a.shape(), b.shape()}); },
                            {"add", "(2,3,4,5)", "(2,2,4,5)"});
}

// Concat, Add, a tensor read by two nodes and the input read by two: backward against central
// differences (tanh: no kinks).
TEST(GraphModel, DiamondGradientsAgreeWithFiniteDifferences) {
  Context ctx(1, 5);
  Model m = make_diamond();
  m.reset_parameters(ctx.rng());
  Rng rng(8);
  pt::GradCheckOptions o;
  o.max_checks = 60;
  pt::check_model_gradients(ctx, m, pt::random_tensor(Shape{2, 3, 6, 5}, rng), o, 0.0);
}

// Merges of three inputs, one of them the model's input, each branch read again by a later
// merge (so every branch's gradient is a sum of two or three): backward against central
// differences, the input gradient included. Bit-exact sums are FanOutGradientsAreSummedInOrder's.
TEST(GraphModel, ThreeInputMergesAgreeWithFiniteDifferences) {
  Context ctx(1, 6);
  Model m;
  m.node<Conv2d>("a", {"input"}, 2, 2, 3, 1, 1);
  m.node<Tanh>("b", {"input"});
  m.node<Sigmoid>("c", {"a"});
  m.node<Concat>("cat", {"a", "b", "input"});  // 2 + 2 + 2 channels
  m.node<Add>("sum", {"c", "b", "input"});
  m.node<Conv2d>("d", {"cat"}, 6, 2, 3, 1, 1);
  m.node<Add>("out", {"d", "sum", "a"});
  m.reset_parameters(ctx.rng());
  Rng rng(12);
  pt::GradCheckOptions o;
  o.max_checks = 60;
  pt::check_model_gradients(ctx, m, pt::random_tensor(Shape{2, 2, 5, 4}, rng), o, 0.0);
}

// The graph's output against composing its layers by hand, and its gradients against the
// same composition with the fan-out summed by hand.
TEST(GraphModel, FanOutGradientsAreSummedInOrder) {
  Context ctx(1, 5);
  Model m = make_diamond();
  m.reset_parameters(ctx.rng());
  Rng rng(2);
  const Tensor x = pt::random_tensor(Shape{2, 3, 6, 5}, rng);
  const Tensor y = m.forward(ctx, x).clone();
  const Tensor dy = pt::random_tensor(y.shape(), rng);
  m.zero_grad(ctx);
  m.backward(ctx, dy, true);
  // By hand.
  auto& conv_a = dynamic_cast<Conv2d&>(m.layer(0));
  auto& conv_b = dynamic_cast<Conv2d&>(m.layer(1));
  auto& conv_d = dynamic_cast<Conv2d&>(m.layer(4));
  Tensor a(Shape{2, 2, 6, 5}), b(Shape{2, 4, 6, 5}), c(a.shape()), cat(Shape{2, 6, 6, 5}),
      d(a.shape()), out(a.shape());
  conv_a.forward(ctx, x, a);
  conv_b.forward(ctx, x, b);
  m.layer(2).forward(ctx, a, c);
  Concat cc;
  cc.forward_all(ctx, {&c, &b}, cat);
  conv_d.forward(ctx, cat, d);
  for (int64_t i = 0; i < out.numel(); ++i) out[i] = d[i] + c[i];
  pt::expect_close(y, out, 0, 0, "output");
  // Backward by hand: out's gradient to d and c; d's to cat, split into c and b; c's summed in
  // the model's order (the reader last in forward order writes, the others add).
  std::vector<Tensor> got;
  for (const Param& p : m.params()) got.push_back(p.grad->clone());
  const Tensor dx_model = m.input_grad().clone();
  m.zero_grad(ctx);
  Tensor dcat(cat.shape()), dc(c.shape()), dc2(c.shape()), db(b.shape()), da(a.shape()),
      dx(x.shape()), dx2(x.shape());
  conv_d.backward(ctx, cat, d, dy, &dcat);
  cc.backward_all(ctx, dcat, {&dc2, &db});
  for (int64_t i = 0; i < dc.numel(); ++i) dc[i] = dy[i] + dc2[i];  // out (add) first, then cat
  m.layer(2).backward(ctx, a, c, dc, &da);
  conv_b.backward(ctx, x, b, db, &dx2);
  conv_a.backward(ctx, x, a, da, &dx);
  for (int64_t i = 0; i < dx.numel(); ++i) dx[i] = dx2[i] + dx[i];  // b (later) first, then a
  pt::expect_close(dx_model, dx, 0, 0, "dL/dx (the input read twice)");
  const std::vector<Param> ps = m.params();
  for (size_t k = 0; k < ps.size(); ++k) pt::expect_close(got[k], *ps[k].grad, 0, 0, ps[k].name);
}

TEST(GraphModel, BuildingChecksNamesInputsAndReaders) {
  Model m;
  m.node<toy::Tanh>("a", {"input"});
  pt::expect_error_mentions([&] { m.node<toy::Tanh>("b", {"nope"}); }, {"'b'", "'nope'"});
  pt::expect_error_mentions([&] { m.node<toy::Tanh>("a", {"input"}); }, {"two nodes", "'a'"});
  pt::expect_error_mentions([&] { m.node<toy::Tanh>("input", {"a"}); }, {"'input'"});
  pt::expect_error_mentions([&] { m.node<toy::Tanh>("x,y", {"a"}); }, {"'x,y'"});
  pt::expect_error_mentions([&] { m.node<toy::Tanh>("b", {"a", "input"}); }, {"'b'", "2 inputs"});
  m.node<toy::Tanh>("dead", {"a"});
  m.node<toy::Tanh>("out", {"a"});
  Context ctx(1, 1);
  pt::expect_error_mentions([&] { m.forward(ctx, Tensor::zeros(Shape{2, 3})); },
                            {"nothing reads", "'dead'"});
  EXPECT_EQ(m.index_of("out"), 2u);
  pt::expect_error_mentions([&] { m.index_of("z"); }, {"'z'", "a, dead, out"});
  // The summary names a graph's edges where they are not the chain's.
  Model g = make_diamond();
  const std::string s = g.summary(Shape{1, 3, 6, 5});
  EXPECT_NE(s.find("Concat <- c, b"), std::string::npos) << s;
  EXPECT_NE(s.find("Conv2d(3->4, k3 s1 p1) <- input"), std::string::npos) << s;
  EXPECT_EQ(g.params()[0].name, "a.weight");
}

// A graph whose activations fuse into their layers where nothing else reads the layer's
// output, and whose fused ReLU's derivative is folded into its one reader: the same numbers
// as every layer run on its own.
TEST(GraphModel, FusionWhereTheOutputHasOneReaderGivesTheSameNumbers) {
  auto build = [](bool fuse) {
    Model m;
    m.node<Conv2d>("c1", {"input"}, 2, 4, 3, 1, 1);
    m.node<ReLU>("r1", {"c1"});  // fused into c1; c2 folds its derivative
    m.node<Conv2d>("c2", {"r1"}, 4, 4, 3, 1, 1);
    m.node<ReLU>("r2", {"c2"});  // fused; read by the pool and the concat: no fold
    m.node<MaxPool2d>("p", {"r2"}, 2);
    m.node<ConvTranspose2d>("up", {"p"}, 4, 4, 2, 2);
    m.node<Concat>("cat", {"up", "r2"});
    m.node<Conv2d>("c3", {"cat"}, 8, 3, 3, 1, 1);
    m.set_fusion(fuse);
    return m;
  };
  Context ctx(1, 4);
  Rng rng(5);
  const Tensor x = pt::random_tensor(Shape{2, 2, 8, 8}, rng);
  std::vector<Tensor> out[2];
  for (int f = 0; f < 2; ++f) {
    Model m = build(f == 1);
    Rng init(9);
    m.reset_parameters(init);
    const Tensor& y = m.forward(ctx, x);
    Rng g(4);
    const Tensor dy = pt::random_tensor(y.shape(), g);
    m.zero_grad(ctx);
    m.backward(ctx, dy, true);
    out[f].push_back(y.clone());
    out[f].push_back(m.input_grad().clone());
    out[f].push_back(m.parameters().grads().clone());
    if (f == 1) {
      EXPECT_TRUE(m.absorbed(1));
      EXPECT_TRUE(m.absorbed(3));
      EXPECT_TRUE(dynamic_cast<Conv2d&>(m.layer(2)).folded_input_activation().kind == FusedAct::ReLU);
      EXPECT_EQ(dynamic_cast<Conv2d&>(m.layer(7)).folded_input_activation().kind, FusedAct::None);
    }
  }
  for (size_t i = 0; i < out[0].size(); ++i)
    pt::expect_close(out[1][i], out[0][i], 0, 0, "fused vs unfused, tensor " + std::to_string(i));
}

// A small U-Net's step: forward, the per-pixel cross-entropy, backward, at 1 and 2 threads.
std::vector<Tensor> unet_step(int threads, bool bn) {
  Context ctx(threads, 3);
  UNetOptions o;
  o.in_channels = 2;
  o.classes = 3;
  o.base = 4;
  o.depth = 2;
  o.batchnorm = bn;
  Model m = make_unet(o);
  m.reset_parameters(ctx.rng());
  Adam opt(m.parameters(), 1e-3);
  ClassifierTrainer tr(m, opt);
  Rng r(6);
  for (int s = 0; s < 2; ++s) {
    const Tensor x = pt::random_tensor(Shape{2, 2, 8, 8}, r);
    Tensor y(Shape{2, 8, 8}, DType::I32);
    for (int64_t i = 0; i < y.numel(); ++i) y.data<int32_t>()[i] = static_cast<int32_t>(r.next() % 3);
    tr.step(ctx, x, y);
  }
  return {m.parameters().values().clone(), m.parameters().grads().clone()};
}

// The graph's own work (the order of its passes, the gradient sums, Concat and Add) does not
// depend on the thread count: with 3x3 convolutions (whose kernels' sums do not either) a
// graph's step is bit-identical at 1 and 2 threads.
TEST(GraphModel, StepIsBitIdenticalAtOneAndTwoThreads) {
  std::vector<Tensor> out[2];
  for (int t = 0; t < 2; ++t) {
    Context ctx(t + 1, 5);
    Model m = make_diamond();
    m.reset_parameters(ctx.rng());
    Rng r(3);
    const Tensor x = pt::random_tensor(Shape{4, 3, 12, 10}, r);
    const Tensor& y = m.forward(ctx, x);
    out[t].push_back(y.clone());
    m.zero_grad(ctx);
    m.backward(ctx, pt::random_tensor(y.shape(), r), true);
    out[t].push_back(m.input_grad().clone());
    out[t].push_back(m.parameters().grads().clone());
  }
  for (size_t i = 0; i < out[0].size(); ++i)
    pt::expect_close(out[1][i], out[0][i], 0, 0, "2 vs 1 threads, tensor " + std::to_string(i));
}

// The U-Net's two training steps at 1 and 2 threads: the same within 1e-5 relative (its 2x2
// stride-2 transposed convolutions and 1x1 head run im2col + GEMM, whose weight gradients sum
// per-thread partials: test_conv2d.cpp's bound), with and without BatchNorm.
TEST(GraphModel, UNetStepAtOneAndTwoThreads) {
  for (bool bn : {false, true}) {
    const std::vector<Tensor> one = unet_step(1, bn), two = unet_step(2, bn);
    const std::string what = bn ? " (BatchNorm)" : "";
    pt::expect_close(two[0], one[0], 1e-6, 1e-5, "weights" + what);
    double scale = 0;
    for (int64_t i = 0; i < one[1].numel(); ++i) scale = std::max(scale, double(std::fabs(one[1][i])));
    pt::expect_close(two[1], one[1], 1e-5 * scale, 1e-4, "gradients" + what);
  }
}

TEST(GraphModel, CheckpointRoundTripAndResume) {
  const std::string path = ::testing::TempDir() + "graph_ckpt.bin";
  UNetOptions o;
  o.in_channels = 1;
  o.base = 2;
  o.depth = 2;
  o.batchnorm = true;
  Rng data(4);
  std::vector<Tensor> xs, ys;
  for (int s = 0; s < 4; ++s) {
    xs.push_back(pt::random_tensor(Shape{2, 1, 8, 8}, data));
    Tensor y(Shape{2, 8, 8}, DType::I32);
    for (int64_t i = 0; i < y.numel(); ++i) y.data<int32_t>()[i] = static_cast<int32_t>(data.next() % 2);
    ys.push_back(y);
  }
  auto train = [&](Model& m, Adam& opt, Context& ctx, int from, int to) {
    ClassifierTrainer tr(m, opt);
    for (int s = from; s < to; ++s) tr.step(ctx, xs[static_cast<size_t>(s)], ys[static_cast<size_t>(s)]);
  };
  // Four steps in one go...
  Context c1(1, 9);
  Model a = make_unet(o);
  a.reset_parameters(c1.rng());
  Adam oa(a.parameters(), 1e-2);
  train(a, oa, c1, 0, 4);
  // ... and two, a checkpoint, a fresh model loaded from it, two more.
  Context c2(1, 9);
  Model b = make_unet(o);
  b.reset_parameters(c2.rng());
  Adam ob(b.parameters(), 1e-2);
  train(b, ob, c2, 0, 2);
  save_checkpoint(path, b, &ob, 2, {{"rng", static_cast<int64_t>(c2.rng().counter())}});
  Context c3(1, 1);
  Model c = make_unet(o);
  Adam oc(c.parameters(), 1e-2);
  const CheckpointInfo info = load_checkpoint(path, c, &oc);
  EXPECT_EQ(info.epoch, 2);
  pt::expect_close(c.parameters().values(), b.parameters().values(), 0, 0, "loaded weights");
  for (const Param& p : c.buffers())  // BatchNorm's running statistics, by node name
    EXPECT_NE(p.name.find(".bn"), std::string::npos) << p.name;
  c3.rng().seed(9);
  c3.rng().set_counter(static_cast<uint64_t>(info.values.at("rng")));
  train(c, oc, c3, 2, 4);
  pt::expect_close(c.parameters().values(), a.parameters().values(), 0, 0, "resumed weights");
  // Another graph's checkpoint is refused, naming a tensor it lacks.
  UNetOptions other = o;
  other.batchnorm = false;
  Model d = make_unet(other);
  pt::expect_error_mentions([&] { load_checkpoint(path, d); }, {path, "enc1.conv1.bias"});
  std::remove(path.c_str());
}

TEST(GraphModel, ProfilerHasARowPerNodeNamedAfterIt) {
  Context ctx(1, 2);
  Model m = make_diamond();
  m.reset_parameters(ctx.rng());
  Profiler prof;
  ctx.set_profile_hook(&prof);
  Rng r(1);
  const Tensor x = pt::random_tensor(Shape{2, 3, 6, 5}, r);
  for (int s = 0; s < 2; ++s) {
    prof.begin_step(ctx);
    const Tensor& y = m.forward(ctx, x);
    m.backward(ctx, pt::random_tensor(y.shape(), r));
    prof.end_step(ctx);
  }
  ctx.set_profile_hook(nullptr);
  std::vector<std::string> labels;
  for (const Profiler::Row& row : prof.rows()) labels.push_back(row.layer);
  const std::vector<std::string> want = {"a", "b", "c", "cat", "d", "out", "other"};
  EXPECT_EQ(labels, want);
  for (const Profiler::Row& row : prof.rows())
    if (row.layer != "other") EXPECT_GT(row.fwd_ms + row.bwd_ms, 0.0) << row.layer;
}

}  // namespace
}  // namespace pdnn
