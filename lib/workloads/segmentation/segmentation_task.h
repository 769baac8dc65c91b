// SegmentationTask: the run loop's task (train/run_loop.h) for a segmentation network (a model
// whose logits are maps (N,K,H,W), the U-Net) over Datasets with per-pixel targets
// (Dataset::target_shape(): the image/mask pair folders, data/image_mask_pairs.h):
//   - each epoch the training split in a fresh seeded order (optionally only its first
//     images_per_epoch images), image and mask augmented by one draw, packed on a background
//     thread (EpochBatches, as the classifier task's) into host memory the GPU copies from
//     (pinned on a GPU);
//   - ClassifierTrainer's step with the per-pixel softmax cross-entropy, the soft Dice loss or
//     both (options.loss; CUDA graph, a memory plan's micro-batches); running train loss (the
//     loss trained on) and pixel accuracy;
//   - at each epoch's end the test split, in stored order without augmentation (Evaluator, per
//     pixel): loss (the cross-entropy, whatever the training's), pixel accuracy, IoU and Dice per class and their means (segmentation_
//     metrics.h, from confusion counts kept on the device), peak resident and device memory;
//   - after each epoch's row (end_epoch), the overlays of the first overlay_images test images:
//     photo, truth, prediction (overlay_image.h) in overlay_path(epoch), when overlay_dir is set.
// Columns: train_loss, train_pixel_acc; test_loss, test_pixel_acc, test_iou_<class>...,
// test_dice_<class>..., test_mean_iou, test_mean_dice, peak_rss_mb, peak_device_mb. A class
// neither in the test masks nor predicted anywhere has no score: its cells hold -1 (the run
// loop persists finite values only) and the means leave it out.
#pragma once
#include <memory>
#include <string>

#include "data/augment.h"
#include "data/dataset.h"
#include "data/dataset_loader.h"
#include "data/prefetch_loader.h"
#include "model/model.h"
#include "optim/optimizer.h"
#include "workloads/classifier/classifier_trainer.h"
#include "workloads/classifier/epoch_batches.h"
#include "train/run_loop.h"
#include "workloads/segmentation/segmentation_metrics.h"

namespace pdnn {

struct SegmentationTaskOptions {
  // batch, augment, images_per_epoch, threads of the training batches; shuffle is on and the
  // seed is the run's data seed (both set by the task).
  LoaderOptions train;
  int prefetch = 1;           // training batches packed ahead (0: on the training thread)
  EvalOptions eval;           // the test split's batches (confusion: set by the task)
  TrainLoss loss = TrainLoss::CrossEntropy;  // what the steps train on
  bool cuda_graph = true;     // replay the step as a CUDA graph on the GPU
  bool overlap_batch_copy = true;  // the batch's copy beside the step before (GPU)
  std::string overlay_dir;    // "": no overlays
  int overlay_images = 4;     // the first this many test images (fewer when it has fewer)
  Normalization norm;         // the images' normalisation, to draw them
  std::string title;          // the overlays' title ("unet_b8_d3 on ccp-person-200-64px")
};

class SegmentationTask : public SingleModelTask {
 public:
  // All references must outlive the task; opt built over model.parameters(), the model on the
  // device it trains on; train and test have per-pixel targets, the same shapes and classes.
  SegmentationTask(Context& ctx, Model& model, Optimizer& opt, const Dataset& train,
                   const Dataset& test, const SegmentationTaskOptions& options);
  ~SegmentationTask() override;

  std::vector<std::string> train_columns() const override {
    return {"train_loss", "train_pixel_acc"};
  }
  std::vector<std::string> eval_columns() const override;
  int64_t begin_epoch(Context& ctx, int epoch, uint64_t data_seed) override;
  int64_t train_batch(Context& ctx, int64_t b) override;
  std::vector<double> train_metrics(Context& ctx) override;
  std::string step_mode() const override;
  std::vector<double> evaluate(Context& ctx) override;
  void end_epoch(Context& ctx, int epoch) override;

  // overlay_dir/epoch_NNN.png (epoch 1-based).
  std::string overlay_path(int epoch) const;
  // The scores of the last evaluation.
  const SegmentationScores& last_scores() const { return scores_; }
  LoaderStats loader_stats() const;

 private:
  const Dataset& train_;
  const Dataset& test_;
  SegmentationTaskOptions o_;
  ClassifierTrainer trainer_;
  EpochBatches batches_;
  std::unique_ptr<Evaluator> evaluator_;
  SegmentationScores scores_;
};

}  // namespace pdnn
