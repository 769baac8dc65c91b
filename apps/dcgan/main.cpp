// build/bin/dcgan: trains W5 of SPEC.md, the DCGAN of the PyCUDA study, on any image folder or
// on an offline default (Fashion-MNIST or MNIST digits upscaled to 64x64, or the shipped
// Caltech101 photos in colour), and writes per epoch a CSV row (mean D and G loss, mean D(x)
// and D(G(z)), seconds per epoch and per iteration, a status; for photos, the files the loader
// skipped), the iterations' losses, and an 8x8 grid of samples; optionally 10,000 samples for
// the quality score (build/bin/gan_score: grey for IDX data, colour for photos), after the
// last epoch or after chosen ones (--samples-epochs).
// Also the step-time probe of the benchmarks (--steps) and the per-layer profile (--profile).
// The app picks the data, models and optimizers; lib/train/run_loop.h runs the training.
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "core/context.h"
#include "core/error.h"
#include "core/cuda_state.h"
#include "data/idx.h"
#include "data/resized_images.h"
#include "layers/batchnorm2d.h"
#include "workloads/dcgan/dcgan_task.h"
#include "run/data_defaults.h"
#include "workloads/model_zoo.h"
#include "run/run_flags.h"
#include "run/run_info.h"
#include "train/run_loop.h"
#include "run/timing.h"
#ifdef PDNN_HAVE_OPENCV
#include "data/image_folder.h"
#endif

namespace {

using namespace pdnn;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string dataset = "fashion-mnist", data;
  int threads = 0;
  int64_t batch = 64, images_per_epoch = 2944, samples = 0;
  std::vector<int> samples_epochs;
  int bn_shards = 1;
  GanTrainer::DeferG defer_g = GanTrainer::DeferG::kAuto;
  float lr = 2e-4f, beta1 = 0.5f;
  DcganConfig model;
  std::string samples_dir, iterations_out, samples_out;
};

bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool has_idx(const std::string& dir) {
  for (const char* f : {"train-images-idx3-ubyte", "train-images-idx3-ubyte.gz",
                        "train-images.idx3-ubyte", "train-images.idx3-ubyte.gz"})
    if (fs::exists(fs::path(dir) / f)) return true;
  return false;
}

// The training images, as 3 x 64 x 64 samples in [-1,1], and what they are called.
struct GanData {
  std::string name, dir, kind;
  bool photos = false;  // colour photos (else IDX images, grey as RGB)
  std::vector<std::string> files;  // inputs no output may be
  ImageDataset idx;
  std::unique_ptr<ResizedImages> resized;
#ifdef PDNN_HAVE_OPENCV
  std::unique_ptr<ImageFolder> folder;
#endif
  const Dataset& dataset() const {
#ifdef PDNN_HAVE_OPENCV
    if (folder) return folder->train;
#endif
    return *resized;
  }
};

std::string default_dir(const Options& o) {
  if (o.dataset == "fashion-mnist") {
    if (!is_dir("datasets/fashion-mnist"))
      PDNN_FAIL("no datasets/fashion-mnist: run datasets/get_fashion_mnist.sh (or pass --data)");
    return "datasets/fashion-mnist";
  }
  if (o.dataset == "mnist") {
    if (is_dir("datasets/mnist")) return "datasets/mnist";
    if (is_dir("datasets/mnist-npm10k")) return "datasets/mnist-npm10k";
    PDNN_FAIL("no MNIST in datasets/mnist or datasets/mnist-npm10k: run datasets/get_mnist.sh "
              "(or pass --data DIR)");
  }
  if (!is_dir("datasets/caltech101-6"))
    PDNN_FAIL("no datasets/caltech101-6 (shipped with pdnn; datasets/README.md) (or pass --data)");
  return "datasets/caltech101-6";
}

void load_data(const Options& o, int threads, GanData& gd) {
  const std::string dir = o.data.empty() ? default_dir(o) : o.data;
  PDNN_CHECK(is_dir(dir), "--data %s: no such folder", dir.c_str());
  gd.dir = dir;
  fs::path p = fs::path(dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  if (has_idx(dir)) {
    gd.idx = load_idx_dataset(dir, o.data.empty() ? o.dataset : p.filename().string());
    gd.name = gd.idx.name;
    gd.files = gd.idx.files;
    gd.kind = "IDX, upscaled to 64x64 (bilinear), grey as RGB";
    gd.resized = std::make_unique<ResizedImages>(gd.idx.train, gd.idx.num_classes, 64, 3);
    return;
  }
#ifdef PDNN_HAVE_OPENCV
  ImageFolderOptions fo;
  fo.size = 64;
  fo.cache_size = 64;
  fo.center_crop = true;
  fo.train_fraction = 1.0;
  fo.threads = threads;
  fo.augment = AugmentOptions::none();
  Normalization half;  // (v - 0.5) / 0.5: [0,1] -> [-1,1]
  for (int c = 0; c < 3; ++c) half.mean[c] = half.std[c] = 0.5f;
  fo.norm = half;
  // A folder of class folders, or a flat folder of photos (its own single class).
  bool has_sub = false;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory() && e.path().filename().string()[0] != '.') has_sub = true;
  if (has_sub) {
    gd.folder = std::make_unique<ImageFolder>(load_image_folder(dir, fo));
  } else {
    fo.classes = {p.filename().string()};
    const std::string parent = p.has_parent_path() ? p.parent_path().string() : ".";
    gd.folder = std::make_unique<ImageFolder>(load_image_folder(parent, fo));
  }
  gd.name = o.data.empty() ? "caltech101-6" : p.filename().string();
  gd.kind = "photos, centre-cropped, 64x64 RGB";
  gd.photos = true;
#else
  (void)threads;
  PDNN_FAIL("--data %s: not an IDX folder, and this pdnn was built without OpenCV (image "
            "folders need it)", dir.c_str());
#endif
}

int run(int argc, char** argv) {
  Options o;
  RunConfig rc;
  rc.app = "dcgan";
  rc.epochs = 5;
  RunFlagText text;
  CLI::App app{"Trains the DCGAN of SPEC.md (W5) with pdnn on the CPU or GPU"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--dataset", o.dataset,
                 "fashion-mnist, mnist (both upscaled to 64x64) or caltech (the shipped "
                 "Caltech101 photos in colour): picks the default --data")
      ->capture_default_str()
      ->check(CLI::IsMember({"fashion-mnist", "mnist", "caltech"}));
  app.add_option("--data", o.data,
                 "a folder of MNIST-layout IDX files, or of images (class folders or the photos "
                 "themselves; centre-cropped, resized to 64x64)");
  app.add_option("--batch", o.batch, "batch size (larger than an epoch: one batch of all of it)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 16));
  app.add_option("--images-per-epoch", o.images_per_epoch,
                 "images per epoch, a fresh random choice each epoch (default: the study's "
                 "2,944 = 46 iterations of 64 when the set has that many, else the whole set; "
                 "0: the whole set)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  app.add_option("--lr", o.lr, "Adam learning rate of both models")
      ->capture_default_str()
      ->check(positive_finite_validator());
  app.add_option("--beta1", o.beta1, "Adam beta1 of both models")
      ->capture_default_str()
      ->check(CLI::Range(0.0f, 0.999f));
  app.add_option("--nz", o.model.nz, "noise values per sample (W5: 100)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  app.add_option("--ngf", o.model.ngf, "generator width (W5: 64; smaller for quick tests)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1024}));
  app.add_option("--ndf", o.model.ndf, "discriminator width (W5: 64)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1024}));
  app.add_option("--samples-dir", o.samples_dir,
                 "folder of the per-epoch 8x8 sample grids epoch_NNN.png (default "
                 "runs/dcgan/samples/<dataset>)");
  app.add_option("--iterations-out", o.iterations_out,
                 "CSV with one row per iteration (default runs/dcgan/dcgan_<dataset>_"
                 "iterations.csv)");
  app.add_option("--samples", o.samples,
                 "after the last epoch, write this many generated images for "
                 "build/bin/gan_score (64x64 IDX: grey for IDX data, colour for photos)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1000000}));
  app.add_option("--samples-epochs", o.samples_epochs,
                 "write the --samples after each of these epochs instead (comma list, e.g. "
                 "50,150,300; the same noise each time), to --samples-out with \"{epoch}\" "
                 "replaced by the epoch (three digits)")
      ->delimiter(',')
      ->expected(1, 100000)
      ->check(CLI::Range(1, kMaxEpochs));
  app.add_option("--samples-out", o.samples_out,
                 "file of --samples (default runs/dcgan/samples_<dataset>_pdnn.idx.gz, or "
                 "..._pdnn_e{epoch}.idx.gz with --samples-epochs)");
  app.add_option("--bn-shards", o.bn_shards,
                 "BatchNorm statistics per shard of N rows of each batch, as N data-parallel "
                 "ranks compute them (one process reproducing an N-rank run; CPU only)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  app.add_option_function<std::string>(
         "--defer-g",
         [&o](const std::string& v) {
           o.defer_g = v == "on"    ? GanTrainer::DeferG::kAlways
                       : v == "off" ? GanTrainer::DeferG::kNever
                                    : GanTrainer::DeferG::kAuto;
         },
         "with --distributed and --overlap on: sum G's gradient under the next iteration's "
         "real-batch pass of D and apply G's update after it (the same weights, G's all-reduce "
         "hidden), or right after G's backward. auto (default): deferred on the GPU with the "
         "CUDA graph (eagerly, deferring measured slower on 2 H200s); on: always; off: never")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  add_run_flags(app, rc, o.threads, text, "dcgan");
  if (const int status = parse_run_flags(app, rc, text, argc, argv); status >= 0) return status;

  // Everything that can be wrong with the input is checked before any output file is touched.
  const auto t_load = Clock::now();
  GanData gd;
  load_data(o, o.threads > 0 ? o.threads : 0, gd);
  const Dataset& data = gd.dataset();
  const Shape sample = data.sample_shape();
  PDNN_CHECK(sample == (Shape{3, 64, 64}), "%s: samples are %s, the DCGAN needs 3x64x64",
             gd.dir.c_str(), sample.str().c_str());
  std::string epoch_note, batch_note;
  if (app.count("--images-per-epoch") == 0)
    o.images_per_epoch =
        default_epoch_images(o.images_per_epoch, "W5's", data.size(), &epoch_note);
  PDNN_CHECK(o.images_per_epoch <= data.size(),
             "--images-per-epoch %lld: %s has %lld training images (0 takes them all)",
             static_cast<long long>(o.images_per_epoch), gd.name.c_str(),
             static_cast<long long>(data.size()));

  for (const int e : o.samples_epochs)
    PDNN_CHECK(e <= rc.epochs, "--samples-epochs: epoch %d is past --epochs %d", e, rc.epochs);
  PDNN_CHECK(o.samples_epochs.empty() || o.samples > 0,
             "--samples-epochs needs --samples N (how many images to write)");
  const int64_t per_epoch = o.images_per_epoch > 0 ? o.images_per_epoch : data.size();
  o.batch = std::max<int64_t>(fit_batch(o.batch, per_epoch, "an epoch", &batch_note), 2);

  Context ctx(o.threads, rc.seed, run_device(rc), run_gpu(rc));
  apply_device_flags(ctx, rc);
  const GanModel& zoo = gan_model("dcgan");
  Sequential g = zoo.generator(o.model), d = zoo.discriminator(o.model);
  // Initial weights: the first draws of the seed's stream, G's then D's.
  dcgan_init(g, ctx.rng());
  dcgan_init(d, ctx.rng());
  g.to(ctx.device(), ctx);
  d.to(ctx.device(), ctx);
  if (o.bn_shards > 1) {
    PDNN_CHECK(ctx.device() == Device::CPU, "--bn-shards %d: on the CPU only", o.bn_shards);
    PDNN_CHECK(o.bn_shards <= o.batch, "--bn-shards %d: more shards than the batch's %lld rows",
               o.bn_shards, static_cast<long long>(o.batch));
    for (Model* m : {&g, &d})
      for (size_t i = 0; i < m->size(); ++i)
        if (auto* bn = dynamic_cast<BatchNorm2d*>(&m->layer(i))) bn->set_stat_shards(o.bn_shards);
  }
  const HyperValues adam = {{"lr", o.lr}, {"beta1", o.beta1}};
  std::unique_ptr<Optimizer> opt_g = make_optimizer("adam", g.parameters(), adam),
                             opt_d = make_optimizer("adam", d.parameters(), adam);

  const DcganConfig w5;
  const bool w5_model = o.model.nz == w5.nz && o.model.ngf == w5.ngf && o.model.ndf == w5.ndf;
  rc.model = w5_model ? "dcgan"
                      : strprintf("dcgan-z%lld-g%lld-d%lld", static_cast<long long>(o.model.nz),
                                  static_cast<long long>(o.model.ngf),
                                  static_cast<long long>(o.model.ndf));
  rc.dataset = gd.name;
  rc.batch = o.batch;
  rc.inputs = gd.files;
  rc.status_column = true;
#ifdef PDNN_HAVE_OPENCV
  // As caltech101's rows: which photos the loader could not read, for after the run.
  rc.run_columns = {{"skipped_files", gd.folder ? skipped_summary(*gd.folder) : ""}};
#else
  rc.run_columns = {{"skipped_files", ""}};
#endif
  rc.must_match = {{"batch", o.batch},
                   {"images_per_epoch", o.images_per_epoch},
                   {"train_images", data.size()}};
  const std::string base = "runs/dcgan/" + rc.model + "_" + gd.name;
  if (rc.out.empty()) rc.out = base + ".csv";
  if (rc.profile_out.empty())
    rc.profile_out = "runs/dcgan/profile_" + rc.model + "_" + gd.name + "_b" +
                     std::to_string(o.batch) + "_t" + std::to_string(ctx.threads()) + ".csv";
  const bool bench = rc.steps > 0;
  DcganTaskOptions to;
  to.batch = o.batch;
  to.images_per_epoch = o.images_per_epoch;
  to.nz = o.model.nz;
  to.cuda_graph = rc.cuda_graph;
  to.overlap_batch_copy = rc.overlap_batch_copy;
  to.defer_g = o.defer_g;
  to.model = rc.model;
  to.dataset = gd.name;
  if (!bench) {
    to.samples_dir = o.samples_dir.empty() ? "runs/dcgan/samples/" + gd.name : o.samples_dir;
    to.iterations_csv = o.iterations_out.empty() ? base + "_iterations.csv" : o.iterations_out;
    to.samples = o.samples;
    to.samples_epochs = o.samples_epochs;
    to.colour_samples = gd.photos;
    if (o.samples > 0)
      to.samples_out = !o.samples_out.empty() ? o.samples_out
                       : o.samples_epochs.empty()
                           ? "runs/dcgan/samples_" + gd.name + "_pdnn.idx.gz"
                           : "runs/dcgan/samples_" + gd.name + "_pdnn_e{epoch}.idx.gz";
  }
  DcganTask task(ctx, g, d, *opt_g, *opt_d, data, to);
  if (!bench) {
    rc.extra_outputs.push_back({"--iterations-out", to.iterations_csv});
    rc.extra_outputs.push_back({"--samples-dir", task.grid_path(1)});
    if (rc.epochs > 1) rc.extra_outputs.push_back({"--samples-dir", task.grid_path(rc.epochs)});
    if (o.samples > 0 && o.samples_epochs.empty())
      rc.extra_outputs.push_back({"--samples-out", to.samples_out});
    for (const int e : o.samples_epochs)
      rc.extra_outputs.push_back({"--samples-out", task.samples_path(e)});
  }
  RunLoop loop(ctx, rc, task);  // checks the outputs and resumes before anything is printed
  const RunInfo info = run_info(ctx);
  const std::string device_line = run_device_text(rc, info.gpu);
  if (!batch_note.empty()) std::printf("%s\n", batch_note.c_str());
  std::printf(
      "dcgan: model %s, dataset %s (%s: %lld images, %s), batch %lld, %lld images (%lld "
      "iterations%s) per epoch, Adam lr %g beta1 %g, %d threads, seed %llu | %s | %s | BLAS %s | "
      "rev %s\n",
      rc.model.c_str(), gd.name.c_str(), gd.dir.c_str(), static_cast<long long>(data.size()),
      gd.kind.c_str(), static_cast<long long>(o.batch), static_cast<long long>(per_epoch),
      static_cast<long long>((per_epoch + o.batch - 1) / o.batch),
      epoch_note.empty() ? "" : ("; " + epoch_note).c_str(), o.lr, o.beta1, ctx.threads(),
      static_cast<unsigned long long>(loop.seed()), device_line.c_str(), info.host.c_str(),
      info.blas_text.c_str(), info.git_rev.c_str());
  std::printf("data loaded in %.2f s\n%s%s",
              std::chrono::duration<double>(Clock::now() - t_load).count(),
              g.summary(Shape{o.batch, o.model.nz, 1, 1}).c_str(),
              d.summary(Shape{o.batch, 3, 64, 64}).c_str());
  if (!bench) std::printf("sample grids in %s\n", to.samples_dir.c_str());
  return loop.run();
}

}  // namespace

int main(int argc, char** argv) { return pdnn::run_app("dcgan", run, argc, argv); }
