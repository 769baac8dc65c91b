// build/bin/caltech101: trains W4 of SPEC.md (the Cython paper's 9-layer CNN, "caltech9"; or
// another caltech101 model of the zoo, --model: the DCGAN's photo judge "photo64") on
// Caltech101 photos (datasets/caltech101-6: the six classes of the paper) and writes one CSV
// row per epoch: train/test loss and accuracy, test accuracy per class, peak resident and
// device memory, how much of the loader's time was hidden behind training, and the files the
// loader skipped (one line, the same in every row). At the end, the
// test set's confusion matrix as a PNG. Also the step-time probe of the benchmarks (--steps)
// and the per-layer profile (--profile). The app picks the data, model and optimizer;
// lib/train/run_loop.h runs the training.
//
// Data: the photos are decoded once into a cache (lib/data/image_folder.h), split per class
// half/half (the split seed is fixed, so every run and scripts/twins/torch_reference.py test on the
// same photos), augmented for training (flip, random resized crop, rotation, brightness and
// contrast) and packed into batches on a background thread (PrefetchLoader) while the
// previous batch trains; an epoch is the first --images-per-epoch images of a fresh order.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "core/cuda_state.h"
#include "workloads/classifier/caltech_models.h"
#include "workloads/classifier/classifier_task.h"
#include "run/data_defaults.h"
#include "workloads/model_zoo.h"
#include "run/run_flags.h"
#include "run/run_info.h"
#include "train/run_loop.h"
#include "train/step_memory.h"
#include "run/timing.h"
#ifdef PDNN_HAVE_OPENCV
#include "data/image_folder.h"
#include "workloads/classifier/confusion_image.h"
#endif

namespace {

using namespace pdnn;

#ifdef PDNN_HAVE_OPENCV
using Clock = std::chrono::steady_clock;

// The flags of this app; the run loop's own (epochs, seed, files, ...) are in RunConfig.
// The zoo's model this app trains by default (W4); its optimizer and batch are SPEC.md's from
// the zoo.
constexpr const char* kModel = "caltech9";

struct Options {
  std::string data = "datasets/caltech101-6", confusion, optimizer, model = kModel;
  std::vector<std::string> classes = caltech_paper_classes();
  int threads = 0, size = 224, loader_threads = 0;
  int64_t batch = 0, images_per_epoch = 1280;  // batch 0: the model's
  uint64_t split_seed = 0;
  bool augment = true, center_crop = false, half_range = false;
  float lr = -1.f;
};

std::string with_commas(int64_t v) {
  std::string s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

// "caltech101-6" for the shipped folder with its six classes at 224; a subset of a folder's
// classes and another input size are named, so rows of different data never mix.
std::string dataset_name(const Options& o, const ImageFolder& f) {
  const size_t folder_classes = list_image_folder_classes(o.data).size();
  std::string dir = o.data;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const size_t slash = dir.find_last_of('/');
  std::string name = slash == std::string::npos ? dir : dir.substr(slash + 1);
  if (f.classes.size() != folder_classes) name += "-" + std::to_string(f.classes.size()) + "cls";
  if (o.size != 224) name += "-" + std::to_string(o.size) + "px";
  if (o.center_crop) name += "-crop";
  return name;
}

// Without --classes: the study's six when --data has them all (the shipped
// datasets/caltech101-6, Caltech's whole 101_ObjectCategories), else every class folder there,
// sorted (torchvision's ImageFolder convention: a user's own folder of class folders). Returns
// the header's note on that choice ("" for the six or a --classes list). A classifier needs two
// classes: one is an error here, before any photo is decoded. A missing or empty folder is left
// to load_image_folder, which names the problem.
std::string choose_classes(Options& o, bool given) {
  std::error_code ec;
  if (!given && std::filesystem::is_directory(o.data, ec)) {
    const std::vector<std::string> found = list_image_folder_classes(o.data);
    const std::vector<std::string>& six = caltech_paper_classes();
    const bool has_six = std::all_of(six.begin(), six.end(), [&](const std::string& c) {
      return std::find(found.begin(), found.end(), c) != found.end();
    });
    if (!has_six) {
      o.classes = found;  // none: load_image_folder says the folder has no class folders
      if (found.empty()) return "";
      PDNN_CHECK(found.size() >= 2,
                 "--data %s: one class folder ('%s'): a classifier needs two or more "
                 "(%s/<class>/<images>)",
                 o.data.c_str(), found[0].c_str(), o.data.c_str());
      std::string listed;
      for (size_t k = 0; k < found.size() && k < 6; ++k) listed += (k ? ", " : "") + found[k];
      if (found.size() > 6) listed += ", ...";
      return "the folder's own, sorted: " + listed + "; it lacks the study's six";
    }
  }
  PDNN_CHECK(!given || o.classes.size() >= 2,
             "--classes %s: one class: a classifier needs two or more",
             o.classes.empty() ? "" : o.classes[0].c_str());
  return "";
}

// The classifier task plus the confusion matrix of the last evaluation, as a PNG and as text,
// when the run ends.
class CaltechTask : public ClassifierTask {
 public:
  CaltechTask(Context& ctx, Model& model, Optimizer& opt, const ImageFolder& folder,
              const ClassifierTaskOptions& o, std::string png, std::string title)
      : ClassifierTask(ctx, model, opt, folder.train, folder.test, o),
        classes_(folder.classes),
        png_(std::move(png)),
        title_(std::move(title)) {}

  void finish(Context& ctx) override {
    (void)ctx;
    const EvalResult& r = last_eval();
    if (r.confusion.empty()) return;
    std::printf("test confusion matrix (rows: true class, columns: predicted)\n%s",
                confusion_text(r.confusion, classes_).c_str());
    create_parent_folders(png_);
    write_confusion_png(png_, r.confusion, classes_,
                        strprintf("%s: test accuracy %.2f%%", title_.c_str(), 100.0 * r.acc));
    std::printf("confusion matrix written to %s\n", png_.c_str());
  }

 private:
  std::vector<std::string> classes_;
  std::string png_, title_;
};

int run(int argc, char** argv) {
  Options o;
  RunConfig rc;
  rc.app = "caltech101";
  rc.epochs = 30;
  RunFlagText text;
  CLI::App app{"Trains the Caltech101 CNN of SPEC.md (W4, 9 layers, 224x224) with pdnn on the "
               "CPU or GPU"};
  // A flag given twice takes its last value, so Makefile targets can be overridden by
  // appending flags (make caltech101 CALTECH_ARGS="--epochs 1").
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--data", o.data, "image folder, one subfolder of photos per class")
      ->capture_default_str();
  app.add_option("--model", o.model, "the network: " + classifier_model_help("caltech101"))
      ->capture_default_str()
      ->check(CLI::IsMember(classifier_model_names("caltech101")));
  app.add_option("--classes", o.classes,
                 "comma-separated class folders to train on; label k = the k-th (default: "
                 "the paper's six when --data has them, else every class folder there, "
                 "sorted)")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
      ->expected(1, 1000);
  app.add_option("--size", o.size, "input side in pixels (a multiple of 8)")
      ->capture_default_str()
      ->check(CLI::Range(8, 4096));
  app.add_option("--batch", o.batch,
                 "batch size (default: the model's, 64; larger than an epoch: one batch of all "
                 "of it)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--images-per-epoch", o.images_per_epoch,
                 "training images per epoch: the first ones of each epoch's fresh order "
                 "(default: W4's 1,280 when the training split has that many, else all of "
                 "them; 0: all of them)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  app.add_option("--optimizer", o.optimizer,
                 "default: the model's (" + model_optimizer_name(kModel) + " for " + kModel +
                     "); one of\n" +
                     optimizer_help())
      ->check(CLI::IsMember(optimizer_name_list()));
  app.add_option("--lr", o.lr, "learning rate (default: the optimizer's)")
      ->check(positive_finite_validator());
  app.add_option_function<std::string>(
         "--augment", [&o](const std::string& v) { o.augment = v == "on"; },
         "flip, random resized crop, rotation, brightness and contrast jitter for training "
         "(default on)")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option_function<std::string>(
         "--center-crop", [&o](const std::string& v) { o.center_crop = v == "on"; },
         "keep the largest centred square of each photo before resizing, as the dcgan app "
         "does (default off: the whole photo, squeezed; on names the data set <name>-crop)")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option_function<std::string>(
         "--normalize", [&o](const std::string& v) { o.half_range = v == "half"; },
         "train: each channel by the training split's mean and std (default); half: (v - 0.5) "
         "/ 0.5, the dcgan app's [-1, 1] (the photo judge's inputs)")
      ->check(CLI::IsMember({"train", "half"}));
  // On a GPU the packing of augmented batches is the host's main work, and a bf16 W4 step
  // outruns it: 4 threads took 12.7 ms a batch against an 11.6 ms step on an H100
  // (results/README.md, bench/bf16-direct-h100); at 7 ms a step on an H200, 8 threads (6.3-9.3
  // ms a batch) left the step waiting 0.2-0.46 s of 60 steps (bench/bww-overlap-h200). So all
  // cores but two (the training thread and the loader's own), 4 to 32.
  const int gpu_loader_threads = std::clamp(omp_get_num_procs() - 2, 4, 32);
  app.add_option("--loader-threads", o.loader_threads,
                 strprintf("threads packing batches on the loader's background thread (default 1 "
                           "on the CPU; with --device cuda all cores but two, 4 to 32: %d here)",
                           gpu_loader_threads))
      ->check(CLI::Range(1, 256));
  app.add_option("--split-seed", o.split_seed,
                 "seed of the per-class train/test split (kept apart from --seed so that every "
                 "run tests on the same photos)")
      ->capture_default_str();
  app.add_option("--confusion", o.confusion,
                 "PNG of the test confusion matrix at the end (default "
                 "runs/caltech101/confusion_<model>_<dataset>.png)");
  add_run_flags(app, rc, o.threads, text, "caltech101");
  add_memory_flags(app, rc);
  if (const int status = parse_run_flags(app, rc, text, argc, argv); status >= 0) return status;
  PDNN_CHECK(o.size % 8 == 0, "--size %d: must be a multiple of 8 (W4 pools three times)",
             o.size);
  const bool gpu = rc.device == "cuda";
  if (o.loader_threads == 0) o.loader_threads = gpu ? gpu_loader_threads : 1;
  const int threads = o.threads > 0 ? o.threads : omp_get_num_procs();
  const std::string classes_note = choose_classes(o, app.count("--classes") > 0);

  // Everything that can be wrong with the input is checked before any output file is touched
  // (the run loop checks the outputs before its first step). The photos decode on all the
  // threads the run may use (on the GPU: all cores, the host's are otherwise idle).
  ImageFolderOptions fo;
  fo.classes = o.classes;
  fo.size = o.size;
  fo.split_seed = o.split_seed;
  fo.center_crop = o.center_crop;
  if (o.half_range) {
    Normalization half;
    for (int c = 0; c < 3; ++c) half.mean[c] = half.std[c] = 0.5f;
    fo.norm = half;
  }
  fo.threads = gpu ? 0 : threads;
  if (!o.augment) fo.augment = AugmentOptions::none();
  const auto t_load = Clock::now();
  const ImageFolder folder = load_image_folder(o.data, fo);
  const double load_s = seconds_since(t_load);
  const std::string dataset = dataset_name(o, folder);
  std::string epoch_note, batch_note;
  if (app.count("--images-per-epoch") == 0)
    o.images_per_epoch =
        default_epoch_images(o.images_per_epoch, "W4's", folder.train.size(), &epoch_note);
  PDNN_CHECK(o.images_per_epoch <= folder.train.size(),
             "--images-per-epoch %lld: the training split of %s has %lld images",
             static_cast<long long>(o.images_per_epoch), o.data.c_str(),
             static_cast<long long>(folder.train.size()));
  const int64_t per_epoch = o.images_per_epoch > 0 ? o.images_per_epoch : folder.train.size();
  const ClassifierModel& zoo = classifier_model(o.model, "caltech101");
  if (o.batch == 0) o.batch = zoo.batch;
  o.batch = fit_batch(o.batch, per_epoch, "an epoch", &batch_note);

  // The set-up's parts are timed: at large sides (W4 at 1344 has a 3.7 G-parameter Dense
  // layer) they took longer than the steps (issue 33's memory table).
  auto t_part = Clock::now();
  // --device cuda without a GPU (or a CUDA build) fails here, in one line.
  Context ctx(threads, rc.seed, run_device(rc), run_gpu(rc));
  apply_device_flags(ctx, rc);
  const double context_s = seconds_since(t_part);
  const int classes = static_cast<int>(folder.classes.size());
  t_part = Clock::now();
  Sequential model = zoo.build(o.size, classes);
  model.reset_parameters(ctx.rng());  // initial weights: the first draws of the seed's stream
  const double init_s = seconds_since(t_part);
  t_part = Clock::now();
  model.to(ctx.device(), ctx);
  std::unique_ptr<Optimizer> opt =
      make_model_optimizer(o.model, o.optimizer, model.parameters(), o.lr);
  const double to_device_s = seconds_since(t_part);

  rc.model = o.model;
  rc.dataset = dataset;
  rc.batch = o.batch;
  for (const ImageFolderDataset* split : {&folder.train, &folder.test})
    for (int64_t i = 0; i < split->size(); ++i) rc.inputs.push_back(o.data + "/" + split->path(i));
  // The same batch, epoch length and training set, or a resumed run would not be the same run.
  rc.must_match = {{"batch", o.batch},
                   {"train_images", folder.train.size()},
                   {"images_per_epoch", o.images_per_epoch},
                   {"size", o.size}};
  if (rc.out.empty()) rc.out = "runs/caltech101/" + o.model + "_" + dataset + ".csv";
  if (rc.profile_out.empty())
    rc.profile_out = "runs/caltech101/profile_" + o.model + "_" + dataset + "_b" +
                     std::to_string(o.batch) + "_t" + std::to_string(ctx.threads()) +
                     (gpu ? "_cuda" : "") + ".csv";
  if (o.confusion.empty())
    o.confusion = "runs/caltech101/confusion_" + o.model + "_" + dataset + ".png";
  rc.extra_outputs = {{"--confusion", o.confusion}};
  rc.run_columns = {{"skipped_files", skipped_summary(folder)}};

  ClassifierTaskOptions to;
  to.train.batch = o.batch;
  to.train.augment = o.augment;
  to.train.images_per_epoch = o.images_per_epoch;
  to.train.threads = o.loader_threads;
  to.prefetch = 1;
  to.eval.batch = std::min(o.batch, std::max<int64_t>(folder.test.size(), 1));
  to.eval.threads = o.loader_threads;
  to.eval.prefetch = 1;
  to.cuda_graph = rc.cuda_graph;
  to.overlap_batch_copy = rc.overlap_batch_copy;
  to.per_class = true;
  to.resources = true;
  CaltechTask task(ctx, model, *opt, folder, to, o.confusion, o.model + " on " + dataset);
  RunLoop loop(ctx, rc, task);  // checks the outputs and resumes before anything is printed
  const RunInfo info = run_info(ctx);
  const std::string device_line = run_device_text(rc, info.gpu);
  if (!batch_note.empty()) std::printf("%s\n", batch_note.c_str());
  std::printf(
      "caltech101: model %s, dataset %s (%s: %s train / %s test, %d classes%s, %dx%d), "
      "batch %lld, %lld images/epoch (%lld steps%s), %s lr %g, augmentation %s, %d threads "
      "+ loader %d, seed %llu | %s | %s | BLAS %s | rev %s\n",
      o.model.c_str(), dataset.c_str(), o.data.c_str(), with_commas(folder.train.size()).c_str(),
      with_commas(folder.test.size()).c_str(), classes,
      classes_note.empty() ? "" : (" (" + classes_note + ")").c_str(), o.size, o.size,
      static_cast<long long>(o.batch), static_cast<long long>(per_epoch),
      static_cast<long long>((per_epoch + o.batch - 1) / o.batch),
      epoch_note.empty() ? "" : ("; " + epoch_note).c_str(),
      model_optimizer_name(o.model, o.optimizer).c_str(),
      static_cast<double>(opt->lr()),
      o.augment ? "on" : "off", ctx.threads(), o.loader_threads,
      static_cast<unsigned long long>(loop.seed()), device_line.c_str(), info.host.c_str(),
      info.blas_text.c_str(), info.git_rev.c_str());
  std::printf("data loaded in %.2f s\n%s", load_s,
              model.summary(Shape{o.batch, 3, o.size, o.size}).c_str());
  std::fflush(stdout);
  t_part = Clock::now();
  plan_step_memory(ctx, model, *opt, Shape{o.batch, 3, o.size, o.size}, rc,
                   rc.steps > 0 ? 0 : to.eval.batch);
  std::printf("set-up: context %.2f s, weights drawn %.2f s, moved to the %s with the "
              "optimizer %.2f s, memory plan %.2f s\n",
              context_s, init_s, gpu ? "GPU" : "CPU", to_device_s, seconds_since(t_part));
  std::fflush(stdout);
  const int status = loop.run();
  report_plan_as_run(ctx, model, *opt, Shape{o.batch, 3, o.size, o.size}, rc,
                     rc.steps > 0 ? 0 : to.eval.batch);
  const LoaderStats ls = task.loader_stats();
  std::printf("peak resident memory %.0f MB, peak device memory %.0f MB (%.0f MB reserved); "
              "loader: %lld batches packed in %.2f s, %.2f s of it hidden behind training, %.2f s "
              "waited for\n",
              static_cast<double>(peak_resident_bytes()) / 1e6,
              static_cast<double>(ctx.device_alloc_stats().peak_in_use) / 1e6,
              static_cast<double>(ctx.device_alloc_stats().peak_reserved) / 1e6,
              static_cast<long long>(ls.batches), ls.prepare_s, ls.hidden_s(), ls.wait_s);
  if (ctx.has_cuda()) {  // beside pdnn's allocator: the driver, kernel images (loaded lazily), handles
    const double planned = static_cast<double>(ctx.cuda().context_bytes()) / 1e6;
    const double now = static_cast<double>(ctx.cuda().context_bytes(true)) / 1e6;
    std::printf("CUDA context %.0f MB at the end (%.0f MB when first measured)\n", now, planned);
  }
  return status;
}
#else
int run(int, char**) {
  std::fprintf(stderr, "caltech101: this pdnn was built without OpenCV, which reads the photos "
                       "(scripts/tools/install_deps.sh, then rebuild)\n");
  return 1;
}
#endif

}  // namespace

int main(int argc, char** argv) { return pdnn::run_app("caltech101", run, argc, argv); }
