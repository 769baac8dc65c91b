// End to end: build/bin/dcgan on tiny generated images (small widths, batch 8): two iterations
// complete with finite losses and write the documented CSV, the iteration rows, a sample grid
// of the right size and the sample file; a run resumed from its checkpoint ends with the same
// checkpoint, byte for byte, as an uninterrupted one; a flat folder of photos of any shape
// trains; bad input fails with a clear message and no output files.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "data/idx.h"
#include "testing.h"
#ifdef PDNN_HAVE_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "data/image_grid.h"
#endif

using namespace pdnn;

namespace {

const std::string kBin = std::string(PDNN_BIN_DIR) + "/dcgan";

using Result = pdnn::testing::CommandResult;
constexpr auto run = pdnn::testing::run_command;
using pdnn::testing::exists;
using pdnn::testing::read_csv;
using pdnn::testing::slurp;

// Small widths and batches: the same code as W5, seconds instead of minutes.
const std::string kSmall = " --ngf 4 --ndf 4 --nz 8 --batch 8 --threads 1 --seed 5";

class DcganApp : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!exists(kBin)) GTEST_SKIP() << kBin << " not built";
    char tmpl[] = "/tmp/pdnn_dcgan_app_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    data_ = dir_ + "/data";
    ::mkdir(data_.c_str(), 0755);
    pdnn::testing::write_idx_squares(data_, "train", 24, 28, 1);
    pdnn::testing::write_idx_squares(data_, "t10k", 8, 28, 2);
    std::ofstream(data_ + "/NAME") << "squares\n";
  }
  void TearDown() override {
    if (!dir_.empty()) std::system(("rm -rf '" + dir_ + "'").c_str());
  }
  // The app on the squares, writing everything under dir_/<tag>.
  Result app(const std::string& tag, const std::string& flags) {
    const std::string o = dir_ + "/" + tag;
    return run(kBin + " --data " + data_ + kSmall + " --out " + o + "/r.csv --iterations-out " +
               o + "/it.csv --samples-dir " + o + "/samples" + flags);
  }
  std::string dir_, data_;
};

TEST_F(DcganApp, TwoIterationsWriteRowsGridAndSamples) {
  const Result r = app("a", " --epochs 1 --images-per-epoch 16 --samples 20 --samples-out " +
                                dir_ + "/a/s.idx.gz");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("dataset squares"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("16 images (2 iterations) per epoch"), std::string::npos) << r.output;
  const auto rows = read_csv(dir_ + "/a/r.csv");
  ASSERT_EQ(rows.size(), 2u);
  const std::vector<std::string> cols = {
      "app",           "model",        "dataset",      "device",  "gpu",
      "threads",       "batch",        "epoch",        "train_d_loss", "train_g_loss",
      "train_d_x",     "train_d_g_z",  "train_s_per_iter", "status", "seconds",
      "images_per_s",  "git_rev",      "host",         "timestamp"};
  EXPECT_EQ(rows[0], cols);
  ASSERT_EQ(rows[1].size(), cols.size());
  EXPECT_EQ(rows[1][1], "dcgan-z8-g4-d4");
  EXPECT_EQ(rows[1][2], "squares");
  EXPECT_EQ(rows[1][6], "8");
  for (int c = 8; c <= 12; ++c) EXPECT_TRUE(std::isfinite(std::stod(rows[1][c]))) << cols[c];
  EXPECT_GT(std::stod(rows[1][8]), 0.0);             // D loss
  EXPECT_GT(std::stod(rows[1][10]), 0.0);            // D(x) in (0, 1)
  EXPECT_LT(std::stod(rows[1][10]), 1.0);
  EXPECT_EQ(rows[1][13], "ok");
  const auto its = read_csv(dir_ + "/a/it.csv");
  ASSERT_EQ(its.size(), 3u);  // header and two iterations
  EXPECT_EQ(its[0][6], "iteration");
  EXPECT_EQ(its[2][6], "2");
  // The mean of the iterations is the epoch's value.
  EXPECT_NEAR((std::stod(its[1][7]) + std::stod(its[2][7])) / 2, std::stod(rows[1][8]), 1e-5);
#ifdef PDNN_HAVE_OPENCV
  int w = 0, h = 0;
  ASSERT_TRUE(png_size(dir_ + "/a/samples/epoch_001.png", &w, &h));
  EXPECT_EQ(w, 8 * 66 + 2);  // 8 tiles of 64 with 2 pixels of padding around each
  EXPECT_EQ(h, 8 * 66 + 2);
  const IdxImages s = read_idx_images(dir_ + "/a/s.idx.gz");
  EXPECT_EQ(s.n, 20);
  EXPECT_EQ(s.rows, 64);
  EXPECT_EQ(s.cols, 64);
#endif
  // Nothing left behind under temporary names.
  EXPECT_EQ(run("find " + dir_ + "/a -name '*.tmp*'").output, "");
}

// The quality score end to end: a classifier trained by the mnist app on the real images, the
// DCGAN's samples and the held-out real images through the same path, one row each.
TEST_F(DcganApp, GanScoreRatesSamplesAndHeldOutImages) {
  const std::string score = std::string(PDNN_BIN_DIR) + "/gan_score";
  if (!exists(score)) GTEST_SKIP() << score << " not built";
  ASSERT_EQ(app("a", " --epochs 1 --images-per-epoch 16 --samples 30 --samples-out " + dir_ +
                         "/a/s.idx.gz").status,
            0);
  // More real images for the classifier to learn the four squares from.
  const std::string real = dir_ + "/real";
  ::mkdir(real.c_str(), 0755);
  pdnn::testing::write_idx_squares(real, "train", 400, 28, 3);
  pdnn::testing::write_idx_squares(real, "t10k", 100, 28, 4);
  const std::string ck = dir_ + "/classifier.ckpt";
  const Result c = run(std::string(PDNN_BIN_DIR) + "/mnist --model small --data " + real +
                       " --epochs 2 --batch 16 --threads 1 --out " + dir_ + "/c.csv --checkpoint " +
                       ck);
  ASSERT_EQ(c.status, 0) << c.output;
  const std::string out = dir_ + "/q.csv";
  const Result r = run(score + " --classifier " + ck + " --model small --dataset mnist --data " +
                       real + " --set pdnn=" + dir_ + "/a/s.idx.gz --images 100 --threads 1 --out " +
                       out);
  ASSERT_EQ(r.status, 0) << r.output;
  const auto rows = read_csv(out);
  ASSERT_EQ(rows.size(), 3u) << r.output;
  EXPECT_EQ(rows[1][1], "real-heldout");
  EXPECT_EQ(rows[1][5], "100");
  EXPECT_GT(std::stod(rows[1][6]), 0.9) << r.output;  // the squares survive 28 -> 64 -> 28
  EXPECT_LT(std::stod(rows[1][10]), 5.0) << r.output;  // FID of held-out real images: small
  EXPECT_EQ(rows[2][1], "pdnn");
  EXPECT_EQ(rows[2][5], "30");
  EXPECT_EQ(rows[2][6], "");
  const double is = std::stod(rows[2][9]), fid = std::stod(rows[2][10]);
  EXPECT_GE(is, 1.0);
  EXPECT_LE(is, 4.0 + 1e-6);  // 4 classes at most
  EXPECT_GT(fid, std::stod(rows[1][10]));  // untrained samples are further than real ones
  // A sample file that is not there: an error naming it, no row.
  const Result bad = run(score + " --classifier " + ck + " --model small --dataset mnist --data " +
                         real + " --set x=" + dir_ + "/none.idx --out " + out);
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.output.find("none.idx"), std::string::npos) << bad.output;
  EXPECT_EQ(read_csv(out).size(), 3u);
}

TEST_F(DcganApp, ResumedRunEndsWithTheSameCheckpointAsAnUninterruptedOne) {
  const std::string common = " --epochs 3 --images-per-epoch 16";
  ASSERT_EQ(app("full", common + " --checkpoint " + dir_ + "/full/c.ckpt").status, 0);
  const Result first = app("part", " --epochs 1 --images-per-epoch 16 --checkpoint " + dir_ +
                                       "/part/c.ckpt");
  ASSERT_EQ(first.status, 0) << first.output;
  const Result rest = app("part", common + " --checkpoint " + dir_ + "/part/c.ckpt --resume");
  ASSERT_EQ(rest.status, 0) << rest.output;
  EXPECT_NE(rest.output.find("resumed from"), std::string::npos) << rest.output;
  const std::string a = slurp(dir_ + "/full/c.ckpt"), b = slurp(dir_ + "/part/c.ckpt");
  ASSERT_GT(a.size(), 1000u);
  EXPECT_TRUE(a == b) << "checkpoints differ";
  // Both runs wrote 3 rows, 6 iteration rows and the three grids, with the same values.
  const auto ra = read_csv(dir_ + "/full/r.csv"), rb = read_csv(dir_ + "/part/r.csv");
  ASSERT_EQ(ra.size(), 4u);
  ASSERT_EQ(rb.size(), 4u);
  for (size_t i = 1; i < 4; ++i)
    for (int c = 8; c <= 11; ++c) EXPECT_EQ(ra[i][c], rb[i][c]) << i << " " << c;
  const auto ia = read_csv(dir_ + "/full/it.csv"), ib = read_csv(dir_ + "/part/it.csv");
  ASSERT_EQ(ia.size(), 7u);
  ASSERT_EQ(ib.size(), 7u);
  for (size_t i = 1; i < 7; ++i)
    for (int c = 5; c <= 10; ++c) EXPECT_EQ(ia[i][c], ib[i][c]) << i << " " << c;
#ifdef PDNN_HAVE_OPENCV
  for (const char* e : {"001", "002", "003"}) {
    const std::string ga = slurp(dir_ + "/full/samples/epoch_" + std::string(e) + ".png");
    EXPECT_FALSE(ga.empty()) << e;
    EXPECT_TRUE(ga == slurp(dir_ + "/part/samples/epoch_" + std::string(e) + ".png")) << e;
  }
#endif
  // A checkpoint of the mnist app is refused with what it holds.
  const std::string mnist_ck = dir_ + "/mnist.ckpt";
  ASSERT_EQ(run(std::string(PDNN_BIN_DIR) + "/mnist --data " + data_ +
                " --epochs 1 --steps 1 --save-init " + mnist_ck + " --threads 1")
                .status,
            0);
  const Result refused = app("full", common + " --checkpoint " + mnist_ck + " --resume");
  EXPECT_NE(refused.status, 0);
  EXPECT_NE(refused.output.find("holds a single model (format version 1"), std::string::npos)
      << refused.output;
}

#ifdef PDNN_HAVE_OPENCV
// Any folder of photos: here, flat (no class folders), of several shapes; each is centre-
// cropped to a square and resized to 64x64.
TEST_F(DcganApp, TrainsOnAFlatFolderOfPhotos) {
  const std::string photos = dir_ + "/photos";
  ::mkdir(photos.c_str(), 0755);
  for (int i = 0; i < 10; ++i) {
    cv::Mat m(40 + 7 * i, 90 - 5 * i, CV_8UC3);
    cv::randu(m, 0, 255);
    ASSERT_TRUE(cv::imwrite(photos + "/p" + std::to_string(i) + ".png", m));
  }
  const std::string o = dir_ + "/f";
  const Result r = run(kBin + " --data " + photos + kSmall +
                       " --epochs 1 --images-per-epoch 8 --out " + o + "/r.csv --iterations-out " +
                       o + "/it.csv --samples-dir " + o + "/samples");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("dataset photos (" + photos + ": 10 images, photos, centre-cropped"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(read_csv(o + "/r.csv").size(), 2u);
}
#endif

// make dcgan without a GPU (scripts/dcgan_study.sh): its first line says that this is the short
// CPU run, how long the full one would take here and how to start it; then the run, the grids,
// the progression PNG and the curves. (Small widths and a small folder of photos: seconds.)
TEST_F(DcganApp, MakeDcganOnTheCpuSaysFirstHowLongTheFullRunWouldTake) {
  if (std::system("/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 lacks matplotlib (apt-get install python3-matplotlib)";
  const std::string o = dir_ + "/study";
  const Result r = run("BIN=" + std::string(PDNN_BIN_DIR) + " OUT=" + o + " DATA=" + data_ +
                       " DEVICE=cpu CPU_EPOCHS=2 CPU_IMAGES=16 THREADS=1 ARGS='--ngf 4 --ndf 4 "
                       "--nz 8 --batch 8' " PDNN_SOURCE_DIR "/scripts/dcgan_study.sh");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string first = r.output.substr(0, r.output.find('\n'));
  EXPECT_EQ(first.rfind("dcgan: no GPU: a short CPU run (2 epochs of 16 images); the study's 300 "
                        "epochs (3 iterations of 8 each) would take about ", 0), 0u) << first;
  EXPECT_NE(first.find("ms per iteration at 1 threads): make dcgan DEVICE=cpu EPOCHS=300"),
            std::string::npos) << first;
  EXPECT_TRUE(exists(o + "/samples/data/epoch_002.png")) << r.output;
  EXPECT_TRUE(exists(o + "/progression_data.png")) << r.output;
  EXPECT_EQ(read_csv(o + "/dcgan_data.csv").size(), 3u);
}

// Issue 20: without --images-per-epoch an epoch is W5's 2,944 images when the set has them,
// else the whole set (here 24), and the header says which (dcgan --dataset caltech stopped:
// 2,944 against the 2,600 shipped photos). An explicit count larger than the set stays an error
// (BadInputFailsWithAMessageAndNoOutput).
TEST_F(DcganApp, DefaultEpochFitsASmallSet) {
  const Result r = app("d", " --epochs 1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("24 images (3 iterations; all of them: the set has fewer than W5's "
                          "2944) per epoch"),
            std::string::npos)
      << r.output;
}

// Issue 20: a fresh run never replaces a checkpoint it did not write (run_loop.h); issue 24:
// nor a --save-init file, which --overwrite replaces with the initial weights (G and D).
TEST_F(DcganApp, AFreshRunRefusesACheckpointItDidNotWrite) {
  const std::string ck = dir_ + "/trained.ckpt";
  std::ofstream(ck) << "a trained run";
  for (const auto& [flag, ways_out] :
       {std::pair<std::string, std::string>{"--checkpoint",
                                            "fresh run would replace it: --resume to continue "
                                            "it, name another path, or --overwrite to replace it"},
        {"--save-init", "run would replace it: name another path, or --overwrite to replace it"}}) {
    const Result r = app("c", " --epochs 1 --images-per-epoch 16 " + flag + " " + ck);
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find("dcgan: error: " + flag + " " + ck + " already exists and this " +
                            ways_out),
              std::string::npos)
        << r.output;
    EXPECT_EQ(pdnn::testing::slurp(ck), "a trained run");
    EXPECT_FALSE(exists(dir_ + "/c"));
  }
  const Result r = app("c", " --epochs 1 --images-per-epoch 8 --save-init " + ck + " --overwrite");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(pdnn::testing::slurp(ck), "a trained run");
  EXPECT_GT(pdnn::testing::slurp(ck).size(), 1000u);
}

TEST_F(DcganApp, BadInputFailsWithAMessageAndNoOutput) {
  Result r = app("bad", " --data " + dir_ + "/nowhere --epochs 1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("nowhere: no such folder"), std::string::npos) << r.output;
  r = app("bad", " --epochs 1 --images-per-epoch 100");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--images-per-epoch 100: squares has 24 training images"),
            std::string::npos)
      << r.output;
  r = app("bad", " --epochs 1 --batch 1");
  EXPECT_NE(r.status, 0);
  EXPECT_FALSE(exists(dir_ + "/bad"));
}

}  // namespace
