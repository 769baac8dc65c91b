// Image folders (lib/data/image_folder.h) on a folder generated here: good JPEG/PNG/BMP
// files, a greyscale image, a PNG with alpha, a 1x1 image, a 16-bit PNG, and files that must be
// skipped and counted (truncated JPEG, JPEG with garbage after its header, zero bytes, a text
// file); errors naming the folder or class; the per-class split; the loaders over the train
// split; and the shipped datasets/caltech101-6 with its per-class counts.
#include <gtest/gtest.h>

#ifdef PDNN_HAVE_OPENCV
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/dataset_loader.h"
#include "data/image_decode.h"
#include "data/image_folder.h"
#include "data/prefetch_loader.h"
#include "testing.h"

namespace pdnn {
namespace {

class ImageFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pdnn_imgfolder_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

  std::string path(const std::string& rel) const { return dir_ + "/" + rel; }
  void mkdir(const std::string& rel) const {
    ASSERT_EQ(std::system(("mkdir -p '" + path(rel) + "'").c_str()), 0);
  }
  void write(const std::string& rel, const cv::Mat& img) const {
    ASSERT_TRUE(cv::imwrite(path(rel), img)) << rel;
  }
  void spit(const std::string& rel, const std::string& bytes) const {
    std::ofstream out(path(rel), std::ios::binary);
    out << bytes;
  }
  std::string slurp(const std::string& rel) const {
    std::ifstream in(path(rel), std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  // A colour picture with structure (BGR, as OpenCV writes it).
  static cv::Mat picture(int h, int w, int seed) {
    cv::Mat m(h, w, CV_8UC3);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        m.at<cv::Vec3b>(y, x) = cv::Vec3b(static_cast<uint8_t>(x * 7 + seed),
                                          static_cast<uint8_t>(y * 5 + 2 * seed),
                                          static_cast<uint8_t>((x + y) * 3 + seed));
    return m;
  }

  // cats: 7 readable images of every kind and 4 bad files; dogs: 3 readable images.
  void make_folder() {
    mkdir("cats/more");
    mkdir("dogs");
    write("cats/colour.jpg", picture(40, 60, 1));
    cv::Mat grey(30, 20, CV_8UC1);
    for (int i = 0; i < grey.rows * grey.cols; ++i) grey.data[i] = static_cast<uint8_t>(i * 3);
    write("cats/grey.png", grey);
    write("cats/grey.jpg", grey);
    cv::Mat rgba(16, 16, CV_8UC4, cv::Scalar(10, 20, 30, 0));  // B G R A, fully transparent
    for (int y = 0; y < 16; ++y) rgba.at<cv::Vec4b>(y, y)[3] = 255;
    write("cats/alpha.png", rgba);
    write("cats/one.bmp", cv::Mat(1, 1, CV_8UC3, cv::Scalar(200, 100, 50)));
    cv::Mat deep(16, 16, CV_16UC3);  // channel values 257 k (-> k) and 65535 (-> 255)
    for (int y = 0; y < 16; ++y)
      for (int x = 0; x < 16; ++x)
        deep.at<cv::Vec3w>(y, x) = cv::Vec3w(65535, static_cast<uint16_t>(257 * (x + 16 * y)), 0);
    write("cats/deep16.png", deep);
    write("cats/more/nested.png", picture(20, 20, 9));  // class folders are walked deeply
    // Bad files.
    std::vector<uint8_t> jpg;
    ASSERT_TRUE(cv::imencode(".jpg", picture(64, 64, 4), jpg));
    spit("cats/truncated.jpg", std::string(jpg.begin(), jpg.begin() + jpg.size() / 2));
    std::string garbage(jpg.begin(), jpg.begin() + 20);
    for (int i = 0; i < 500; ++i) garbage.push_back(static_cast<char>(i * 37 + 11));
    spit("cats/garbage.jpg", garbage);
    spit("cats/empty.jpg", "");
    spit("cats/notes.txt", "not a picture\n");
    for (int k = 0; k < 3; ++k) write("dogs/d" + std::to_string(k) + ".png", picture(24, 32, 20 + k));
  }

  static ImageFolderOptions quiet(int size) {
    ImageFolderOptions o;
    o.size = size;
    o.log = nullptr;
    return o;
  }

  std::string dir_;
};

TEST_F(ImageFolderTest, ReadsEveryKindSkipsAndCountsTheBadFiles) {
  make_folder();
  ImageFolderOptions o = quiet(16);
  o.log = std::tmpfile();
  ASSERT_NE(o.log, nullptr);
  const ImageFolder f = load_image_folder(dir_, o);
  EXPECT_EQ(f.classes, (std::vector<std::string>{"cats", "dogs"}));
  EXPECT_EQ(f.files, 14);
  ASSERT_EQ(f.skipped.size(), 4u);
  EXPECT_EQ(f.skipped[0].path, "cats/empty.jpg");
  EXPECT_EQ(f.skipped[0].reason, "empty file");
  EXPECT_EQ(f.skipped[1].path, "cats/garbage.jpg");
  EXPECT_EQ(f.skipped[2].path, "cats/notes.txt");
  EXPECT_EQ(f.skipped[2].reason, "not a JPEG, PNG or BMP file");
  EXPECT_EQ(f.skipped[3].path, "cats/truncated.jpg");
  EXPECT_EQ(f.skipped[3].reason, "truncated JPEG (no end-of-image marker)");
  // 7 cats -> round(3.5) = 4 train / 3 test; 3 dogs -> 2 / 1 (rounded half away from zero).
  EXPECT_EQ(f.train_per_class, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(f.test_per_class, (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(f.train.size() + f.test.size(), 10);
  EXPECT_EQ(f.cache_size, 19);  // ceil(16 * 8 / 7)
  EXPECT_EQ(f.train.sample_shape(), (Shape{3, 16, 16}));
  EXPECT_EQ(f.train.num_classes(), 2);
  EXPECT_EQ(f.test.class_name(1), "dogs");

  // The log: one summary line and one naming the skipped files.
  std::rewind(o.log);
  std::string log;
  char buf[512];
  while (std::fgets(buf, sizeof buf, o.log)) log += buf;
  std::fclose(o.log);
  EXPECT_NE(log.find("10 images in 2 classes"), std::string::npos) << log;
  EXPECT_NE(log.find("cats 4/3, dogs 2/1"), std::string::npos) << log;
  EXPECT_NE(log.find("skipped 4 of 14 files: cats/empty.jpg (empty file)"), std::string::npos)
      << log;

  // The default normalisation is the train split's: its plain samples at the cache size have
  // mean 0 and std 1 per channel.
  {
    ImageFolderOptions at_cache = quiet(19);
    at_cache.cache_size = 19;
    const ImageFolder g = load_image_folder(dir_, at_cache);
    const int64_t plane = 19 * 19;
    std::vector<float> s(static_cast<size_t>(3 * plane));
    double sum[3] = {0, 0, 0}, sum_sq[3] = {0, 0, 0};
    for (int64_t i = 0; i < g.train.size(); ++i) {
      g.train.read(i, s.data(), std::nullopt);
      for (int c = 0; c < 3; ++c)
        for (int64_t k = 0; k < plane; ++k) {
          sum[c] += s[static_cast<size_t>(c * plane + k)];
          sum_sq[c] += s[static_cast<size_t>(c * plane + k)] * s[static_cast<size_t>(c * plane + k)];
        }
    }
    const double n = static_cast<double>(plane * g.train.size());
    for (int c = 0; c < 3; ++c) {
      EXPECT_NEAR(sum[c] / n, 0.0, 1e-4) << "channel " << c;
      EXPECT_NEAR(sum_sq[c] / n, 1.0, 1e-4) << "channel " << c;
    }
    EXPECT_EQ(g.test.normalization().mean[1], g.norm.mean[1]);
    EXPECT_EQ(g.train.normalization().std[2], g.norm.std[2]);
  }

  // Every sample reads finite values of the right shape, with and without augmentation.
  std::vector<float> x(3 * 16 * 16);
  for (const ImageFolderDataset* split : {&f.train, &f.test})
    for (int64_t i = 0; i < split->size(); ++i)
      for (const std::optional<uint64_t> key : {std::optional<uint64_t>{}, std::optional<uint64_t>{42}}) {
        split->read(i, x.data(), key);
        for (float v : x) ASSERT_TRUE(std::isfinite(v)) << split->path(i);
      }
}

// The pixels as cached, for the kinds that need converting, with the cache at the source size
// (no resampling) and no normalisation.
// Regression (fuzz_image_folder, test/fuzz/regressions/image_folder/bmp_header_claims_2gb): a
// 50-byte BMP whose header claims 1044 x 720884 pixels made OpenCV allocate 2.26 GB before
// failing to read them. Headers announcing more than kMaxImagePixels are now skipped unread,
// in every format, and counted like any bad file.
TEST_F(ImageFolderTest, RegressionHugeImageHeadersAreSkippedNotAllocated) {
  std::ifstream in(std::string(PDNN_SOURCE_DIR) +
                       "/test/fuzz/regressions/image_folder/bmp_header_claims_2gb",
                   std::ios::binary);
  const std::vector<uint8_t> bmp(std::istreambuf_iterator<char>(in), {});
  ASSERT_EQ(bmp.size(), 50u);
  std::vector<uint8_t> out(16 * 16 * 3);
  EXPECT_EQ(decode_image_bytes(bmp, 16, false, out.data()),
            "image too large (1044 x 720884 pixels to decode; at most 67108864)");

  // The next finding, in that check itself: a PNG claiming 2^32 - 1 pixels a side overflowed
  // the product (regressions/image_folder/png_header_size_overflow).
  std::ifstream in2(std::string(PDNN_SOURCE_DIR) +
                        "/test/fuzz/regressions/image_folder/png_header_size_overflow",
                    std::ios::binary);
  const std::vector<uint8_t> png_max(std::istreambuf_iterator<char>(in2), {});
  ASSERT_GT(png_max.size(), 24u);
  EXPECT_EQ(decode_image_bytes(png_max, 16, false, out.data()),
            "image too large (4294967295 x 4294967295 pixels to decode; at most 67108864)");

  // A PNG with its size patched to 20000 x 20000 (its IHDR CRC is then wrong: the size check
  // comes before any decoding).
  std::vector<uint8_t> png, jpg;
  ASSERT_TRUE(cv::imencode(".png", picture(2, 2, 1), png));
  for (int i : {16, 20}) png[i] = 0, png[i + 1] = 0, png[i + 2] = 0x4E, png[i + 3] = 0x20;
  EXPECT_EQ(decode_image_bytes(png, 16, false, out.data()),
            "image too large (20000 x 20000 pixels to decode; at most 67108864)");
  // A JPEG patched to 65535 x 1100 counts at the scale libjpeg would decode it at: at side 16
  // that is 1/8 (8192 x 138), within the limit, so the file gets to OpenCV (which finds the
  // pixel data missing); at side 600 it is not reduced (1100 < 2 x 600): 72 M pixels.
  ASSERT_TRUE(cv::imencode(".jpg", picture(8, 8, 1), jpg));
  size_t sof = 2;
  while (!(jpg[sof] == 0xFF && jpg[sof + 1] == 0xC0)) sof += 2 + (jpg[sof + 2] << 8 | jpg[sof + 3]);
  jpg[sof + 5] = 0x04, jpg[sof + 6] = 0x4C;  // height 1100
  jpg[sof + 7] = 0xFF, jpg[sof + 8] = 0xFF;  // width 65535
  EXPECT_NE(decode_image_bytes(jpg, 16, false, out.data()).rfind("image too large", 0), 0u);
  std::vector<uint8_t> big(600 * 600 * 3);
  EXPECT_EQ(decode_image_bytes(jpg, 600, false, big.data()),
            "image too large (65535 x 1100 pixels to decode; at most 67108864)");

  // In a folder: skipped and counted, the good images still load.
  mkdir("cats");
  write("cats/a.png", picture(8, 8, 1));
  write("cats/b.png", picture(8, 8, 2));
  spit("cats/huge.bmp", std::string(bmp.begin(), bmp.end()));
  const ImageFolder f = load_image_folder(dir_, quiet(8));
  EXPECT_EQ(f.train.size() + f.test.size(), 2);
  ASSERT_EQ(f.skipped.size(), 1u);
  EXPECT_EQ(f.skipped[0].path, "cats/huge.bmp");
  EXPECT_EQ(f.skipped[0].reason.rfind("image too large (1044 x 720884", 0), 0u);
}

TEST_F(ImageFolderTest, GreyAlphaSixteenBitAndOnePixelImagesBecomeRgbBytes) {
  make_folder();
  ImageFolderOptions o = quiet(16);
  o.cache_size = 16;
  o.train_fraction = 1;  // everything in one split
  o.norm = Normalization{};
  const ImageFolder f = load_image_folder(dir_, o);
  ASSERT_EQ(f.test.size(), 0);
  auto find = [&](const std::string& p) {
    for (int64_t i = 0; i < f.train.size(); ++i)
      if (f.train.path(i) == p) return f.train.cached(i);
    ADD_FAILURE() << p << " not loaded";
    return static_cast<const uint8_t*>(nullptr);
  };
  const uint8_t* deep = find("cats/deep16.png");
  const uint8_t* alpha = find("cats/alpha.png");
  const uint8_t* one = find("cats/one.bmp");
  const uint8_t* grey = find("cats/grey.png");
  ASSERT_TRUE(deep && alpha && one && grey);
  for (int p = 0; p < 16 * 16; ++p) {
    // Written B = 65535, G = 257 p, R = 0; cached R, G, B.
    ASSERT_EQ(deep[p * 3 + 0], 0) << p;
    ASSERT_EQ(deep[p * 3 + 1], p) << p;
    ASSERT_EQ(deep[p * 3 + 2], 255) << p;
    // Alpha dropped, the stored colour kept (B 10, G 20, R 30), transparent or not.
    ASSERT_EQ(alpha[p * 3 + 0], 30);
    ASSERT_EQ(alpha[p * 3 + 1], 20);
    ASSERT_EQ(alpha[p * 3 + 2], 10);
    // One pixel (B 200, G 100, R 50) enlarged: the same colour everywhere.
    ASSERT_EQ(one[p * 3 + 0], 50);
    ASSERT_EQ(one[p * 3 + 1], 100);
    ASSERT_EQ(one[p * 3 + 2], 200);
    // Grey: three equal channels.
    ASSERT_EQ(grey[p * 3 + 0], grey[p * 3 + 1]);
    ASSERT_EQ(grey[p * 3 + 1], grey[p * 3 + 2]);
  }
  // read() without a key is the cached image / 255, channel-major.
  int64_t i_deep = 0;
  while (f.train.path(i_deep) != "cats/deep16.png") ++i_deep;
  std::vector<float> x(3 * 16 * 16);
  f.train.read(i_deep, x.data(), std::nullopt);
  for (int p = 0; p < 16 * 16; ++p) {
    ASSERT_FLOAT_EQ(x[p], 0.f);
    ASSERT_FLOAT_EQ(x[256 + p], p / 255.f);
    ASSERT_FLOAT_EQ(x[512 + p], 1.f);
  }
}

// center_crop (the DCGAN's photos): the largest centred square is kept, aspect ratio intact;
// with the DCGAN's normalisation (mean 0.5, std 0.5) the values span [-1, 1].
TEST_F(ImageFolderTest, CenterCropKeepsTheMiddleSquare) {
  mkdir("wide");
  mkdir("tall");
  // 30 x 10: red | green | red thirds; 10 x 30: blue | green | blue from the top.
  cv::Mat wide(10, 30, CV_8UC3, cv::Scalar(0, 0, 255)), tall(30, 10, CV_8UC3, cv::Scalar(255, 0, 0));
  wide(cv::Rect(10, 0, 10, 10)).setTo(cv::Scalar(0, 255, 0));
  tall(cv::Rect(0, 10, 10, 10)).setTo(cv::Scalar(0, 255, 0));
  write("wide/w.png", wide);
  write("tall/t.png", tall);
  ImageFolderOptions o = quiet(10);
  o.cache_size = 10;
  o.train_fraction = 1;
  o.center_crop = true;
  Normalization half;
  for (int c = 0; c < 3; ++c) half.mean[c] = half.std[c] = 0.5f;
  o.norm = half;
  const ImageFolder f = load_image_folder(dir_, o);
  ASSERT_EQ(f.train.size(), 2);
  for (int64_t i = 0; i < 2; ++i) {
    const uint8_t* px = f.train.cached(i);
    for (int p = 0; p < 100; ++p) {  // all green: R 0, G 255, B 0
      ASSERT_EQ(px[p * 3 + 0], 0) << f.train.path(i) << " " << p;
      ASSERT_EQ(px[p * 3 + 1], 255) << f.train.path(i) << " " << p;
      ASSERT_EQ(px[p * 3 + 2], 0) << f.train.path(i) << " " << p;
    }
    std::vector<float> x(300);
    f.train.read(i, x.data(), std::nullopt);
    EXPECT_FLOAT_EQ(x[0], -1.f);
    EXPECT_FLOAT_EQ(x[100], 1.f);
  }
  // Without the crop the whole frame is squeezed in: red and green both present.
  o.center_crop = false;
  const ImageFolder g = load_image_folder(dir_, o);
  const uint8_t* w = g.train.path(0) == "wide/w.png" ? g.train.cached(0) : g.train.cached(1);
  EXPECT_EQ(w[0], 255);  // left edge red
}

TEST_F(ImageFolderTest, ClassListOrderSplitAndDeterminism) {
  make_folder();
  ImageFolderOptions o = quiet(8);
  o.classes = {"dogs", "cats"};  // labels follow the list
  o.split_seed = 4;
  const ImageFolder a = load_image_folder(dir_, o);
  EXPECT_EQ(a.classes, (std::vector<std::string>{"dogs", "cats"}));
  EXPECT_EQ(a.train.class_name(0), "dogs");
  for (int64_t i = 0; i < a.train.size(); ++i)
    EXPECT_EQ(a.train.path(i).substr(0, 4), a.train.label(i) == 0 ? "dogs" : "cats");
  // Train and test are disjoint, cover every readable image, and are in (class, path) order.
  std::set<std::string> all;
  for (const ImageFolderDataset* s : {&a.train, &a.test})
    for (int64_t i = 0; i < s->size(); ++i) {
      EXPECT_TRUE(all.insert(s->path(i)).second) << s->path(i);
      if (i > 0) {
        EXPECT_LE(s->label(i - 1), s->label(i));
        if (s->label(i - 1) == s->label(i)) EXPECT_LT(s->path(i - 1), s->path(i));
      }
    }
  EXPECT_EQ(all.size(), 10u);
  // The same seed gives the same split at another thread count; another seed another split.
  o.threads = 2;
  const ImageFolder b = load_image_folder(dir_, o);
  for (int64_t i = 0; i < a.train.size(); ++i) EXPECT_EQ(a.train.path(i), b.train.path(i));
  bool differs = false;
  for (uint64_t seed = 5; seed < 10 && !differs; ++seed) {
    o.split_seed = seed;
    const ImageFolder c = load_image_folder(dir_, o);
    for (int64_t i = 0; i < c.train.size(); ++i) differs |= c.train.path(i) != a.train.path(i);
  }
  EXPECT_TRUE(differs);
  // A class splits the same way whatever the class list: cats alone, with dogs, in any order.
  o.split_seed = 4;
  auto cats_train = [&](const std::vector<std::string>& classes) {
    ImageFolderOptions p = o;
    p.classes = classes;
    const ImageFolder g = load_image_folder(dir_, p);
    std::vector<std::string> paths;
    for (int64_t i = 0; i < g.train.size(); ++i)
      if (g.train.path(i).rfind("cats/", 0) == 0) paths.push_back(g.train.path(i));
    return paths;
  };
  const std::vector<std::string> alone = cats_train({"cats"});
  EXPECT_EQ(alone.size(), 4u);
  EXPECT_EQ(cats_train({"dogs", "cats"}), alone);
  EXPECT_EQ(cats_train({}), alone);
}

TEST_F(ImageFolderTest, AugmentedBatchesArePrefetchedExactlyAndAtAnyThreadCount) {
  make_folder();
  ImageFolderOptions o = quiet(12);
  o.train_fraction = 1;
  const ImageFolder f = load_image_folder(dir_, o);
  LoaderOptions opt;
  opt.batch = 3;
  opt.augment = true;
  opt.seed = 8;
  PrefetchLoader pre(f.train, opt, 2);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    if (epoch) pre.start_epoch(epoch);
    for (const int threads : {1, 2}) {
      LoaderOptions t = opt;
      t.threads = threads;
      DatasetLoader plain(f.train, t);
      plain.start_epoch(epoch);
      Tensor x;
      std::vector<int32_t> y;
      for (int64_t b = 0; b < plain.num_batches(); ++b) {
        plain.load(b, x, y);
        if (threads == 1) {
          const Batch& got = pre.next();
          ASSERT_EQ(got.y, y);
          ASSERT_EQ(std::vector<float>(got.x.data(), got.x.data() + got.x.numel()),
                    std::vector<float>(x.data(), x.data() + x.numel()))
              << "epoch " << epoch << " batch " << b;
        }
      }
    }
  }
}

TEST_F(ImageFolderTest, MissingFolderEmptyClassAndUnreadableClassAreErrorsNamingThem) {
  testing::expect_error_mentions([&] { load_image_folder(path("nowhere"), quiet(8)); },
                                 {"nowhere", "no such directory"});
  spit("plain_file", "x");
  testing::expect_error_mentions([&] { load_image_folder(path("plain_file"), quiet(8)); },
                                 {"plain_file", "not a directory"});
  mkdir("top");
  testing::expect_error_mentions([&] { load_image_folder(path("top"), quiet(8)); },
                                 {"top", "no class subfolders"});
  ASSERT_EQ(std::system(("rmdir '" + path("top") + "'").c_str()), 0);
  make_folder();
  ImageFolderOptions o = quiet(8);
  o.classes = {"cats", "birds"};
  testing::expect_error_mentions([&] { load_image_folder(dir_, o); },
                                 {"no folder for class 'birds'", "cats, dogs"});
  o.classes = {"cats", "cats"};
  testing::expect_error_mentions([&] { load_image_folder(dir_, o); }, {"'cats' is listed twice"});
  mkdir("fish");
  testing::expect_error_mentions([&] { load_image_folder(dir_, quiet(8)); },
                                 {"class 'fish' is empty"});
  spit("fish/a.txt", "text");
  spit("fish/b.jpg", "");
  testing::expect_error_mentions([&] { load_image_folder(dir_, quiet(8)); },
                                 {"class 'fish' has no readable image", "fish/a.txt",
                                  "fish/b.jpg (empty file)"});
  write("fish/c.png", picture(8, 8, 3));
  testing::expect_error_mentions([&] { load_image_folder(dir_, quiet(8)); },
                                 {"class 'fish' has 1 readable image"});
  ImageFolderOptions all = quiet(8);
  all.train_fraction = 1;
  EXPECT_EQ(load_image_folder(dir_, all).train.size(), 11);
}

// The shipped six Caltech101 classes, decoded small (libjpeg's 1/8 scale: about a second for
// the 2,600 photos) with the default split.
TEST(Caltech101Six, ShippedFolderLoadsWithTheExpectedCounts) {
  const std::string dir = std::string(PDNN_SOURCE_DIR) + "/datasets/caltech101-6";
  ImageFolderOptions o;
  o.size = 16;
  o.cache_size = 16;
  o.threads = 2;
  o.log = nullptr;
  o.classes = {"airplanes", "Motorbikes", "Faces_easy", "watch", "Leopards", "bonsai"};  // W4
  const ImageFolder f = load_image_folder(dir, o);
  EXPECT_EQ(f.files, 2600);
  EXPECT_TRUE(f.skipped.empty()) << f.skipped.front().path << ": " << f.skipped.front().reason;
  EXPECT_EQ(f.train_per_class, (std::vector<int64_t>{400, 399, 218, 120, 100, 64}));
  EXPECT_EQ(f.test_per_class, (std::vector<int64_t>{400, 399, 217, 119, 100, 64}));
  EXPECT_EQ(f.train.size(), 1301);
  EXPECT_EQ(f.test.size(), 1299);
  // W4's epoch: 20 batches of 64 from the 1,301.
  LoaderOptions opt;
  opt.images_per_epoch = 1280;
  EXPECT_EQ(DatasetLoader(f.train, opt).num_batches(), 20);
}

}  // namespace
}  // namespace pdnn

#else
TEST(ImageFolder, NeedsOpenCV) { GTEST_SKIP() << "built without OpenCV: no image folders"; }
#endif
