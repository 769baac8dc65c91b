// Threads per Context (issue 16): every parallel region in lib/ takes its team size from the
// CpuExec it is handed, never from the process's OpenMP setting, so Contexts with different
// thread counts share one process without changing each other's threads or results.
//
// Each region's threads report their team size through core/parallel.h's observer (cpu::gemm
// reports the team it tells OpenBLAS to form). The process setting is made kProcessThreads
// first, a count no Context here uses: a region that ignores its exec runs with it and fails.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <vector>

#include "core/parallel.h"
#include "data/dataset.h"
#include "data/dataset_loader.h"
#include "layers/activation.h"
#include "layers/batchnorm2d.h"
#include "layers/conv2d.h"
#include "layers/dense.h"
#include "layers/dropout.h"
#include "layers/flatten.h"
#include "layers/maxpool2d.h"
#include "model/sequential.h"
#include "ops/activation.h"
#include "ops/basic.h"
#include "ops/conv/conv2d.h"
#include "ops/dropout.h"
#include "ops/loss.h"
#include "ops/random.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "testing.h"
#include "workloads/classifier/classifier_trainer.h"
#include "workloads/hebbian/hebbian_ops.h"

namespace pdnn {
namespace {

namespace fs = std::filesystem;

constexpr int kProcessThreads = 5;
const int kThreadCounts[] = {1, 2, 3};

std::mutex g_mu;
std::vector<int> g_teams;

void record_team(int team) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_teams.push_back(team);
}

class ThreadsPerContext : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = omp_get_max_threads();
    omp_set_num_threads(kProcessThreads);
  }
  void TearDown() override {
    set_team_observer(nullptr);
    omp_set_num_threads(saved_);
  }

  // Runs f and expects each parallel region it opened to have had `threads` threads (and at
  // least one region: the sizes here are above every serial threshold).
  static void expect_teams(int threads, const std::string& what, const std::function<void()>& f) {
    g_teams.clear();
    set_team_observer(record_team);
    f();
    set_team_observer(nullptr);
    ASSERT_FALSE(g_teams.empty()) << what << ": no parallel region reported its team";
    int wrong = 0, example = 0;
    for (int t : g_teams)
      if (t != threads) {
        ++wrong;
        example = t;
      }
    EXPECT_EQ(wrong, 0) << what << ": " << wrong << " of " << g_teams.size()
                        << " thread reports were not the context's " << threads
                        << " threads (e.g. " << example << ")";
  }

  int saved_ = 1;
};

// The observer sees only regions that report: every `#pragma omp parallel` in lib/ must name
// its team (num_threads) and report it (observe_team() first in its body), so a region added
// without either fails here rather than going unseen. (parallel_for's own region is one of
// them; a combined `parallel for` cannot report, hence none.)
TEST(ThreadsPerContextSource, EveryRegionInLibNamesAndReportsItsTeam) {
  int regions = 0;
  for (const auto& f : fs::recursive_directory_iterator(std::string(PDNN_SOURCE_DIR) + "/lib")) {
    const std::string ext = f.path().extension().string();
    if (ext != ".cpp" && ext != ".h") continue;
    std::ifstream in(f.path());
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    for (size_t i = 0; i < lines.size(); ++i) {
      if (lines[i].rfind("#pragma omp parallel", 0) != 0) continue;
      ++regions;
      const std::string where = f.path().string() + ":" + std::to_string(i + 1);
      EXPECT_NE(lines[i].find("num_threads("), std::string::npos) << where << ": no num_threads";
      EXPECT_EQ(lines[i].find("parallel for"), std::string::npos)
          << where << ": a combined parallel for cannot report its team (use parallel_for)";
      const bool reports = i + 2 < lines.size() && lines[i + 1].find('{') != std::string::npos &&
                           lines[i + 2].find("observe_team();") != std::string::npos;
      EXPECT_TRUE(reports) << where << ": the region's body must start with observe_team()";
    }
  }
  EXPECT_GE(regions, 15);  // the scan found the files
}

// Forward and backward of a layer on x.
void run_layer(Context& ctx, Layer& layer, const Tensor& x) {
  Tensor y(layer.output_shape(x.shape()));
  layer.forward(ctx, x, y);
  Tensor dy = testing::random_tensor(y.shape(), ctx.rng());
  Tensor dx(x.shape());
  layer.backward(ctx, x, y, dy, &dx);
}

TEST_F(ThreadsPerContext, ElementwiseAndLossRegions) {
  const int64_t n = 1 << 19;  // above normal_fill's threshold, the highest (n / 16)
  for (int threads : kThreadCounts) {
    Context ctx(threads, 1);
    Tensor x = testing::random_tensor(Shape{n}, ctx.rng()), y(Shape{n}), dx(Shape{n});
    Tensor mask(Shape{n});
    const std::string at = " at " + std::to_string(threads);
    expect_teams(threads, "relu" + at, [&] {
      ops::relu_forward(ctx, x, y);
      ops::relu_backward(ctx, x, y, dx);
    });
    expect_teams(threads, "tanh/sigmoid" + at, [&] {
      ops::tanh_forward(ctx, x, y);
      ops::sigmoid_forward(ctx, x, y);
      ops::sigmoid_backward(ctx, y, x, dx);
    });
    expect_teams(threads, "fill/normal_fill" + at, [&] {
      ops::fill(ctx, y, 0.5f);
      ops::normal_fill(ctx, y, 0.f, 1.f);
    });
    expect_teams(threads, "dropout" + at, [&] {
      ops::dropout_forward(ctx, 0.3f, x, y, mask);
      ops::dropout_backward(ctx, y, mask, dx);
    });
    const int64_t rows = 1024, k = 64;
    Tensor z = testing::random_tensor(Shape{rows, k}, ctx.rng()), probs(Shape{rows, k});
    Tensor row_loss(Shape{rows}), dz(Shape{rows, k});
    std::vector<int32_t> l(rows);
    for (int64_t i = 0; i < rows; ++i) l[static_cast<size_t>(i)] = static_cast<int32_t>(i % k);
    const Tensor labels = testing::labels_tensor(l);
    expect_teams(threads, "softmax cross-entropy" + at, [&] {
      ops::softmax_cross_entropy_forward(ctx, z, labels, probs, row_loss);
      ops::softmax_cross_entropy_backward(ctx, 1.f / rows, probs, labels, dz);
    });
    Tensor p(Shape{n}), t(Shape{n}), parts(Shape{loss_chunks(n)});
    ops::sigmoid_forward(ctx, x, p);
    ops::fill(ctx, t, 1.f);
    expect_teams(threads, "binary cross-entropy" + at, [&] {
      ops::binary_cross_entropy_forward(ctx, p, t, parts);
      ops::binary_cross_entropy_backward(ctx, 1.f, p, t, dx);
      ops::bce_with_logits_forward(ctx, x, t, parts);
      ops::bce_with_logits_backward(ctx, 1.f, x, t, dx);
    });
  }
}

TEST_F(ThreadsPerContext, ConvolutionEveryCpuAlgorithm) {
  const int64_t n = 8, c = 8, k = 16, side = 32;
  const ConvGeom g = conv_geom("test", c, side, side, 3, 3, 1, 1, 1, 1);
  for (int threads : kThreadCounts) {
    Context ctx(threads, 2);
    Tensor x = testing::random_tensor(Shape{n, c, side, side}, ctx.rng());
    Tensor w = testing::random_tensor(Shape{k, c, 3, 3}, ctx.rng(), -0.1f, 0.1f);
    Tensor b = testing::random_tensor(Shape{k}, ctx.rng());
    Tensor y(Shape{n, k, side, side}), dy = testing::random_tensor(y.shape(), ctx.rng());
    Tensor dw(w.shape()), db(b.shape()), dx(x.shape());
    for (ConvAlgo a : {ConvAlgo::PerImage, ConvAlgo::Batched, ConvAlgo::Winograd,
                       ConvAlgo::Direct}) {
      expect_teams(threads,
                   std::string("conv2d ") + conv_algo_name(a) + " at " + std::to_string(threads),
                   [&] {
                     const ConvFwdTensors f =
                         ConvFwdTensors::of(ConvShape{g, n, k}, &x, &w, &b, &y, Act{}, a);
                     ops::conv2d_forward(ctx, f);
                     ops::conv2d_backward(ctx, ConvBwdTensors::of(f, &dy, &dw, &db, &dx));
                   });
    }
  }
}

TEST_F(ThreadsPerContext, LayersDenseBatchNormPooling) {
  for (int threads : kThreadCounts) {
    Context ctx(threads, 3);
    const std::string at = " at " + std::to_string(threads);
    Dense dense(512, 256);
    dense.reset_parameters(ctx.rng());
    expect_teams(threads, "Dense (GEMM)" + at,
                 [&] { run_layer(ctx, dense, testing::random_tensor(Shape{64, 512}, ctx.rng())); });
    const Tensor x = testing::random_tensor(Shape{8, 16, 32, 32}, ctx.rng());
    BatchNorm2d bn(16);
    expect_teams(threads, "BatchNorm2d" + at, [&] { run_layer(ctx, bn, x); });
    MaxPool2d pool(2);
    expect_teams(threads, "MaxPool2d" + at, [&] { run_layer(ctx, pool, x); });
  }
}

TEST_F(ThreadsPerContext, OptimizerSteps) {
  for (int threads : kThreadCounts) {
    Context ctx(threads, 4);
    Sequential m;
    m.emplace<Dense>(512, 256);
    m.reset_parameters(ctx.rng());
    ops::fill(ctx, m.parameters().grads(), 0.25f);
    Adam adam(m.parameters(), 1e-3);
    expect_teams(threads, "Adam step at " + std::to_string(threads), [&] { adam.step(ctx); });
    Sgd sgd(m.parameters(), 1e-2, 0.9);
    expect_teams(threads, "SGD step at " + std::to_string(threads), [&] { sgd.step(ctx); });
  }
}

TEST_F(ThreadsPerContext, HebbianKernels) {
  const int64_t n = 2048;  // reservoir_update's threshold: n * 8 >= 2^14
  for (int threads : kThreadCounts) {
    Context ctx(threads, 5);
    const HebbianParams<float> p = hebbian_params<float>(n, 1e-6, 0.0);
    Tensor W = testing::random_tensor(Shape{n, n}, ctx.rng(), -0.01f, 0.01f);
    Tensor x = testing::random_tensor(Shape{n}, ctx.rng()), y(Shape{n}), scratch(Shape{n});
    Tensor win = testing::random_tensor(Shape{n}, ctx.rng());
    Tensor u = testing::random_tensor(Shape{4}, ctx.rng()), u1(Shape{1});
    Tensor index(Shape{1}, DType::I64);
    const std::string at = " at " + std::to_string(threads);
    expect_teams(threads, "hebbian gemv/oja/reservoir" + at, [&] {
      ops::gemv<float>(ctx, y, W, x);
      ops::reservoir_update<float>(ctx, scratch, x, y, win, u1, p);
      ops::oja_update<float>(ctx, W, x, 1e-6f);
      ops::first_nonfinite<float>(ctx, index, W);
    });
    expect_teams(threads, "hebbian_run" + at,
                 [&] { ops::hebbian_run<float>(ctx, W, x, index, win, u, 0, 3, p, scratch); });
  }
}

// The loader's team is its own option (LoaderOptions::threads), not a Context's.
TEST_F(ThreadsPerContext, LoaderUsesItsOwnThreads) {
  LabeledImages d{Tensor(Shape{64, 1, 8, 8}), std::vector<int32_t>(64)};
  const TensorDataset data(d, 1);
  for (int threads : kThreadCounts) {
    LoaderOptions opt;
    opt.batch = 16;
    opt.threads = threads;
    DatasetLoader loader(data, opt);
    loader.start_epoch(0);
    Tensor x;
    std::vector<int32_t> y;
    expect_teams(threads, "loader at " + std::to_string(threads), [&] { loader.load(0, x, y); });
  }
}

// Two contexts trained in turns give bit for bit the weights each gives when trained alone:
// neither one's threads leak into the other's regions (where the summation order of the
// per-thread partial sums, e.g. conv2d's dW, depends on the team size).
constexpr int64_t kBatch = 16, kClasses = 4;

struct Training {
  Context ctx;
  Sequential model;
  std::unique_ptr<Adam> opt;
  std::unique_ptr<ClassifierTrainer> trainer;
  explicit Training(int threads) : ctx(threads, 9) {
    // Images in parallel: its dW sums per-thread partials, so the thread count shows in it.
    model.emplace<Conv2d>(3, 8, 3, 1, 1).set_algo(ConvAlgo::PerImage);
    model.emplace<BatchNorm2d>(8);
    model.emplace<ReLU>();
    model.emplace<MaxPool2d>(2);
    model.emplace<Flatten>();
    model.emplace<Dense>(8 * 8 * 8, kClasses);
    model.reset_parameters(ctx.rng());
    opt = std::make_unique<Adam>(model.parameters(), 1e-3);
    trainer = std::make_unique<ClassifierTrainer>(model, *opt);
  }
  void step() {
    Tensor x = testing::random_tensor(Shape{kBatch, 3, 16, 16}, ctx.rng());
    std::vector<int32_t> labels(kBatch);
    for (auto& l : labels) l = static_cast<int32_t>(ctx.rng().next() % kClasses);
    trainer->step(ctx, x, testing::labels_tensor(labels));
  }
  std::vector<float> weights() {
    const Tensor& v = model.parameters().values();
    return std::vector<float>(v.data(), v.data() + v.numel());
  }
};

TEST_F(ThreadsPerContext, AlternatingContextsGiveTheirOwnResults) {
  constexpr int kSteps = 3;
  Training alone1(1), alone3(3);
  for (int s = 0; s < kSteps; ++s) alone1.step();
  for (int s = 0; s < kSteps; ++s) alone3.step();
  Training turn1(1), turn3(3);
  for (int s = 0; s < kSteps; ++s) {
    turn1.step();
    turn3.step();
  }
  const std::vector<float> a1 = alone1.weights(), a3 = alone3.weights();
  const std::vector<float> t1 = turn1.weights(), t3 = turn3.weights();
  ASSERT_EQ(a1.size(), t1.size());
  // Not vacuous: 1 and 3 threads sum the convolution's per-thread dW partials differently.
  EXPECT_NE(std::memcmp(a1.data(), a3.data(), a1.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(a1.data(), t1.data(), a1.size() * sizeof(float)), 0)
      << "1-thread context trained in turns with a 3-thread one differs from it trained alone";
  EXPECT_EQ(std::memcmp(a3.data(), t3.data(), a3.size() * sizeof(float)), 0)
      << "3-thread context trained in turns with a 1-thread one differs from it trained alone";
}

}  // namespace
}  // namespace pdnn
