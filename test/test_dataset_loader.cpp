// Dataset, DatasetLoader and PrefetchLoader (lib/data/dataset.h, dataset_loader.h,
// prefetch_loader.h): TensorDataset over an IDX-style set gives the epoch's permutation in
// batches; epochs
// of images_per_epoch / drop_last; augmentation keyed by (seed, epoch, image) so batches are
// the same at 1 and 2 threads; the prefetching loader gives exactly the plain loader's batches
// (any depth, threads, an epoch abandoned half way), rethrows a reader's error, fills the
// caller's allocator's tensors and counts its time.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "data/augment.h"
#include "data/dataset.h"
#include "data/dataset_loader.h"
#include "data/prefetch_loader.h"
#include "testing.h"

namespace pdnn {
namespace {

// n byte images h x w x 3 with class = i % classes, served at out x out through
// augment_image: an augmenting data set that needs no OpenCV.
class ByteImages : public Dataset {
 public:
  ByteImages(int64_t n, int h, int w, int out, int classes = 3)
      : n_(n), h_(h), w_(w), out_(out), classes_(classes),
        bytes_(static_cast<size_t>(n) * h * w * 3) {
    Rng rng(11);
    for (auto& b : bytes_) b = static_cast<uint8_t>(rng.next() & 0xFF);
  }
  int64_t size() const override { return n_; }
  Shape sample_shape() const override { return Shape{3, out_, out_}; }
  int num_classes() const override { return classes_; }
  std::string class_name(int k) const override { return "c" + std::to_string(k); }
  int32_t label(int64_t i) const override { return static_cast<int32_t>(i % classes_); }
  void read(int64_t i, float* dst, std::optional<uint64_t> key) const override {
    if (i == fail_at_) PDNN_FAIL("ByteImages: image %lld is broken", static_cast<long long>(i));
    if (delay_us_ > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay_us_));
    const AugmentDraw d = key ? draw_augment(AugmentOptions{}, *key, h_, w_) : identity_draw(h_, w_);
    augment_image(d, Normalization::imagenet(), h_, w_,
                  bytes_.data() + static_cast<size_t>(i) * h_ * w_ * 3, out_, out_, dst);
  }
  int64_t fail_at_ = -1;
  int delay_us_ = 0;

 private:
  int64_t n_;
  int h_, w_, out_, classes_;
  std::vector<uint8_t> bytes_;
};

struct Plain {  // every batch of one epoch, through DatasetLoader
  std::vector<std::vector<float>> x;
  std::vector<std::vector<int32_t>> y;
};

Plain plain_epoch(const Dataset& data, const LoaderOptions& opt, int64_t epoch) {
  DatasetLoader loader(data, opt);
  loader.start_epoch(epoch);
  Plain p;
  Tensor x;
  std::vector<int32_t> y;
  for (int64_t b = 0; b < loader.num_batches(); ++b) {
    const int64_t nb = loader.load(b, x, y);
    EXPECT_EQ(x.shape(0), nb);
    p.x.emplace_back(x.data(), x.data() + x.numel());
    p.y.push_back(y);
  }
  return p;
}

// Batch b of epoch e holds images order[b*B ..] of order = epoch_order_rng(seed,
// e).permutation(N) (what scripts/twins/torch_reference.py rebuilds), the last one the N % B left.
TEST(DatasetLoader, TensorDatasetGivesTheEpochsPermutationInBatches) {
  LabeledImages d{Tensor(Shape{50, 1, 3, 4}), std::vector<int32_t>(50)};
  Rng rng(3);
  for (int64_t i = 0; i < d.images.numel(); ++i) d.images[i] = rng.uniform(-1.f, 1.f);
  for (int i = 0; i < 50; ++i) d.labels[static_cast<size_t>(i)] = i % 10;
  const TensorDataset set(d, 10);
  EXPECT_EQ(set.sample_shape(), (Shape{1, 3, 4}));
  LoaderOptions opt;
  opt.batch = 8;
  opt.seed = 99;
  opt.augment = true;  // ignored by a set without augmentation
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    const std::vector<int64_t> order = epoch_order_rng(99, epoch).permutation(50);
    const Plain p = plain_epoch(set, opt, epoch);
    ASSERT_EQ(p.x.size(), 7u);
    for (size_t b = 0; b < p.x.size(); ++b) {
      const size_t nb = b < 6 ? 8 : 2;
      std::vector<float> x;
      std::vector<int32_t> y;
      for (size_t i = 0; i < nb; ++i) {
        const int64_t k = order[b * 8 + i];
        x.insert(x.end(), d.images.data() + k * 12, d.images.data() + (k + 1) * 12);
        y.push_back(d.labels[static_cast<size_t>(k)]);
      }
      EXPECT_EQ(p.y[b], y) << "epoch " << epoch << " batch " << b;
      EXPECT_EQ(p.x[b], x) << "epoch " << epoch << " batch " << b;
    }
  }
}

TEST(DatasetLoader, TensorDatasetChecksItsInput) {
  LabeledImages d{Tensor(Shape{2, 1, 2, 2}), {0, 5}};
  testing::expect_error_mentions([&] { TensorDataset(d, 3); }, {"label 5", "[0, 3)"});
  LabeledImages e{Tensor(Shape{3, 1, 2, 2}), {0, 1}};
  testing::expect_error_mentions([&] { TensorDataset(e, 3); }, {"3 images", "2 labels"});
}

TEST(DatasetLoader, EpochOf1280From1301DrawsDistinctImagesAndVariesWhatItLeavesOut) {
  const ByteImages data(1301, 2, 2, 2);
  for (const bool by_count : {true, false}) {
    LoaderOptions opt;
    opt.batch = 64;
    opt.seed = 5;
    if (by_count) opt.images_per_epoch = 1280; else opt.drop_last = true;
    std::set<int64_t> left_out_first;
    for (int64_t epoch = 0; epoch < 2; ++epoch) {
      const EpochPlan plan(data, opt, epoch);
      ASSERT_EQ(plan.num_batches(), 20);
      ASSERT_EQ(plan.images(), 1280);
      std::set<int64_t> seen;
      for (int64_t b = 0; b < 20; ++b) {
        int64_t n = 0;
        const int64_t* idx = plan.batch_indices(b, &n);
        ASSERT_EQ(n, 64);
        seen.insert(idx, idx + n);
      }
      ASSERT_EQ(seen.size(), 1280u);
      std::set<int64_t> left_out;
      for (int64_t i = 0; i < 1301; ++i)
        if (!seen.count(i)) left_out.insert(i);
      if (epoch == 0) left_out_first = left_out;
      else EXPECT_NE(left_out, left_out_first);
    }
  }
  LoaderOptions too_many;
  too_many.images_per_epoch = 1302;
  testing::expect_error_mentions([&] { DatasetLoader(data, too_many); }, {"1302", "1301"});
}

TEST(DatasetLoader, AugmentedBatchesAreTheSameAtOneAndTwoThreads) {
  const ByteImages data(37, 12, 10, 8);
  LoaderOptions opt;
  opt.batch = 8;
  opt.augment = true;
  opt.seed = 21;
  const Plain one = plain_epoch(data, opt, 1);
  opt.threads = 2;
  const Plain two = plain_epoch(data, opt, 1);
  ASSERT_EQ(one.x.size(), 5u);  // 4 x 8 + 5
  EXPECT_EQ(one.x.back().size(), 5u * 3 * 8 * 8);
  EXPECT_EQ(one.x, two.x);
  EXPECT_EQ(one.y, two.y);
  // Augmentation changes the images, the epoch changes the draws, the stored order is
  // 0, 1, 2, ... when shuffle is off.
  opt.augment = false;
  EXPECT_NE(plain_epoch(data, opt, 1).x, one.x);
  opt.augment = true;
  EXPECT_NE(plain_epoch(data, opt, 2).x, one.x);
  opt.shuffle = false;
  const Plain stored = plain_epoch(data, opt, 0);
  for (size_t b = 0; b < stored.y.size(); ++b)
    for (size_t i = 0; i < stored.y[b].size(); ++i)
      EXPECT_EQ(stored.y[b][i], static_cast<int32_t>((b * 8 + i) % 3));
}

// Everything PrefetchLoader hands out over `epochs`, against DatasetLoader.
void expect_prefetch_matches_plain(const Dataset& data, const LoaderOptions& opt, int depth,
                                   int64_t epochs) {
  PrefetchLoader pre(data, opt, depth);
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    if (epoch > 0) pre.start_epoch(epoch);
    const Plain p = plain_epoch(data, opt, epoch);
    ASSERT_EQ(pre.num_batches(), static_cast<int64_t>(p.x.size()));
    for (size_t b = 0; b < p.x.size(); ++b) {
      ASSERT_TRUE(pre.has_next());
      const Batch& got = pre.next();
      ASSERT_EQ(got.epoch, epoch);
      ASSERT_EQ(got.index, static_cast<int64_t>(b));
      ASSERT_EQ(got.y, p.y[b]) << "epoch " << epoch << " batch " << b;
      ASSERT_EQ(std::vector<float>(got.x.data(), got.x.data() + got.x.numel()), p.x[b])
          << "epoch " << epoch << " batch " << b << " depth " << depth;
    }
    EXPECT_FALSE(pre.has_next());
  }
  const LoaderStats s = pre.stats();
  EXPECT_EQ(s.batches, [&] {
    int64_t n = 0;
    for (int64_t e = 0; e < epochs; ++e) n += EpochPlan(data, opt, e).num_batches();
    return n;
  }());
  EXPECT_GT(s.prepare_s, 0);
  EXPECT_GE(s.wait_s, 0);
  EXPECT_LE(s.hidden_s(), s.prepare_s);
}

TEST(PrefetchLoader, GivesExactlyThePlainLoadersBatches) {
  const ByteImages data(45, 9, 13, 7);
  LoaderOptions opt;
  opt.batch = 6;
  opt.augment = true;
  opt.seed = 77;
  for (const int depth : {1, 3})
    for (const int threads : {1, 2}) {
      opt.threads = threads;
      expect_prefetch_matches_plain(data, opt, depth, 3);
    }
  opt.shuffle = false;
  opt.augment = false;
  expect_prefetch_matches_plain(data, opt, 2, 2);
  opt.shuffle = true;
  opt.drop_last = true;
  expect_prefetch_matches_plain(data, opt, 1, 2);
}

TEST(PrefetchLoader, AnEpochAbandonedHalfWayDoesNotLeakIntoTheNext) {
  ByteImages data(40, 6, 6, 5);
  data.delay_us_ = 200;  // so that work of the old epoch is in flight at the switch
  LoaderOptions opt;
  opt.batch = 4;
  opt.augment = true;
  opt.seed = 3;
  PrefetchLoader pre(data, opt, 3);
  pre.next();
  pre.next();
  pre.start_epoch(4);
  const Plain p = plain_epoch(data, opt, 4);
  for (size_t b = 0; b < p.x.size(); ++b) {
    const Batch& got = pre.next();
    ASSERT_EQ(got.epoch, 4);
    ASSERT_EQ(std::vector<float>(got.x.data(), got.x.data() + got.x.numel()), p.x[b]) << b;
  }
  testing::expect_error_mentions([&] { pre.next(); }, {"all taken", "start_epoch"});
  pre.start_epoch(0);  // and back: still consistent
  const Plain p0 = plain_epoch(data, opt, 0);
  const Batch& first = pre.next();
  EXPECT_EQ(std::vector<float>(first.x.data(), first.x.data() + first.x.numel()), p0.x[0]);
}

TEST(PrefetchLoader, AReadersErrorComesOutOfNext) {
  ByteImages data(20, 4, 4, 4);
  data.fail_at_ = 13;
  LoaderOptions opt;
  opt.batch = 5;
  opt.shuffle = false;
  PrefetchLoader pre(data, opt, 2);
  pre.next();
  pre.next();
  testing::expect_error_mentions([&] { pre.next(); }, {"image 13 is broken"});
  EXPECT_EQ(pre.next().index, 3);  // the loader goes on
}

TEST(PrefetchLoader, PacksIntoTheCallersTensorsAndCountsItsTime) {
  ByteImages data(30, 8, 8, 8);
  data.delay_us_ = 1000;  // 8 ms per batch of 8: the consumer below is faster, so it waits
  LoaderOptions opt;
  opt.batch = 8;
  std::vector<const float*> given;
  int calls = 0;
  PrefetchLoader pre(data, opt, 2, [&](const Shape& s, DType type) {
    ++calls;
    EXPECT_EQ(s, (Shape{8, 3, 8, 8}));
    EXPECT_EQ(type, DType::F32);
    Tensor t(s, type);
    given.push_back(t.data());
    return t;
  });
  EXPECT_EQ(calls, 3);  // depth + 1 slots, allocated once
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    if (epoch) pre.start_epoch(epoch);
    while (pre.has_next()) {
      const Batch& b = pre.next();
      EXPECT_NE(std::find(given.begin(), given.end(), b.x.data()), given.end());
    }
  }
  EXPECT_EQ(calls, 3);
  const LoaderStats s = pre.stats();
  EXPECT_EQ(s.batches, 8);
  EXPECT_GT(s.wait_s, 0);  // the consumer did nothing, so it must have waited
  EXPECT_GE(s.prepare_s, 2 * 30 * 1e-3);  // 2 epochs of 30 reads, each sleeping >= 1 ms
  pre.reset_stats();
  EXPECT_EQ(pre.stats().batches, 0);
}

}  // namespace
}  // namespace pdnn
