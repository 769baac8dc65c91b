// End to end: build/bin/segment (the U-Net) on the shipped pair folder datasets/ccp-200 at a
// tiny size (32 px, base 4, depth 2): three short epochs of two steps write the documented rows
// (IoU and Dice per class consistent with each other and with their means), the training loss
// falls, and each epoch's overlay PNG has the documented layout; bad flags and data fail in
// one line and write nothing. The PyTorch twin (scripts/twins/torch_reference.py segment) follows
// a run from the same initial weights, data order and augmentation (skipped without torch).
#include <gtest/gtest.h>

#ifdef PDNN_HAVE_OPENCV
#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/context.h"
#include "core/rng.h"
#include "data/image_grid.h"
#include "ops/metrics.h"
#include "testing.h"
#include "workloads/segmentation/segmentation_metrics.h"
#include "workloads/segmentation/unet.h"

namespace pdnn {
namespace {

const std::string kBin = std::string(PDNN_BIN_DIR) + "/segment";
const std::string kData = std::string(PDNN_SOURCE_DIR) + "/datasets/ccp-200";

class SegmentApp : public testing::TempDirTest {
 protected:
  void SetUp() override {
    if (!testing::exists(kBin)) GTEST_SKIP() << kBin << " not built";
    testing::TempDirTest::SetUp();
  }
  std::string base() const {
    return kBin + " --data " + kData +
           " --size 32 --base 4 --depth 2 --batch 8 --images-per-epoch 16 --threads 1 "
           "--overlays 2 --lr 0.01";
  }
};

TEST_F(SegmentApp, ShortRunWritesRowsOverlaysAndTheLossFalls) {
  const std::string out = path("r.csv"), ov = path("ov");
  const testing::CommandResult r =
      testing::run_command(base() + " --epochs 3 --seed 3 --out " + out + " --overlay-dir " + ov);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("segment: model unet_b4_d2, dataset ccp-person-200-32px"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("16 images/epoch (2 steps)"), std::string::npos) << r.output;
  const auto rows = testing::read_csv(out);
  ASSERT_EQ(rows.size(), 4u) << testing::slurp(out);
  const std::vector<std::string> cols = {
      "app",           "model",           "dataset",          "device",
      "gpu",           "threads",         "batch",            "epoch",
      "train_loss",    "train_pixel_acc", "test_loss",        "test_pixel_acc",
      "test_iou_background", "test_iou_person", "test_dice_background", "test_dice_person",
      "test_mean_iou", "test_mean_dice",  "peak_rss_mb",      "peak_device_mb",
      "seconds",       "images_per_s",    "git_rev",          "host",
      "timestamp"};
  EXPECT_EQ(rows[0], cols);
  auto value = [&](size_t row, const std::string& name) {
    const auto at = std::find(cols.begin(), cols.end(), name) - cols.begin();
    return std::stod(rows[row].at(static_cast<size_t>(at)));
  };
  for (size_t e = 1; e <= 3; ++e) {
    SCOPED_TRACE("epoch " + std::to_string(e));
    ASSERT_EQ(rows[e].size(), cols.size());
    EXPECT_EQ(rows[e][1], "unet_b4_d2");
    EXPECT_EQ(rows[e][7], std::to_string(e));
    for (const char* c : {"train_loss", "test_loss"}) EXPECT_GT(value(e, c), 0.0) << c;
    for (const char* c : {"train_pixel_acc", "test_pixel_acc"}) {
      EXPECT_GE(value(e, c), 0.0) << c;
      EXPECT_LE(value(e, c), 1.0) << c;
    }
    // Per class Dice = 2 IoU / (1 + IoU) (both from the same counts), and the means are the
    // classes' means (both classes are in the test masks).
    for (const char* k : {"background", "person"}) {
      const double iou = value(e, std::string("test_iou_") + k);
      EXPECT_GE(iou, 0.0);
      EXPECT_LE(iou, 1.0);
      EXPECT_NEAR(value(e, std::string("test_dice_") + k), 2 * iou / (1 + iou), 2e-6) << k;
    }
    EXPECT_NEAR(value(e, "test_mean_iou"),
                (value(e, "test_iou_background") + value(e, "test_iou_person")) / 2, 2e-6);
    EXPECT_NEAR(value(e, "test_mean_dice"),
                (value(e, "test_dice_background") + value(e, "test_dice_person")) / 2, 2e-6);
    EXPECT_GT(value(e, "peak_rss_mb"), 10.0);
    EXPECT_EQ(value(e, "peak_device_mb"), 0.0);  // the CPU
    EXPECT_GT(value(e, "seconds"), 0.0);
    // Two overlays a epoch: a title band of 40 px, then rows of 128 px tiles (32 px x 4) with
    // 4 px gaps, three columns.
    int w = 0, h = 0;
    const std::string png = ov + "/epoch_00" + std::to_string(e) + ".png";
    ASSERT_TRUE(png_size(png, &w, &h)) << png;
    EXPECT_EQ(w, 3 * (128 + 4) + 4);
    EXPECT_EQ(h, 40 + 2 * (128 + 4) + 4);
  }
  // Six Adam steps at lr 0.01 from a loss near log 2 (two classes, PyTorch's initialisation):
  // the running training loss of the third epoch is below the first's, and so is the test loss.
  EXPECT_LT(value(3, "train_loss"), value(1, "train_loss"));
  EXPECT_LT(value(3, "test_loss"), value(1, "test_loss"));
  EXPECT_NEAR(value(1, "train_loss"), std::log(2.0), 0.2);
  // No temporary files left beside the outputs.
  const testing::CommandResult ls = testing::run_command("ls -a " + ov + " " + dir_);
  EXPECT_EQ(ls.output.find(".tmp"), std::string::npos) << ls.output;
}

// --tile: the model trains and is scored on each image's grid of tiles (issue 35's whole image
// against its tiles). One tile of the whole side is the plain run, value for value; tiles of
// half the side are four an image, counted in the batch and the epoch, and named in the data
// set's name (the rows' and the outputs').
TEST_F(SegmentApp, TilesAreTheImagesGridAndOneTileIsThePlainRun) {
  const std::string a = path("plain.csv"), b = path("one_tile.csv"), c = path("quarters.csv");
  const std::string run = base() + " --epochs 1 --seed 5 --overlays 0 --out ";
  ASSERT_EQ(testing::run_command(run + a).status, 0);
  const testing::CommandResult one = testing::run_command(run + b + " --tile 32");
  ASSERT_EQ(one.status, 0) << one.output;
  const auto ra = testing::read_csv(a), rb = testing::read_csv(b);
  ASSERT_EQ(ra.size(), 2u);
  ASSERT_EQ(rb.size(), 2u);
  const auto col = [&](const std::string& name) {
    return static_cast<size_t>(std::find(ra[0].begin(), ra[0].end(), name) - ra[0].begin());
  };
  for (const char* k : {"train_loss", "test_loss", "test_pixel_acc", "test_dice_person", "test_mean_iou"})
    EXPECT_EQ(ra[1].at(col(k)), rb[1].at(col(k))) << k;
  EXPECT_EQ(rb[1].at(col("dataset")), "ccp-person-200-32px-tiles32");
  const testing::CommandResult q = testing::run_command(run + c + " --tile 16");
  ASSERT_EQ(q.status, 0) << q.output;
  EXPECT_NE(q.output.find("dataset ccp-person-200-32px-tiles16"), std::string::npos) << q.output;
  EXPECT_NE(q.output.find("64 tiles/epoch (8 steps)"), std::string::npos) << q.output;
  EXPECT_NE(q.output.find("each 32x32 image is 4 tiles of 16x16"), std::string::npos) << q.output;
  const auto rc = testing::read_csv(c);
  ASSERT_EQ(rc.size(), 2u);
  for (const char* k : {"test_dice_person", "test_mean_dice"}) {
    const double v = std::stod(rc[1].at(col(k)));
    EXPECT_GE(v, 0.0) << k;
    EXPECT_LE(v, 1.0) << k;
  }
}

// --loss dice: the run says so, and its train_loss column is the Dice loss trained on (1 - the
// batch's mean soft Dice: within (0, 1)), falling; the test loss stays the cross-entropy.
TEST_F(SegmentApp, DiceLossTrainsAndIsTheTrainLoss) {
  const std::string out = path("d.csv");
  const testing::CommandResult r = testing::run_command(
      base() + " --epochs 3 --seed 3 --loss dice --overlays 0 --out " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("(2 steps), loss dice, "), std::string::npos) << r.output;
  const auto rows = testing::read_csv(out);
  ASSERT_EQ(rows.size(), 4u) << testing::slurp(out);
  const auto at = std::find(rows[0].begin(), rows[0].end(), "train_loss") - rows[0].begin();
  std::vector<double> loss;
  for (size_t e = 1; e <= 3; ++e) {
    loss.push_back(std::stod(rows[e].at(static_cast<size_t>(at))));
    EXPECT_GT(loss.back(), 0.0) << "epoch " << e;
    EXPECT_LT(loss.back(), 1.0) << "epoch " << e;
  }
  EXPECT_LT(loss[2], loss[0]);
}

TEST_F(SegmentApp, BadFlagsAndDataFailInOneLineAndWriteNothing) {
  const std::string out = path("out.csv"), ov = path("ov");
  auto expect_failure = [&](const std::string& args, const std::string& message) {
    const testing::CommandResult r = testing::run_command(
        base() + " --epochs 1 --out " + out + " --overlay-dir " + ov + " " + args);
    EXPECT_NE(r.status, 0) << args;
    const size_t at = r.output.find("segment: ");
    ASSERT_NE(at, std::string::npos) << r.output;
    const std::string line = r.output.substr(at);
    EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1) << args << "\n" << r.output;
    EXPECT_NE(line.find(message), std::string::npos) << args << "\n" << r.output;
    EXPECT_FALSE(testing::exists(out)) << args;
    EXPECT_FALSE(testing::exists(ov)) << args;
  };
  expect_failure("--size 30", "--size 30: must be a multiple of 4");
  expect_failure("--classes 5", "--classes 5: " + kData + " has mask sets of 2 (masks/), 59 (masks59/) classes");
  expect_failure("--data " + path("nothing"), "no such folder");
  expect_failure("--images-per-epoch 1000", "--images-per-epoch 1000: the training split");
  expect_failure("--base 0", "--base");
  expect_failure("--depth 9", "--depth");
  expect_failure("--lr -1", "--lr");
  expect_failure("--loss focal", "--loss");
  expect_failure("--device gpu", "--device");
  expect_failure("--tile 24", "--tile 24: must divide --size 32 and be a multiple of 4");
  expect_failure("--tile 2", "--tile 2: must divide --size 32 and be a multiple of 4");
  // A pair folder with a mask of the wrong size: the loader names the file.
  mkdir("pairs/images");
  mkdir("pairs/masks");
  testing::run_command("cp " + kData + "/images/0001.jpg " + path("pairs/images/a.jpg"));
  spit("pairs/masks/classes.txt", "background\nperson\n");
  spit("pairs/train.txt", "a\n");
  spit("pairs/test.txt", "");
  testing::run_command("cp " + kData + "/masks/0006.png " + path("pairs/masks/a.png"));
  expect_failure("--data " + path("pairs"), "masks/a.png: 256x385 but its photo is 256x387");
}

// A pair folder of the first `train` training and `test` test pairs of ccp-200 with the photos
// as 37x37 PNGs (the cache side of --size 32, so both frameworks cache the pixels as written)
// and the masks nearest-neighbour at the same size.
void write_small_pairs(const std::string& dir, int train, int test) {
  ASSERT_EQ(std::system(("mkdir -p '" + dir + "/images' '" + dir + "/masks'").c_str()), 0);
  std::ofstream(dir + "/masks/classes.txt") << "background\nperson\n";
  const std::string lists[2] = {"train.txt", "test.txt"};
  const int counts[2] = {train, test};
  for (int l = 0; l < 2; ++l) {
    std::ifstream in(kData + "/" + lists[l]);
    std::ofstream out(dir + "/" + lists[l]);
    std::string id;
    for (int i = 0; i < counts[l] && std::getline(in, id); ++i) {
      cv::Mat photo = cv::imread(kData + "/images/" + id + ".jpg", cv::IMREAD_COLOR), small;
      cv::Mat mask = cv::imread(kData + "/masks/" + id + ".png", cv::IMREAD_UNCHANGED), m37;
      ASSERT_FALSE(photo.empty() || mask.empty()) << id;
      cv::resize(photo, small, cv::Size(37, 37), 0, 0, cv::INTER_AREA);
      cv::resize(mask, m37, cv::Size(37, 37), 0, 0, cv::INTER_NEAREST);
      ASSERT_TRUE(cv::imwrite(dir + "/images/" + id + ".png", small));
      ASSERT_TRUE(cv::imwrite(dir + "/masks/" + id + ".png", m37));
      out << id << "\n";
    }
  }
}

// The largest |a_i - b_i| over the parameters of two checkpoints of unet_b4_d2 (batchnorm as
// given).
double max_weight_difference(const std::string& a, const std::string& b, bool batchnorm) {
  UNetOptions u;
  u.base = 4;
  u.depth = 2;
  u.batchnorm = batchnorm;
  Model ma = make_unet(u), mb = make_unet(u);
  return testing::max_checkpoint_difference(a, ma, b, mb);
}

double after(const std::string& text, const std::string& tag) {
  const size_t at = text.find(tag);
  return at == std::string::npos ? -1.0 : std::stod(text.substr(at + tag.size()));
}

// scripts/twins/torch_reference.py segment rebuilds pdnn's U-Net with its initial weights
// exactly, reads the same pairs into the same split and normalisation, and draws pdnn's data
// order and augmentation (the masks by pdnn's own arithmetic, the photos resampled by
// grid_sample): with SGD the two runs differ only by float32 rounding. The bound is
// CaltechApp.TorchReferenceFollowsTheRun's: a gradient element is a float32 sum of at most
// n = 4,096 terms (a convolution weight's at batch 4 over 32x32), so after T steps of
// w -= lr g the weights differ by at most gamma = n u (u = 2^-24) times their movement
// max |w_T - w_0|, and the losses, sums of the same kind, by gamma of their size (measured on
// an AVX-512 EPYC, 4 steps: 7.5e-9 against a bound of 9.0e-7, movement 3.7e-3; the losses and
// scores equal to 6 digits). Not Adam, the app's default: its first step is lr g / |g|, so a weight with a
// gradient near 0 moves by +-lr on a sign that rounding decides. A pixel's predicted class
// depends on the sign of a logit difference, which rounding may flip where it is within
// rounding of 0: the pixel accuracies and scores are allowed two such pixels.
// Also: the BatchNorm variant's initial weights and one epoch, and the twin's step timer
// (--steps) on the CPU, its row appended to pdnn's --bench-csv file (same header).
TEST_F(SegmentApp, TorchReferenceFollowsTheRun) {
  const std::string py = "/usr/bin/python3";
  if (testing::run_command(py + " -c 'import torch, numpy, PIL'").status != 0 &&
      testing::run_command(py + " -c 'import torch, numpy, cv2'").status != 0)
    GTEST_SKIP() << "no torch with PIL or cv2 for " << py << " (scripts/tools/install_deps.sh torch)";
  const std::string data = path("pairs"), csv = path("r.csv"), init = path("init.ckpt"),
                    fin = path("fin.ckpt"), twin = py + " " + PDNN_SOURCE_DIR +
                                                    "/scripts/twins/torch_reference.py segment";
  write_small_pairs(data, 12, 4);
  const std::string args = " --data " + data +
                           " --size 32 --base 4 --depth 2 --batch 4 --images-per-epoch 8 "
                           "--epochs 2 --threads 1 --seed 3 --optimizer sgd --lr 0.01";
  testing::CommandResult r = testing::run_command(kBin + args + " --overlays 0 --out " + csv +
                                                  " --save-init " + init + " --checkpoint " + fin);
  ASSERT_EQ(r.status, 0) << r.output;
  r = testing::run_command(twin + args + " --out " + csv + " --init-checkpoint " + init +
                           " --compare-checkpoint " + fin);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(after(r.output, "initial weights: max |torch - pdnn| over all parameters = "), 0.0)
      << r.output;
  EXPECT_NE(r.output.find("16 pairs (12 train, 4 test), 2 classes, decoded to 37x37"),
            std::string::npos)
      << r.output;
  const double gamma = 4096 * 0x1p-24;
  const double moved = max_weight_difference(init, fin, false);
  EXPECT_GT(moved, 1e-4);  // the runs trained: there is something to compare
  const double final_diff =
      after(r.output, "final weights: max |torch - pdnn| over all parameters = ");
  EXPECT_GE(final_diff, 0.0) << r.output;
  EXPECT_LE(final_diff, gamma * moved) << r.output;
  // One header: torch's rows have pdnn's columns.
  const auto rows = testing::read_csv(csv);
  ASSERT_EQ(rows.size(), 5u) << testing::slurp(csv);
  const auto& cols = rows[0];
  auto col = [&](const std::string& name) {
    return static_cast<size_t>(std::find(cols.begin(), cols.end(), name) - cols.begin());
  };
  const double pixels[2] = {8 * 32 * 32, 4 * 32 * 32};  // an epoch's training and test pixels
  for (size_t i : {1u, 2u}) {
    const auto &p = rows[i], &t = rows[i + 2];
    SCOPED_TRACE("epoch " + p[7]);
    EXPECT_EQ(p[0], "pdnn");
    EXPECT_EQ(t[0], "torch");
    ASSERT_EQ(t.size(), cols.size());
    for (size_t c = 1; c < 8; ++c)
      if (c != 3 && c != 4) EXPECT_EQ(t[c], p[c]) << cols[c];  // model .. epoch
    for (const char* c : {"train_loss", "test_loss"}) {
      const double a = std::stod(p[col(c)]), b = std::stod(t[col(c)]);
      EXPECT_NEAR(b, a, gamma * a) << c;
    }
    for (const char* c : {"train_pixel_acc", "test_pixel_acc", "test_iou_person",
                          "test_dice_person", "test_mean_dice"}) {
      const double n = std::string(c) == "train_pixel_acc" ? pixels[0] : pixels[1];
      EXPECT_NEAR(std::stod(t[col(c)]), std::stod(p[col(c)]), 2 * 2 / n) << c;
    }
  }

  // The accuracy runs' settings (scripts/gpu/runners/segment.sh): Adam 1e-3, the app's default,
  // with the cross-entropy and augmentation as above, four steps. Adam's update is
  // lr m^ / (sqrt(v^) + eps), m^ and v^ averages of the gradients and of their squares: with
  // each gradient element within gamma of the other framework's, relatively (as the bound
  // above takes it), m^ and sqrt(v^) are each within gamma, the update within 2 gamma of its
  // size, and that size at most lr |m^| / sqrt(v^) <= 1.01 lr over the first four steps
  // (Cauchy-Schwarz, beta1 0.9, beta2 0.999): the weights within 2.02 gamma T lr after T steps
  // (measured on an AVX-512 EPYC: 4.8e-8 against 2.0e-6 at this seed, at most 0.22 of the bound
  // over seeds 1-6). Over more steps rounding grows until the runs part, pdnn against itself at
  // 1 and 2 threads as much as against the twin (results/README.md, the U-Net's accuracy).
  const std::string adam = " --data " + data +
                           " --size 32 --base 4 --depth 2 --batch 4 --images-per-epoch 8 "
                           "--epochs 2 --threads 1 --seed 3";
  const std::string a_csv = path("adam.csv"), a_init = path("adam_init.ckpt"),
                    a_fin = path("adam_fin.ckpt");
  r = testing::run_command(kBin + adam + " --overlays 0 --out " + a_csv + " --save-init " +
                           a_init + " --checkpoint " + a_fin);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("adam lr 0.001"), std::string::npos) << r.output;
  r = testing::run_command(twin + adam + " --out " + a_csv + " --init-checkpoint " + a_init +
                           " --compare-checkpoint " + a_fin + " --eval-checkpoint " + a_fin);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("adam lr 0.001"), std::string::npos) << r.output;
  EXPECT_EQ(after(r.output, "initial weights: max |torch - pdnn| over all parameters = "), 0.0)
      << r.output;
  EXPECT_GT(max_weight_difference(a_init, a_fin, false), 1e-3);  // four steps of about lr
  const double adam_diff =
      after(r.output, "final weights: max |torch - pdnn| over all parameters = ");
  EXPECT_GE(adam_diff, 0.0) << r.output;
  EXPECT_LE(adam_diff, 2.02 * gamma * 4 * 1e-3) << r.output;
  // The metric: the twin scores pdnn's final weights (--eval-checkpoint, after its own epochs)
  // as pdnn's last row does (the same forward up to rounding, the same counts and formulas;
  // SegmentTwin.ScoresLikePdnn pins the formulas on given logits).
  const auto a_rows = testing::read_csv(a_csv);
  ASSERT_EQ(a_rows.size(), 5u) << testing::slurp(a_csv);
  const auto& last = a_rows[2];  // pdnn's epoch 2
  ASSERT_EQ(last[0], "pdnn");
  const double test_loss = std::stod(last[col("test_loss")]);
  const size_t eval_at = r.output.find("\neval " + a_fin + ": ");
  ASSERT_NE(eval_at, std::string::npos) << r.output;
  const std::string scored = r.output.substr(eval_at);
  EXPECT_NEAR(after(scored, " test loss "), test_loss, gamma * test_loss) << r.output;
  for (const char* c : {"pixel_acc", "dice_background", "dice_person", "mean_dice"}) {
    const std::string column = std::string(c) == "pixel_acc" ? "test_pixel_acc"
                                                             : std::string("test_") + c;
    EXPECT_NEAR(after(scored, std::string(" ") + c + " "), std::stod(last[col(column)]),
                2 * 2 / pixels[1])
        << c << "\n" << r.output;
  }

  // BatchNorm: the same initial weights (convolutions without bias), one epoch alike.
  const std::string bn = " --data " + data +
                         " --size 32 --base 4 --depth 2 --batch 4 --images-per-epoch 4 --epochs 1 "
                         "--threads 1 --seed 5 --optimizer sgd --lr 0.01 --batchnorm on";
  r = testing::run_command(kBin + bn + " --overlays 0 --out " + path("bn.csv") + " --save-init " +
                           path("bn_init.ckpt") + " --checkpoint " + path("bn_fin.ckpt"));
  ASSERT_EQ(r.status, 0) << r.output;
  r = testing::run_command(twin + bn + " --out " + path("bn.csv") + " --init-checkpoint " +
                           path("bn_init.ckpt") + " --compare-checkpoint " + path("bn_fin.ckpt"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(after(r.output, "initial weights: max |torch - pdnn| over all parameters = "), 0.0)
      << r.output;
  EXPECT_LE(after(r.output, "final weights: max |torch - pdnn| over all parameters = "),
            gamma * max_weight_difference(path("bn_init.ckpt"), path("bn_fin.ckpt"), true))
      << r.output;

  // The step timer: pdnn's --bench-csv file takes the twin's row.
  const std::string bench = path("bench.csv");
  r = testing::run_command(kBin + " --data " + data +
                           " --size 32 --base 4 --depth 2 --batch 4 --threads 1 --overlays 0 "
                           "--steps 3 --bench-csv " + bench);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("step_ms: the first block only"), std::string::npos) << r.output;
  // One step is the first block alone: timed, and said not to be a steady step.
  const testing::CommandResult one = testing::run_command(
      kBin + " --data " + data + " --size 32 --base 4 --depth 2 --batch 4 --threads 1 "
      "--overlays 0 --steps 1");
  ASSERT_EQ(one.status, 0) << one.output;
  EXPECT_NE(one.output.find("step_ms: the first block only (the buffers' first allocation in "
                            "it), not a steady step: give --steps past the first block (1 step "
                            "here)"),
            std::string::npos)
      << one.output;
  r = testing::run_command(twin + " --size 32 --base 4 --depth 2 --batch 4 --threads 1 --steps 10 "
                           "--bench-csv " + bench);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("step_ms model=unet_b4_d2 batch=4 threads=1 steps=1 median="),
            std::string::npos)
      << r.output;
  const auto b = testing::read_csv(bench);
  ASSERT_EQ(b.size(), 3u) << testing::slurp(bench);
  EXPECT_EQ(b[1][0], "pdnn");
  EXPECT_EQ(b[2][0], "torch");
  EXPECT_EQ(b[2][1], b[1][1]);  // the model
  EXPECT_GT(std::stod(b[2][10]), 0.0);  // median_ms
}

// The test Dice of both frameworks is one function of the predictions: the twin's confusion
// counts and scores (torch_segment.py's confusion and scores) of given logits and labels are
// pdnn's (ops::segmentation_confusion, segmentation_scores) exactly: integer counts, and the
// same double quotients and sums in the same order. The logits are small integers, so that
// ties (the lowest class wins on both sides) occur; class 3 is neither true nor predicted (no
// score, -1 in the rows, left out of the means).
class SegmentTwin : public testing::TempDirTest {};

TEST_F(SegmentTwin, ScoresLikePdnn) {
  const std::string py = "/usr/bin/python3";
  if (testing::run_command(py + " -c 'import torch, numpy'").status != 0)
    GTEST_SKIP() << "no torch for " << py << " (scripts/tools/install_deps.sh torch)";
  const int64_t n = 3, k = 4, h = 5, w = 7, plane = h * w;
  Tensor z(Shape{n, k, h, w}), labels(Shape{n, h, w}, DType::I32);
  Rng rng(7);
  for (int64_t i = 0; i < z.numel(); ++i) {
    const int64_t c = (i / plane) % k;
    z.data()[i] = c == 3 ? -10.f : std::floor(rng.uniform(0.f, 3.f));
  }
  for (int64_t i = 0; i < labels.numel(); ++i)
    labels.data<int32_t>()[i] = static_cast<int32_t>(rng.uniform(0.f, 3.f));
  Context ctx(1);
  Tensor counts = Tensor::zeros(Shape{k * k}, DType::I64);
  ops::segmentation_confusion(ctx, z, labels, counts);
  const std::vector<int64_t> conf(counts.data<int64_t>(), counts.data<int64_t>() + k * k);
  const SegmentationScores s = segmentation_scores(conf, k);
  std::ofstream(path("z.f32"), std::ios::binary)
      .write(reinterpret_cast<const char*>(z.data()), z.numel() * 4);
  std::ofstream(path("y.i32"), std::ios::binary)
      .write(reinterpret_cast<const char*>(labels.data<int32_t>()), labels.numel() * 4);
  std::ofstream(path("score.py"))
      << "import sys, numpy as np, torch\n"
         "sys.path.insert(0, '" PDNN_SOURCE_DIR "/scripts/twins')\n"
         "import torch_segment as ts\n"
         "z = torch.from_numpy(np.fromfile(sys.argv[1], '<f4').reshape(3, 4, 5, 7))\n"
         "y = torch.from_numpy(np.fromfile(sys.argv[2], '<i4').astype(np.int64).reshape(3, 5, 7))\n"
         "conf = ts.confusion(torch, z, y, 4)\n"
         "iou, dice, m_iou, m_dice = ts.scores(conf.view(4, 4).numpy())\n"
         "print(' '.join(str(int(c)) for c in conf))\n"
         "print(' '.join(repr(-1.0 if v != v else v) for v in iou + dice + [m_iou, m_dice]))\n";
  const testing::CommandResult r = testing::run_command(
      py + " " + path("score.py") + " " + path("z.f32") + " " + path("y.i32"));
  ASSERT_EQ(r.status, 0) << r.output;
  std::istringstream in(r.output);
  for (int64_t c = 0; c < k * k; ++c) {
    int64_t v = -1;
    in >> v;
    EXPECT_EQ(v, conf[static_cast<size_t>(c)]) << "count " << c << "\n" << r.output;
  }
  std::vector<double> want = s.iou;
  want.insert(want.end(), s.dice.begin(), s.dice.end());
  want.push_back(s.mean_iou);
  want.push_back(s.mean_dice);
  int64_t ties = 0;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t q = 0; q < plane; ++q)
      ties += z.data()[b * k * plane + q] == z.data()[b * k * plane + plane + q];
  EXPECT_GT(ties, 0);  // the tie rule is exercised
  EXPECT_TRUE(std::isnan(s.dice[3]));
  EXPECT_GT(s.dice[1], 0.0);
  for (size_t i = 0; i < want.size(); ++i) {
    double v = 0;
    in >> v;
    EXPECT_EQ(v, std::isnan(want[i]) ? -1.0 : want[i]) << "score " << i << "\n" << r.output;
  }
}

}  // namespace
}  // namespace pdnn
#endif
