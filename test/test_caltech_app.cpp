// End to end: build/bin/caltech101 (W4) on a small image folder generated here (three classes
// of 12 PNG photos each). Two steps at 32x32 finish with finite losses and write the
// documented CSV row (per-class accuracy, memory, loader time) and the confusion-matrix PNG; a
// resumed run reaches the very same weights as an uninterrupted one (augmentation, dropout and
// the prefetching loader included); --steps writes nothing; bad input fails in one line and
// writes nothing.
#include <gtest/gtest.h>

#ifdef PDNN_HAVE_OPENCV
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/rng.h"
#include "model/checkpoint.h"
#include "run/csv.h"
#include "workloads/classifier/caltech_models.h"
#include "testing.h"

namespace pdnn {
namespace {

const std::string kBin = std::string(PDNN_BIN_DIR) + "/caltech101";
using testing::read_csv;
using testing::run_command;
using testing::exists;
using testing::slurp;


class CaltechApp : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!exists(kBin)) GTEST_SKIP() << kBin << " not built";
    char tmpl[] = "/tmp/pdnn_caltech_app_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    data_ = dir_ + "/photos";
    const char* names[3] = {"red", "green", "blue"};
    for (int k = 0; k < 3; ++k) write_class(data_ + "/" + names[k], k, 12);
  }
  // A class folder of `count` photos: a bright disc of colour k % 3 on noise, at a random
  // place. 37x37 is the cache side for --size 32, so the cache holds the pixels as written.
  void write_class(const std::string& cls, int k, int count) {
    ASSERT_EQ(std::system(("mkdir -p '" + cls + "'").c_str()), 0);
    for (int i = 0; i < count; ++i) {
      cv::Mat m(37, 37, CV_8UC3);
      for (int y = 0; y < 37; ++y)
        for (int x = 0; x < 37; ++x)
          for (int c = 0; c < 3; ++c)
            m.at<cv::Vec3b>(y, x)[c] = static_cast<uint8_t>(rng_.next() % 60);
      const int cx = 10 + static_cast<int>(rng_.next() % 17);
      const int cy = 10 + static_cast<int>(rng_.next() % 17);
      for (int y = 0; y < 37; ++y)
        for (int x = 0; x < 37; ++x)
          if ((x - cx) * (x - cx) + (y - cy) * (y - cy) < 64)
            m.at<cv::Vec3b>(y, x)[2 - k % 3] = 240;  // BGR: red is channel 2
      ASSERT_TRUE(cv::imwrite(cls + "/img_" + std::to_string(i) + ".png", m));
    }
  }
  void TearDown() override {
    if (!dir_.empty()) std::system(("rm -rf '" + dir_ + "'").c_str());
  }
  // 18 training photos: 2 steps of 8 per epoch.
  std::string base(int size = 32) const {
    return kBin + " --data " + data_ + " --classes red,green,blue --size " +
           std::to_string(size) + " --batch 8 --images-per-epoch 16 --threads 1";
  }
  std::string dir_, data_;
  Rng rng_{17};
};

TEST_F(CaltechApp, TwoStepsAt32WriteTheDocumentedRowAndTheConfusionMatrix) {
  const std::string out = dir_ + "/r.csv", png = dir_ + "/cm.png";
  const testing::CommandResult r =
      run_command(base() + " --epochs 1 --seed 2 --out " + out + " --confusion " + png);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("caltech101: model caltech9, dataset photos-32px"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("16 images/epoch (2 steps)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("test confusion matrix"), std::string::npos) << r.output;
  const auto rows = read_csv(out);
  ASSERT_EQ(rows.size(), 2u) << slurp(out);
  const std::vector<std::string> cols = {
      "app",          "model",          "dataset",         "device",          "gpu",
      "threads",      "batch",          "epoch",           "train_loss",      "train_acc",
      "test_loss",    "test_acc",       "test_acc_red",    "test_acc_green",  "test_acc_blue",
      "peak_rss_mb",  "peak_device_mb", "loader_hidden_s", "loader_exposed_s", "seconds",
      "images_per_s", "git_rev",        "host",            "timestamp",       "skipped_files"};
  EXPECT_EQ(rows[0], cols);
  const std::vector<std::string>& row = rows[1];
  ASSERT_EQ(row.size(), cols.size());
  auto value = [&](const std::string& name) {
    return std::stod(row[static_cast<size_t>(std::find(cols.begin(), cols.end(), name) -
                                             cols.begin())]);
  };
  EXPECT_EQ(row[1], "caltech9");
  EXPECT_EQ(row[2], "photos-32px");
  EXPECT_EQ(row[6], "8");
  EXPECT_TRUE(std::isfinite(value("train_loss")) && value("train_loss") > 0) << row[8];
  EXPECT_TRUE(std::isfinite(value("test_loss")) && value("test_loss") > 0) << row[10];
  // Per-class accuracies over 6 test photos each, whose mean is the overall accuracy.
  double mean = 0;
  for (const char* c : {"test_acc_red", "test_acc_green", "test_acc_blue"}) {
    const double a = value(c);
    EXPECT_GE(a, 0.0);
    EXPECT_LE(a, 1.0);
    EXPECT_NEAR(a * 6, std::round(a * 6), 1e-4) << c;
    mean += a / 3;
  }
  EXPECT_NEAR(mean, value("test_acc"), 1e-5);
  EXPECT_GT(value("peak_rss_mb"), 10.0);
  EXPECT_EQ(value("peak_device_mb"), 0.0);  // the CPU
  EXPECT_GE(value("loader_hidden_s"), 0.0);
  EXPECT_GE(value("loader_exposed_s"), 0.0);
  EXPECT_EQ(row.back(), "skipped 0 of 36 files");
  const cv::Mat img = cv::imread(png);
  ASSERT_FALSE(img.empty()) << png;
  EXPECT_GT(img.cols, 200);
  EXPECT_GT(img.rows, 200);
}

// Augmentation draws, dropout masks and the data order all depend on (seed, epoch) only, and
// the prefetching loader starts each epoch afresh: stopping after epoch 1 and resuming gives
// epoch 2's checkpoint byte for byte.
TEST_F(CaltechApp, ResumeReachesTheSameWeightsAsAnUninterruptedRun) {
  const std::string common = base(16) + " --seed 5 --out " + dir_ + "/r.csv --confusion " +
                             dir_ + "/cm.png";
  const std::string a = dir_ + "/a.ckpt", b = dir_ + "/b.ckpt";
  testing::CommandResult r = run_command(common + " --epochs 2 --checkpoint " + a);
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_command(common + " --epochs 1 --checkpoint " + b);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(slurp(a), slurp(b));
  r = run_command(common + " --epochs 2 --resume --checkpoint " + b);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  const std::string sa = slurp(a), sb = slurp(b);
  EXPECT_GT(sa.size(), 1000u);
  EXPECT_TRUE(sa == sb) << "resumed checkpoint differs from the uninterrupted one";
  r = run_command(base(16) + " --images-per-epoch 8 --epochs 3 --resume --checkpoint " + b +
                  " --out " + dir_ + "/r.csv --confusion " + dir_ + "/cm.png");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("was made with images_per_epoch 16, this run has 8"),
            std::string::npos)
      << r.output;
}

// Issue 20: without --images-per-epoch an epoch is W4's 1,280 images when the split has them,
// else all of it (here 18), and the header says which; a batch larger than that is one batch of
// all of them. An explicit count larger than the split stays an error
// (BadInputFailsWithOneLineAndWritesNothing).
TEST_F(CaltechApp, DefaultsFitASmallFolder) {
  const std::string common = kBin + " --data " + data_ + " --classes red,green,blue --size 32 " +
                             "--threads 1 --epochs 1 --out " + dir_ + "/r.csv --confusion " +
                             dir_ + "/cm.png";
  testing::CommandResult r = run_command(common + " --batch 8");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("18 images/epoch (3 steps; all of them: the set has fewer than W4's "
                          "1280)"),
            std::string::npos)
      << r.output;
  r = run_command(common + " --batch 1000 --images-per-epoch 16");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("note: batch 1000 is larger than an epoch (16 images): each step "
                          "takes one batch of all 16"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("batch 16, 16 images/epoch (1 steps)"), std::string::npos)
      << r.output;
}

// Issue 20: the loader skips broken files, each named with its reason on the console; the
// same one-line summary is in every row's run metadata (skipped_files), for after the run.
TEST_F(CaltechApp, SkippedFilesAreSummedUpInTheCsv) {
  std::ofstream(data_ + "/red/empty.png");
  std::ofstream(data_ + "/green/notes.png") << "not an image";
  const std::string out = dir_ + "/r.csv";
  const testing::CommandResult r = run_command(base() + " --epochs 1 --out " + out +
                                               " --confusion " + dir_ + "/cm.png");
  ASSERT_EQ(r.status, 0) << r.output;
  const size_t at = r.output.find(": skipped 2 of 38 files: red/empty.png (empty file), ");
  ASSERT_NE(at, std::string::npos) << r.output;
  const std::string line = r.output.substr(at + 2, r.output.find('\n', at) - at - 2);
  EXPECT_NE(line.find("green/notes.png ("), std::string::npos) << line;
  // The field holds commas: read it with the CSV rules (quoted).
  const std::string text = slurp(out);
  const std::string last_row = text.substr(text.find('\n') + 1);
  const std::vector<std::string> fields = csv_split(last_row.substr(0, last_row.find('\n')));
  EXPECT_EQ(fields.back(), line);
}

// The DCGAN's photo judge (model zoo "photo64") trains in this app with the DCGAN's view of the
// photos (--center-crop on: the dataset is named -crop; --normalize half: [-1, 1]), with its own
// default batch and optimizer; --save-weights writes the trained weights alone: the same values
// as the checkpoint's, without the optimizer's state.
TEST_F(CaltechApp, PhotoJudgeTrainsWithTheDcgansViewAndSavesItsWeights) {
  const std::string out = dir_ + "/j.csv", ck = dir_ + "/j.ckpt", w = dir_ + "/j.weights";
  const testing::CommandResult r = run_command(
      kBin + " --data " + data_ + " --classes red,green,blue --model photo64 --size 64 " +
      "--center-crop on --normalize half --images-per-epoch 16 --threads 1 --epochs 1 --out " +
      out + " --checkpoint " + ck + " --save-weights " + w + " --confusion " + dir_ + "/j.png");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("caltech101: model photo64, dataset photos-64px-crop"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("batch 16, 16 images/epoch (1 steps"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(", adam lr 0.001,"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("RGB mean 0.500 0.500 0.500, std 0.500 0.500 0.500 (given)"),
            std::string::npos)
      << r.output;
  const auto rows = read_csv(out);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1][1], "photo64");
  Sequential a = make_photo_scorer(64, 3), b = make_photo_scorer(64, 3);
  load_checkpoint(ck, a);
  load_checkpoint(w, b, nullptr);
  const Tensor va = a.parameters().values(), vb = b.parameters().values();
  ASSERT_EQ(va.numel(), vb.numel());
  for (int64_t i = 0; i < va.numel(); ++i) ASSERT_EQ(va[i], vb[i]) << "parameter " << i;
  EXPECT_LT(slurp(w).size() * 2, slurp(ck).size());  // Adam's two slots are not in it
}

// Issue 20: a fresh run never replaces a checkpoint it did not write (run_loop.h); issue 24:
// nor a --save-init file (the initial weights).
TEST_F(CaltechApp, AFreshRunRefusesACheckpointItDidNotWrite) {
  const std::string ck = dir_ + "/trained.ckpt", out = dir_ + "/r.csv", png = dir_ + "/cm.png";
  std::ofstream(ck) << "a trained run";
  for (const auto& [flag, ways_out] :
       {std::pair<std::string, std::string>{"--checkpoint",
                                            "fresh run would replace it: --resume to continue "
                                            "it, name another path, or --overwrite to replace it"},
        {"--save-init", "run would replace it: name another path, or --overwrite to replace it"}}) {
    const testing::CommandResult r = run_command(base() + " --epochs 1 --out " + out +
                                                 " --confusion " + png + " " + flag + " " + ck);
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find("caltech101: error: " + flag + " " + ck +
                            " already exists and this " + ways_out),
              std::string::npos)
        << r.output;
    EXPECT_EQ(slurp(ck), "a trained run");
    EXPECT_FALSE(exists(out));
    EXPECT_FALSE(exists(png));
  }
}

TEST_F(CaltechApp, StepsTimeTrainingAndWriteNoResults) {
  const testing::CommandResult r = run_command("cd " + dir_ + " && " + base() + " --steps 5");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("step_ms model=caltech9 batch=8 threads=1 steps=3 median="),
            std::string::npos)
      << r.output;
  // Where the time went: set-up before the first step, the first block, the rest (on the CPU
  // a block is a step).
  EXPECT_NE(r.output.find("bench time: the first step began "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the first block "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(1 step), the other 4 steps "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("peak resident memory"), std::string::npos) << r.output;
  EXPECT_FALSE(exists(dir_ + "/runs"));
}

TEST_F(CaltechApp, BadInputFailsWithOneLineAndWritesNothing) {
  const std::string out = dir_ + "/out.csv", ck = dir_ + "/x.ckpt", png = dir_ + "/cm.png";
  const std::string tail =
      " --epochs 1 --out " + out + " --checkpoint " + ck + " --confusion " + png;
  auto expect_failure = [&](const std::string& args, const std::string& message) {
    // args last: they override tail (a repeated flag takes its last value).
    const testing::CommandResult r = run_command(kBin + " --threads 1" + tail + " " + args);
    EXPECT_NE(r.status, 0) << args;
    EXPECT_NE(r.output.find(message), std::string::npos) << args << "\n" << r.output;
    // The image folder's summary lines may come first; the error is one line, the last.
    const size_t at = r.output.find("caltech101: error: ");
    const size_t from = at == std::string::npos ? r.output.find("caltech101: ") : at;
    ASSERT_NE(from, std::string::npos) << r.output;
    EXPECT_EQ(std::count(r.output.begin() + static_cast<long>(from), r.output.end(), '\n'), 1)
        << r.output;
    EXPECT_FALSE(exists(out)) << args;
    EXPECT_FALSE(exists(ck)) << args;
    EXPECT_FALSE(exists(png)) << args;
  };
  expect_failure("--data " + dir_ + "/missing --size 32", "no such directory");
  expect_failure("--data " + data_ + " --size 32 --classes red,airplanes",
                 "no folder for class 'airplanes' (classes there: blue, green, red)");
  const std::string ok =
      "--data " + data_ + " --classes red,green,blue --batch 8 --images-per-epoch 16 ";
  expect_failure(ok + "--size 30", "--size 30: must be a multiple of 8");
  expect_failure(ok + "--size 32 --images-per-epoch 19",
                 "--images-per-epoch 19: the training split of " + data_ + " has 18 images");
  expect_failure(ok + "--size 32 --classes red,red", "class 'red' is listed twice");
  expect_failure(ok + "--size 32 --augment maybe", "--augment");
  expect_failure(ok + "--size 32 --optimizer rmsprop", "--optimizer");
  // W4 in bf16 runs on the GPU only: on the CPU one line, never a silent fp32 run
  expect_failure(ok + "--size 32 --precision bf16", "--precision bf16: the CPU has no bf16 path");
  expect_failure(ok + "--size 32 --confusion " + out, "same file");
}

// Issue 24: without --classes, a folder of the user's own class folders (here red, green, blue:
// not the study's six) trains on all of them, sorted, as torchvision's ImageFolder does, and
// the run header says so; label k is the k-th (the CSV's per-class columns in that order).
TEST_F(CaltechApp, AFolderOfOwnClassesTrainsOnThemSorted) {
  const std::string out = dir_ + "/r.csv";
  const testing::CommandResult r =
      run_command(kBin + " --data " + data_ + " --size 32 --batch 8 --images-per-epoch 16 " +
                  "--threads 1 --epochs 1 --out " + out + " --confusion " + dir_ + "/cm.png");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("caltech101: model caltech9, dataset photos-32px (" + data_ +
                          ": 18 train / 18 test, 3 classes (the folder's own, sorted: blue, "
                          "green, red; it lacks the study's six), 32x32)"),
            std::string::npos)
      << r.output;
  const auto rows = read_csv(out);
  ASSERT_EQ(rows.size(), 2u) << slurp(out);
  const std::vector<std::string>& cols = rows[0];
  const auto at = [&](const std::string& c) {
    return std::find(cols.begin(), cols.end(), c) - cols.begin();
  };
  ASSERT_LT(at("test_acc_red"), static_cast<long>(cols.size()));
  EXPECT_LT(at("test_acc_blue"), at("test_acc_green"));
  EXPECT_LT(at("test_acc_green"), at("test_acc_red"));
  EXPECT_EQ(rows[1][2], "photos-32px");
}

// A folder that has the study's six classes (and others) trains on the six, in the study's
// order, without a note; the dataset is named as a subset of the folder's classes.
TEST_F(CaltechApp, AFolderWithTheSixTrainsOnTheSix) {
  const std::string six = dir_ + "/caltech";
  const char* names[6] = {"airplanes", "Motorbikes", "Faces_easy", "watch", "Leopards", "bonsai"};
  for (int k = 0; k < 6; ++k) write_class(six + "/" + names[k], k, 4);
  write_class(six + "/cats", 0, 4);
  const testing::CommandResult r =
      run_command(kBin + " --data " + six + " --size 32 --batch 4 --images-per-epoch 4 " +
                  "--threads 1 --epochs 1 --out " + dir_ + "/r.csv --confusion " + dir_ +
                  "/cm.png");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("dataset caltech-6cls-32px (" + six +
                          ": 12 train / 12 test, 6 classes, 32x32)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("airplanes 2/2, Motorbikes 2/2, Faces_easy 2/2, watch 2/2, "
                          "Leopards 2/2, bonsai 2/2"),
            std::string::npos)
      << r.output;
}

// Issue 24: a folder of the user's own that cannot make a classifier fails in one line naming
// the problem, before anything is written: no class folders, one class folder, a class with
// no readable image.
TEST_F(CaltechApp, AnOwnFolderThatCannotTrainFailsWithOneLine) {
  const std::string out = dir_ + "/out.csv", png = dir_ + "/cm.png";
  auto expect_failure = [&](const std::string& data, const std::string& message) {
    const testing::CommandResult r =
        run_command(kBin + " --threads 1 --size 32 --epochs 1 --data " + data + " --out " + out +
                    " --confusion " + png);
    EXPECT_EQ(r.status, 1) << data;
    const size_t at = r.output.find("caltech101: error: ");
    ASSERT_NE(at, std::string::npos) << r.output;
    EXPECT_NE(r.output.find(message, at), std::string::npos) << data << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin() + static_cast<long>(at), r.output.end(), '\n'), 1)
        << r.output;
    EXPECT_FALSE(exists(out)) << data;
    EXPECT_FALSE(exists(png)) << data;
  };
  const std::string empty = dir_ + "/empty", one = dir_ + "/one";
  const std::string unreadable = dir_ + "/unreadable";
  ASSERT_EQ(std::system(("mkdir -p '" + empty + "/.hidden'").c_str()), 0);
  std::ofstream(empty + "/notes.txt") << "no class folders here";
  expect_failure(empty, "image folder " + empty + ": no class subfolders (expected " + empty +
                            "/<class>/<images>)");
  write_class(one + "/cats", 0, 4);
  expect_failure(one, "--data " + one + ": one class folder ('cats'): a classifier needs two or "
                      "more");
  write_class(unreadable + "/cats", 0, 4);
  ASSERT_EQ(std::system(("mkdir -p '" + unreadable + "/dogs'").c_str()), 0);
  std::ofstream(unreadable + "/dogs/a.jpg") << "not a photo";
  expect_failure(unreadable, "image folder " + unreadable + ": class 'dogs' has no readable "
                             "image (skipped: dogs/a.jpg (");
  expect_failure(data_ + " --classes red", "--classes red: one class: a classifier needs two or "
                                           "more");
}

// The largest |a_i - b_i| over every parameter of two checkpoints of caltech9 at 32x32, 3 classes.
double max_weight_difference(const std::string& a, const std::string& b) {
  Sequential ma = make_caltech_model(32, 3), mb = make_caltech_model(32, 3);
  return testing::max_checkpoint_difference(a, ma, b, mb);
}

// scripts/twins/torch_reference.py caltech rebuilds pdnn's initial weights exactly, reads the same
// photos into the same split (PNGs at the cache size: decoded and cached identically), and
// augments with pdnn's draws and resampling: with the same data order, dropout masks and
// optimizer, the two runs differ only by float32 rounding (summation orders).
//
// The optimizer is SGD, so that the difference has a bound: after T steps of w -= lr * g a
// weight differs by lr * sum_t (g_t - g'_t), and each gradient element is a float32 sum of at
// most n = 8,192 terms (a convolution weight's gradient at batch 8 over 32x32), so it differs
// by at most gamma = n * u = 4.9e-4 of the sum of those terms' sizes (u = 2^-24; the change of
// g between the two weight vectors, lr * H * dw, is of second order while lr is small: at lr
// 0.1 a ReLU or max-pool choice flips and the difference grows 300-fold, hence lr 0.01). The
// weights' difference is then below gamma times their movement max |w_T - w_0| (measured on an
// AVX-512 Xeon, 4 steps: 3.7e-9 against a bound of 7e-7, movement 1.4e-3), and the losses,
// float32 sums of the same kind, within gamma of each other (measured: equal to 6 digits).
// Not W4's AdaGrad: its first step is lr * g / |g|,
// so a weight whose gradient is near 0 moves by +-lr on a sign that rounding decides, and the
// losses then agreed or not depending on the CPU (2.2e-3 relative on one AVX-512 machine
// against a tolerance of 2e-3).
TEST_F(CaltechApp, TorchReferenceFollowsTheRun) {
  const std::string py = "/usr/bin/python3";
  if (run_command(py + " -c 'import torch, PIL'").status != 0 &&
      run_command(py + " -c 'import torch, cv2'").status != 0)
    GTEST_SKIP() << "no torch with PIL or cv2 for " << py << " (scripts/tools/install_deps.sh torch)";
  const std::string csv = dir_ + "/r.csv", init = dir_ + "/init.ckpt", fin = dir_ + "/fin.ckpt";
  const std::string args = " --data " + data_ +
                           " --classes red,green,blue --size 32 --batch 8 --images-per-epoch 16 "
                           "--epochs 2 --threads 1 --seed 3 --optimizer sgd --lr 0.01 --out " +
                           csv;
  testing::CommandResult r = run_command(kBin + args + " --save-init " + init + " --checkpoint " +
                                         fin + " --confusion " + dir_ + "/cm.png");
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_command(py + " " + PDNN_SOURCE_DIR + "/scripts/twins/torch_reference.py caltech" + args +
                  " --init-checkpoint " + init + " --compare-checkpoint " + fin);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("initial weights: max |torch - pdnn| over all parameters = 0.000e+00"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("red 6/6, green 6/6, blue 6/6 = 18/18"), std::string::npos)
      << r.output;
  const double gamma = 8192 * 0x1p-24;
  const double moved = max_weight_difference(init, fin);
  EXPECT_GT(moved, 5e-4);  // the runs trained: there is something to compare
  const std::string tag = "final weights: max |torch - pdnn| over all parameters = ";
  const size_t at = r.output.find(tag);
  ASSERT_NE(at, std::string::npos) << r.output;
  EXPECT_LE(std::stod(r.output.substr(at + tag.size())), gamma * moved) << r.output;
  // One header: torch's rows have pdnn's columns (its skipped_files empty, a trailing empty
  // field that read_csv's split would drop).
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(slurp(csv));
  for (std::string line; std::getline(lines, line);) rows.push_back(csv_split(line));
  ASSERT_EQ(rows.size(), 5u) << slurp(csv);
  for (size_t i : {1u, 2u}) {
    const auto &p = rows[i], &t = rows[i + 2];
    EXPECT_EQ(p[0], "pdnn");
    EXPECT_EQ(t[0], "torch");
    ASSERT_EQ(t.size(), rows[0].size());
    for (size_t c = 1; c < 8; ++c)
      if (c != 3 && c != 4) EXPECT_EQ(t[c], p[c]) << rows[0][c];  // model .. epoch
    for (size_t c : {8u, 10u}) {  // train and test loss
      const double a = std::stod(p[c]), b = std::stod(t[c]);
      EXPECT_NEAR(b, a, gamma * a) << rows[0][c] << " of epoch " << p[7];
    }
  }
}

// The twin's --precision bf16 is torch.autocast("cuda"): on the CPU it is refused in one line,
// before the photos are read.
TEST_F(CaltechApp, TorchReferenceRefusesBf16OnTheCpu) {
  const testing::CommandResult r =
      run_command("/usr/bin/python3 " + std::string(PDNN_SOURCE_DIR) +
                  "/scripts/twins/torch_reference.py caltech --data " + data_ +
                  " --precision bf16 --out " + dir_ + "/r.csv");
  if (r.output.find("torch_reference: no torch for") == 0)  // its own line without torch
    GTEST_SKIP() << r.output;
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(r.output, "torch_reference: --precision bf16: the CPU runs fp32, as pdnn's (tf32 and "
                      "bf16 are for --device cuda: bf16 is torch.autocast(\"cuda\"), which "
                      "needs a GPU)\n");
  EXPECT_FALSE(exists(dir_ + "/r.csv"));
}

// scripts/report/accuracy_summary.py on W4-like runs of two precisions (issue 32): grouped by
// framework and the precision the file name carries, with pdnn bf16 - pdnn fp32 and pdnn bf16 -
// PyTorch bf16 in points, of the means and paired over the seeds, against the 1-point target;
// a twin's file whose name and gpu column disagree on the precision, and a seed in two folders,
// are refused.
TEST_F(CaltechApp, AccuracySummaryComparesBf16WithFp32AndPyTorch) {
  const std::string acc = dir_ + "/accuracy", old = dir_ + "/old";
  ASSERT_EQ(std::system(("mkdir -p '" + acc + "' '" + old + "'").c_str()), 0);
  auto write = [](const std::string& path, const std::string& app, const std::string& gpu,
                  double final_acc) {
    std::ofstream f(path);
    f << "app,model,dataset,device,gpu,batch,epoch,test_acc,seconds\n"
      << app << ",caltech9,photos,cuda,\"" << gpu << "\",64,1,0.5,0.5\n"
      << app << ",caltech9,photos,cuda,\"" << gpu << "\",64,2," << final_acc << ",0.5\n";
  };
  const std::string bf16 = "H100, cc 9.0 | bf16, autocast bfloat16 + channels_last";
  write(old + "/pdnn-cuda_caltech9_s1.csv", "pdnn", "H100", 0.900);
  write(old + "/pdnn-cuda_caltech9_s2.csv", "pdnn", "H100", 0.920);
  write(acc + "/pdnn-cuda-bf16_caltech9_s1.csv", "pdnn", "H100", 0.890);
  write(acc + "/pdnn-cuda-bf16_caltech9_s2.csv", "pdnn", "H100", 0.900);
  write(acc + "/torch-cuda-bf16_caltech9_s1.csv", "torch", bf16, 0.890);
  write(acc + "/torch-cuda-bf16_caltech9_s2.csv", "torch", bf16, 0.894);
  const std::string summary = "/usr/bin/python3 " + std::string(PDNN_SOURCE_DIR) +
                              "/scripts/report/accuracy_summary.py " + acc + " " + old;
  testing::CommandResult r = run_command(summary);
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* line :
       {"caltech9 on photos, 2 epochs, cuda: pdnn bf16 - pdnn fp32: -1.50 points (means 89.50 "
        "+- 0.71 over seeds 1 2, 91.00 +- 1.41 over 1 2); paired over seeds 1 2: -1.50 +- 0.71 "
        "(-1.00 -2.00); target |difference| <= 1: missed",
        "caltech9 on photos, 2 epochs, cuda: pdnn bf16 - PyTorch bf16: +0.30 points (means "
        "89.50 +- 0.71 over seeds 1 2, 89.20 +- 0.28 over 1 2); paired over seeds 1 2: +0.30 "
        "+- 0.42 (+0.00 +0.60); target |difference| <= 1: met"})
    EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
  const auto rows = read_csv(acc + "/summary.csv");  // into the first folder
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0][6], "precision");
  EXPECT_EQ(rows[1][4] + " " + rows[1][6] + " " + rows[1][8], "pdnn bf16 89.50");
  EXPECT_EQ(rows[1][11], "bf16-fp32 -1.50");
  EXPECT_EQ(rows[2][4] + " " + rows[2][6] + " " + rows[2][8], "pdnn fp32 91.00");
  EXPECT_EQ(rows[3][4] + " " + rows[3][6] + " " + rows[3][8], "torch bf16 89.20");
  EXPECT_EQ(rows[3][11], "pdnn-torch +0.30");
  // A bf16 twin run under an fp32 name, and pdnn fp32's seed 1 in both folders.
  write(acc + "/torch-cuda_caltech9_s3.csv", "torch", bf16, 0.9);
  r = run_command(summary);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("torch-cuda_caltech9_s3.csv: its name says fp32, its gpu column bf16: "
                          "rename the file (<app>-<device>-bf16_...)"),
            std::string::npos)
      << r.output;
  std::remove((acc + "/torch-cuda_caltech9_s3.csv").c_str());
  write(acc + "/pdnn-cuda_caltech9_s1.csv", "pdnn", "H100", 0.9);
  r = run_command(summary);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("accuracy_summary: pdnn cuda fp32 seed 1 twice: " + acc +
                          "/pdnn-cuda_caltech9_s1.csv and " + old +
                          "/pdnn-cuda_caltech9_s1.csv (summarise one of them)"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace pdnn
#endif
