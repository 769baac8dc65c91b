// build/bin/segment: trains a U-Net (lib/workloads/segmentation/unet.h) on an image/mask pair
// folder (datasets/ccp-200 by default: Clothing Co-Parsing, person against background) and
// writes one CSV row per epoch (train loss and pixel accuracy; test loss, pixel accuracy, IoU
// and Dice per class and their means; peak resident and device memory; seconds) and, after
// each epoch, a PNG of photo, truth and prediction for the first few test images. Also the
// step-time probe of the benchmarks (--steps) and the per-layer profile (--profile). The app
// picks the data, model and optimizer; lib/train/run_loop.h runs the training
// (SegmentationTask: segmentation_task.h).
//
// Classes: --classes K picks the folder's mask set of K classes (the <masks>/classes.txt of
// --data with K lines: ccp-200 has masks/, 2, and masks59/, 59).
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/cuda_state.h"
#include "core/error.h"
#include "losses/dice_loss.h"
#include "run/data_defaults.h"
#include "run/run_flags.h"
#include "run/run_info.h"
#include "run/timing.h"
#include "train/run_loop.h"
#include "train/step_memory.h"
#include "workloads/classifier/classifier_task.h"
#include "workloads/model_zoo.h"
#include "workloads/segmentation/segmentation_task.h"
#include "workloads/segmentation/unet.h"
#ifdef PDNN_HAVE_OPENCV
#include "data/image_mask_pairs.h"
#endif

namespace {

using namespace pdnn;

#ifdef PDNN_HAVE_OPENCV
using Clock = std::chrono::steady_clock;

constexpr const char* kModel = "unet";

struct Options {
  std::string data = "datasets/ccp-200", optimizer, overlay_dir, loss = "ce";
  int classes = 2, threads = 0, size = 256, loader_threads = 0, overlays = 4, tile = 0;
  int64_t base = -1, batch = 0, images_per_epoch = 0;
  int depth = -1;
  bool batchnorm = false, augment = true;
  float lr = -1.f;
};

// The mask sets of a pair folder: subfolder -> its classes (lines of its classes.txt).
std::map<std::string, int> mask_sets(const std::string& dir) {
  std::map<std::string, int> sets;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::ifstream f(e.path() / "classes.txt");
    if (!f) continue;
    int n = 0;
    for (std::string line; std::getline(f, line);)
      if (!line.empty()) ++n;
    sets[e.path().filename().string()] = n;
  }
  return sets;
}

// The mask set of --classes K in --data: one line naming the sets there when none has K.
std::string choose_masks(const Options& o) {
  std::error_code ec;
  PDNN_CHECK(std::filesystem::is_directory(o.data, ec),
             "--data %s: no such folder (an image/mask pair folder: images/, <masks>/, "
             "train.txt, test.txt; datasets/README.md)",
             o.data.c_str());
  const std::map<std::string, int> sets = mask_sets(o.data);
  std::string found, listed;
  for (const auto& [name, k] : sets) {
    if (k == o.classes && (found.empty() || name == "masks")) found = name;
    listed += (listed.empty() ? "" : ", ") + std::to_string(k) + " (" + name + "/)";
  }
  PDNN_CHECK(!found.empty(), "--classes %d: %s has %s", o.classes, o.data.c_str(),
             listed.empty() ? "no mask set (no <masks>/classes.txt)"
                            : ("mask sets of " + listed + " classes").c_str());
  return found;
}

std::string model_name(const UNetOptions& u) {
  return strprintf("unet_b%lld_d%d%s", static_cast<long long>(u.base), u.depth,
                   u.batchnorm ? "_bn" : "");
}

int run(int argc, char** argv) {
  Options o;
  RunConfig rc;
  rc.app = "segment";
  rc.epochs = 20;
  RunFlagText text;
  const SegmentationModel& zoo = segmentation_model(kModel);
  CLI::App app{"Trains a U-Net for segmentation (person vs background on Clothing Co-Parsing by "
               "default) with pdnn on the CPU or GPU"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--data", o.data,
                 "image/mask pair folder (images/, <masks>/ with classes.txt, train.txt, "
                 "test.txt; datasets/README.md)")
      ->capture_default_str();
  app.add_option("--classes", o.classes,
                 "the mask set of --data with this many classes (datasets/ccp-200: 2, person "
                 "vs background, in masks/; 59, the clothing classes, in masks59/)")
      ->capture_default_str()
      ->check(CLI::Range(2, 256));
  app.add_option("--size", o.size,
                 "input side in pixels (a multiple of 2^depth; sides above a photo's own are "
                 "up-sampled, and the run says so; past what the GPU and the host hold, the "
                 "memory plan refuses the side and names what ran out)")
      ->capture_default_str()
      ->check(CLI::Range(2, 16384));
  app.add_option("--tile", o.tile,
                 "train and evaluate on the grid of TILE x TILE tiles of each --size image, not "
                 "the whole image (a multiple of 2^depth dividing --size; the scores count every "
                 "pixel, so they are the stitched images'; --batch and --images-per-epoch count "
                 "tiles and images: a batch of (size/tile)^2 tiles has one image's pixels)")
      ->check(CLI::Range(0, 16384));
  app.add_option("--base", o.base,
                 strprintf("channels of the first level (default %lld, the paper's)",
                           static_cast<long long>(zoo.defaults.base)))
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  app.add_option("--depth", o.depth,
                 strprintf("poolings (and up-samplings; default %d, the paper's)",
                           zoo.defaults.depth))
      ->check(CLI::Range(1, 8));
  app.add_option_function<std::string>(
         "--batchnorm", [&o](const std::string& v) { o.batchnorm = v == "on"; },
         "BatchNorm after every 3x3 convolution (default off, as the paper)")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--loss", o.loss,
                 "what training minimises: ce (per-pixel softmax cross-entropy, the default), "
                 "dice (1 - the mean soft Dice over the classes, of each batch) or ce+dice "
                 "(their sum); the test loss column stays the cross-entropy")
      ->check(CLI::IsMember({"ce", "dice", "ce+dice"}));
  app.add_option("--batch", o.batch,
                 strprintf("batch size (default %lld)", static_cast<long long>(zoo.batch)))
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--images-per-epoch", o.images_per_epoch,
                 "training images per epoch: the first ones of each epoch's fresh order (0, "
                 "the default: all of them)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  app.add_option("--optimizer", o.optimizer,
                 "default: the model's (" + model_optimizer_name(kModel) + "); one of\n" +
                     optimizer_help())
      ->check(CLI::IsMember(optimizer_name_list()));
  app.add_option("--lr", o.lr, "learning rate (default: the optimizer's)")
      ->check(positive_finite_validator());
  app.add_option_function<std::string>(
         "--augment", [&o](const std::string& v) { o.augment = v == "on"; },
         "flip and random resized crop of image and mask together for training (default on)")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--loader-threads", o.loader_threads,
                 "threads packing batches on the loader's background thread (default 1 on the "
                 "CPU, 4 with --device cuda)")
      ->check(CLI::Range(1, 256));
  app.add_option("--overlays", o.overlays,
                 "test images drawn after each epoch, photo | truth | prediction (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
  app.add_option("--overlay-dir", o.overlay_dir,
                 "folder of the overlays, epoch_NNN.png (default "
                 "runs/segment/overlays/<model>_<dataset>)");
  add_run_flags(app, rc, o.threads, text, "segment");
  add_memory_flags(app, rc);
  if (const int status = parse_run_flags(app, rc, text, argc, argv); status >= 0) return status;

  UNetOptions u = zoo.defaults;
  if (o.base > 0) u.base = o.base;
  if (o.depth > 0) u.depth = o.depth;
  u.batchnorm = o.batchnorm;
  u.classes = o.classes;
  const int64_t unit = int64_t{1} << u.depth;
  PDNN_CHECK(o.size % unit == 0 && o.size >= unit,
             "--size %d: must be a multiple of %lld (2^depth: the U-Net pools %d times)", o.size,
             static_cast<long long>(unit), u.depth);
  PDNN_CHECK(o.tile == 0 || (o.tile % unit == 0 && o.size % o.tile == 0),
             "--tile %d: must divide --size %d and be a multiple of %lld (2^depth)", o.tile, o.size,
             static_cast<long long>(unit));
  // The Dice loss's buffers (its probabilities, N x K x H x W floats, its sums, a copy of the
  // labels) in the memory plan beside the cross-entropy's.
  if (o.loss != "ce")
    rc.loss_buffers = [](const Shape& logits) { return DiceLoss::buffer_bytes(logits); };
  const int side = o.tile > 0 ? o.tile : o.size;  // what the model sees
  const bool gpu = rc.device == "cuda";
  if (o.loader_threads == 0) o.loader_threads = gpu ? 4 : 1;
  const int threads = o.threads > 0 ? o.threads : omp_get_num_procs();

  // The input is checked whole before any output file is touched (the run loop checks the
  // outputs before its first step).
  ImageMaskOptions mo;
  mo.masks = choose_masks(o);
  mo.size = o.size;
  mo.threads = gpu ? 0 : threads;
  if (!o.augment) mo.augment = AugmentOptions::none();
  const auto t_load = Clock::now();
  const ImageMaskFolder folder = load_image_mask_folder(o.data, mo);
  const double load_s = std::chrono::duration<double>(Clock::now() - t_load).count();
  PDNN_CHECK(static_cast<int>(folder.classes.size()) == o.classes,
             "--classes %d: %s/%s has %zu", o.classes, o.data.c_str(), mo.masks.c_str(),
             folder.classes.size());
  // With --tile, the splits' tiles (the photos still decoded and augmented at --size).
  std::optional<DatasetTiles> train_tiles, test_tiles;
  if (o.tile > 0) train_tiles.emplace(folder.train, o.tile), test_tiles.emplace(folder.test, o.tile);
  const Dataset& train = o.tile > 0 ? static_cast<const Dataset&>(*train_tiles) : folder.train;
  const Dataset& test = o.tile > 0 ? static_cast<const Dataset&>(*test_tiles) : folder.test;
  const int64_t tiles = o.tile > 0 ? train_tiles->per_sample() : 1;
  const std::string dataset = folder.name + "-" + std::to_string(o.size) + "px" +
                              (o.tile > 0 ? "-tiles" + std::to_string(o.tile) : "");
  PDNN_CHECK(o.images_per_epoch <= folder.train.size(),
             "--images-per-epoch %lld: the training split of %s has %lld images",
             static_cast<long long>(o.images_per_epoch), o.data.c_str(),
             static_cast<long long>(folder.train.size()));
  const int64_t per_epoch = (o.images_per_epoch > 0 ? o.images_per_epoch : folder.train.size()) * tiles;
  std::string batch_note;
  if (o.batch == 0) o.batch = zoo.batch;
  o.batch = fit_batch(o.batch, per_epoch, "an epoch", &batch_note);

  Context ctx(threads, rc.seed, run_device(rc), run_gpu(rc));
  apply_device_flags(ctx, rc);
  u.in_channels = 3;
  Model model = zoo.build(u);
  model.reset_parameters(ctx.rng());  // initial weights: the first draws of the seed's stream
  model.to(ctx.device(), ctx);
  std::unique_ptr<Optimizer> opt = make_model_optimizer(kModel, o.optimizer, model.parameters(), o.lr);

  const std::string name = model_name(u);
  rc.model = name;
  rc.dataset = dataset;
  rc.batch = o.batch;
  for (const ImageMaskDataset* split : {&folder.train, &folder.test})
    for (int64_t i = 0; i < split->size(); ++i)
      rc.inputs.push_back(o.data + "/" + split->image_path(i));
  rc.must_match = {{"batch", o.batch},
                   {"train_images", folder.train.size()},
                   {"images_per_epoch", o.images_per_epoch},
                   {"size", o.size},
                   {"tile", o.tile}};
  if (rc.out.empty()) rc.out = "runs/segment/" + name + "_" + dataset + ".csv";
  if (rc.profile_out.empty())
    rc.profile_out = "runs/segment/profile_" + name + "_" + dataset + "_b" +
                     std::to_string(o.batch) + "_t" + std::to_string(ctx.threads()) +
                     (gpu ? "_cuda" : "") + ".csv";
  if (o.overlay_dir.empty()) o.overlay_dir = "runs/segment/overlays/" + name + "_" + dataset;

  SegmentationTaskOptions to;
  to.train.batch = o.batch;
  to.train.augment = o.augment;
  to.train.images_per_epoch = o.images_per_epoch * tiles;
  to.train.threads = o.loader_threads;
  to.prefetch = 1;
  to.eval.batch = std::min(o.batch, std::max<int64_t>(test.size(), 1));
  to.eval.threads = o.loader_threads;
  to.eval.prefetch = 1;
  to.loss = parse_train_loss(o.loss, "--loss");
  to.cuda_graph = rc.cuda_graph;
  to.overlap_batch_copy = rc.overlap_batch_copy;
  to.overlay_images = o.overlays;
  to.overlay_dir = o.overlays > 0 ? o.overlay_dir : "";
  to.norm = folder.norm;
  to.title = name + " on " + dataset;
  SegmentationTask task(ctx, model, *opt, train, test, to);
  if (!to.overlay_dir.empty()) {
    rc.extra_outputs.push_back({"--overlay-dir", task.overlay_path(1)});
    if (rc.epochs > 1) rc.extra_outputs.push_back({"--overlay-dir", task.overlay_path(rc.epochs)});
  }
  RunLoop loop(ctx, rc, task);  // checks the outputs and resumes before anything is printed
  const RunInfo info = run_info(ctx);
  const std::string device_line = run_device_text(rc, info.gpu);
  if (!batch_note.empty()) std::printf("%s\n", batch_note.c_str());
  std::printf(
      "segment: model %s, dataset %s (%s), %dx%d, batch %lld, %lld %s/epoch (%lld steps), "
      "loss %s, %s lr %g, augmentation %s, %d threads + loader %d, seed %llu | %s | %s | BLAS "
      "%s | rev %s\n",
      name.c_str(), dataset.c_str(), folder.describe().c_str(), o.size, o.size,
      static_cast<long long>(o.batch), static_cast<long long>(per_epoch), o.tile > 0 ? "tiles" : "images",
      static_cast<long long>((per_epoch + o.batch - 1) / o.batch), o.loss.c_str(),
      model_optimizer_name(kModel, o.optimizer).c_str(), static_cast<double>(opt->lr()),
      o.augment ? "on" : "off", ctx.threads(), o.loader_threads,
      static_cast<unsigned long long>(loop.seed()), device_line.c_str(), info.host.c_str(),
      info.blas_text.c_str(), info.git_rev.c_str());
  if (o.tile > 0)
    std::printf("tiles: each %dx%d image is %lld tiles of %dx%d; the model trains and is scored "
                "on the tiles, the scores over every pixel (the stitched images')\n",
                o.size, o.size, static_cast<long long>(tiles), o.tile, o.tile);
  std::printf("data loaded in %.2f s\n%s", load_s,
              model.summary(Shape{o.batch, 3, side, side}).c_str());
  std::fflush(stdout);
  const Shape batch{o.batch, 3, side, side};
  plan_step_memory(ctx, model, *opt, batch, rc, rc.steps > 0 ? 0 : to.eval.batch);
  const int status = loop.run();
  report_plan_as_run(ctx, model, *opt, batch, rc, rc.steps > 0 ? 0 : to.eval.batch);
  if (rc.steps == 0 && !to.overlay_dir.empty())
    std::printf("overlays (photo | truth | prediction) in %s\n", to.overlay_dir.c_str());
  std::printf("peak resident memory %.0f MB, peak device memory %.0f MB\n",
              static_cast<double>(peak_resident_bytes()) / 1e6,
              static_cast<double>(ctx.device_alloc_stats().peak_in_use) / 1e6);
  return status;
}
#else
int run(int, char**) {
  std::fprintf(stderr, "segment: this pdnn was built without OpenCV, which reads the photos and "
                       "masks (scripts/tools/install_deps.sh, then rebuild)\n");
  return 1;
}
#endif

}  // namespace

int main(int argc, char** argv) { return pdnn::run_app("segment", run, argc, argv); }
