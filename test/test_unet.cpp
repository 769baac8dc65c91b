// The segmentation pieces (their losses: test_losses.cpp): IoU and Dice per class from
// confusion counts; the U-Net's shape, its checks, its gradients against finite differences
// (tiny width, depth 2, with and without BatchNorm), a few steps that learn a trivially
// learnable map; on a GPU, its step against the CPU's with the GPU's ReLU masks, and as a
// CUDA graph and under a memory plan against the eager step.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "core/cuda_state.h"
#include "core/error.h"
#include "data/dataset.h"
#include "layers/activation.h"
#include "layers/conv2d.h"
#include "layers/conv_transpose2d.h"
#include "losses/dice_loss.h"
#include "losses/softmax_cross_entropy.h"
#include "ops/metrics.h"
#include "optim/adam.h"
#include "optim/registry.h"
#include "testing.h"
#include "workloads/classifier/classifier_trainer.h"
#include "workloads/model_zoo.h"
#include "workloads/segmentation/segmentation_metrics.h"
#include "workloads/segmentation/unet.h"

namespace pdnn {
namespace {

namespace pt = testing;

Tensor random_labels(const Shape& s, int k, Rng& r) {
  Tensor t(s, DType::I32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<int32_t>()[i] = static_cast<int32_t>(r.next() % k);
  return t;
}

TEST(SegmentationMetrics, IouAndDicePerClassFromCounts) {
  // Truth 0 0 1 1 2 / prediction 0 1 1 1 0 (one image of 5 pixels, 4 classes: 3 never seen).
  Tensor z = Tensor::zeros(Shape{1, 4, 1, 5});
  const int pred[5] = {0, 1, 1, 1, 0};
  for (int q = 0; q < 5; ++q) z[pred[q] * 5 + q] = 1.f;
  const Tensor labels = pt::labels_tensor({0, 0, 1, 1, 2});
  Context ctx(2, 1);
  SegmentationCounts counts(4);
  counts.add(ctx, z, labels);
  counts.add(ctx, z, labels);  // accumulated over a set
  const std::vector<int64_t> c = counts.counts(ctx);
  EXPECT_EQ(c[0 * 4 + 0], 2);
  EXPECT_EQ(c[0 * 4 + 1], 2);
  EXPECT_EQ(c[1 * 4 + 1], 4);
  EXPECT_EQ(c[2 * 4 + 0], 2);
  const SegmentationScores s = counts.scores(ctx);
  // Class 0: TP 2, FP 2, FN 2: IoU 1/3, Dice 1/2. Class 1: TP 4, FP 2, FN 0: IoU 2/3, Dice 4/5.
  // Class 2: TP 0, FN 2: 0 and 0. Class 3: never present nor predicted: no score.
  EXPECT_DOUBLE_EQ(s.iou[0], 1.0 / 3);
  EXPECT_DOUBLE_EQ(s.dice[0], 0.5);
  EXPECT_DOUBLE_EQ(s.iou[1], 2.0 / 3);
  EXPECT_DOUBLE_EQ(s.dice[1], 0.8);
  EXPECT_DOUBLE_EQ(s.iou[2], 0.0);
  EXPECT_TRUE(std::isnan(s.iou[3]));
  EXPECT_DOUBLE_EQ(s.mean_iou, (1.0 / 3 + 2.0 / 3 + 0) / 3);
  EXPECT_DOUBLE_EQ(s.mean_dice, (0.5 + 0.8 + 0) / 3);
  EXPECT_DOUBLE_EQ(s.pixel_acc, 0.6);
  EXPECT_EQ(s.pixels, 10);
  counts.reset(ctx);
  EXPECT_EQ(counts.counts(ctx)[0], 0);
  pt::expect_error_mentions([&] { counts.add(ctx, z, pt::labels_tensor({0, 0, 1, 1, 4})); },
                            {"label 4", "pixel 4"});
}

// A split of random images (2,8,8) with random 3-class maps, held in memory.
class MapSet : public Dataset {
 public:
  MapSet(int64_t n, Rng& r) : x_(pt::random_tensor(Shape{n, 2, 8, 8}, r)), y_(random_labels(Shape{n, 8, 8}, 3, r)) {}
  int64_t size() const override { return x_.shape(0); }
  Shape sample_shape() const override { return Shape{2, 8, 8}; }
  Shape target_shape() const override { return Shape{8, 8}; }
  int num_classes() const override { return 3; }
  std::string class_name(int k) const override { return std::to_string(k); }
  int32_t label(int64_t) const override { return 0; }
  void read(int64_t i, float* dst, std::optional<uint64_t>) const override {
    std::copy(x_.data() + i * 128, x_.data() + (i + 1) * 128, dst);
  }
  void read_with_target(int64_t i, float* dst, int32_t* t, std::optional<uint64_t> k) const override {
    read(i, dst, k);
    std::copy(y_.data<int32_t>() + i * 64, y_.data<int32_t>() + (i + 1) * 64, t);
  }
  const Tensor& images() const { return x_; }
  const Tensor& maps() const { return y_; }

 private:
  Tensor x_, y_;
};

// The evaluation of a split with per-pixel targets, in batches that do not divide it (and with
// and without the prefetching loader), against the whole split in one forward: the loss and
// pixel accuracy as means over all pixels, the confusion matrix counted per pixel.
TEST(SegmentationEvaluation, PerPixelMeansAndCountsOverTheSplit) {
  Context ctx(1, 4);
  UNetOptions o;
  o.in_channels = 2;
  o.classes = 3;
  o.base = 2;
  o.depth = 2;
  Model m = make_unet(o);
  m.reset_parameters(ctx.rng());
  Rng r(8);
  const MapSet data(7, r);
  m.train(false);
  const Tensor z = m.forward(ctx, data.images()).clone();
  SoftmaxCrossEntropy ce;
  ce.forward(ctx, z, data.maps());
  SegmentationCounts want(3);
  want.add(ctx, z, data.maps());
  const std::vector<int64_t> counts = want.counts(ctx);
  int64_t diag = 0;
  for (int k = 0; k < 3; ++k) diag += counts[static_cast<size_t>(k * 4)];
  m.train(true);
  for (int prefetch : {0, 1}) {
    SCOPED_TRACE("prefetch " + std::to_string(prefetch));
    EvalOptions eo;
    eo.batch = 3;
    eo.prefetch = prefetch;
    eo.confusion = true;
    const EvalResult got = evaluate_classifier(ctx, m, data, eo);
    EXPECT_EQ(got.count, 7 * 64);
    EXPECT_NEAR(got.loss, ce.loss(ctx), 1e-6);
    EXPECT_DOUBLE_EQ(got.acc, static_cast<double>(diag) / (7 * 64));
    EXPECT_EQ(got.confusion, counts);
  }
}

UNetOptions tiny(bool bn) {
  UNetOptions o;
  o.in_channels = 2;
  o.classes = 3;
  o.base = 2;
  o.depth = 2;
  o.batchnorm = bn;
  return o;
}

TEST(UNet, ShapesNamesAndChecks) {
  // Ronneberger's four levels at a sixteenth of the width (base 4: 4 .. 64 channels at the
  // bottom); at base 64, 31,031,810 parameters with padded convolutions (this count's formula).
  UNetOptions o;
  EXPECT_EQ(o.base, 64);
  EXPECT_EQ(o.depth, 4);
  o.base = 4;
  Model m = make_unet(o);
  EXPECT_EQ(m.output_shape(Shape{1, 3, 64, 64}), (Shape{1, 2, 64, 64}));
  EXPECT_EQ(m.layer(m.index_of("mid.conv2")).describe(), "Conv2d(64->64, k3 s1 p1)");
  EXPECT_EQ(m.layer(m.index_of("up4")).describe(), "ConvTranspose2d(64->32, k2 s2 p0)");
  EXPECT_EQ(m.layer(m.index_of("dec1.conv1")).describe(), "Conv2d(8->4, k3 s1 p1)");
  EXPECT_EQ(m.num_params(), 121730);
  Model b = make_unet(tiny(true));
  EXPECT_EQ(b.layer(b.index_of("enc1.conv1")).describe(), "Conv2d(2->2, k3 s1 p1, no bias)");
  EXPECT_EQ(b.layer(b.index_of("enc1.bn1")).kind(), "BatchNorm2d");
  pt::expect_error_mentions([] { check_unet_input(tiny(false), Shape{1, 2, 12, 10}); },
                            {"(1,2,12,10)", "multiples of 4"});
  pt::expect_error_mentions([] { check_unet_input(tiny(false), Shape{1, 3, 12, 12}); },
                            {"(N,2,H,W)"});
  check_unet_input(tiny(false), Shape{1, 2, 12, 8});
  UNetOptions bad = tiny(false);
  bad.classes = 1;
  pt::expect_error_mentions([&] { make_unet(bad); }, {"unet", "1 classes"});
  // The zoo's entry.
  const SegmentationModel& z = segmentation_model("unet");
  EXPECT_EQ(z.defaults.base, 64);
  EXPECT_EQ(z.defaults.depth, 4);
  EXPECT_EQ(model_optimizer_name("unet"), "adam");
  pt::expect_error_mentions([] { segmentation_model("vnet"); }, {"'vnet'", "unet"});
}

// A tiny U-Net's gradients against central differences, in training mode (BatchNorm with its
// batch statistics), ReLU and pool kinks skipped.
TEST(UNet, GradientsAgreeWithFiniteDifferences) {
  for (bool bn : {false, true}) {
    SCOPED_TRACE(bn ? "BatchNorm" : "no BatchNorm");
    Context ctx(1, 11);
    Model m = make_unet(tiny(bn));
    m.reset_parameters(ctx.rng());
    Rng r(4);
    pt::GradCheckOptions o;
    o.max_checks = 12;
    o.atol = 2e-3;
    o.rtol = 2e-2;
    pt::check_model_gradients(ctx, m, pt::random_tensor(Shape{2, 2, 8, 8}, r), o);
  }
}

// Pixels whose class is the sign pattern of the first input channel: a few Adam steps on the
// per-pixel cross-entropy and Dice lower both (the trainer's step with a map's labels).
TEST(UNet, LearnsAMapInAFewSteps) {
  Context ctx(1, 3);
  UNetOptions o = tiny(true);
  o.classes = 2;
  o.base = 4;
  Model m = make_unet(o);
  m.reset_parameters(ctx.rng());
  Adam opt(m.parameters(), 1e-2);
  ClassifierTrainer tr(m, opt);
  Rng r(1);
  const Tensor x = pt::random_tensor(Shape{4, 2, 16, 16}, r);
  Tensor y(Shape{4, 16, 16}, DType::I32);
  for (int64_t b = 0; b < 4; ++b)
    for (int64_t q = 0; q < 256; ++q) y.data<int32_t>()[b * 256 + q] = x[b * 512 + q] > 0.f;
  DiceLoss dice;
  double first_ce = 0, first_dice = 0;
  for (int s = 0; s < 30; ++s) {
    tr.reset_metrics(ctx);
    tr.step(ctx, x, y);
    dice.forward(ctx, tr.logits(), y);
    if (s == 0) first_ce = tr.metrics(ctx).loss(), first_dice = dice.loss(ctx);
  }
  EXPECT_LT(tr.metrics(ctx).loss(), 0.5 * first_ce);
  EXPECT_LT(dice.loss(ctx), 0.5 * first_dice);
  EXPECT_GT(tr.metrics(ctx).acc(), 0.9);  // per pixel
}

// ---- on a GPU (skipped, saying so, without one) ----

// ReLU with a fixed mask: y = x where the mask is set, else 0; dx likewise. The CPU side of a
// parity test runs with the GPU's masks, so that a pre-activation within rounding of 0, which
// one side puts on the other side of the kink, moves no gradient.
class PinnedReLU : public Layer {
 public:
  explicit PinnedReLU(Tensor mask) : mask_(std::move(mask)) {}
  std::string kind() const override { return "PinnedReLU"; }
  Shape output_shape(const Shape& in) const override { return in; }
  void forward(Context&, const Tensor& x, Tensor& y) override {
    check_same_shape("pinned relu", x.shape(), mask_.shape());
    for (int64_t i = 0; i < x.numel(); ++i) y[i] = mask_[i] > 0.f ? x[i] : 0.f;
  }
  void backward(Context&, const Tensor&, const Tensor&, const Tensor& dy, Tensor* dx) override {
    if (dx)
      for (int64_t i = 0; i < dy.numel(); ++i) (*dx)[i] = mask_[i] > 0.f ? dy[i] : 0.f;
  }

 private:
  Tensor mask_;
};

struct StepResult {
  std::vector<std::string> names;
  std::vector<Tensor> grads;
  std::vector<Tensor> masks;  // per ReLU node, in node order: its output > 0
  float loss = 0;
};

// One step of the tiny U-Net (base 4, depth 2, 3 classes) on a fixed batch: forward, the
// per-pixel cross-entropy, backward. On the GPU as trained (activations fused); on the CPU
// with every layer on its own, the convolutions on im2col + GEMM (the formula the GPU
// computes; Winograd rounds within a bound of its own) and, given masks, each ReLU pinned.
StepResult unet_grads(Context& ctx, Device dev, bool bn, const std::vector<Tensor>& masks = {}) {
  UNetOptions o = tiny(bn);
  o.base = 4;
  Model m = make_unet(o);
  Rng init(17);
  m.reset_parameters(init);
  if (dev == Device::CPU) {
    m.set_fusion(false);
    size_t r = 0;
    for (size_t i = 0; i < m.size(); ++i) {
      if (auto* c = dynamic_cast<Conv2d*>(&m.layer(i))) c->set_algo(ConvAlgo::PerImage);
      if (auto* c = dynamic_cast<ConvTranspose2d*>(&m.layer(i))) c->set_algo(ConvAlgo::PerImage);
      if (m.layer(i).kind() == "ReLU" && !masks.empty())
        m.replace(i, std::make_unique<PinnedReLU>(masks.at(r++)));
    }
  }
  m.to(dev, ctx);
  Rng r(23);
  const Tensor xh = pt::random_tensor(Shape{2, 2, 16, 16}, r);
  const Tensor yh = random_labels(Shape{2, 16, 16}, 3, r);
  const Tensor x = dev == Device::CPU ? xh : xh.to(dev, ctx);
  const Tensor y = dev == Device::CPU ? yh : yh.to(dev, ctx);
  SoftmaxCrossEntropy ce;
  ce.forward(ctx, m.forward(ctx, x), y);
  Tensor dz;
  ce.backward(ctx, dz);
  m.zero_grad(ctx);
  m.backward(ctx, dz);
  StepResult s;
  s.loss = ce.loss(ctx);
  for (const Param& p : m.params()) {
    s.names.push_back(p.name);
    s.grads.push_back(p.grad->to(Device::CPU, ctx));
  }
  for (size_t i = 0; i < m.size(); ++i)
    if (m.layer(i).kind() == "ReLU") {
      Tensor h = m.activation(i).to(Device::CPU, ctx);
      for (int64_t k = 0; k < h.numel(); ++k) h[k] = h[k] > 0.f ? 1.f : 0.f;
      s.masks.push_back(h);
    }
  return s;
}

double rel_error(const Tensor& a, const Tensor& ref) {
  double d = 0, n = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    d += (double(a[i]) - ref[i]) * (double(a[i]) - ref[i]);
    n += double(ref[i]) * ref[i];
  }
  return n > 0 ? std::sqrt(d / n) : std::sqrt(d);
}

// The GPU's step against the CPU's with the GPU's ReLU masks. What is left is summation order:
// each sum of K <= 144 products (the decoder's first convolutions: 16 channels x 9 taps; the
// weight gradients sum over 2 x 16 x 16 pixels: K = 512) is off by at most gamma_K ~ K u
// (u = 6e-8) of its terms' magnitudes on either side, typically sqrt(K) u; through the 15
// convolutions forward and back (and BatchNorm's normalisation, which scales an error by at
// most its 1/std) that stays under 1e-5 normwise, and a rounding that crosses a pool's tie
// (two equal maxima: measure zero with random data) is the only discrete choice left. 1e-4
// normwise per parameter: a flipped mask moves its upstream gradients by ~1e-3, a wrong kernel
// or a missing sum by O(1).
TEST(UNetGpu, StepMatchesTheCpuWithTheGpusMasks) {
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  for (bool bn : {false, true}) {
    SCOPED_TRACE(bn ? "BatchNorm" : "no BatchNorm");
    Context gpu(1, 1, Device::CUDA);
    const StepResult g = unet_grads(gpu, Device::CUDA, bn);
    Context cpu(1, 1);
    const StepResult c = unet_grads(cpu, Device::CPU, bn, g.masks);
    ASSERT_EQ(g.grads.size(), c.grads.size());
    ASSERT_EQ(g.masks.size(), 10u);
    EXPECT_NEAR(g.loss, c.loss, 1e-5 * std::fabs(c.loss));
    for (size_t i = 0; i < c.grads.size(); ++i)
      EXPECT_LT(rel_error(g.grads[i], c.grads[i]), 1e-4) << c.names[i];
    // The CPU's own masks differ from the GPU's in a handful of elements at most.
    Context cpu2(1, 1);
    const StepResult own = unet_grads(cpu2, Device::CPU, bn);
    int64_t flips = 0, total = 0;
    for (size_t k = 0; k < own.masks.size(); ++k)
      for (int64_t i = 0; i < own.masks[k].numel(); ++i, ++total) flips += own.masks[k][i] != g.masks[k][i];
    std::printf("[ info ] %s: %lld of %lld ReLU masks differ between the GPU and the CPU\n",
                bn ? "BatchNorm" : "plain", static_cast<long long>(flips), static_cast<long long>(total));
    EXPECT_LT(flips, total / 1000 + 5);
  }
}

// Three U-Net training steps on the GPU: as a replayed CUDA graph and eagerly, the same weights
// bit for bit; and under a memory plan (skips offloaded, pools recomputed) the same again.
std::vector<float> unet_gpu_run(bool graph, bool planned, int64_t* replays,
                                TrainLoss loss = TrainLoss::CrossEntropy,
                                ClassifierMetrics* metrics = nullptr) {
  Context ctx(1, 5, Device::CUDA);
  pt::share_conv_choices(ctx);
  UNetOptions o = tiny(true);
  o.base = 4;
  Model m = make_unet(o);
  m.reset_parameters(ctx.rng());
  if (planned) {
    m.prepare_fusion();
    std::vector<Placement> where(m.size(), Placement::Keep);
    for (const char* n : {"enc1.bn2", "enc2.bn2", "up1"}) where[m.index_of(n)] = Placement::Offload;
    for (const char* n : {"pool1", "pool2"}) where[m.index_of(n)] = Placement::Recompute;
    m.set_placements(where);
  }
  m.to(Device::CUDA, ctx);
  auto opt = make_optimizer("adam", m.parameters(), 1e-3f);
  ClassifierTrainer tr(m, *opt, graph);
  tr.set_loss(loss);
  Rng r(5);
  for (int s = 0; s < 3; ++s) {
    const Tensor x = pt::random_tensor(Shape{2, 2, 16, 16}, r);
    tr.step(ctx, x, random_labels(Shape{2, 16, 16}, 3, r));
  }
  *replays = tr.graph_replays();
  if (metrics) *metrics = tr.metrics(ctx);
  const Tensor w = m.parameters().values().to(Device::CPU, ctx);
  return std::vector<float>(w.data(), w.data() + w.numel());
}

TEST(UNetGpu, GraphAndPlannedStepsGiveTheEagerWeights) {
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  int64_t replays = 0;
  const std::vector<float> eager = unet_gpu_run(false, false, &replays);
  const std::vector<float> graph = unet_gpu_run(true, false, &replays);
  EXPECT_GT(replays, 0);
  EXPECT_EQ(eager, graph);
  const std::vector<float> planned = unet_gpu_run(true, true, &replays);
  EXPECT_GT(replays, 0);
  EXPECT_EQ(eager, planned);
}

// The same with the Dice loss, alone and added to the cross-entropy: the replayed graph's steps
// are the eager steps bit for bit, and the metrics count a Dice loss for every step, the
// replayed ones too (their sum the same as the eager run's).
TEST(UNetGpu, DiceGraphStepsGiveTheEagerWeights) {
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  for (const TrainLoss loss : {TrainLoss::Dice, TrainLoss::CrossEntropyAndDice}) {
    SCOPED_TRACE(train_loss_name(loss));
    int64_t replays = 0;
    ClassifierMetrics me, mg;
    const std::vector<float> eager = unet_gpu_run(false, false, &replays, loss, &me);
    const std::vector<float> graph = unet_gpu_run(true, false, &replays, loss, &mg);
    EXPECT_GT(replays, 0);
    EXPECT_EQ(eager, graph);
    EXPECT_EQ(me.dice_terms, 3.0);
    EXPECT_EQ(mg.dice_terms, 3.0);
    EXPECT_EQ(mg.dice_sum, me.dice_sum);
    EXPECT_GT(me.dice_sum, 0.0);
    EXPECT_NE(eager, unet_gpu_run(false, false, &replays));  // the loss changed the steps
  }
}

// The per-pixel evaluation on the GPU (its confusion counts kept there) against the CPU's, the
// same weights: the loss within rounding, the counts equal but for pixels whose two largest
// logits are within rounding of each other (none expected; a few allowed).
TEST(UNetGpu, PerPixelEvaluationMatchesTheCpu) {
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  Rng r(8);
  const MapSet data(7, r);
  EvalOptions eo;
  eo.batch = 3;
  eo.prefetch = 1;
  eo.confusion = true;
  EvalResult res[2];
  for (int d = 0; d < 2; ++d) {
    const Device dev = d == 0 ? Device::CPU : Device::CUDA;
    Context ctx(1, 4, dev);
    UNetOptions o = tiny(false);
    o.classes = 3;
    Model m = make_unet(o);
    Rng init(5);
    m.reset_parameters(init);
    m.to(dev, ctx);
    res[d] = evaluate_classifier(ctx, m, data, eo);
  }
  EXPECT_EQ(res[1].count, res[0].count);
  EXPECT_NEAR(res[1].loss, res[0].loss, 1e-5 * res[0].loss);
  ASSERT_EQ(res[1].confusion.size(), 9u);
  int64_t moved = 0;
  for (size_t i = 0; i < 9; ++i) moved += std::llabs(res[1].confusion[i] - res[0].confusion[i]);
  EXPECT_LE(moved, 4) << "pixels whose predicted class differs";
}

}  // namespace
}  // namespace pdnn
