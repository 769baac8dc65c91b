// SegmentationTask (segmentation_task.h).
#include "workloads/segmentation/segmentation_task.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "model/checkpoint.h"
#include "run/output_files.h"
#include "workloads/classifier/classifier_task.h"
#ifdef PDNN_HAVE_OPENCV
#include "workloads/segmentation/overlay_image.h"
#endif

namespace pdnn {

namespace {

EvalOptions with_confusion(EvalOptions e) {
  e.confusion = true;
  return e;
}

double score_cell(double v) { return std::isnan(v) ? -1.0 : v; }

}  // namespace

SegmentationTask::SegmentationTask(Context& ctx, Model& model, Optimizer& opt,
                                   const Dataset& train, const Dataset& test,
                                   const SegmentationTaskOptions& options)
    : SingleModelTask(ctx, model, opt),
      train_(train),
      test_(test),
      o_(options),
      trainer_(model, opt, options.cuda_graph, options.overlap_batch_copy),
      batches_(train, options.train, options.prefetch, "segmentation task") {
  PDNN_CHECK(o_.train.batch >= 1 && o_.prefetch >= 0 && o_.overlay_images >= 0,
             "segmentation task: batch %lld, prefetch %d, %d overlay images (need >= 1, >= 0, "
             ">= 0)",
             static_cast<long long>(o_.train.batch), o_.prefetch, o_.overlay_images);
  PDNN_CHECK(train.size() > 0, "segmentation task: the training set is empty");
  trainer_.set_loss(o_.loss);
  PDNN_CHECK(train.target_shape().rank() == 2 && train.target_shape() == test.target_shape() &&
                 train.sample_shape() == test.sample_shape() &&
                 train.num_classes() == test.num_classes(),
             "segmentation task: training samples %s with targets %s, test samples %s with "
             "targets %s (per-pixel targets (H,W) of the same shape and classes needed)",
             train.sample_shape().str().c_str(), train.target_shape().str().c_str(),
             test.sample_shape().str().c_str(), test.target_shape().str().c_str());
  o_.train.shuffle = true;
  evaluator_ = std::make_unique<Evaluator>(ctx, test, with_confusion(o_.eval));
}

SegmentationTask::~SegmentationTask() = default;

std::vector<std::string> SegmentationTask::eval_columns() const {
  std::vector<std::string> c = {"test_loss", "test_pixel_acc"};
  for (const char* what : {"test_iou_", "test_dice_"})
    for (int k = 0; k < test_.num_classes(); ++k) c.push_back(what + column_safe(test_.class_name(k)));
  for (const char* r : {"test_mean_iou", "test_mean_dice", "peak_rss_mb", "peak_device_mb"})
    c.push_back(r);
  return c;
}

LoaderStats SegmentationTask::loader_stats() const { return batches_.stats(); }

int64_t SegmentationTask::begin_epoch(Context& ctx, int epoch, uint64_t data_seed) {
  const int64_t n = batches_.begin_epoch(ctx, epoch, data_seed);
  model_.train(true);
  trainer_.reset_metrics(ctx);
  return n;
}

int64_t SegmentationTask::train_batch(Context& ctx, int64_t b) {
  const EpochBatches::Taken t = batches_.take(b);
  trainer_.step(ctx, *t.x, *t.target);
  batches_.trained(b);
  return t.rows;
}

std::vector<double> SegmentationTask::train_metrics(Context& ctx) {
  const ClassifierMetrics m = trainer_.metrics(ctx);
  return {m.loss(), m.acc()};
}

std::string SegmentationTask::step_mode() const {
  if (model_.device() == Device::CPU) return "";
  return trainer_.graph_replays() > 0 ? "graph" : "eager";
}

std::vector<double> SegmentationTask::evaluate(Context& ctx) {
  const EvalResult r = evaluator_->run(ctx, model_);
  const int k = test_.num_classes();
  scores_ = segmentation_scores(r.confusion, k);
  std::vector<double> v = {r.loss, r.acc};
  for (const std::vector<double>* s : {&scores_.iou, &scores_.dice})
    for (int c = 0; c < k; ++c) v.push_back(score_cell((*s)[static_cast<size_t>(c)]));
  v.push_back(score_cell(scores_.mean_iou));
  v.push_back(score_cell(scores_.mean_dice));
  v.push_back(static_cast<double>(peak_resident_bytes()) / 1e6);
  v.push_back(static_cast<double>(ctx.device_alloc_stats().peak_in_use) / 1e6);
  return v;
}

std::string SegmentationTask::overlay_path(int epoch) const {
  return o_.overlay_dir + "/" + strprintf("epoch_%03d.png", epoch);
}

void SegmentationTask::end_epoch(Context& ctx, int epoch) {
  const int64_t n = std::min<int64_t>(o_.overlay_images, test_.size());
  if (o_.overlay_dir.empty() || n == 0) return;
#ifdef PDNN_HAVE_OPENCV
  // The first n test images as the evaluation sees them, and the model's argmax for them.
  const Shape s = test_.sample_shape(), t = test_.target_shape();
  Tensor x(Shape{n, s[0], s[1], s[2]}), truth(Shape{n, t[0], t[1]}, DType::I32);
  for (int64_t i = 0; i < n; ++i)
    test_.read_with_target(i, x.data() + i * s.numel(), truth.data<int32_t>() + i * t.numel(),
                           std::nullopt);
  model_.train(false);
  struct TrainAgain {  // also when an error leaves
    Model& m;
    ~TrainAgain() { m.train(true); }
  } train_again{model_};
  // One image a forward: the smallest batch, whatever a memory plan's micro-batch is.
  const Device dev = model_.device();
  const int64_t plane = t.numel();
  Tensor pred(truth.shape(), DType::I32);
  for (int64_t i = 0; i < n; ++i) {
    const Tensor xi = x.slice(i * s.numel(), Shape{1, s[0], s[1], s[2]});
    const Tensor xd = dev == Device::CPU ? xi : xi.to(dev, ctx);
    const Tensor& z = model_.forward(ctx, xd);
    const Tensor zh = dev == Device::CPU ? z : z.to(Device::CPU, ctx);
    const int64_t k = zh.shape(1);
    for (int64_t q = 0; q < plane; ++q) {
      const float* zq = zh.data() + q;
      int32_t best = 0;
      for (int64_t c = 1; c < k; ++c)
        if (zq[c * plane] > zq[best * plane]) best = static_cast<int32_t>(c);
      pred.data<int32_t>()[i * plane + q] = best;
    }
  }
  const std::string path = overlay_path(epoch + 1);
  create_parent_folders(path);
  write_overlay_png(path, x, o_.norm, truth, pred,
                    strprintf("%s, epoch %d", o_.title.c_str(), epoch + 1));
#else
  (void)ctx;
  (void)epoch;
#endif
}

}  // namespace pdnn
