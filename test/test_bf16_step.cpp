// Whole training steps in bf16 mixed precision (issue 32; the Model is the autocast boundary:
// model/model.h): a small W4 (caltech9 at 16x16, batch 8, 3 classes) step's parameter
// gradients against an fp32 step's with the bf16 run's ReLU masks and max-pool choices pinned,
// every convolution pass forced to each bf16 path in turn; the W4 step as one CUDA graph giving
// the eager steps' numbers (W5's: test_cuda_runtime.cpp's DCGAN test runs in fp32 and bf16);
// and the CPU's refusal. The GPU tests skip without a device.
//
// Why pin. A pre-activation within bf16's rounding of 0 lands on the other side of a ReLU in
// one precision only, and that one element moves every upstream gradient by ~1e-3 normwise (more
// than bf16's own error on a small model); a window whose two largest values round to one bf16
// value picks another maximum. So the reference step runs in fp32 on the CPU through the same
// layers with each ReLU replaced by the fixed 0/1 mask the bf16 step's output holds
// (PinnedMask) and each max pool by the window choices made on the bf16 step's own input values
// (PinnedMaxPool, kit::window_max: the GPU's rule). Dropout draws the same masks on both (the
// same seed and counter; test_conv_gpu_passes.cpp's W4 step shows the CPU and GPU masks agree).
// What remains is bf16's rounding alone.
//
// The bound, first order in bf16's unit roundoff u = 2^-8. The bf16 step rounds, on the path to
// a parameter gradient, the input (once), each of the 9 weight layers' weights, inputs' producers
// (outputs) and backward outputs (dx, and act'(y) . dy where it is an operand): at most 4
// roundings a weight layer, plus the cast of dL/dlogits, R = 4 * 9 + 2 = 38. Each contributes at
// most u of the quantity it rounds; the sums themselves are fp32 (their error, K 2^-23 with
// K <= 2048 here, is 2^-12 at worst, below one rounding). With the layers' gains near 1 in norm
// (PyTorch's default initialisation, a 16x16 W4), the normwise relative error of a gradient is
// at most R u = 38 / 256 = 0.148; random roundings add in quadrature, so a typical value is
// sqrt(R) u ~ 0.024. The test checks the bound, and that the error is not 0 (the step ran in
// bf16: an fp32 step would match the reference to ~1e-6). A pass that did not run leaves a
// gradient 0 (error 1); a wrong one is off by O(1).
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "bf16_testing.h"
#include "conv_reference.h"
#include "core/context.h"
#include "core/cuda_state.h"
#include "layers/activation.h"
#include "layers/dropout.h"
#include "layers/dense.h"
#include "layers/layer.h"
#include "layers/merge.h"
#include "model/sequential.h"
#include "ops/conv/conv2d_algo.h"
#include "ops/kit/argmax.h"
#include "optim/sgd.h"
#include "run/run_flags.h"
#include "testing.h"
#include "workloads/classifier/classifier_trainer.h"
#include "workloads/classifier/caltech_models.h"
#include "workloads/dcgan/dcgan_models.h"

namespace pdnn {
namespace {

using testing::gpu_conv_algos;

// y = m . x, dx = m . dy: a ReLU whose mask m (0 or 1 per element) is fixed. CPU only.
class PinnedMask : public Layer {
 public:
  explicit PinnedMask(Tensor mask) : m_(std::move(mask)) {}
  std::string kind() const override { return "PinnedMask"; }
  Shape output_shape(const Shape& in) const override { return in; }
  void forward(Context&, const Tensor& x, Tensor& y) override {
    PDNN_CHECK(x.numel() == m_.numel(), "PinnedMask: input %s, mask %s",
               x.shape().str().c_str(), m_.shape().str().c_str());
    for (int64_t i = 0; i < x.numel(); ++i) y[i] = m_[i] != 0.f ? x[i] : 0.f;
  }
  void backward(Context&, const Tensor&, const Tensor&, const Tensor& dy, Tensor* dx) override {
    if (dx)
      for (int64_t i = 0; i < dy.numel(); ++i) (*dx)[i] = m_[i] != 0.f ? dy[i] : 0.f;
  }

 private:
  Tensor m_;
};

// Max pooling k x k, stride k, each window's maximum at the offset chosen on `chooser` (the bf16
// step's input to the pool, widened): y = x there, dx = dy there. CPU only.
class PinnedMaxPool : public Layer {
 public:
  PinnedMaxPool(int64_t k, Tensor chooser) : k_(k), c_(std::move(chooser)) {}
  std::string kind() const override { return "PinnedMaxPool"; }
  Shape output_shape(const Shape& in) const override {
    return Shape{in.n(), in.c(), in.h() / k_, in.w() / k_};
  }
  void forward(Context&, const Tensor& x, Tensor& y) override {
    PDNN_CHECK(x.shape() == c_.shape(), "PinnedMaxPool: input %s, chooser %s",
               x.shape().str().c_str(), c_.shape().str().c_str());
    walk(x.shape(), [&](int64_t out, int64_t in) { y[out] = x[in]; });
  }
  void backward(Context&, const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx) override {
    if (!dx) return;
    dx->fill(0.f);
    walk(x.shape(), [&](int64_t out, int64_t in) { (*dx)[in] = dy[out]; });
  }

 private:
  // f(output index, input index of its window's chosen maximum)
  template <class F>
  void walk(const Shape& s, F&& f) const {
    const int64_t planes = s.n() * s.c(), h = s.h(), w = s.w(), oh = h / k_, ow = w / k_;
    for (int64_t p = 0; p < planes; ++p)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          const float* plane = c_.data() + p * h * w;
          const int at = kit::window_max<int64_t>(plane, w, k_, k_, oy, ox).at;
          f((p * oh + oy) * ow + ox, p * h * w + (oy * k_ + at / k_) * w + ox * k_ + at % k_);
        }
  }
  int64_t k_;
  Tensor c_;
};

constexpr int64_t kSide = 16, kClasses = 3, kBatch = 8;

struct Step {
  std::vector<std::string> names;
  std::vector<Tensor> grads;  // host float32
};

struct Batch {
  Tensor x, labels;
};
Batch w4_batch() {
  Rng r(8);
  Batch b{testing::random_tensor(Shape{kBatch, 3, kSide, kSide}, r), Tensor()};
  std::vector<int32_t> l(kBatch);
  for (auto& v : l) v = static_cast<int32_t>(r.next() % kClasses);
  b.labels = testing::labels_tensor(l);
  return b;
}

// W4 at 16x16 with the parameters of seed 3 (drawn from ctx's RNG, which dropout then goes on
// from, as in test_conv_gpu_passes.cpp).
Sequential w4_model(Context& ctx) {
  Sequential m = make_caltech_model(kSide, kClasses);
  ctx.rng().seed(3);
  m.reset_parameters(ctx.rng());
  return m;
}

Step gradients_of(Sequential& m, Context& ctx) {
  Step s;
  for (const Param& p : m.params()) {
    s.names.push_back(p.name);
    s.grads.push_back(p.grad->device() == Device::CPU ? p.grad->clone()
                                                      : p.grad->to(Device::CPU, ctx));
  }
  return s;
}

// A tensor's values as a host float32 tensor (bf16 widened exactly).
Tensor host_floats(const Tensor& t, Context& ctx) {
  if (t.dtype() == DType::BF16) return testing::widened(t, ctx);
  return t.device() == Device::CPU ? t.clone() : t.to(Device::CPU, ctx);
}

// One W4 step on `dev` in ctx's precision; pins[i]: for each ReLU (fused into the layer
// before, so activation(i) is that layer's output) its 0/1 mask, for each max pool its window
// choices on its input; null elsewhere.
Step step_with_pins(Context& ctx, Device dev, const Batch& b,
                    std::vector<std::unique_ptr<Layer>>* pins) {
  Sequential m = w4_model(ctx);
  if (dev != Device::CPU) m.to(dev, ctx);
  Sgd opt(m.parameters(), 0.01);
  ClassifierTrainer tr(m, opt, /*cuda_graph=*/false);
  tr.step(ctx, b.x, b.labels);
  pins->clear();
  for (size_t i = 0; i < m.size(); ++i) {
    const std::string k = m.layer(i).kind();
    if (k == "ReLU") {
      Tensor mask = host_floats(m.activation(i), ctx);
      for (int64_t j = 0; j < mask.numel(); ++j) mask[j] = mask[j] > 0.f ? 1.f : 0.f;
      pins->push_back(std::make_unique<PinnedMask>(std::move(mask)));
    } else if (k == "MaxPool2d") {
      pins->push_back(std::make_unique<PinnedMaxPool>(2, host_floats(m.activation(i - 1), ctx)));
    } else {
      pins->push_back(nullptr);
    }
  }
  return gradients_of(m, ctx);
}

// The reference: W4 in fp32 on the CPU from the same parameters and dropout draws, each ReLU
// and pool replaced by its pin (unfused: a pin is no activation a layer could take over).
Step pinned_fp32_step(const Batch& b, std::vector<std::unique_ptr<Layer>>& pins) {
  Context cpu(1, 1);
  Sequential m = w4_model(cpu);
  for (size_t i = 0; i < pins.size(); ++i)
    if (pins[i]) m.replace(i, std::move(pins[i]));
  Sgd opt(m.parameters(), 0.01);
  ClassifierTrainer tr(m, opt, /*cuda_graph=*/false);
  tr.step(cpu, b.x, b.labels);
  return gradients_of(m, cpu);
}

// The pinned reference itself, on the CPU: pinned with the masks and pool choices of the fp32
// step itself, it is that step (the unfused layers and the pins give the fused model's numbers,
// bit for bit: Sequential's fusion promises it), so what the GPU test below measures is bf16's
// rounding and nothing of the reference's making.
TEST(Bf16Step, ThePinnedReferenceIsTheFp32StepWhenPinnedToItsOwnMasks) {
  const Batch b = w4_batch();
  Context cpu(1, 1);
  std::vector<std::unique_ptr<Layer>> pins;
  const Step got = step_with_pins(cpu, Device::CPU, b, &pins);
  int pinned = 0;
  for (const auto& p : pins) pinned += p != nullptr;
  EXPECT_EQ(pinned, 6 + 3 + 2);  // 6 convolutions' and 2 dense layers' ReLUs, 3 pools
  const Step want = pinned_fp32_step(b, pins);
  ASSERT_EQ(got.grads.size(), want.grads.size());
  for (size_t i = 0; i < want.grads.size(); ++i) {
    ASSERT_EQ(got.names[i], want.names[i]);
    testing::expect_close(got.grads[i], want.grads[i], 0, 0, want.names[i]);
  }
}

TEST(Bf16Step, W4GradientsMatchFp32sWithTheMasksPinnedOnEveryConvolutionPath) {
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  const Batch b = w4_batch();
  Context probe(1, 1, Device::CUDA);
  const std::vector<ConvAlgo> algos = gpu_conv_algos(probe);
  constexpr double kU = testing::kBf16U, kBound = (4 * 9 + 2) * kU;  // see the file's comment
  int runs = 0;
  for (ConvAlgo f : algos)
    for (ConvAlgo d : algos)
      for (ConvAlgo w : algos) {
        const std::string policy = std::string("fwd=") + conv_algo_name(f) + ",bwd-data=" +
                                   conv_algo_name(d) + ",bwd-weights=" + conv_algo_name(w);
        SCOPED_TRACE(policy);
        Context ctx(1, 1, Device::CUDA);
        ctx.set_precision(Precision::Bf16);
        ctx.tuning().set_policy(policy);
        std::vector<std::unique_ptr<Layer>> pins;
        const Step got = step_with_pins(ctx, Device::CUDA, b, &pins);
        // every pass ran as forced, under bf16's keys
        for (const auto& made : ctx.tuning().made())
          EXPECT_NE(made.first.find(" bf16 "), std::string::npos) << made.first;
        const Step want = pinned_fp32_step(b, pins);
        ASSERT_EQ(got.grads.size(), want.grads.size());
        for (size_t i = 0; i < want.grads.size(); ++i) {
          ASSERT_EQ(got.names[i], want.names[i]);
          const double e = testing::rel_error(got.grads[i], want.grads[i]);
          EXPECT_LT(e, kBound) << want.names[i] << ": ||bf16 - fp32|| / ||fp32|| = " << e;
          EXPECT_GT(e, 1e-5) << want.names[i] << ": no bf16 rounding at all?";
        }
        ++runs;
      }
  EXPECT_EQ(runs, static_cast<int>(algos.size() * algos.size() * algos.size()));
}

// W4 in bf16 as one CUDA graph a step: the replays equal the eager steps bit for bit (weights,
// the dropout stream's position), with the bf16 weight copy refreshed inside the step; the
// model's output and input gradient are float32 (the autocast boundary) and its activations
// bf16.
TEST(Bf16Step, W4GraphReplayEqualsEagerSteps) {
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  std::vector<Tensor> weights;
  std::vector<uint64_t> rng;
  std::vector<int64_t> replays;
  for (bool graph : {false, true}) {
    Context ctx(1, 1, Device::CUDA);
    ctx.set_precision(Precision::Bf16);
    testing::share_conv_choices(ctx);
    Sequential m = w4_model(ctx);
    m.to(Device::CUDA, ctx);
    Sgd opt(m.parameters(), 0.01);
    ClassifierTrainer tr(m, opt, graph);
    Rng r(5);
    for (int i = 0; i < 6; ++i) {
      std::vector<int32_t> l(kBatch);
      for (auto& v : l) v = static_cast<int32_t>(r.next() % kClasses);
      tr.step(ctx, testing::random_tensor(Shape{kBatch, 3, kSide, kSide}, r),
              testing::labels_tensor(l));
    }
    EXPECT_EQ(m.activation(0).dtype(), DType::BF16);
    EXPECT_EQ(m.forward(ctx, testing::random_tensor(Shape{kBatch, 3, kSide, kSide}, r).to(
                                 Device::CUDA, ctx)).dtype(),
              DType::F32);
    m.forget_forward();
    weights.push_back(m.parameters().values().to(Device::CPU, ctx));
    rng.push_back(ctx.rng().counter());
    replays.push_back(tr.graph_replays());
  }
  testing::expect_close(weights[1], weights[0], 0, 0, "weights, graph vs eager (bf16)");
  EXPECT_EQ(rng[1], rng[0]);
  EXPECT_EQ(replays[0], 0);
  EXPECT_GE(replays[1], 3) << "replayed steps";
}

// The CPU has no bf16 path: a model under Precision::Bf16 on the CPU refuses its forward in one
// line (the apps refuse the flag before that: test_run_flags.cpp, the app tests), never a silent
// fp32 run.
void expect_bf16_refused(Model& m, Context& ctx, const Tensor& x) {
  try {
    m.forward(ctx, x);
    FAIL() << "a bf16 forward ran on the CPU";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--precision bf16 on the cpu: the CPU has no bf16 path"),
              std::string::npos)
        << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

TEST(Bf16Step, TheCpuRefusesABf16ForwardInOneLine) {
  Context ctx(1, 1);
  ctx.set_precision(Precision::Bf16);
  Sequential m = w4_model(ctx);
  Rng r(1);
  expect_bf16_refused(m, ctx, testing::random_tensor(Shape{2, 3, kSide, kSide}, r));
}

// A graph model is the autocast boundary as a chain is: x (4, 6) -> d = Dense(6, 6) with the
// identity weight and no bias -> cat = Concat(d, x) -> out = Add(cat, cat). The input is read
// twice (d and cat) and cat twice (Add's two operands), so the input's and cat's gradients are
// sums of two; every value here is exact in bf16 but the input gradient's one sum. Forward:
// out = 2 [r(x), r(x)] (r: bf16 rounding), float32, bit for bit. Backward from a float32 dy:
// dcat = 2 r(dy) (exact), dx = 2 r(dy)[:, :6] + 2 r(dy)[:, 6:] rounded once to bf16 (2^-8) and
// returned as float32; dW = dd^T r(x) summed in fp32 on the tensor cores (4 + 2) 2^-23 S.
// A square Dense's weights made the identity (its products exact in any precision).
void set_identity(Dense& dense, int64_t n) {
  Tensor& w = *dense.params()[0].value;
  w.fill(0.f);
  for (int64_t i = 0; i < n; ++i) w[i * n + i] = 1.f;
}

TEST(Bf16Step, AGraphModelIsTheAutocastBoundaryToo) {
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  Context ctx(1, 1, Device::CUDA);
  ctx.set_precision(Precision::Bf16);
  Model m;
  Dense& dense = m.node<Dense>("d", {Model::kInput}, 6, 6, /*bias=*/false);
  m.node<Concat>("cat", {"d", Model::kInput});
  m.node<Add>("out", {"cat", "cat"});
  set_identity(dense, 6);
  m.to(Device::CUDA, ctx);
  m.zero_grad(ctx);
  Rng r(23);
  const Tensor x = testing::random_tensor(Shape{4, 6}, r, -3.f, 3.f);
  const Tensor dy = testing::random_tensor(Shape{4, 12}, r, -3.f, 3.f);
  const Tensor rx = testing::bf16_rounded(x), rdy = testing::bf16_rounded(dy);
  const Tensor& y = m.forward(ctx, x.to(Device::CUDA, ctx));
  ASSERT_EQ(y.dtype(), DType::F32);
  const Tensor hy = y.to(Device::CPU, ctx);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 12; ++j)
      ASSERT_EQ(hy[i * 12 + j], 2.f * rx[i * 6 + j % 6]) << i << " " << j;
  m.backward(ctx, dy.to(Device::CUDA, ctx), /*want_input_grad=*/true);
  ASSERT_EQ(m.input_grad().dtype(), DType::F32);
  std::vector<double> dx_ref(24), dw_ref(36), dw_abs(36);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 6; ++j)
      dx_ref[size_t(i * 6 + j)] = 2.0 * rdy[i * 12 + j] + 2.0 * rdy[i * 12 + 6 + j];
  for (int64_t o = 0; o < 6; ++o)
    for (int64_t k = 0; k < 6; ++k) {
      double sum = 0, mag = 0;
      for (int64_t i = 0; i < 4; ++i) {
        const double t = 2.0 * rdy[i * 12 + o] * rx[i * 6 + k];
        sum += t;
        mag += std::fabs(t);
      }
      dw_ref[size_t(o * 6 + k)] = sum;
      dw_abs[size_t(o * 6 + k)] = (4 + 2) * 0x1.0p-23 * mag;
    }
  testing::expect_within(m.input_grad().to(Device::CPU, ctx), dx_ref, testing::kBf16U, {},
                         "the input gradient");
  testing::expect_within(dense.params()[0].grad->to(Device::CPU, ctx), dw_ref, testing::kFp32U,
                         dw_abs, "the weight gradient");
}

// So does a graph model's forward on the CPU: refused in one line.
TEST(Bf16Step, TheCpuRefusesABf16GraphForwardInOneLine) {
  Context ctx(1, 1);
  ctx.set_precision(Precision::Bf16);
  Model m;
  m.node<Dense>("d", {Model::kInput}, 6, 6);
  m.node<Concat>("cat", {"d", Model::kInput});
  Rng r(2);
  m.reset_parameters(r);
  expect_bf16_refused(m, ctx, testing::random_tensor(Shape{2, 6}, r));
}

// A last Sigmoid runs on the float32 side of the output cast (Layer::fp32_under_bf16; autocast
// computes BCEWithLogitsLoss's sigmoid in float32). In bf16 the sigmoid of any logit above ~6.2
// is 1 and its derivative y (1 - y) 0: a GAN's discriminator that rates a fake 1 got no gradient
// from it (issue 32's DCGAN seed that collapsed). Dense(6 -> 6, identity, no bias) then Sigmoid,
// logits up to 12: the logits are r(x) exactly (r: bf16 rounding; identity sums are exact).
// Forward: y = sigmoid(r(x)) in float32: expf (2 ulp), 1 + e and the division (1 ulp each):
// within 4 ulp = 8 u32 relative. Backward from float32 dy: dz = dy y (1 - y) in float32, then
// rounded to bf16 once; the Dense's dx = r(dz) exactly. dz's error: y's 8 u32 y, through
// (1 - y) and y, plus the two products' rounding; then bf16's rounding (u = 2^-8).
TEST(Bf16Step, ALastSigmoidRunsInFloat32SoItsGradientDoesNotVanishAtLargeLogits) {
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why;
  Context ctx(1, 1, Device::CUDA);
  ctx.set_precision(Precision::Bf16);
  Sequential m;
  Dense& dense = m.emplace<Dense>(6, 6, /*bias=*/false);
  m.emplace<Sigmoid>();
  ASSERT_TRUE(m.fp32_tail());
  set_identity(dense, 6);
  m.to(Device::CUDA, ctx);
  m.zero_grad(ctx);
  Rng r(29);
  const Tensor x = testing::random_tensor(Shape{8, 6}, r, -12.f, 12.f);
  const Tensor dy = testing::random_tensor(Shape{8, 6}, r, 0.5f, 2.f);
  const Tensor rx = testing::bf16_rounded(x);
  const Tensor& y = m.forward(ctx, x.to(Device::CUDA, ctx));
  ASSERT_EQ(y.dtype(), DType::F32);
  const Tensor hy = y.to(Device::CPU, ctx);
  m.backward(ctx, dy.to(Device::CUDA, ctx), /*want_input_grad=*/true);
  const Tensor dx = m.input_grad().to(Device::CPU, ctx);
  const double u32 = testing::kFp32U;
  std::vector<double> y_ref(48), dx_ref(48), dx_abs(48);
  int saturated = 0;
  for (int64_t i = 0; i < 48; ++i) {
    const double yr = 1.0 / (1.0 + std::exp(-double(rx[i])));
    y_ref[size_t(i)] = yr;
    dx_ref[size_t(i)] = double(dy[i]) * yr * (1.0 - yr);
    dx_abs[size_t(i)] = (std::fabs(double(dy[i])) * 8 * u32 * yr + 8 * u32 * std::fabs(dx_ref[size_t(i)])) * 1.01;
    if (rx[i] > 6.5f) {  // bf16's sigmoid would be 1 here, its gradient 0
      ++saturated;
      EXPECT_LT(hy[i], 1.f) << "element " << i << ", logit " << rx[i];
      EXPECT_GT(dx[i], 0.f) << "element " << i << ", logit " << rx[i];
    }
  }
  ASSERT_GE(saturated, 4);
  testing::expect_within(hy, y_ref, 8 * u32, {}, "the float32 sigmoid");
  testing::expect_within(dx, dx_ref, testing::kBf16U * 1.01, dx_abs, "the input gradient");
}

// The DCGAN's discriminator ends in such a Sigmoid; a classifier's last layer (logits) does not.
TEST(Bf16Step, TheDiscriminatorsSigmoidIsAFloat32Tail) {
  EXPECT_TRUE(make_dcgan_discriminator().fp32_tail());
  EXPECT_FALSE(make_caltech_model(kSide, kClasses).fp32_tail());
}

}  // namespace
}  // namespace pdnn
