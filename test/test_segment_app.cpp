// End to end: build/bin/segment (the U-Net) on the shipped pair folder datasets/ccp-200 at a
// tiny size (32 px, base 4, depth 2): three short epochs of two steps write the documented rows
// (IoU and Dice per class consistent with each other and with their means), the training loss
// falls, and each epoch's overlay PNG has the documented layout; bad flags and data fail in
// one line and write nothing.
#include <gtest/gtest.h>

#ifdef PDNN_HAVE_OPENCV
#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "data/image_grid.h"
#include "testing.h"

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
  expect_failure("--device gpu", "--device");
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

}  // namespace
}  // namespace pdnn
#endif
