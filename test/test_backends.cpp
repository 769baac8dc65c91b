// Every op, layer, loss and optimizer on every backend present (after ggml's test-backend-ops):
// one table of cases, each run through the same code on the CPU and, when a GPU is present, on
// CUDA from the same inputs; the GPU's outputs, all gradients, one update and BatchNorm in both
// modes must match the CPU's within per-tensor tolerances. (The CPU itself is checked against
// naive references and finite differences in the per-layer test files.) Without a GPU each case
// still runs its CPU side through the dispatch, then skips visibly.
//
// Tolerances, |gpu - cpu| <= atol + rtol |cpu|, per kind of output:
// - exact (0, 0): data movement and selection (im2col/col2im, permutes, max pool and its
//   argmax, dropout masks, ReLU), and sums the GPU does in the CPU's order (col2im's gather,
//   pool backward, dense bias gradient).
// - elementwise math (1e-6 relative + 1e-7): CUDA's expf/tanhf/log1p are within 2 ulp of the
//   correctly rounded value and nvcc contracts a*b+c into one fma (the CPU does not): a few ulp.
// - GEMM outputs (conv, dense; 2e-5 relative of the largest term + 2e-5): cuBLAS sums the K
//   products in another order than OpenBLAS; the float32 rounding bound of a dot product is
//   about K * 2^-24 * sum|a b|, which for K <= 600 and inputs in [-1,1] stays under 2e-5 of
//   the magnitudes involved.
// - reductions in double (BatchNorm statistics, bias gradients, losses, metrics): 1e-5
//   relative: the double sums agree to 1e-15; what differs is float rounding of the results and
//   of the products that feed them.
// - optimizer updates (1e-6 relative + 1e-7): one fma and sqrt rounding per element per step.
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/cuda_state.h"
#include "layers/activation.h"
#include "layers/batchnorm2d.h"
#include "layers/conv2d.h"
#include "layers/conv_transpose2d.h"
#include "layers/dense.h"
#include "layers/dropout.h"
#include "layers/flatten.h"
#include "layers/maxpool2d.h"
#include "layers/merge.h"
#include "losses/binary_cross_entropy.h"
#include "losses/dice_loss.h"
#include "losses/softmax_cross_entropy.h"
#include "workloads/classifier/caltech_models.h"
#include "workloads/dcgan/dcgan_models.h"
#include "workloads/classifier/mnist_models.h"
#include "workloads/model_zoo.h"
#include "model/sequential.h"
#include "ops/basic.h"
#include "ops/conv/im2col.h"
#include "ops/loss.h"
#include "ops/metrics.h"
#include "ops/random.h"
#include "optim/adadelta.h"
#include "optim/adagrad.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "testing.h"
#include "workloads/classifier/classifier_task.h"
#include "workloads/classifier/classifier_trainer.h"
#include "workloads/dcgan/gan_trainer.h"

using namespace pdnn;
namespace pt = pdnn::testing;

namespace {

struct Tol {
  double atol, rtol;
};
constexpr Tol kExact{0, 0}, kElementwise{1e-7, 1e-6}, kGemm{2e-5, 2e-5}, kReduce{1e-6, 1e-5},
    kUpdate{1e-7, 1e-6};

// Named outputs of one run, copied to the host, each with its tolerance.
struct Output {
  std::string name;
  Tensor value;
  Tol tol;
};
using Outputs = std::vector<Output>;

Tensor host(const Tensor& t, Context& ctx) {
  return t.device() == Device::CPU ? t.clone() : t.to(Device::CPU, ctx);
}
Tensor on(Device d, const Tensor& t, Context& ctx) { return d == Device::CPU ? t.clone() : t.to(d, ctx); }

// Float copy of an int32 tensor, so argmax and labels compare with the same helper.
Tensor as_float(const Tensor& t) {
  Tensor f(t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) f[i] = static_cast<float>(t.data<int32_t>()[i]);
  return f;
}

struct Case {
  std::string name;
  std::function<Outputs(Context&, Device)> run;
};
// gtest prints a case by its name, not its bytes.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// A layer's forward and backward in a one-layer model on `dev` from fixed random inputs:
// y, dx, every parameter gradient, every buffer (BatchNorm's running statistics).
Outputs run_layer(Context& ctx, Device dev, const std::function<std::unique_ptr<Layer>()>& make,
                  const Shape& in, bool training, Tol y_tol, Tol grad_tol, float lo = -1.f,
                  float hi = 1.f) {
  Sequential m;
  m.add(make());
  Rng init(11);
  m.reset_parameters(init);
  m.train(training);
  m.to(dev, ctx);
  ctx.rng().seed(5);
  Rng data(7);
  const Tensor x = on(dev, pt::random_tensor(in, data, lo, hi), ctx);
  const Tensor& y = m.forward(ctx, x);
  const Tensor dy = on(dev, pt::random_tensor(y.shape(), data), ctx);
  m.zero_grad(ctx);
  m.backward(ctx, dy, /*want_input_grad=*/true);
  Outputs out{{"y", host(y, ctx), y_tol}, {"dx", host(m.input_grad(), ctx), grad_tol}};
  for (const Param& p : m.params()) out.push_back({"d" + p.name, host(*p.grad, ctx), grad_tol});
  for (const Param& b : m.buffers()) out.push_back({b.name, host(*b.value, ctx), kReduce});
  out.push_back({"rng position", Tensor::zeros(Shape{1}), kExact});
  out.back().value[0] = static_cast<float>(ctx.rng().counter());
  return out;
}

template <class L, class... A>
std::function<std::unique_ptr<Layer>()> maker(A... args) {
  return [=] { return std::unique_ptr<Layer>(new L(args...)); };
}

// Convolutions on the CPU's im2col + GEMM path, the formula the GPU computes: the CPU's
// Winograd kernels (the default for 3x3 stride-1 layers) round differently, within their own
// bound (test_conv3x3.cpp), which is up to 256x a plain dot product's.
template <class A0, class... A>
std::function<std::unique_ptr<Layer>()> conv(A0 in, A... args) {
  return [=] {
    auto l = std::make_unique<Conv2d>(in, args...);
    l->set_algo(ConvAlgo::PerImage);
    return std::unique_ptr<Layer>(std::move(l));
  };
}

// The same layer with an activation fused into its output write (convolutions on im2col).
template <class L, class... A>
std::function<std::unique_ptr<Layer>()> fused(Act act, A... args) {
  return [=] {
    auto l = std::make_unique<L>(args...);
    if constexpr (std::is_same<L, Conv2d>::value) l->set_algo(ConvAlgo::PerImage);
    EXPECT_TRUE(l->fuse_activation(act));
    return std::unique_ptr<Layer>(std::move(l));
  };
}

Case layer_case(std::string name, std::function<std::unique_ptr<Layer>()> make, Shape in,
                Tol y_tol, Tol grad_tol, bool training = true, float lo = -1.f, float hi = 1.f) {
  return {name, [=](Context& ctx, Device dev) {
            return run_layer(ctx, dev, make, in, training, y_tol, grad_tol, lo, hi);
          }};
}

// Three steps of an optimizer over a flat buffer of odd length (the last partial vector). Bit
// for bit: both kernels run ops/optim_formula.h's arithmetic (explicit fused multiply-adds,
// IEEE division and square root), which the host's update of offloaded state relies on; Adam
// within kUpdate, its bias corrections' pow being each side's libm.
template <class Make>
Case optim_case(std::string name, Make make, Tol tol = kExact) {
  return {name, [=](Context& ctx, Device dev) {
            Rng r(3);
            Tensor w = pt::random_tensor(Shape{1001}, r), g = Tensor::zeros(Shape{1001});
            ParamSet ps;
            ps.build({Param{"w", &w, &g}});
            ps.to(dev, ctx);
            auto opt = make(ps);
            for (int s = 0; s < 3; ++s) {
              copy_into(ps.grads(), on(dev, pt::random_tensor(ps.grads().shape(), r), ctx), ctx);
              opt->step(ctx);
            }
            Outputs out{{"w", host(ps.values(), ctx), tol}};
            for (auto& st : opt->state()) out.push_back({st.first, host(*st.second, ctx), tol});
            return out;
          }};
}

std::vector<Case> cases() {
  std::vector<Case> c;
  // ---- layers (forward, backward, parameter gradients) ----
  c.push_back(layer_case("Conv2d_W2", conv(1, 10, 3, 1, 1), {4, 1, 28, 28}, kGemm, kGemm));
  c.push_back(layer_case("Conv2d_W3a", conv(1, 32, 3), {3, 1, 28, 28}, kGemm, kGemm));
  c.push_back(layer_case("Conv2d_W3b", conv(32, 64, 3), {2, 32, 26, 26}, kGemm, kGemm));
  c.push_back(layer_case("Conv2d_W4", conv(3, 8, 3, 1, 1), {2, 3, 30, 30}, kGemm, kGemm));
  c.push_back(layer_case("Conv2d_k4s2p1", conv(3, 16, 4, 2, 1), {2, 3, 16, 16}, kGemm, kGemm));
  c.push_back(layer_case("Conv2d_to1x1", conv(16, 1, 4), {3, 16, 4, 4}, kGemm, kGemm));
  c.push_back(layer_case("Conv2d_s2_odd_nobias", conv(4, 6, 3, 2, 0, false),
                         {3, 4, 9, 7}, kGemm, kGemm));
  c.push_back(layer_case("Conv2d_W3b_ReLU", fused<Conv2d>(Act{FusedAct::ReLU, 0.f}, 32, 64, 3),
                         {2, 32, 26, 26}, kGemm, kGemm));
  c.push_back(layer_case("Conv2d_k4s2p1_LeakyReLU",
                         fused<Conv2d>(Act{FusedAct::LeakyReLU, 0.2f}, 3, 16, 4, 2, 1),
                         {2, 3, 16, 16}, kGemm, kGemm));
  c.push_back(layer_case("Dense_small_batch_ReLU", fused<Dense>(Act{FusedAct::ReLU, 0.f}, 1960, 100),
                         {8, 1960}, kGemm, kGemm));
  c.push_back(layer_case("Dense_LeakyReLU", fused<Dense>(Act{FusedAct::LeakyReLU, 0.1f}, 200, 33),
                         {40, 200}, kGemm, kGemm));
  c.push_back(layer_case("ConvT_from1x1", maker<ConvTranspose2d>(10, 16, 4, 1, 0), {2, 10, 1, 1},
                         kGemm, kGemm));
  c.push_back(layer_case("ConvT_k4s2p1", maker<ConvTranspose2d>(16, 8, 4, 2, 1), {2, 16, 4, 4},
                         kGemm, kGemm));
  // The U-Net's up-sampling (2x2 stride 2) and its 1x1 head.
  c.push_back(layer_case("ConvT_k2s2", maker<ConvTranspose2d>(16, 8, 2, 2, 0), {2, 16, 5, 6},
                         kGemm, kGemm));
  c.push_back(layer_case("Conv2d_1x1_head", conv(8, 3, 1), {2, 8, 9, 7}, kGemm, kGemm));
  c.push_back(layer_case("Dense", maker<Dense>(300, 17), {5, 300}, kGemm, kGemm));
  c.push_back(layer_case("Dense_4d_nobias", maker<Dense>(2 * 3 * 4, 9, false), {3, 2, 3, 4},
                         kGemm, kGemm));
  c.push_back(layer_case("MaxPool2d_2x2", maker<MaxPool2d>(2), {3, 5, 13, 12}, kExact, kExact));
  c.push_back(layer_case("MaxPool2d_k3s2", maker<MaxPool2d>(3, 2), {2, 3, 11, 9}, kExact, kExact));
  // No argmax kept: backward finds the maxima again in x (a memory plan's choice).
  for (int s : {2, 1}) {
    auto again = [s] {
      auto l = std::make_unique<MaxPool2d>(3, s);
      l->set_keep_argmax(false);
      return std::unique_ptr<Layer>(std::move(l));
    };
    c.push_back(layer_case("MaxPool2d_k3s" + std::to_string(s) + "_argmax_again", again,
                           {2, 3, 11, 9}, kExact, kExact));
  }
  // A Dropout fused into the pool's write: the same mask from the same draw on both.
  for (int k : {2, 3}) {
    auto pool_dropout = [k] {
      auto l = std::make_unique<MaxPool2d>(k, k);
      EXPECT_TRUE(l->fuse_dropout(0.3f));
      return std::unique_ptr<Layer>(std::move(l));
    };
    c.push_back(layer_case("MaxPool2d_dropout_k" + std::to_string(k), pool_dropout,
                           {6, 5, 13, 12}, kExact, kExact));
  }
  // Integer-valued inputs: many ties in each window (the first maximum must win on both).
  c.push_back({"MaxPool2d_ties", [](Context& ctx, Device dev) {
                 Sequential m;
                 m.emplace<MaxPool2d>(3, 2);
                 m.to(dev, ctx);
                 Rng r(9);
                 Tensor xh(Shape{2, 2, 9, 9});
                 for (int64_t i = 0; i < xh.numel(); ++i) xh[i] = static_cast<float>(r.next() % 3);
                 const Tensor& y = m.forward(ctx, on(dev, xh, ctx));
                 const Tensor dy = on(dev, pt::random_tensor(y.shape(), r), ctx);
                 m.backward(ctx, dy, true);
                 return Outputs{{"y", host(y, ctx), kExact}, {"dx", host(m.input_grad(), ctx), kExact}};
               }});
  c.push_back(layer_case("ReLU", maker<ReLU>(), {4, 1000}, kExact, kExact));
  c.push_back(layer_case("LeakyReLU", maker<LeakyReLU>(0.2f), {4, 1000}, kElementwise, kElementwise));
  c.push_back(layer_case("Sigmoid", maker<Sigmoid>(), {4, 1000}, kElementwise, kElementwise, true,
                         -12.f, 12.f));
  c.push_back(layer_case("Tanh", maker<Tanh>(), {4, 1000}, kElementwise, kElementwise, true, -5.f,
                         5.f));
  c.push_back(layer_case("Flatten", maker<Flatten>(), {3, 2, 5, 5}, kExact, kExact));
  c.push_back(layer_case("Dropout_train", maker<Dropout>(0.3f), {7, 1001}, kExact, kExact));
  c.push_back(layer_case("Dropout_eval", maker<Dropout>(0.3f), {7, 1001}, kExact, kExact, false));
  for (bool train : {true, false}) {
    const std::string mode = train ? "_train" : "_eval";
    c.push_back(layer_case("BatchNorm2d" + mode, maker<BatchNorm2d>(6), {4, 6, 5, 7}, kReduce,
                           kReduce, train, -2.f, 3.f));
    c.push_back(layer_case("BatchNorm2d_noaffine" + mode, maker<BatchNorm2d>(3, 1e-5f, 0.1f, false),
                           {5, 3, 4, 4}, kReduce, kReduce, train));
    c.push_back(layer_case("BatchNorm2d_ReLU" + mode,
                           maker<BatchNorm2d>(8, 1e-5f, 0.1f, true, FusedAct::ReLU), {4, 8, 4, 4},
                           kReduce, kReduce, train));
    c.push_back(layer_case("BatchNorm2d_LeakyReLU" + mode,
                           maker<BatchNorm2d>(8, 1e-5f, 0.1f, true, FusedAct::LeakyReLU, 0.2f),
                           {4, 8, 8, 8}, kReduce, kReduce, train));
    // The GPU's block takes a channel's N*H*W elements in turns of 512 accesses across the
    // planes (of 4 elements where H*W is a multiple of 4, else 1): several turns of each kind,
    // a turn that ends mid-plane, and a plane longer than a turn.
    c.push_back(layer_case("BatchNorm2d_planes_across_turns" + mode, maker<BatchNorm2d>(5),
                           {9, 5, 7, 11}, kReduce, kReduce, train));
    c.push_back(layer_case("BatchNorm2d_vector_accesses_across_turns" + mode,
                           maker<BatchNorm2d>(3, 1e-5f, 0.1f, true, FusedAct::LeakyReLU, 0.2f),
                           {8, 3, 16, 24}, kReduce, kReduce, train));
    c.push_back(layer_case("BatchNorm2d_plane_past_a_turn" + mode,
                           maker<BatchNorm2d>(4, 1e-5f, 0.1f, true, FusedAct::ReLU),
                           {3, 4, 19, 31}, kReduce, kReduce, train));
  }
  // ---- a graph: Concat and Add, tensors read by several nodes (their gradients summed) ----
  c.push_back({"Graph_Concat_Add_fanout", [](Context& ctx, Device dev) {
                 Model m;
                 m.node<Tanh>("a", {"input"});
                 m.node<Sigmoid>("b", {"input"});
                 m.node<Concat>("cat", {"a", "b", "input"});
                 m.node<Add>("sum", {"a", "b"});
                 m.node<Concat>("out", {"cat", "sum"});
                 m.to(dev, ctx);
                 Rng r(3);
                 const Tensor x = on(dev, pt::random_tensor(Shape{3, 4, 5, 6}, r), ctx);
                 const Tensor& y = m.forward(ctx, x);
                 const Tensor dy = on(dev, pt::random_tensor(y.shape(), r), ctx);
                 m.backward(ctx, dy, /*want_input_grad=*/true);
                 // dx sums the gradients of x's five readers, dy_in + tanh'(x) (dy_a + dy_sum)
                 // + sigmoid'(x) (dy_b + dy_sum): terms up to 3.5 in all (|dy| <= 1, tanh' <= 1,
                 // sigmoid' <= 1/4) that may cancel to a small dx, in another order and with
                 // fma contraction on the GPU. Six roundings of partial sums up to 3.5 bound
                 // the difference by 6 * 3.5 * 2^-24 absolute (1.25e-6; measured on an H100:
                 // 1.8e-7 at dx = 0.029), not by the elementwise tolerance relative to dx.
                 constexpr Tol kFanInSum{6 * 3.5 * 0x1p-24, kElementwise.rtol};
                 return Outputs{{"y", host(y, ctx), kElementwise},
                                {"dx", host(m.input_grad(), ctx), kFanInSum}};
               }});
  // ---- batch-level ops without a layer of their own ----
  c.push_back({"im2col_col2im_permute", [](Context& ctx, Device dev) {
                 const ConvGeom g = conv_geom("t", 3, 7, 6, 3, 2, 2, 1, 1, 0);
                 const int64_t n = 3;
                 Rng r(2);
                 const Tensor x = on(dev, pt::random_tensor(Shape{n, 3, 7, 6}, r), ctx);
                 Tensor cols = Tensor::empty(Shape{g.col_rows(), n * g.col_cols()}, DType::F32, dev, ctx);
                 Tensor back = Tensor::empty(x.shape(), DType::F32, dev, ctx);
                 Tensor perm = Tensor::empty(x.shape(), DType::F32, dev, ctx);
                 if (dev == Device::CPU) {
                   cpu::im2col_batch(g, n, x.data(), cols.data(), ctx.cpu_exec());
                   cpu::col2im_batch(g, n, cols.data(), back.data(), ctx.cpu_exec());
                   cpu::nchw_to_cnhw(n, 3, 42, x.data(), perm.data(), ctx.cpu_exec());
                 } else {
#if PDNN_HAVE_CUDA
                   cuda::im2col_batch(g, n, x.data(), cols.data(), ctx.cuda_exec());
                   cuda::col2im_batch(g, n, cols.data(), back.data(), ctx.cuda_exec());
                   cuda::nchw_to_cnhw(n, 3, 42, x.data(), perm.data(), ctx.cuda_exec());
#endif
                 }
                 return Outputs{{"cols", host(cols, ctx), kExact},
                                {"col2im(cols)", host(back, ctx), kExact},
                                {"nchw_to_cnhw", host(perm, ctx), kExact}};
               }});
  c.push_back({"fill_zero_counter", [](Context& ctx, Device dev) {
                 Tensor t = Tensor::empty(Shape{777}, DType::F32, dev, ctx);
                 ops::fill(ctx, t, 2.5f);
                 Tensor z = Tensor::empty(Shape{5}, DType::I32, dev, ctx);
                 ops::zero(ctx, z);
                 Tensor k = on(dev, Tensor::zeros(Shape{1}, DType::I64), ctx);
                 ops::counter_add(ctx, k, 41);
                 ops::counter_add(ctx, k, 1);
                 Tensor kh = host(k, ctx), kf(Shape{1});
                 kf[0] = static_cast<float>(kh.data<int64_t>()[0]);
                 return Outputs{{"fill", host(t, ctx), kExact},
                                {"zero", as_float(host(z, ctx)), kExact},
                                {"counter", kf, kExact}};
               }});
  // Normal draws from the run's stream: the same values from the host's stream position and
  // from the device's copy of it (the DCGAN's noise inside its CUDA graph).
  c.push_back({"normal_fill", [](Context& ctx, Device dev) {
                 ctx.rng().seed(5);
                 ctx.rng().set_counter(17);
                 Tensor t = Tensor::empty(Shape{5003}, DType::F32, dev, ctx);
                 ops::normal_fill(ctx, t, 0.5f, 2.f);
                 Tensor u = Tensor::empty(Shape{64, 100, 1, 1}, DType::F32, dev, ctx);
                 ops::normal_fill(ctx, u);
                 Tensor pos(Shape{1});
                 pos[0] = static_cast<float>(ctx.rng().counter());
                 return Outputs{{"first draw", host(t, ctx), kElementwise},
                                {"second draw", host(u, ctx), kElementwise},
                                {"rng position", pos, kExact}};
               }});
  // ---- losses and metrics ----
  c.push_back({"SoftmaxCrossEntropy", [](Context& ctx, Device dev) {
                 Rng r(4);
                 const Tensor z = on(dev, pt::random_tensor(Shape{37, 10}, r, -8.f, 8.f), ctx);
                 std::vector<int32_t> l(37);
                 for (auto& v : l) v = static_cast<int32_t>(r.next() % 10);
                 const Tensor labels = on(dev, pt::labels_tensor(l), ctx);
                 SoftmaxCrossEntropy ce;
                 ce.forward(ctx, z, labels);
                 Tensor dz;
                 ce.backward(ctx, dz);
                 Tensor acc = on(dev, Tensor::zeros(Shape{3}, DType::F64), ctx);
                 ce.accumulate_metrics(ctx, z, acc);
                 const Tensor ah = host(acc, ctx);
                 Tensor m(Shape{4});
                 m[0] = ce.loss(ctx);
                 for (int i = 0; i < 3; ++i) m[i + 1] = static_cast<float>(ah.data<double>()[i]);
                 return Outputs{{"probs", host(ce.probs(), ctx), kElementwise},
                                {"dlogits", host(dz, ctx), kElementwise},
                                {"loss, metrics", m, kReduce}};
               }});
  // Per pixel, and the soft Dice and the confusion counts of a map (5 x 3 x 30 x 31 pixels:
  // the Dice's sums in two chunks).
  c.push_back({"PixelCrossEntropy_Dice_Confusion", [](Context& ctx, Device dev) {
                 Rng r(4);
                 const Tensor z = on(dev, pt::random_tensor(Shape{5, 3, 30, 31}, r, -4.f, 4.f), ctx);
                 std::vector<int32_t> l(5 * 30 * 31);
                 for (auto& v : l) v = static_cast<int32_t>(r.next() % 3);
                 const Tensor labels = on(dev, pt::labels_tensor(l), ctx);
                 SoftmaxCrossEntropy ce;
                 ce.forward(ctx, z, labels);
                 Tensor dz;
                 ce.backward(ctx, dz);
                 Tensor acc = on(dev, Tensor::zeros(Shape{4}, DType::F64), ctx);
                 ce.accumulate_metrics(ctx, z, acc);
                 DiceLoss dice;
                 dice.forward(ctx, z, labels);
                 Tensor dd = dz.clone(ctx);
                 dice.backward(ctx, dd, 0.5f, /*add=*/true);
                 dice.accumulate(ctx, acc, 3);
                 Tensor counts = on(dev, Tensor::zeros(Shape{9}, DType::I64), ctx);
                 ops::segmentation_confusion(ctx, z, labels, counts);
                 const Tensor ah = host(acc, ctx), ch = host(counts, ctx);
                 Tensor m(Shape{6}), cf(Shape{9});
                 m[0] = ce.loss(ctx);
                 m[1] = dice.loss(ctx);
                 for (int i = 0; i < 4; ++i) m[i + 2] = static_cast<float>(ah.data<double>()[i]);
                 for (int i = 0; i < 9; ++i) cf[i] = static_cast<float>(ch.data<int64_t>()[i]);
                 return Outputs{{"probs", host(ce.probs(), ctx), kElementwise},
                                {"dlogits", host(dz, ctx), kElementwise},
                                {"dlogits + dice", host(dd, ctx), kElementwise},
                                {"losses, metrics", m, kReduce},
                                {"confusion", cf, kExact}};
               }});
  for (bool logits : {false, true}) {
    c.push_back({logits ? "BCEWithLogits" : "BCE", [logits](Context& ctx, Device dev) {
                   Rng r(6);
                   // 5000 elements: two reduction chunks.
                   const Tensor x = on(dev, logits ? pt::random_tensor(Shape{5000}, r, -9.f, 9.f)
                                                   : pt::random_tensor(Shape{5000}, r, 0.f, 1.f),
                                       ctx);
                   const Tensor t = on(dev, pt::random_tensor(Shape{5000}, r, 0.f, 1.f), ctx);
                   Tensor dx, acc = on(dev, Tensor::zeros(Shape{2}, DType::F64), ctx);
                   Tensor loss(Shape{2});
                   if (logits) {
                     BinaryCrossEntropyWithLogits l;
                     l.forward(ctx, x, t);
                     l.backward(ctx, dx);
                     l.accumulate(ctx, acc, 1);
                     loss[0] = l.loss(ctx);
                   } else {
                     BinaryCrossEntropy l;
                     l.forward(ctx, x, t);
                     l.backward(ctx, dx);
                     l.accumulate(ctx, acc, 1);
                     loss[0] = l.loss(ctx);
                   }
                   loss[1] = static_cast<float>(host(acc, ctx).data<double>()[1]);
                   return Outputs{{"loss, accumulated", loss, kReduce},
                                  {"dx", host(dx, ctx), kElementwise}};
                 }});
  }
  c.push_back({"prob_mean_into_append_row", [](Context& ctx, Device dev) {
                 Rng r(6);
                 Tensor acc = on(dev, Tensor::zeros(Shape{6}, DType::F64), ctx);
                 Tensor hist = on(dev, Tensor::zeros(Shape{3, 6}, DType::F64), ctx);
                 Tensor row = on(dev, Tensor::zeros(Shape{1}, DType::I64), ctx);
                 for (int s = 0; s < 4; ++s) {  // 4 steps into 3 rows: the last is dropped
                   ops::prob_mean_into(ctx, on(dev, pt::random_tensor(Shape{64, 1, 1, 1}, r, 0.f, 1.f), ctx), acc, 2);
                   ops::prob_mean_into(ctx, on(dev, pt::random_tensor(Shape{300}, r, 0.9f, 1.f), ctx), acc, 4);
                   ops::append_row(ctx, acc, hist, row);
                 }
                 Tensor out(Shape{6 + 18 + 1});
                 const Tensor a = host(acc, ctx), h = host(hist, ctx), k = host(row, ctx);
                 for (int i = 0; i < 6; ++i) out[i] = static_cast<float>(a.data<double>()[i]);
                 for (int i = 0; i < 18; ++i) out[6 + i] = static_cast<float>(h.data<double>()[i]);
                 out[24] = static_cast<float>(k.data<int64_t>()[0]);
                 return Outputs{{"acc, history, row", out, kReduce}};
               }});
  // ---- optimizers: three fused updates ----
  c.push_back(optim_case("SGD_momentum_nesterov_wd", [](ParamSet& ps) {
    return std::make_unique<Sgd>(ps, 0.1, 0.9, 0.01, 0.0, true);
  }));
  c.push_back(optim_case("SGD_plain", [](ParamSet& ps) { return std::make_unique<Sgd>(ps, 0.1); }));
  c.push_back(optim_case("Adagrad_decay_wd", [](ParamSet& ps) {
    return std::make_unique<Adagrad>(ps, 0.1, 0.5, 0.01, 0.1);
  }));
  c.push_back(optim_case("Adadelta", [](ParamSet& ps) { return std::make_unique<Adadelta>(ps, 1.0, 0.95); }));
  c.push_back(optim_case("Adam_wd", [](ParamSet& ps) {
    return std::make_unique<Adam>(ps, 1e-2, 0.5, 0.999, 1e-8, 0.01);
  }, kUpdate));
  // ---- whole training steps of the MNIST models (W3 with both dropouts) ----
  for (const char* model : {"small", "keras"}) {
    c.push_back({std::string("TrainStep_") + model, [model](Context& ctx, Device dev) {
                   Sequential m = make_mnist_model(model, 28, 10);
                   ctx.rng().seed(3);
                   m.reset_parameters(ctx.rng());
                   m.to(dev, ctx);
                   auto opt = make_model_optimizer(model, "", m.parameters(), -1.f);
                   ClassifierTrainer tr(m, *opt, /*cuda_graph=*/false);
                   Rng r(8);
                   for (int s = 0; s < 2; ++s) {
                     const Tensor x = pt::random_tensor(Shape{16, 1, 28, 28}, r, 0.f, 1.f);
                     std::vector<int32_t> l(16);
                     for (auto& v : l) v = static_cast<int32_t>(r.next() % 10);
                     tr.step(ctx, x, pt::labels_tensor(l));
                   }
                   const ClassifierMetrics mt = tr.metrics(ctx);
                   Tensor mm(Shape{3});
                   mm[0] = static_cast<float>(mt.loss_sum);
                   mm[1] = static_cast<float>(mt.correct);
                   mm[2] = static_cast<float>(mt.count);
                   // Two Adam/Adadelta steps amplify the GEMMs' rounding differences a little.
                   return Outputs{{"weights", host(m.parameters().values(), ctx), {1e-5, 1e-4}},
                                  {"metrics", mm, {1e-4, 1e-4}}};
                 }});
  }
  // ---- W4 (caltech9) at 16x16 the way the caltech101 app trains it: batches packed ahead by
  // a PrefetchLoader into pinned host memory and copied once into the trainer's buffers (the
  // same host buffers refilled while the device trains), two steps and the test set's
  // evaluation with its confusion matrix. SGD, so that the comparison is of the network and
  // the data path, not of AdaGrad's first step (lr * g / |g|: the sign of gradients near 0,
  // which the two sides' summation orders may flip; AdaGrad has its own case above).
  c.push_back({"TrainStep_caltech9_prefetch", [](Context& ctx, Device dev) {
                 Rng r(12);
                 LabeledImages train{pt::random_tensor(Shape{24, 3, 16, 16}, r), {}};
                 LabeledImages test{pt::random_tensor(Shape{10, 3, 16, 16}, r), {}};
                 for (int i = 0; i < 24; ++i) train.labels.push_back(i % 3);
                 for (int i = 0; i < 10; ++i) test.labels.push_back((i * 7) % 3);
                 const TensorDataset train_set(train, 3), test_set(test, 3);
                 Sequential m = make_caltech_model(16, 3);
                 for (size_t i = 0; i < m.size(); ++i)
                   if (auto* cv = dynamic_cast<Conv2d*>(&m.layer(i))) cv->set_algo(ConvAlgo::PerImage);
                 ctx.rng().seed(3);
                 m.reset_parameters(ctx.rng());
                 m.to(dev, ctx);
                 Sgd opt(m.parameters(), 0.01);
                 ClassifierTaskOptions o;
                 o.train.batch = 8;
                 o.train.images_per_epoch = 16;
                 o.train.threads = 2;
                 o.prefetch = 1;
                 o.eval.batch = 4;
                 o.eval.prefetch = 1;
                 o.cuda_graph = false;
                 o.per_class = true;
                 ClassifierTask task(ctx, m, opt, train_set, test_set, o);
                 const int64_t steps = task.begin_epoch(ctx, 0, 77);
                 for (int64_t b = 0; b < steps; ++b) task.train_batch(ctx, b);
                 const std::vector<double> tm = task.train_metrics(ctx);
                 const std::vector<double> ev = task.evaluate(ctx);
                 Tensor mm(Shape{2}), ee(Shape{static_cast<int64_t>(ev.size())});
                 mm[0] = static_cast<float>(tm[0]);
                 mm[1] = static_cast<float>(tm[1]);
                 for (size_t i = 0; i < ev.size(); ++i) ee[static_cast<int64_t>(i)] = static_cast<float>(ev[i]);
                 return Outputs{{"weights", host(m.parameters().values(), ctx), {1e-5, 1e-4}},
                                {"train loss, acc", mm, {1e-4, 1e-4}},
                                {"test loss, acc, per class", ee, {1e-4, 1e-4}}};
               }});
  // ---- two DCGAN iterations (small widths: the layers are checked at W5's shapes above) ----
  c.push_back({"DcganIteration", [](Context& ctx, Device dev) {
                 DcganConfig cfg;
                 cfg.nz = 16;
                 cfg.ngf = cfg.ndf = 8;
                 Sequential g = make_dcgan_generator(cfg), d = make_dcgan_discriminator(cfg);
                 // im2col on the CPU, as the other cases: the 4x4 stride-2 Winograd (the CPU's
                 // default from 16 channels) rounds within its own bound (test_conv_k4s2.cpp),
                 // and Adam's first steps turn a gradient's rounding near zero into a whole
                 // step of lr (sign(g)).
                 for (Sequential* m : {&g, &d})
                   for (size_t i = 0; i < m->size(); ++i) {
                     if (auto* cv = dynamic_cast<Conv2d*>(&m->layer(i))) cv->set_algo(ConvAlgo::PerImage);
                     if (auto* ct = dynamic_cast<ConvTranspose2d*>(&m->layer(i)))
                       ct->set_algo(ConvAlgo::PerImage);
                   }
                 ctx.rng().seed(3);
                 dcgan_init(g, ctx.rng());
                 dcgan_init(d, ctx.rng());
                 g.to(dev, ctx);
                 d.to(dev, ctx);
                 Adam opt_g(g.parameters(), 2e-4, 0.5), opt_d(d.parameters(), 2e-4, 0.5);
                 GanTrainer tr(g, d, opt_g, opt_d, cfg.nz, 4, /*cuda_graph=*/false);
                 Rng r(8);
                 for (int s = 0; s < 2; ++s) tr.step(ctx, pt::random_tensor(Shape{8, 3, 64, 64}, r));
                 const GanMetrics m = tr.metrics(ctx);
                 Tensor mm(Shape{4});
                 mm[0] = static_cast<float>(m.d_loss);
                 mm[1] = static_cast<float>(m.g_loss);
                 mm[2] = static_cast<float>(m.d_x);
                 mm[3] = static_cast<float>(m.d_g_z);
                 // Two Adam steps amplify the GEMMs' rounding differences a little.
                 return Outputs{{"G weights", host(g.parameters().values(), ctx), {1e-5, 1e-4}},
                                {"D weights", host(d.parameters().values(), ctx), {1e-5, 1e-4}},
                                {"metrics", mm, {1e-4, 1e-4}}};
               }});
  return c;
}

class Backends : public ::testing::TestWithParam<Case> {};

TEST_P(Backends, CudaMatchesCpu) {
  const Case& c = GetParam();
  std::string why;
  const bool gpu = cuda_usable(&why);
  Context ctx(1, 1, gpu ? Device::CUDA : Device::CPU);
  // The GPU's convolutions on im2col + cuBLAS, as the CPU's: under "auto" the first call's
  // timings chose per shape (cuDNN or im2col within 1 us of each other on the DCGAN case), so
  // which rounding a run got, and whether two Adam steps' amplification of a near-zero gradient
  // stayed within the bound, was a draw. Every algorithm and mix is tested against the
  // reference in test_conv_gpu.cpp and test_conv_gpu_passes.cpp.
  ctx.tuning().set_policy("im2col");
  const Outputs cpu = c.run(ctx, Device::CPU);
  for (const Output& o : cpu) {
    bool finite = true;
    for (int64_t i = 0; i < o.value.numel(); ++i) finite = finite && std::isfinite(o.value[i]);
    EXPECT_TRUE(finite) << c.name << ": CPU output " << o.name << " is not finite";
  }
  if (!gpu) GTEST_SKIP() << "CPU side ran; CPU-vs-CUDA parity needs a GPU: " << why;
  const Outputs dev = c.run(ctx, Device::CUDA);
  ASSERT_EQ(dev.size(), cpu.size()) << c.name;
  for (size_t i = 0; i < cpu.size(); ++i)
    pt::expect_close(dev[i].value, cpu[i].value, cpu[i].tol.atol, cpu[i].tol.rtol,
                     c.name + " " + cpu[i].name);
}

INSTANTIATE_TEST_SUITE_P(AllOps, Backends, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

}  // namespace
