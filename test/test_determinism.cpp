// Determinism: the same seed and thread count give bit-identical weights after several Adam
// steps of a conv + pool + dense net; 1 and 2 threads agree within 1e-5 relative.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "layers/activation.h"
#include "layers/conv2d.h"
#include "layers/dense.h"
#include "layers/flatten.h"
#include "layers/maxpool2d.h"
#include "model/sequential.h"
#include "optim/adam.h"
#include "testing.h"
#include "workloads/classifier/classifier_trainer.h"

namespace pdnn {
namespace {

// Big enough that the conv, pool and elementwise loops take their parallel paths at 2 threads.
constexpr int64_t kBatch = 32, kClasses = 5;

std::vector<Tensor> train_and_get_weights(int threads, uint64_t seed) {
  Context ctx(threads, seed);
  Sequential m;
  m.emplace<Conv2d>(3, 8, 3, 1, 1);
  m.emplace<ReLU>();
  m.emplace<MaxPool2d>(2);
  m.emplace<Conv2d>(8, 16, 3, 1, 1);
  m.emplace<ReLU>();
  m.emplace<MaxPool2d>(2);
  m.emplace<Flatten>();
  m.emplace<Dense>(16 * 4 * 4, 32);
  m.emplace<ReLU>();
  m.emplace<Dense>(32, kClasses);
  m.reset_parameters(ctx.rng());
  Adam opt(m.parameters(), 1e-3);
  ClassifierTrainer trainer(m, opt);
  for (int step = 0; step < 4; ++step) {
    Tensor x = testing::random_tensor(Shape{kBatch, 3, 16, 16}, ctx.rng());
    std::vector<int32_t> labels(kBatch);
    for (auto& l : labels) l = static_cast<int32_t>(ctx.rng().next() % kClasses);
    trainer.step(ctx, x, testing::labels_tensor(labels));
  }
  std::vector<Tensor> w;
  for (const Param& p : m.params()) w.push_back(p.value->clone());
  return w;
}

}  // namespace

TEST(Determinism, SameSeedAndThreadsGiveBitIdenticalWeights) {
  const std::vector<Tensor> a = train_and_get_weights(2, 42);
  const std::vector<Tensor> b = train_and_get_weights(2, 42);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(std::memcmp(a[i].data(), b[i].data(), a[i].numel() * sizeof(float)), 0)
        << "parameter " << i << " differs between two identical runs";
  // And the seed matters (the comparison above is not vacuous).
  const std::vector<Tensor> c = train_and_get_weights(2, 43);
  EXPECT_NE(std::memcmp(a[0].data(), c[0].data(), a[0].numel() * sizeof(float)), 0);
}

TEST(Determinism, OneAndTwoThreadsAgree) {
  const std::vector<Tensor> one = train_and_get_weights(1, 42);
  const std::vector<Tensor> two = train_and_get_weights(2, 42);
  ASSERT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size(); ++i) {
    // Relative to the tensor's scale: a weight that happens to sit near 0 is not held to 1e-5
    // of itself.
    double scale = 0;
    for (int64_t k = 0; k < one[i].numel(); ++k)
      scale = std::max(scale, static_cast<double>(std::fabs(one[i][k])));
    testing::expect_close(two[i], one[i], 1e-5 * scale, 1e-5,
                          "parameter " + std::to_string(i) + ", 2 threads vs 1");
  }
}

}  // namespace pdnn
