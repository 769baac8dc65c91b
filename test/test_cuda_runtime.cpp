// The GPU runtime around the kernels: a training step moves only the batch and the labels
// across the bus (and the metrics when they are read), allocates nothing once warm, replays as
// a CUDA graph with the same results as eager steps; running out of device memory names the
// tensor; checkpoints go through the host; asking for a GPU where there is none is one clear
// error. Tests that need a GPU skip visibly without one.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/cuda_state.h"
#include "model/checkpoint.h"
#include "workloads/dcgan/dcgan_models.h"
#include "optim/adam.h"
#include "workloads/classifier/mnist_models.h"
#include "workloads/model_zoo.h"
#include "testing.h"
#include "workloads/classifier/classifier_trainer.h"
#include "workloads/dcgan/gan_trainer.h"

using namespace pdnn;
namespace pt = pdnn::testing;

namespace {

#define PDNN_NEED_GPU()                                           \
  do {                                                            \
    std::string why;                                              \
    if (!cuda_usable(&why)) GTEST_SKIP() << "needs a GPU: " << why; \
  } while (0)

struct Batch {
  Tensor x, y;
};

std::vector<Batch> batches(int n, int64_t size, uint64_t seed, int64_t last_size = 0) {
  Rng r(seed);
  std::vector<Batch> out;
  for (int i = 0; i < n; ++i) {
    const int64_t b = i + 1 == n && last_size > 0 ? last_size : size;
    std::vector<int32_t> l(static_cast<size_t>(b));
    for (auto& v : l) v = static_cast<int32_t>(r.next() % 10);
    out.push_back({pt::random_tensor(Shape{b, 1, 28, 28}, r, 0.f, 1.f), pt::labels_tensor(l)});
  }
  return out;
}

TEST(CudaRuntime, AskingForAMissingGpuIsOneClearError) {
  std::string why;
  if (cuda_usable(&why)) GTEST_SKIP() << "a GPU is present";
  try {
    Context ctx(1, 0, Device::CUDA);
    FAIL() << "Context(Device::CUDA) must fail without a GPU";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("--device cuda: "), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
  }
}

TEST(CudaRuntime, TrainingStepMovesOnlyTheBatchAndAllocatesNothingOnceWarm) {
  PDNN_NEED_GPU();
  Context ctx(1, 3, Device::CUDA);
  Sequential m = make_mnist_model("keras");
  m.reset_parameters(ctx.rng());
  m.to(Device::CUDA, ctx);
  auto opt = make_model_optimizer("keras", "", m.parameters(), -1.f);
  ClassifierTrainer tr(m, *opt);
  // Pinned host batches, as the app uses.
  Tensor x(Shape{32, 1, 28, 28}, DType::F32, ctx.staging_allocator());
  Tensor y(Shape{32}, DType::I32, ctx.staging_allocator());
  const std::vector<Batch> bs = batches(8, 32, 1);
  auto step = [&](int i) {
    copy_into(x, bs[static_cast<size_t>(i)].x, ctx);
    copy_into(y, bs[static_cast<size_t>(i)].y, ctx);
    tr.step(ctx, x, y);
  };
  for (int i = 0; i < 3; ++i) step(i);  // eager, capture, first replay
  ctx.synchronize();
  const TransferStats t0 = ctx.transfers();
  const AllocStats a0 = ctx.device_alloc_stats();
  for (int i = 3; i < 8; ++i) step(i);
  ctx.synchronize();
  const TransferStats t1 = ctx.transfers();
  const AllocStats a1 = ctx.device_alloc_stats();
  EXPECT_EQ(t1.h2d_copies - t0.h2d_copies, 10u) << "one copy of images and one of labels per step";
  EXPECT_EQ(t1.h2d_bytes - t0.h2d_bytes, 5u * (x.nbytes() + y.nbytes()));
  EXPECT_EQ(t1.d2h_copies, t0.d2h_copies) << "a step reads nothing back";
  EXPECT_EQ(a1.sys_allocs, a0.sys_allocs) << "cudaMalloc after warm-up";
  EXPECT_EQ(a1.sys_frees, a0.sys_frees) << "cudaFree after warm-up";
  EXPECT_EQ(a1.allocs, a0.allocs) << "allocations (even cached) after warm-up";
  EXPECT_GE(tr.graph_replays(), 6);
  // Reading the metrics is one small copy back: loss sum, correct, count, and the Dice losses'
  // sum (since the U-Net's Dice loss, 545632c: this GPU test still asked for three).
  const ClassifierMetrics mt = tr.metrics(ctx);
  EXPECT_EQ(ctx.transfers().d2h_copies - t1.d2h_copies, 1u);
  EXPECT_EQ(ctx.transfers().d2h_bytes - t1.d2h_bytes, 4u * sizeof(double));
  EXPECT_EQ(mt.count, 8 * 32);
  EXPECT_TRUE(std::isfinite(mt.loss_sum));
}

// The graph replays exactly the eager step: same weights, RNG position (dropout) and step
// count, including a smaller last batch (run eagerly) and an evaluation between epochs (its
// larger batch regrows buffers: the graph is captured again).
TEST(CudaRuntime, GraphReplayEqualsEagerSteps) {
  PDNN_NEED_GPU();
  std::vector<Tensor> weights;
  std::vector<uint64_t> rng;
  std::vector<int64_t> steps, replays;
  Rng tr_rng(4);
  LabeledImages test{pt::random_tensor(Shape{200, 1, 28, 28}, tr_rng, 0.f, 1.f),
                     std::vector<int32_t>(200, 3)};
  for (bool graph : {false, true}) {
    Context ctx(1, 9, Device::CUDA);
    pt::share_conv_choices(ctx);
    Sequential m = make_mnist_model("keras");
    m.reset_parameters(ctx.rng());
    m.to(Device::CUDA, ctx);
    auto opt = make_model_optimizer("keras", "", m.parameters(), -1.f);
    ClassifierTrainer tr(m, *opt, graph);
    for (int epoch = 0; epoch < 2; ++epoch) {
      for (const Batch& b : batches(6, 16, 20 + epoch, 7)) tr.step(ctx, b.x, b.y);
      evaluate_classifier(ctx, m, TensorDataset(test, 10), EvalOptions{100});
    }
    weights.push_back(m.parameters().values().to(Device::CPU, ctx));
    rng.push_back(ctx.rng().counter());
    steps.push_back(opt->steps());
    replays.push_back(tr.graph_replays());
  }
  pt::expect_close(weights[1], weights[0], 0, 0, "weights, graph vs eager");
  EXPECT_EQ(rng[1], rng[0]);
  EXPECT_EQ(steps[1], steps[0]);
  EXPECT_EQ(steps[0], 12);
  EXPECT_EQ(replays[0], 0);
  EXPECT_GE(replays[1], 4) << "replayed steps";
}

// Batches staged in one pinned buffer that is refilled every step (the app's way; the copy to
// the device is asynchronous) train exactly like fresh host tensors per step: the refill waits
// for the last copy (step() returns once its batch has been copied). Without that wait the host
// overwrote images still on their way to the GPU, and a W3 run on Fashion-MNIST lost 1.8 points of test accuracy.
TEST(CudaRuntime, PinnedBatchesRefilledEachStepTrainLikeFreshOnes) {
  PDNN_NEED_GPU();
  std::vector<Tensor> weights;
  for (bool pinned : {false, true}) {
    Context ctx(1, 4, Device::CUDA);
    pt::share_conv_choices(ctx);
    Sequential m = make_mnist_model("keras");
    m.reset_parameters(ctx.rng());
    m.to(Device::CUDA, ctx);
    auto opt = make_model_optimizer("keras", "", m.parameters(), -1.f);
    ClassifierTrainer tr(m, *opt);
    Tensor x(Shape{128, 1, 28, 28}, DType::F32, ctx.staging_allocator());
    Tensor y(Shape{128}, DType::I32, ctx.staging_allocator());
    for (const Batch& b : batches(12, 128, 31)) {
      if (pinned) {
        std::memcpy(x.raw_data(), b.x.raw_data(), b.x.nbytes());
        std::memcpy(y.raw_data(), b.y.raw_data(), b.y.nbytes());
        tr.step(ctx, x, y);
      } else {
        tr.step(ctx, b.x, b.y);
      }
    }
    weights.push_back(m.parameters().values().to(Device::CPU, ctx));
  }
  pt::expect_close(weights[1], weights[0], 0, 0, "weights, refilled pinned vs fresh batches");
}

// The DCGAN iteration on the GPU (W5's widths, batch 16), in fp32 and in bf16 (autocast:
// Sequential casts at the models' edges, the weights' bf16 copy refreshed inside the step):
// once warm it moves only the real batch to the device, reads nothing back and allocates
// nothing; replayed as a CUDA graph it equals the eager iterations (weights of both models, both
// step counts, the noise stream's position), across a smaller last batch and an
// evaluation-mode forward between epochs (the sample grid); the metrics read back as one small
// copy. The same with G's update deferred into the next iteration (GanTrainer::DeferG, flushed
// before the grid), eager and as a graph: the same weights bit for bit.
void dcgan_graph_equals_eager(Precision prec) {
  SCOPED_TRACE(precision_name(prec));
  std::vector<Tensor> gw, dw;
  std::vector<uint64_t> rng;
  std::vector<int64_t> steps_g, steps_d, replays;
  for (int variant = 0; variant < 4; ++variant) {
    const bool graph = (variant & 1) != 0, defer = (variant & 2) != 0;
    SCOPED_TRACE(std::string(graph ? "graph" : "eager") + (defer ? ", G deferred" : ""));
    Context ctx(1, 9, Device::CUDA);
    ctx.set_precision(prec);
    pt::share_conv_choices(ctx);
    Sequential g = make_dcgan_generator(), d = make_dcgan_discriminator();
    dcgan_init(g, ctx.rng());
    dcgan_init(d, ctx.rng());
    g.to(Device::CUDA, ctx);
    d.to(Device::CUDA, ctx);
    Adam opt_g(g.parameters(), 2e-4, 0.5), opt_d(d.parameters(), 2e-4, 0.5);
    GanTrainer tr(g, d, opt_g, opt_d, 100, 8, graph);
    if (defer) tr.set_defer_g(GanTrainer::DeferG::kAlways);
    Tensor x(Shape{16, 3, 64, 64}, DType::F32, ctx.staging_allocator());
    Rng r(3);
    for (int epoch = 0; epoch < 2; ++epoch) {
      tr.reset_metrics(ctx);
      for (int i = 0; i < 5; ++i) {
        const int64_t n = i == 4 ? 9 : 16;
        x.resize(Shape{n, 3, 64, 64});
        const Tensor src = pt::random_tensor(x.shape(), r);
        copy_into(x, src, ctx);
        if (graph && epoch == 1 && i == 3) {
          ctx.synchronize();
          const TransferStats t0 = ctx.transfers();
          const AllocStats a0 = ctx.device_alloc_stats();
          tr.step(ctx, x);
          ctx.synchronize();
          const TransferStats t1 = ctx.transfers();
          const AllocStats a1 = ctx.device_alloc_stats();
          EXPECT_EQ(t1.h2d_copies - t0.h2d_copies, 1u) << "the real batch only";
          EXPECT_EQ(t1.d2h_copies, t0.d2h_copies) << "an iteration reads nothing back";
          EXPECT_EQ(a1.allocs, a0.allocs) << "allocations after warm-up";
          continue;
        }
        tr.step(ctx, x);
      }
      EXPECT_EQ(tr.g_update_pending(), defer);
      tr.flush(ctx);
      // The sample grid: G in evaluation mode on a batch of another size.
      g.train(false);
      const Tensor z = pt::random_tensor(Shape{64, 100, 1, 1}, r).to(Device::CUDA, ctx);
      g.forward(ctx, z);
      g.train(true);
    }
    const TransferStats before = ctx.transfers();
    const GanMetrics m = tr.metrics(ctx);
    EXPECT_EQ(ctx.transfers().d2h_copies - before.d2h_copies, 1u);
    EXPECT_EQ(m.steps, 5);
    EXPECT_TRUE(std::isfinite(m.d_loss) && std::isfinite(m.g_loss));
    EXPECT_EQ(tr.history(ctx).size(), 5u);
    gw.push_back(g.parameters().values().to(Device::CPU, ctx));
    dw.push_back(d.parameters().values().to(Device::CPU, ctx));
    rng.push_back(ctx.rng().counter());
    steps_g.push_back(opt_g.steps());
    steps_d.push_back(opt_d.steps());
    replays.push_back(tr.graph_replays());
  }
  for (size_t v = 1; v < 4; ++v) {
    const std::string what = std::string(v & 1 ? "graph" : "eager") +
                             (v & 2 ? ", G deferred" : "") + " vs eager";
    pt::expect_close(gw[v], gw[0], 0, 0, "G, " + what);
    pt::expect_close(dw[v], dw[0], 0, 0, "D, " + what);
    EXPECT_EQ(rng[v], rng[0]) << what;
    EXPECT_EQ(steps_g[v], 10) << what;
    EXPECT_EQ(steps_d[v], 10) << what;
    if (v & 1)
      EXPECT_GE(replays[v], 4) << "replayed iterations, " << what;
    else
      EXPECT_EQ(replays[v], 0) << what;
  }
  EXPECT_EQ(replays[0], 0);
}

TEST(CudaRuntime, DcganIterationGraphEqualsEagerAndMovesOnlyTheBatch) {
  PDNN_NEED_GPU();
  for (Precision prec : {Precision::Fp32, Precision::Bf16}) dcgan_graph_equals_eager(prec);
}

// The DCGAN iteration with its real batch refilled in one pinned buffer every step (DcganTask's
// way) trains exactly like fresh host tensors per step: step() returns only once the batch has
// left the buffer.
TEST(CudaRuntime, DcganPinnedBatchRefilledEachStepTrainsLikeFreshOnes) {
  PDNN_NEED_GPU();
  std::vector<Tensor> gw;
  for (bool pinned : {false, true}) {
    Context ctx(1, 5, Device::CUDA);
    pt::share_conv_choices(ctx);
    Sequential g = make_dcgan_generator(), d = make_dcgan_discriminator();
    dcgan_init(g, ctx.rng());
    dcgan_init(d, ctx.rng());
    g.to(Device::CUDA, ctx);
    d.to(Device::CUDA, ctx);
    Adam opt_g(g.parameters(), 2e-4, 0.5), opt_d(d.parameters(), 2e-4, 0.5);
    GanTrainer tr(g, d, opt_g, opt_d, 100, 8);
    Tensor x(Shape{32, 3, 64, 64}, DType::F32, ctx.staging_allocator());
    Rng r(6);
    for (int i = 0; i < 6; ++i) {
      const Tensor src = pt::random_tensor(x.shape(), r);
      if (pinned) {
        std::memcpy(x.raw_data(), src.raw_data(), src.nbytes());
        tr.step(ctx, x);
      } else {
        tr.step(ctx, src);
      }
    }
    gw.push_back(g.parameters().values().to(Device::CPU, ctx));
  }
  pt::expect_close(gw[1], gw[0], 0, 0, "G, refilled pinned vs fresh batches");
}

TEST(CudaRuntime, OutOfMemoryNamesTheTensor) {
  PDNN_NEED_GPU();
  Context ctx(1, 0, Device::CUDA);
  pt::expect_error_mentions(
      [&] { Tensor::empty(Shape{int64_t{1} << 40}, DType::F32, Device::CUDA, ctx); },
      {"(1099511627776)", "float32", "out of GPU memory"});
  // The device still works afterwards.
  Tensor t = Tensor::empty(Shape{4}, DType::F32, Device::CUDA, ctx);
  EXPECT_EQ(t.to(Device::CPU, ctx).numel(), 4);
}

// Uncapped, a cached block up to 1/8 (and 1 MiB) larger than asked serves a request, which
// saves a cudaMalloc; what was asked is counted beside the block. Under a cap
// (--gpu-memory-limit) only a block of the size asked does: a memory plan counts what is asked,
// and the larger block's difference would be outside it.
TEST(CudaRuntime, UnderACapCachedBlocksServeOnlyTheirOwnSize) {
  PDNN_NEED_GPU();
  Context ctx(1, 0, Device::CUDA);
  const std::shared_ptr<Allocator> a = ctx.allocator(Device::CUDA);
  a->trim();  // nothing cached; the peaks start here
  const size_t mib = size_t{1} << 20, held = a->stats().in_use,
               held_asked = a->stats().in_use_asked;
  void* big = a->allocate(10 * mib);
  a->deallocate(big, 10 * mib);
  void* small = a->allocate(6 * mib);
  EXPECT_NE(small, big) << "uncapped: the cached 10 MiB block is too large for 6 MiB";
  void* p = a->allocate(17 * mib / 2);
  EXPECT_EQ(p, big) << "uncapped: the cached 10 MiB block serves 8.5 MiB";
  EXPECT_EQ(a->stats().in_use - held, 16 * mib);
  EXPECT_EQ(a->stats().in_use_asked - held_asked, 6 * mib + 17 * mib / 2);
  EXPECT_EQ(a->stats().peak_in_use_asked - held_asked, 6 * mib + 17 * mib / 2);
  a->deallocate(small, 6 * mib);
  a->deallocate(p, 17 * mib / 2);
  EXPECT_EQ(a->stats().in_use_asked, held_asked);
  a->trim();  // below, the cached 10 MiB block is the only one
  big = a->allocate(10 * mib);
  a->deallocate(big, 10 * mib);
  a->set_limit(a->stats().reserved + 64 * mib);
  void* q = a->allocate(6 * mib);
  EXPECT_NE(q, big) << "capped: a block of its own size";
  EXPECT_EQ(a->stats().in_use - held, 6 * mib);
  a->deallocate(q, 6 * mib);
  void* q2 = a->allocate(6 * mib);
  EXPECT_EQ(q2, q) << "capped: a cached block of the size asked is reused";
  // Past the cap, the cached 10 MiB block is given back for a request it cannot serve.
  const size_t room = a->stats().reserved;
  void* r = a->allocate(60 * mib);
  EXPECT_LE(a->stats().reserved, room - 10 * mib + 60 * mib);
  a->deallocate(r, 60 * mib);
  a->deallocate(q2, 6 * mib);
  a->set_limit(0);
}

TEST(CudaRuntime, CheckpointOfADeviceModelLoadsOnTheHost) {
  PDNN_NEED_GPU();
  Context ctx(1, 2, Device::CUDA);
  Sequential m = make_mnist_model("small");
  m.reset_parameters(ctx.rng());
  m.to(Device::CUDA, ctx);
  auto opt = make_model_optimizer("small", "", m.parameters(), -1.f);
  ClassifierTrainer tr(m, *opt);
  for (const Batch& b : batches(3, 8, 5)) tr.step(ctx, b.x, b.y);
  const std::string path = ::testing::TempDir() + "pdnn_cuda_ckpt.bin";
  save_checkpoint(path, m, opt.get(), 1, {}, &ctx);
  Sequential h = make_mnist_model("small");
  auto hopt = make_model_optimizer("small", "", h.parameters(), -1.f);
  load_checkpoint(path, h, hopt.get());
  pt::expect_close(h.parameters().values(), m.parameters().values().to(Device::CPU, ctx), 0, 0,
                   "weights through a checkpoint");
  EXPECT_EQ(hopt->steps(), 3);
  std::remove(path.c_str());
}

}  // namespace
