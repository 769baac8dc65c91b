// IDX reader/writer and the batch loader: good files raw and gzip, truncated files, trailing
// garbage, wrong magic, mismatched counts, labels out of range; every batch seen once per epoch.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <string>

#include "core/error.h"
#include "data/dataset.h"
#include "data/dataset_loader.h"
#include "data/idx.h"

using namespace pdnn;

namespace {

// A fresh temporary folder per test, removed with its files afterwards.
class IdxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pdnn_idx_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  static IdxImages images(int64_t n, int64_t rows, int64_t cols) {
    IdxImages im;
    im.n = n, im.rows = rows, im.cols = cols;
    im.pixels.resize(static_cast<size_t>(n * rows * cols));
    for (size_t i = 0; i < im.pixels.size(); ++i) im.pixels[i] = static_cast<uint8_t>(i * 7 + 3);
    return im;
  }
  static std::vector<uint8_t> labels(int64_t n) {
    std::vector<uint8_t> l(static_cast<size_t>(n));
    for (size_t i = 0; i < l.size(); ++i) l[i] = static_cast<uint8_t>(i % 10);
    return l;
  }
  static std::string slurp(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  static void spit(const std::string& p, const std::string& bytes) {
    std::ofstream out(p, std::ios::binary);
    out << bytes;
  }
  // The message of the pdnn::Error that f throws ("" when it throws none).
  template <class F>
  static std::string error_of(F f) {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  void write_dataset(int64_t n_train, int64_t n_test, bool gz) {
    const std::string ext = gz ? ".gz" : "";
    write_idx_images(path("train-images-idx3-ubyte" + ext), images(n_train, 5, 4));
    write_idx_labels(path("train-labels-idx1-ubyte" + ext), labels(n_train));
    write_idx_images(path("t10k-images-idx3-ubyte" + ext), images(n_test, 5, 4));
    write_idx_labels(path("t10k-labels-idx1-ubyte" + ext), labels(n_test));
  }

  std::string dir_;
};

TEST_F(IdxTest, RoundTripRawAndGzip) {
  const IdxImages im = images(3, 5, 4);
  for (const char* name : {"a-idx3-ubyte", "a-idx3-ubyte.gz"}) {
    write_idx_images(path(name), im);
    const IdxImages back = read_idx_images(path(name));
    EXPECT_EQ(back.n, 3);
    EXPECT_EQ(back.rows, 5);
    EXPECT_EQ(back.cols, 4);
    EXPECT_EQ(back.pixels, im.pixels) << name;
  }
  // The .gz file really is compressed (gzip magic), the raw one starts with the IDX magic.
  EXPECT_EQ(slurp(path("a-idx3-ubyte.gz")).substr(0, 2), "\x1f\x8b");
  EXPECT_EQ(slurp(path("a-idx3-ubyte")).substr(0, 4), std::string("\0\0\x08\x03", 4));
  EXPECT_EQ(slurp(path("a-idx3-ubyte")).size(), 16u + 60u);
  // Gzip is recognised by content, not by name.
  std::rename(path("a-idx3-ubyte.gz").c_str(), path("b-idx3-ubyte").c_str());
  EXPECT_EQ(read_idx_images(path("b-idx3-ubyte")).pixels, im.pixels);

  write_idx_labels(path("l.gz"), labels(13));
  EXPECT_EQ(read_idx_labels(path("l.gz")), labels(13));
}

// Colour images (the DCGAN's samples of photos): magic 0x804, N x C x H x W, read back as
// they were written; a channel count other than 1 or 3 is refused, and the MNIST layout takes
// grey images only.
TEST_F(IdxTest, ColourPlanesRoundTripWithTheirOwnMagic) {
  IdxImages im = images(2, 5, 4);
  im.channels = 3;
  im.pixels.resize(2 * 3 * 5 * 4);
  for (size_t i = 0; i < im.pixels.size(); ++i) im.pixels[i] = static_cast<uint8_t>(i * 11 + 1);
  for (const char* name : {"c", "c.gz"}) {
    write_idx_images(path(name), im);
    const IdxImages back = read_idx_images(path(name));
    EXPECT_EQ(back.n, 2);
    EXPECT_EQ(back.channels, 3);
    EXPECT_EQ(back.rows, 5);
    EXPECT_EQ(back.cols, 4);
    EXPECT_EQ(back.pixels, im.pixels) << name;
  }
  const std::string raw = slurp(path("c"));
  EXPECT_EQ(raw.substr(0, 8), std::string("\0\0\x08\x04\0\0\0\x02", 8));
  EXPECT_EQ(raw.size(), 20u + 120u);
  const Tensor t = idx_to_tensor(read_idx_images(path("c")));
  EXPECT_EQ(t.shape(), (Shape{2, 3, 5, 4}));
  EXPECT_EQ(t[119], static_cast<float>(static_cast<uint8_t>(119 * 11 + 1)) / 255.f);
  // Two channels: refused when read, naming the count.
  std::string two = raw;
  two[11] = 2;
  spit(path("two"), two.substr(0, 20 + 80));
  std::string e = error_of([&] { read_idx_images(path("two")); });
  EXPECT_NE(e.find(path("two") + ": header says 2 images of 2 x 5x4: 2 channels, images have 1 "
                                 "or 3"),
            std::string::npos)
      << e;
  spit(path("cut"), raw.substr(0, 18));
  e = error_of([&] { read_idx_images(path("cut")); });
  EXPECT_NE(e.find("truncated IDX image header (18 of 20 bytes)"), std::string::npos) << e;
  im.channels = 2;
  e = error_of([&] { write_idx_images(path("w"), im); });
  EXPECT_NE(e.find("2 channels (1 or 3)"), std::string::npos) << e;
  // A colour file in the MNIST layout: refused by the data set loader.
  write_dataset(6, 4, false);
  im.channels = 3;
  write_idx_images(path("train-images-idx3-ubyte"), im);
  e = error_of([&] { load_idx_dataset(dir_, "x"); });
  EXPECT_NE(e.find("train-images-idx3-ubyte: 3 channels: this layout holds grey images"),
            std::string::npos)
      << e;
}

TEST_F(IdxTest, PixelsBecomeFloatsOverTwoHundredFiftyFive) {
  IdxImages im = images(2, 2, 3);
  im.pixels = {0, 255, 128, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  const Tensor t = idx_to_tensor(im);
  EXPECT_EQ(t.shape(), (Shape{2, 1, 2, 3}));
  EXPECT_EQ(t[0], 0.f);
  EXPECT_EQ(t[1], 1.f);
  EXPECT_EQ(t[2], 128.f / 255.f);
  EXPECT_EQ(t[11], 9.f / 255.f);
}

TEST_F(IdxTest, TruncatedAndTrailingGarbageNameTheFileAndSizes) {
  write_idx_images(path("im"), images(10, 28, 28));
  const std::string bytes = slurp(path("im"));
  spit(path("short"), bytes.substr(0, 16 + 1200));
  std::string e = error_of([&] { read_idx_images(path("short")); });
  EXPECT_NE(e.find(path("short") + ": truncated: header says 10 images of 28x28 (7840 bytes), "
                                   "file has 1200"),
            std::string::npos)
      << e;
  spit(path("long"), bytes + "xyz");
  e = error_of([&] { read_idx_images(path("long")); });
  EXPECT_NE(e.find("3 bytes of trailing garbage"), std::string::npos) << e;
  spit(path("header"), bytes.substr(0, 10));
  e = error_of([&] { read_idx_images(path("header")); });
  EXPECT_NE(e.find("truncated IDX image header"), std::string::npos) << e;

  // A gzip file whose uncompressed content is truncated, and a cut gzip stream.
  gzFile f = gzopen(path("short.gz").c_str(), "wb");
  gzwrite(f, bytes.data(), 16 + 1200);
  gzclose(f);
  e = error_of([&] { read_idx_images(path("short.gz")); });
  EXPECT_NE(e.find("file has 1200 after decompression"), std::string::npos) << e;
  write_idx_images(path("full.gz"), images(10, 28, 28));
  const std::string gz = slurp(path("full.gz"));
  spit(path("cut.gz"), gz.substr(0, gz.size() / 2));
  e = error_of([&] { read_idx_images(path("cut.gz")); });
  EXPECT_NE(e.find(path("cut.gz") + ": corrupt or truncated gzip data"), std::string::npos) << e;

  write_idx_labels(path("lab"), labels(50));
  spit(path("lab_short"), slurp(path("lab")).substr(0, 8 + 20));
  e = error_of([&] { read_idx_labels(path("lab_short")); });
  EXPECT_NE(e.find("truncated: header says 50 labels (50 bytes), file has 20"), std::string::npos)
      << e;
}

// Big-endian header bytes, as an IDX file stores them.
std::string be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

// Dimensions whose product passes 2^64 (here exactly 2^64, which wraps to 0 and so "matched"
// an empty payload), or that could not fit in memory, are refused by name before any
// allocation.
TEST_F(IdxTest, HeaderSizesAreOverflowCheckedAndBoundedByMemory) {
  spit(path("wrap"), be32(0x803) + be32(1u << 22) + be32(1u << 21) + be32(1u << 21));
  std::string e = error_of([&] { read_idx_images(path("wrap")); });
  EXPECT_NE(e.find(path("wrap") + ": header says 4194304 images of 2097152x2097152: the image "
                                  "count times the image size overflows"),
            std::string::npos)
      << e;
  spit(path("max"), be32(0x803) + be32(0xffffffffu) + be32(0xffffffffu) + be32(0xffffffffu));
  EXPECT_NE(error_of([&] { read_idx_images(path("max")); }).find("overflows"), std::string::npos);
  // 2^32-1 images of 16384x16384: 2^60 bytes, no overflow, but no machine holds it.
  spit(path("huge"), be32(0x803) + be32(0xffffffffu) + be32(16384) + be32(16384) + "abc");
  e = error_of([&] { read_idx_images(path("huge")); });
  EXPECT_NE(e.find("more than this machine has"), std::string::npos) << e;
}

// A gzip stream that inflates far past what its header promises is not read to its end, and
// one whose header promises more than deflate can expand the file to fails before reading.
TEST_F(IdxTest, GzipBombsAreNotReadWhole) {
  const std::string bomb = path("bomb.gz");
  gzFile f = gzopen(bomb.c_str(), "wb1");
  const std::string head = be32(0x801) + be32(10) + "0123456789";
  gzwrite(f, head.data(), static_cast<unsigned>(head.size()));
  const std::vector<char> zeros(1 << 20, 0);
  for (int i = 0; i < 48; ++i) gzwrite(f, zeros.data(), static_cast<unsigned>(zeros.size()));
  gzclose(f);
  std::string e = error_of([&] { read_idx_labels(bomb); });
  EXPECT_NE(e.find(bomb + ": more than 1048576 bytes of trailing garbage after 10 labels (10 "
                          "bytes) after decompression"),
            std::string::npos)
      << e;

  const std::string liar = path("liar.gz");
  f = gzopen(liar.c_str(), "wb");
  const std::string claim = be32(0x801) + be32(5000000) + "xyz";
  gzwrite(f, claim.data(), static_cast<unsigned>(claim.size()));
  gzclose(f);
  e = error_of([&] { read_idx_labels(liar); });
  EXPECT_NE(e.find("header says 5000000 labels (5000000 bytes), more than"), std::string::npos)
      << e;
}

// A FIFO (or device) given as an IDX file is refused without opening it for a blocking read.
TEST_F(IdxTest, FifosAndDevicesAreRefused) {
  ASSERT_EQ(mkfifo(path("fifo").c_str(), 0600), 0);
  EXPECT_NE(error_of([&] { read_idx_images(path("fifo")); }).find("not a regular file"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_idx_labels("/dev/zero"); }).find("/dev/zero: not a regular file"),
            std::string::npos);
}

TEST_F(IdxTest, WrongMagicAndMissingFiles) {
  write_idx_labels(path("lab"), labels(4));
  std::string e = error_of([&] { read_idx_images(path("lab")); });
  EXPECT_NE(e.find("not an IDX image file: magic number 0x00000801, expected 0x00000803"),
            std::string::npos)
      << e;
  write_idx_images(path("im"), images(2, 3, 3));
  e = error_of([&] { read_idx_labels(path("im")); });
  EXPECT_NE(e.find("not an IDX label file: magic number 0x00000803"), std::string::npos) << e;
  spit(path("text"), "hello world, not idx");
  EXPECT_NE(error_of([&] { read_idx_images(path("text")); }).find("not an IDX image file"),
            std::string::npos);
  spit(path("empty"), "");
  EXPECT_NE(error_of([&] { read_idx_labels(path("empty")); }).find("too short"), std::string::npos);
  e = error_of([&] { read_idx_images(path("nope")); });
  EXPECT_NE(e.find(path("nope") + ": cannot open"), std::string::npos) << e;
}

TEST_F(IdxTest, DatasetFolderChecksCountsSizesAndLabels) {
  write_dataset(30, 12, true);
  ImageDataset d = load_idx_dataset(dir_, "mnist");
  EXPECT_EQ(d.name, "mnist");
  EXPECT_EQ(d.train.size(), 30);
  EXPECT_EQ(d.test.size(), 12);
  EXPECT_EQ(d.train.images.shape(), (Shape{30, 1, 5, 4}));
  EXPECT_EQ(d.test.labels[11], 1);
  spit(path("NAME"), "mnist-npm10k\n");
  EXPECT_EQ(load_idx_dataset(dir_, "mnist").name, "mnist-npm10k");

  // Raw files are found too.
  std::remove(path("t10k-labels-idx1-ubyte.gz").c_str());
  EXPECT_NE(error_of([&] { load_idx_dataset(dir_, "mnist"); }).find("no t10k-labels-idx1-ubyte"),
            std::string::npos);
  write_idx_labels(path("t10k-labels-idx1-ubyte"), labels(11));
  std::string e = error_of([&] { load_idx_dataset(dir_, "mnist"); });
  EXPECT_NE(e.find("12 images but " + path("t10k-labels-idx1-ubyte") + " has 11 labels"),
            std::string::npos)
      << e;

  write_idx_labels(path("t10k-labels-idx1-ubyte"), labels(12));
  EXPECT_NO_THROW(load_idx_dataset(dir_, "mnist"));
  e = error_of([&] { load_idx_dataset(dir_, "mnist", 4); });
  EXPECT_NE(e.find("label 4 at index 4 is outside 0..3"), std::string::npos) << e;

  write_idx_images(path("t10k-images-idx3-ubyte.gz"), images(12, 4, 5));
  e = error_of([&] { load_idx_dataset(dir_, "mnist"); });
  EXPECT_NE(e.find("training images are 5x4 but test images 4x5"), std::string::npos) << e;

  e = error_of([&] { load_idx_dataset(path("missing"), "mnist"); });
  EXPECT_NE(e.find("no such data folder"), std::string::npos) << e;
}

TEST_F(IdxTest, LoaderCoversEveryImageOncePerEpochWithAPartialLastBatch) {
  write_dataset(23, 5, false);
  const ImageDataset d = load_idx_dataset(dir_, "x");
  const TensorDataset set(d.train, d.num_classes);
  LoaderOptions opt;
  opt.batch = 8;
  opt.seed = 5;
  DatasetLoader loader(set, opt);
  loader.start_epoch(2);
  EXPECT_EQ(loader.num_batches(), 3);
  // The order is the Rng permutation of epoch_order_rng, and not the identity.
  Rng order_rng = epoch_order_rng(5, 2);
  const std::vector<int64_t> order = order_rng.permutation(23);
  EXPECT_EQ(order_rng.counter(), 22u);  // Fisher-Yates on 23 items draws 22 values
  EXPECT_NE(order[22], 22);
  Tensor x;
  std::vector<int32_t> y;
  std::multiset<int64_t> seen;
  const int64_t per = 20;
  for (int64_t b = 0; b < loader.num_batches(); ++b) {
    const int64_t nb = loader.load(b, x, y);
    EXPECT_EQ(nb, b < 2 ? 8 : 7);
    EXPECT_EQ(x.shape(), (Shape{nb, 1, 5, 4}));
    for (int64_t i = 0; i < nb; ++i) {
      const int64_t k = order[static_cast<size_t>(b * 8 + i)];
      seen.insert(k);
      EXPECT_EQ(y[static_cast<size_t>(i)], d.train.labels[static_cast<size_t>(k)]);
      for (int64_t j = 0; j < per; ++j) ASSERT_EQ(x[i * per + j], d.train.images[k * per + j]);
    }
  }
  EXPECT_EQ(seen.size(), 23u);
  EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 23u);
  // Stored order without shuffling.
  opt.shuffle = false;
  DatasetLoader stored(set, opt);
  stored.load(2, x, y);
  EXPECT_EQ(y.back(), d.train.labels[22]);
  EXPECT_THROW(loader.load(3, x, y), Error);
  opt.batch = 0;
  EXPECT_THROW(DatasetLoader(set, opt), Error);
}

}  // namespace
