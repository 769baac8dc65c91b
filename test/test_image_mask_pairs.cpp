// Image/mask pair folders (lib/data/image_mask_pairs.h) and the mask half of augmentation
// (augment_mask): pair folders generated here load with the right shapes, names and class ids;
// a photo whose colours encode its mask stays aligned with its target under flips and crops;
// nearest-neighbour targets never hold a class their mask lacks; batches are a function of the
// seed alone (1 and 2 threads, the prefetching loader); every bad pair is an error naming its
// file; and the shipped datasets/ccp-200 loads as datasets/README.md describes it (its SHA-256
// list is checked by the ctest Datasets.CcpSubsetChecksums, datasets/get_ccp.sh --check).
#include <gtest/gtest.h>

#ifdef PDNN_HAVE_OPENCV
#include <cmath>
#include <fstream>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/augment.h"
#include "data/dataset.h"
#include "data/dataset_loader.h"
#include "data/image_mask_pairs.h"
#include "data/prefetch_loader.h"
#include "testing.h"

namespace pdnn {
namespace {

// A pure colour per class (BGR for OpenCV): one channel at 255, so that no blend of two or four
// of them is another class's colour.
cv::Vec3b class_colour(int k) {
  cv::Vec3b c(0, 0, 0);
  c[2 - k % 3] = 255;  // class 0 red, 1 green, 2 blue
  return c;
}

// An asymmetric map of 3 classes in blocks of `block` pixels (a flip or shift moves it).
cv::Mat block_mask(int h, int w, int block, int seed) {
  cv::Mat m(h, w, CV_8UC1);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      m.at<uint8_t>(y, x) = static_cast<uint8_t>((x / block + 2 * (y / block) + seed +
                                                  (x < w / 3 ? 1 : 0)) % 3);
  return m;
}

// The photo whose every pixel is its mask's class colour.
cv::Mat photo_of(const cv::Mat& mask) {
  cv::Mat img(mask.rows, mask.cols, CV_8UC3);
  for (int y = 0; y < mask.rows; ++y)
    for (int x = 0; x < mask.cols; ++x)
      img.at<cv::Vec3b>(y, x) = class_colour(mask.at<uint8_t>(y, x));
  return img;
}

class ImageMaskTest : public testing::TempDirTest {
 protected:
  void write(const std::string& rel, const cv::Mat& img,
             const std::vector<int>& params = {}) const {
    ASSERT_TRUE(cv::imwrite(path(rel), img, params)) << rel;
  }

  // A folder of n_train + n_test square pairs (side x side, 3 classes in blocks of `block`),
  // ids p00, p01, ..., photos as PNG (lossless: the colours stay pure).
  void make_folder(int n_train, int n_test, int side, int block) {
    mkdir("images");
    mkdir("masks");
    spit("masks/classes.txt", "red\ngreen\nblue\n");
    std::string train, test;
    for (int i = 0; i < n_train + n_test; ++i) {
      const std::string id = "p" + std::to_string(i / 10) + std::to_string(i % 10);
      const cv::Mat m = block_mask(side, side, block, i);
      write("images/" + id + ".png", photo_of(m));
      write("masks/" + id + ".png", m);
      (i < n_train ? train : test) += id + "\n";
    }
    spit("train.txt", train);
    spit("test.txt", test);
  }

  static ImageMaskOptions quiet(int size, int cache = 0) {
    ImageMaskOptions o;
    o.size = size;
    o.cache_size = cache;
    o.log = nullptr;
    return o;
  }
};

// Class ids of a target map, as a set.
std::set<int32_t> classes_in(const int32_t* t, int64_t n) { return std::set<int32_t>(t, t + n); }

TEST_F(ImageMaskTest, GoodPairsLoadWithTheirShapesNamesAndClassIds) {
  make_folder(5, 2, 24, 6);
  ImageMaskOptions o = quiet(24, 24);  // cache = photo = sample size: nothing resampled
  o.log = std::tmpfile();
  ASSERT_NE(o.log, nullptr);
  const ImageMaskFolder f = load_image_mask_folder(dir_, o);
  EXPECT_EQ(f.classes, (std::vector<std::string>{"red", "green", "blue"}));
  EXPECT_EQ(f.train.size(), 5);
  EXPECT_EQ(f.test.size(), 2);
  EXPECT_EQ(f.train.sample_shape(), (Shape{3, 24, 24}));
  EXPECT_EQ(f.train.target_shape(), (Shape{24, 24}));
  EXPECT_EQ(f.train.num_classes(), 3);
  EXPECT_EQ(f.test.id(1), "p06");
  EXPECT_EQ(f.test.image_path(1), "images/p06.png");
  // No NAME file: the folder's name; no RESIZED file: the photos are the originals.
  EXPECT_EQ(f.name, dir_.substr(dir_.rfind('/') + 1));
  EXPECT_EQ(f.resized, "");
  EXPECT_EQ(f.min_width, 24);
  EXPECT_EQ(f.max_height, 24);
  EXPECT_EQ(f.upsampled, 0);
  EXPECT_EQ(f.two_tone_masks, 0);
  int64_t pixels = 0;
  for (const int64_t c : f.train_class_pixels) pixels += c;
  EXPECT_EQ(pixels, 5 * 24 * 24);
  EXPECT_NE(f.describe().find("photos 24 x 24 as stored; sampled at 24 x 24"), std::string::npos)
      << f.describe();
  EXPECT_EQ(f.describe().find("up-sampled"), std::string::npos) << f.describe();
  std::rewind(o.log);
  char line[512] = {0};
  ASSERT_NE(std::fgets(line, sizeof line, o.log), nullptr);
  EXPECT_NE(std::string(line).find("7 pairs (5 train, 2 test), 3 classes"), std::string::npos)
      << line;
  std::fclose(o.log);

  // The test split (no augmentation) gives each mask exactly, and the photo's colours.
  std::vector<float> x(3 * 24 * 24);
  std::vector<int32_t> t(24 * 24);
  for (int64_t i = 0; i < f.test.size(); ++i) {
    f.test.read_with_target(i, x.data(), t.data(), std::nullopt);
    const cv::Mat m = cv::imread(path("masks/" + f.test.id(i) + ".png"), cv::IMREAD_UNCHANGED);
    for (int p = 0; p < 24 * 24; ++p) {
      ASSERT_EQ(t[static_cast<size_t>(p)], m.data[p]) << "pixel " << p;
      const int k = t[static_cast<size_t>(p)];  // its channel is 1, the others 0, normalised
      for (int c = 0; c < 3; ++c) {
        const float v = x[static_cast<size_t>(c * 24 * 24 + p)] * f.norm.std[c] + f.norm.mean[c];
        ASSERT_NEAR(v, c == k ? 1.f : 0.f, 1e-5) << "pixel " << p << " channel " << c;
      }
    }
    // read() writes the same image.
    std::vector<float> x2(x.size());
    f.test.read(i, x2.data(), std::nullopt);
    EXPECT_EQ(x2, x);
  }

  // The loaders pack (N,3,H,W) floats and (N,H,W) int32 class ids.
  LoaderOptions lo;
  lo.batch = 4;
  lo.augment = true;
  DatasetLoader loader(f.train, lo);
  Tensor xb, tb;
  std::vector<int32_t> y;
  EXPECT_EQ(loader.load(1, xb, y, &tb), 1);
  EXPECT_EQ(loader.load(0, xb, y, &tb), 4);
  EXPECT_EQ(xb.shape(), (Shape{4, 3, 24, 24}));
  EXPECT_EQ(tb.shape(), (Shape{4, 24, 24}));
  EXPECT_EQ(tb.dtype(), DType::I32);
  EXPECT_EQ(y, (std::vector<int32_t>{0, 0, 0, 0}));  // no per-sample class
  EXPECT_EQ(classes_in(tb.data<int32_t>(), tb.numel()), (std::set<int32_t>{0, 1, 2}));
  // Without a tensor for the targets the loader says what is missing.
  testing::expect_error_mentions([&] { loader.load(0, xb, y); }, {"per-pixel targets"});
}

TEST_F(ImageMaskTest, BlackAndWhiteMasksAreClassesZeroAndOneForTwoClasses) {
  mkdir("images");
  mkdir("bw");
  spit("bw/classes.txt", "background\nperson\n");
  spit("bw/NAME", "people-3\nsecond line ignored\n");
  spit("RESIZED", "photos halved\n");
  cv::Mat m(10, 14, CV_8UC1, cv::Scalar(0));
  m(cv::Rect(3, 2, 6, 5)) = 255;
  for (const char* id : {"a", "b", "c"})
    write(std::string("images/") + id + ".png", photo_of(m / 255));
  write("bw/a.png", m);                                   // 8-bit 0/255
  write("bw/b.png", m, {cv::IMWRITE_PNG_BILEVEL, 1});     // 1-bit
  write("bw/c.png", m / 255);                             // 8-bit 0/1, the plain form
  spit("train.txt", "a\nb\n");
  spit("test.txt", "c\n");
  ImageMaskOptions o = quiet(12);
  o.masks = "bw";
  const ImageMaskFolder f = load_image_mask_folder(dir_, o);
  EXPECT_EQ(f.name, "people-3");
  EXPECT_EQ(f.resized, "photos halved");
  EXPECT_EQ(f.two_tone_masks, 2);
  EXPECT_EQ(f.upsampled, 3);  // 14 x 10 photos sampled at 12 x 12: taller than they are
  EXPECT_NE(f.describe().find("up-sampled (3 photos below 12 px)"), std::string::npos)
      << f.describe();
  EXPECT_NE(f.describe().find("3 pairs (2 train, 1 test), 2 classes; photos halved; sampled at "
                              "12 x 12: up-sampled"),
            std::string::npos)
      << f.describe();
  EXPECT_EQ(f.train_class_pixels, (std::vector<int64_t>{2 * (140 - 30), 2 * 30}));
  for (const ImageMaskDataset* s : {&f.train, &f.test}) {
    for (int64_t i = 0; i < s->size(); ++i) {
      const cv::Mat want = m / 255;
      ASSERT_EQ(std::vector<uint8_t>(s->mask(i), s->mask(i) + 140),
                std::vector<uint8_t>(want.data, want.data + 140))
          << s->id(i);
    }
  }
}

TEST(AugmentMask, SamplesTheMapPixelUnderTheImagesSamplePoint) {
  // A 4 x 6 map of distinct values; the image frame 4 x 6 (same resolution) and 2 x 3 (the
  // map at twice the image's resolution).
  std::vector<uint8_t> map(24);
  for (int i = 0; i < 24; ++i) map[static_cast<size_t>(i)] = static_cast<uint8_t>(i);
  std::vector<int32_t> out(24);
  augment_mask(identity_draw(4, 6), 4, 6, map.data(), 4, 6, 4, 6, out.data());
  for (int i = 0; i < 24; ++i) EXPECT_EQ(out[static_cast<size_t>(i)], i);  // a copy
  AugmentDraw flip = identity_draw(4, 6);
  flip.flip = true;
  augment_mask(flip, 4, 6, map.data(), 4, 6, 4, 6, out.data());
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 6; ++x) EXPECT_EQ(out[static_cast<size_t>(y * 6 + x)], y * 6 + 5 - x);
  // Image frame 2 x 3, map 4 x 6, output 2 x 3: output pixel (u,v) samples the frame's pixel
  // centre (u,v), which is the corner of map pixels (2u..2u+1, 2v..2v+1): floor takes 2u+1.
  std::vector<int32_t> small(6);
  augment_mask(identity_draw(2, 3), 2, 3, map.data(), 4, 6, 2, 3, small.data());
  for (int v = 0; v < 2; ++v)
    for (int u = 0; u < 3; ++u)
      EXPECT_EQ(small[static_cast<size_t>(v * 3 + u)], (2 * v + 1) * 6 + 2 * u + 1);
  // Up-sampling 4 x 6 to 8 x 12 repeats every map pixel 2 x 2.
  std::vector<int32_t> big(96);
  augment_mask(identity_draw(4, 6), 4, 6, map.data(), 4, 6, 8, 12, big.data());
  for (int y = 0; y < 8; ++y)
    for (int x = 0; x < 12; ++x)
      EXPECT_EQ(big[static_cast<size_t>(y * 12 + x)], (y / 2) * 6 + x / 2) << y << "," << x;
}

// Over many augmented samples: every output pixel whose colour is pure (one channel near 1,
// the others near 0) has that channel's class as its target, and every pixel's target class
// has a share of at least a quarter in its colour (the nearest map pixel is one of the four
// bilinear taps and weighs at least 1/4 there). Checks that the check is not vacuous.
void expect_aligned(const ImageMaskDataset& s, int size, int64_t keys, double min_pure) {
  std::vector<float> x(static_cast<size_t>(3) * size * size);
  std::vector<int32_t> t(static_cast<size_t>(size) * size);
  const Normalization& n = s.normalization();
  int64_t pure = 0, all = 0, moved = 0;
  std::vector<int32_t> plain(t.size());
  for (int64_t key = 0; key < keys; ++key) {
    const int64_t i = key % s.size();
    s.read_with_target(i, x.data(), plain.data(), std::nullopt);
    s.read_with_target(i, x.data(), t.data(), augment_key(3, 0, key));
    moved += plain != t;
    for (int p = 0; p < size * size; ++p) {
      float v[3];
      for (int c = 0; c < 3; ++c)
        v[c] = x[static_cast<size_t>(c * size * size + p)] * n.std[c] + n.mean[c];
      const int k = t[static_cast<size_t>(p)];
      ASSERT_GE(v[k], 0.25f - 1e-4f) << "sample " << i << " key " << key << " pixel " << p;
      int hot = -1, cold = 0;
      for (int c = 0; c < 3; ++c) {
        if (v[c] > 1 - 1e-4f) hot = c;
        if (v[c] < 1e-4f) ++cold;
      }
      if (hot >= 0 && cold == 2) {
        ++pure;
        ASSERT_EQ(k, hot) << "sample " << i << " key " << key << " pixel " << p;
      }
      ++all;
    }
  }
  EXPECT_GE(static_cast<double>(pure) / static_cast<double>(all), min_pure);
  EXPECT_GT(moved, keys / 2);  // the draws did move the maps
}

TEST_F(ImageMaskTest, JointAugmentationKeepsPhotoAndMaskAligned) {
  make_folder(4, 1, 40, 8);
  // The photos cached at their own size, so the mask and the image share one frame.
  ImageMaskOptions o = quiet(24, 40);
  for (const bool rotate : {false, true}) {
    o.augment = AugmentOptions::flip_and_crop();
    o.augment.scale_min = 0.3f;
    if (rotate) o.augment.rotate_deg = 30.f;
    const ImageMaskFolder f = load_image_mask_folder(dir_, o);
    expect_aligned(f.train, 24, 40, 0.5);
  }
}

TEST_F(ImageMaskTest, MasksAtThePhotosResolutionStayAlignedWithASmallerCache) {
  // Photos 64 x 64 in blocks of 16 cached at 16 x 16 (INTER_AREA), masks kept at 64 x 64: a
  // target pixel well inside a block has the block's class.
  make_folder(3, 0, 64, 16);
  ImageMaskOptions o = quiet(16, 16);
  o.augment.scale_min = 0.5f;
  const ImageMaskFolder f = load_image_mask_folder(dir_, o);
  EXPECT_EQ(f.cache_size, 16);
  std::vector<float> x(3 * 16 * 16);
  std::vector<int32_t> t(16 * 16);
  int64_t pure = 0;
  for (int64_t key = 0; key < 30; ++key) {
    f.train.read_with_target(key % 3, x.data(), t.data(), augment_key(9, 1, key));
    for (int p = 0; p < 16 * 16; ++p) {
      float v[3];
      for (int c = 0; c < 3; ++c)
        v[c] = x[static_cast<size_t>(c * 256 + p)] * f.norm.std[c] + f.norm.mean[c];
      for (int c = 0; c < 3; ++c)
        if (v[c] > 1 - 1e-4f) {
          ++pure;
          ASSERT_EQ(t[static_cast<size_t>(p)], c) << "key " << key << " pixel " << p;
        }
    }
  }
  EXPECT_GT(pure, 30 * 256 / 3);
}

TEST_F(ImageMaskTest, NearestNeighbourTargetsNeverInventAClass) {
  // Six classes, the masks holding only 0, 2 and 5 in a fine checkerboard: any averaging of
  // ids would show 1, 3 or 4 somewhere.
  mkdir("images");
  mkdir("masks");
  spit("masks/classes.txt", "a\nb\nc\nd\ne\nf\n");
  std::string ids;
  for (int i = 0; i < 4; ++i) {
    const std::string id = "m" + std::to_string(i);
    cv::Mat m(27 + i, 33 - i, CV_8UC1);
    for (int y = 0; y < m.rows; ++y)
      for (int x = 0; x < m.cols; ++x)
        m.at<uint8_t>(y, x) = static_cast<uint8_t>(((x + y + i) % 3) == 0 ? 0 : (x % 2 ? 2 : 5));
    write("masks/" + id + ".png", m);
    write("images/" + id + ".jpg", photo_of(m / 2));
    ids += id + "\n";
  }
  spit("train.txt", ids);
  spit("test.txt", "");
  for (const int size : {7, 16, 50}) {
    ImageMaskOptions o = quiet(size);
    o.augment.rotate_deg = 20.f;
    const ImageMaskFolder f = load_image_mask_folder(dir_, o);
    EXPECT_EQ(f.test.size(), 0);
    std::vector<float> x(static_cast<size_t>(3) * size * size);
    std::vector<int32_t> t(static_cast<size_t>(size) * size);
    std::set<int32_t> seen;
    for (int64_t key = 0; key < 24; ++key) {
      f.train.read_with_target(key % 4, x.data(), t.data(),
                               key < 4 ? std::nullopt : std::optional<uint64_t>(key));
      const std::set<int32_t> s = classes_in(t.data(), static_cast<int64_t>(t.size()));
      seen.insert(s.begin(), s.end());
    }
    EXPECT_EQ(seen, (std::set<int32_t>{0, 2, 5})) << "size " << size;
  }
}

// Every batch of an epoch, images and targets, as plain vectors.
struct PairEpoch {
  std::vector<std::vector<float>> x;
  std::vector<std::vector<int32_t>> t;
};
PairEpoch pair_epoch(const Dataset& data, const LoaderOptions& opt, int64_t epoch) {
  DatasetLoader loader(data, opt);
  loader.start_epoch(epoch);
  PairEpoch e;
  Tensor x, t;
  std::vector<int32_t> y;
  for (int64_t b = 0; b < loader.num_batches(); ++b) {
    loader.load(b, x, y, &t);
    e.x.emplace_back(x.data(), x.data() + x.numel());
    e.t.emplace_back(t.data<int32_t>(), t.data<int32_t>() + t.numel());
  }
  return e;
}

TEST_F(ImageMaskTest, BatchesAreAFunctionOfTheSeedAtAnyThreadCount) {
  make_folder(11, 1, 30, 5);
  const ImageMaskFolder f = load_image_mask_folder(dir_, quiet(20));
  LoaderOptions opt;
  opt.batch = 4;
  opt.augment = true;
  opt.seed = 17;
  const PairEpoch one = pair_epoch(f.train, opt, 1);
  opt.threads = 2;
  const PairEpoch two = pair_epoch(f.train, opt, 1);
  ASSERT_EQ(one.t.size(), 3u);
  EXPECT_EQ(one.t.back().size(), 3u * 20 * 20);
  EXPECT_EQ(one.x, two.x);
  EXPECT_EQ(one.t, two.t);
  opt.seed = 18;
  const PairEpoch other = pair_epoch(f.train, opt, 1);
  EXPECT_NE(other.t, one.t);
  // Decoding on 2 threads gives the same store.
  ImageMaskOptions o2 = quiet(20);
  o2.threads = 2;
  const ImageMaskFolder f2 = load_image_mask_folder(dir_, o2);
  opt.seed = 17;
  EXPECT_EQ(pair_epoch(f2.train, opt, 1).x, one.x);

  // The prefetching loader: the same batches, its slots' targets from the allocator as int32.
  int target_slots = 0;
  PrefetchLoader pre(f.train, opt, 2, [&](const Shape& s, DType type) {
    if (type == DType::I32) {
      ++target_slots;
      EXPECT_EQ(s, (Shape{4, 20, 20}));
    }
    return Tensor(s, type);
  });
  EXPECT_EQ(target_slots, 3);
  pre.start_epoch(1);
  for (size_t b = 0; b < one.t.size(); ++b) {
    const Batch& got = pre.next();
    ASSERT_EQ(got.target.shape(), (Shape{static_cast<int64_t>(got.size()), 20, 20}));
    EXPECT_EQ(std::vector<int32_t>(got.target.data<int32_t>(),
                                   got.target.data<int32_t>() + got.target.numel()),
              one.t[b]);
    EXPECT_EQ(std::vector<float>(got.x.data(), got.x.data() + got.x.numel()), one.x[b]);
  }
  // A range of the set (a data-parallel rank's test share) reads the same targets.
  DatasetRange part(f.train, 2, 5);
  EXPECT_EQ(part.target_shape(), (Shape{20, 20}));
  std::vector<float> xa(3 * 400), xb(3 * 400);
  std::vector<int32_t> ta(400), tb(400);
  part.read_with_target(1, xa.data(), ta.data(), 77);
  f.train.read_with_target(3, xb.data(), tb.data(), 77);
  EXPECT_EQ(ta, tb);
  EXPECT_EQ(xa, xb);
}

TEST_F(ImageMaskTest, EveryBadPairIsAnErrorNamingItsFile) {
  make_folder(3, 1, 12, 4);  // p00 p01 p02 / p03
  const ImageMaskOptions o = quiet(8);
  auto fails = [&](const std::vector<std::string>& parts) {
    testing::expect_error_mentions([&] { load_image_mask_folder(dir_, o); }, parts);
  };
  const std::string good_mask = slurp("masks/p01.png");
  const std::string good_photo = slurp("images/p01.png");
  auto restore = [&] {
    spit("masks/p01.png", good_mask);
    spit("images/p01.png", good_photo);
    load_image_mask_folder(dir_, o);  // good again
  };
  restore();

  write("masks/p01.png", cv::Mat(11, 12, CV_8UC1, cv::Scalar(1)));
  fails({dir_, "masks/p01.png", "12x11 but its photo is 12x12"});
  cv::Mat bad = block_mask(12, 12, 4, 1);
  bad.at<uint8_t>(3, 4) = 7;
  bad.at<uint8_t>(5, 5) = 3;
  write("masks/p01.png", bad);
  fails({"masks/p01.png", "values 3 (1 pixels), 7 (1 pixels) outside the 3 classes 0..2"});
  write("masks/p01.png", cv::Mat(12, 12, CV_8UC1, cv::Scalar(255)));
  fails({"masks/p01.png", "values 255 (144 pixels) outside the 3 classes"});
  write("masks/p01.png", cv::Mat(12, 12, CV_8UC3, cv::Scalar(0, 1, 2)));
  fails({"masks/p01.png", "3-channel", "single channel of class ids"});
  write("masks/p01.png", cv::Mat(12, 12, CV_16UC1, cv::Scalar(1)));
  fails({"masks/p01.png", "16-bit"});
  spit("masks/p01.png", good_mask.substr(0, 40));
  fails({"masks/p01.png", "cannot decode"});
  spit("masks/p01.png", "");
  fails({"masks/p01.png", "empty file"});
  write("masks/p01.jpg", block_mask(12, 12, 4, 1));
  spit("masks/p01.png", slurp("masks/p01.jpg"));
  fails({"masks/p01.png", "not a PNG file"});
  ASSERT_EQ(std::remove(path("masks/p01.png").c_str()), 0);
  fails({"masks/p01.png", "no mask for images/p01.png"});
  restore();

  spit("images/p01.png", good_photo.substr(0, good_photo.size() / 2));
  fails({"images/p01.png"});
  spit("images/p01.png", "not a picture");
  fails({"images/p01.png", "not a JPEG, PNG or BMP file"});
  restore();
  write("images/p01.jpg", photo_of(block_mask(12, 12, 4, 1)));
  fails({"images/p01.jpg and images/p01.png", "two photos for id p01"});
  ASSERT_EQ(std::remove(path("images/p01.jpg").c_str()), 0);
  ASSERT_EQ(std::remove(path("images/p01.png").c_str()), 0);
  fails({"no photo for id p01 of train.txt"});
  restore();

  // Two classes: 0/255 is accepted, a mix of 1 and 255 is not.
  spit("masks/classes.txt", "bg\nfg\n");
  ASSERT_EQ(std::system(("rm '" + path("masks") + "'/p0*.png").c_str()), 0);
  cv::Mat two(12, 12, CV_8UC1, cv::Scalar(0));
  two(cv::Rect(0, 0, 6, 6)) = 255;
  for (const char* id : {"p00", "p01", "p02", "p03"})
    write(std::string("masks/") + id + ".png", two);
  EXPECT_EQ(load_image_mask_folder(dir_, o).two_tone_masks, 4);
  two.at<uint8_t>(11, 11) = 1;
  write("masks/p02.png", two);
  fails({"masks/p02.png", "values 255 (36 pixels) outside the 2 classes 0..1",
         "black and white: 0 and 255 only"});
  two.at<uint8_t>(11, 11) = 0;
  write("masks/p02.png", two);

  // The folder's own files.
  spit("masks/classes.txt", "only\n");
  fails({"masks/classes.txt names 1 classes"});
  spit("masks/classes.txt", "bg\nfg\nbg\n");
  fails({"masks/classes.txt names class 'bg' twice"});
  spit("masks/classes.txt", "bg\nfg\n");
  spit("test.txt", "p03\np01\n");
  fails({"id p01 is listed in train.txt and in test.txt"});
  spit("test.txt", "p03\n../x\n");
  fails({"test.txt: bad id '../x'"});
  ASSERT_EQ(std::remove(path("test.txt").c_str()), 0);
  fails({dir_, "cannot read test.txt"});
  spit("test.txt", "p03\n");
  spit("train.txt", "\n");
  fails({"train.txt lists no id"});
  spit("train.txt", "p00\n");
  ImageMaskOptions other = o;
  other.masks = "masks59";
  testing::expect_error_mentions([&] { load_image_mask_folder(dir_, other); },
                                 {"no mask folder masks59/"});
  testing::expect_error_mentions([&] { load_image_mask_folder(dir_ + "/nowhere", o); },
                                 {"nowhere", "no such directory"});
  load_image_mask_folder(dir_, o);  // and good after all that
}

TEST(DatasetTargets, ASetWithoutPerPixelTargetsSaysSo) {
  LabeledImages li{Tensor::zeros(Shape{2, 1, 2, 2}), {0, 1}};
  const TensorDataset data(li, 2);
  EXPECT_EQ(data.target_shape().rank(), 0);
  float x[4];
  int32_t t[4];
  testing::expect_error_mentions([&] { data.read_with_target(0, x, t, std::nullopt); },
                                 {"no per-pixel targets"});
}

// A set seen as its tiles: tile 4i + k of 16 x 16 is window k (row by row) of image i at 32 x 32,
// photo and mask, with the augmentation the same key draws for the whole image; labels and
// classes pass through; a side that does not divide the images is refused.
TEST(DatasetTiles, TilesPartitionEachImageAndItsMask) {
  ImageMaskOptions o;
  o.size = 32;
  o.log = nullptr;
  o.threads = 2;
  const ImageMaskFolder f = load_image_mask_folder(std::string(PDNN_SOURCE_DIR) + "/datasets/ccp-200", o);
  const DatasetTiles tiles(f.train, 16);
  EXPECT_EQ(tiles.per_sample(), 4);
  EXPECT_EQ(tiles.size(), 4 * f.train.size());
  EXPECT_EQ(tiles.sample_shape(), (Shape{3, 16, 16}));
  EXPECT_EQ(tiles.target_shape(), (Shape{16, 16}));
  EXPECT_EQ(tiles.num_classes(), 2);
  EXPECT_EQ(tiles.class_name(1), "person");
  std::vector<float> img(3 * 32 * 32), tile(3 * 16 * 16);
  std::vector<int32_t> map(32 * 32), tmap(16 * 16);
  for (const int64_t i : {int64_t{0}, int64_t{7}, f.train.size() - 1})
    for (const std::optional<uint64_t> key : {std::optional<uint64_t>{}, std::optional<uint64_t>{12345}}) {
      f.train.read_with_target(i, img.data(), map.data(), key);
      for (int64_t k = 0; k < 4; ++k) {
        tiles.read_with_target(4 * i + k, tile.data(), tmap.data(), key);
        const int64_t y0 = k / 2 * 16, x0 = k % 2 * 16;
        for (int64_t c = 0; c < 3; ++c)
          for (int64_t y = 0; y < 16; ++y)
            for (int64_t x = 0; x < 16; ++x)
              ASSERT_EQ(tile[static_cast<size_t>((c * 16 + y) * 16 + x)],
                        img[static_cast<size_t>((c * 32 + y0 + y) * 32 + x0 + x)])
                  << "image " << i << " tile " << k;
        for (int64_t y = 0; y < 16; ++y)
          for (int64_t x = 0; x < 16; ++x)
            ASSERT_EQ(tmap[static_cast<size_t>(y * 16 + x)], map[static_cast<size_t>((y0 + y) * 32 + x0 + x)]);
        std::vector<float> alone(tile.size());
        tiles.read(4 * i + k, alone.data(), key);  // read() gives the same photo
        EXPECT_EQ(alone, tile);
      }
    }
  testing::expect_error_mentions([&] { DatasetTiles(f.train, 24); }, {"tiles of side 24", "32 x 32"});
  testing::expect_error_mentions([&] { tiles.read(tiles.size(), tile.data(), std::nullopt); }, {"tile"});
  LabeledImages li{Tensor::zeros(Shape{2, 1, 4, 4}), {0, 1}};
  const TensorDataset labelled(li, 2);
  const DatasetTiles quarters(labelled, 2);
  EXPECT_EQ(quarters.size(), 8);
  EXPECT_EQ(quarters.label(5), 1);
  EXPECT_EQ(quarters.target_shape().rank(), 0);
  testing::expect_error_mentions([&] { quarters.read_with_target(0, tile.data(), tmap.data(), std::nullopt); },
                                 {"no per-pixel targets"});
}

// The shipped subset (datasets/README.md): its counts, names, split rule and classes.
TEST(ShippedCcp, LoadsAsTheReadmeDescribesIt) {
  const std::string dir = std::string(PDNN_SOURCE_DIR) + "/datasets/ccp-200";
  ImageMaskOptions o;
  o.size = 32;
  o.log = nullptr;
  o.threads = 2;
  const ImageMaskFolder f = load_image_mask_folder(dir, o);
  EXPECT_EQ(f.name, "ccp-person-200");
  EXPECT_EQ(f.classes, (std::vector<std::string>{"background", "person"}));
  EXPECT_EQ(f.train.size(), 151);
  EXPECT_EQ(f.test.size(), 49);
  EXPECT_EQ(f.two_tone_masks, 200);  // 1-bit PNGs
  EXPECT_EQ(f.min_width, 256);
  EXPECT_EQ(f.max_width, 256);
  EXPECT_EQ(f.min_height, 374);
  EXPECT_EQ(f.max_height, 406);
  EXPECT_NE(f.resized.find("shorter side 256"), std::string::npos) << f.resized;
  for (int64_t i = 0; i < f.test.size(); ++i)
    EXPECT_EQ((std::stoi(f.test.id(i)) - 1) % 4, 3) << f.test.id(i);
  for (int64_t i = 0; i < f.train.size(); ++i)
    EXPECT_NE((std::stoi(f.train.id(i)) - 1) % 4, 3) << f.train.id(i);
  // About a quarter of the pixels are the person (23.1% over all 1,004 source maps).
  const double person = static_cast<double>(f.train_class_pixels[1]) /
                        static_cast<double>(f.train_class_pixels[0] + f.train_class_pixels[1]);
  EXPECT_GT(person, 0.15);
  EXPECT_LT(person, 0.35);
  o.size = 512;
  o.cache_size = 64;  // (a small cache: this checks the report, not the pixels)
  o.masks = "masks59";
  const ImageMaskFolder g = load_image_mask_folder(dir, o);
  EXPECT_EQ(g.name, "ccp-clothing59-200");
  EXPECT_EQ(g.classes.size(), 59u);
  EXPECT_EQ(g.classes[19], "hair");
  EXPECT_EQ(g.upsampled, 200);
  EXPECT_NE(g.describe().find("up-sampled"), std::string::npos);
  // Its person pixels are exactly the binary masks' (one map, resized once).
  for (int64_t i = 0; i < 5; ++i) {
    const int64_t n = static_cast<int64_t>(f.test.mask_width(i)) * f.test.mask_height(i);
    for (int64_t p = 0; p < n; ++p)
      ASSERT_EQ(f.test.mask(i)[p], g.test.mask(i)[p] > 0 ? 1 : 0) << f.test.id(i) << " " << p;
  }
}

}  // namespace
}  // namespace pdnn

#endif  // PDNN_HAVE_OPENCV
