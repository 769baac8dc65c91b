// ClassifierTask (lib/workloads/classifier/classifier_task.h) and evaluate_classifier over Datasets: the
// prefetching path (batches packed ahead on a background thread, next epoch started during
// evaluation, any loader thread count) trains to exactly the weights of the synchronous path;
// an epoch of images_per_epoch takes that many images; the per-class columns and the
// confusion matrix agree with the overall accuracy; the resource columns are there and sane.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "core/context.h"
#include "data/dataset.h"
#include "workloads/classifier/mnist_models.h"
#include "optim/adam.h"
#include "testing.h"
#include "workloads/classifier/classifier_task.h"

namespace pdnn {
namespace {

// 4 classes of 10x10 images, class = i % 4, a bright square in quadrant c on noise (easy).
LabeledImages squares(int64_t n, uint64_t seed) {
  Rng rng(seed);
  LabeledImages d{Tensor(Shape{n, 1, 10, 10}), std::vector<int32_t>(static_cast<size_t>(n))};
  for (int64_t i = 0; i < n; ++i) {
    const int c = static_cast<int>(i % 4);
    d.labels[static_cast<size_t>(i)] = c;
    float* img = d.images.data() + i * 100;
    for (int k = 0; k < 100; ++k) img[k] = rng.uniform(0.f, 0.3f);
    const int r0 = (c / 2) * 5 + static_cast<int>(rng.next() % 2);
    const int c0 = (c % 2) * 5 + static_cast<int>(rng.next() % 2);
    for (int y = r0; y < r0 + 3; ++y)
      for (int x = c0; x < c0 + 3; ++x) img[y * 10 + x] = 1.f;
  }
  return d;
}

struct Trained {
  std::vector<float> weights;
  std::vector<std::vector<double>> evals;
  std::vector<int64_t> seen;  // images per epoch
};

// Three epochs of W3 (keras: dropout draws from the context's RNG) on the squares.
Trained train(int prefetch, int loader_threads, int64_t images_per_epoch) {
  const LabeledImages tr = squares(60, 1), te = squares(20, 2);
  const TensorDataset train_set(tr, 4), test_set(te, 4);
  Context ctx(1, 7);
  Sequential m = make_mnist_model("keras", 10, 4);
  m.reset_parameters(ctx.rng());
  Adam opt(m.parameters(), 1e-3);
  ClassifierTaskOptions o;
  o.train.batch = 8;
  o.train.threads = loader_threads;
  o.train.images_per_epoch = images_per_epoch;
  o.prefetch = prefetch;
  o.eval.batch = 6;
  o.eval.prefetch = prefetch;
  o.per_class = true;
  o.resources = true;
  ClassifierTask task(ctx, m, opt, train_set, test_set, o);
  Trained t;
  for (int epoch = 0; epoch < 3; ++epoch) {
    const int64_t batches = task.begin_epoch(ctx, epoch, 1234);
    int64_t seen = 0;
    for (int64_t b = 0; b < batches; ++b) seen += task.train_batch(ctx, b);
    t.seen.push_back(seen);
    t.evals.push_back(task.evaluate(ctx));
  }
  const Tensor& w = m.parameters().values();
  t.weights.assign(w.data(), w.data() + w.numel());
  EXPECT_EQ(task.eval_columns().size(), t.evals.back().size());
  return t;
}

TEST(ClassifierTask, PrefetchingTrainsExactlyAsTheSynchronousPath) {
  const Trained sync = train(0, 1, 0);
  EXPECT_EQ(sync.seen, (std::vector<int64_t>{60, 60, 60}));
  for (const int depth : {1, 2})
    for (const int threads : {1, 2}) {
      const Trained pre = train(depth, threads, 0);
      EXPECT_EQ(pre.weights, sync.weights) << "depth " << depth << ", threads " << threads;
      ASSERT_EQ(pre.evals.size(), sync.evals.size());
      for (size_t e = 0; e < sync.evals.size(); ++e)
        for (size_t i = 0; i < 2 + 4; ++i)  // losses and accuracies (not the resources)
          EXPECT_EQ(pre.evals[e][i], sync.evals[e][i]) << "epoch " << e << " value " << i;
    }
  const Trained part = train(1, 1, 40);
  EXPECT_EQ(part.seen, (std::vector<int64_t>{40, 40, 40}));
  EXPECT_NE(part.weights, sync.weights);
}

TEST(ClassifierTask, ColumnsPerClassAndResources) {
  const LabeledImages tr = squares(16, 1), te = squares(12, 2);
  const TensorDataset train_set(tr, 4), test_set(te, 4);
  Context ctx(1, 7);
  Sequential m = make_mnist_model("small", 10, 4);
  m.reset_parameters(ctx.rng());
  Adam opt(m.parameters(), 1e-3);
  ClassifierTaskOptions o;
  o.train.batch = 8;
  {
    ClassifierTask plain(ctx, m, opt, train_set, test_set, o);
    EXPECT_EQ(plain.eval_columns(), (std::vector<std::string>{"test_loss", "test_acc"}));
  }
  o.per_class = true;
  o.resources = true;
  o.prefetch = 1;
  ClassifierTask task(ctx, m, opt, train_set, test_set, o);
  EXPECT_EQ(task.eval_columns(),
            (std::vector<std::string>{"test_loss", "test_acc", "test_acc_0", "test_acc_1",
                                      "test_acc_2", "test_acc_3", "peak_rss_mb",
                                      "peak_device_mb", "loader_hidden_s",
                                      "loader_exposed_s"}));
  const int64_t batches = task.begin_epoch(ctx, 0, 9);
  for (int64_t b = 0; b < batches; ++b) task.train_batch(ctx, b);
  const std::vector<double> v = task.evaluate(ctx);
  ASSERT_EQ(v.size(), 10u);
  const EvalResult& r = task.last_eval();
  ASSERT_EQ(r.confusion.size(), 16u);
  EXPECT_EQ(std::accumulate(r.confusion.begin(), r.confusion.end(), int64_t{0}), 12);
  int64_t trace = 0;
  for (int k = 0; k < 4; ++k) {
    trace += r.confusion[static_cast<size_t>(k * 5)];
    int64_t row = 0;
    for (int j = 0; j < 4; ++j) row += r.confusion[static_cast<size_t>(k * 4 + j)];
    EXPECT_EQ(row, 3) << "class " << k;  // 12 test images, class = i % 4
    EXPECT_DOUBLE_EQ(v[2 + static_cast<size_t>(k)],
                     static_cast<double>(r.confusion[static_cast<size_t>(k * 5)]) / 3);
  }
  EXPECT_NEAR(v[1], static_cast<double>(trace) / 12, 1e-12);  // the device's count agrees
  EXPECT_GT(v[6], 1.0);   // peak RSS, MB
  EXPECT_EQ(v[7], 0.0);   // no device memory on the CPU
  EXPECT_GE(v[8], 0.0);
  EXPECT_GE(v[9], 0.0);
  EXPECT_EQ(task.loader_stats().batches, 2);
  EXPECT_GT(peak_resident_bytes(), 1u << 20);
}

TEST(ClassifierTask, RefusesMismatchedSets) {
  const LabeledImages a = squares(8, 1);
  LabeledImages b{Tensor(Shape{4, 1, 8, 8}), {0, 1, 2, 3}};
  const TensorDataset sa(a, 4), sb(b, 4), sc(a, 5);
  Context ctx(1, 1);
  Sequential m = make_mnist_model("small", 10, 4);
  m.reset_parameters(ctx.rng());
  Adam opt(m.parameters(), 1e-3);
  ClassifierTaskOptions o;
  testing::expect_error_mentions([&] { ClassifierTask(ctx, m, opt, sa, sb, o); },
                                 {"(1,10,10)", "(1,8,8)"});
  testing::expect_error_mentions([&] { ClassifierTask(ctx, m, opt, sa, sc, o); },
                                 {"4 classes", "5"});
  o.train.batch = 0;
  testing::expect_error_mentions([&] { ClassifierTask(ctx, m, opt, sa, sa, o); }, {"batch 0"});
}

}  // namespace
}  // namespace pdnn
