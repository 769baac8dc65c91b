// The mnist app's run (mnist_app.h): flags, data, model and optimizer; lib/train/run_loop.h runs
// the training.
#include "mnist_app.h"

#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "core/context.h"
#include "core/error.h"
#include "core/fault_hook.h"
#include "core/cuda_state.h"
#include "data/dataset.h"
#include "data/idx.h"
#include "workloads/classifier/classifier_task.h"
#include "workloads/model_zoo.h"
#include "run/data_defaults.h"
#include "run/run_flags.h"
#include "run/run_info.h"
#include "train/run_loop.h"
#include "train/step_memory.h"
#include "run/timing.h"

namespace {

using namespace pdnn;
using Clock = std::chrono::steady_clock;

// The flags of this app; the run loop's own (epochs, seed, files, ...) are in RunConfig.
struct Options {
  std::string model = "small", dataset = "mnist", data, optimizer;
  int threads = 0;
  int64_t batch = 0;
  float lr = -1.f;
};

bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// --data, or the data set's folder under datasets/: for MNIST the full set when it is there,
// else the offline mnist-npm10k build (datasets/get_mnist.sh makes one of the two).
std::string resolve_data_dir(const Options& o) {
  if (!o.data.empty()) return o.data;
  if (o.dataset == "fashion-mnist") {
    if (!is_dir("datasets/fashion-mnist"))
      PDNN_FAIL("no datasets/fashion-mnist: run datasets/get_fashion_mnist.sh (or pass --data)");
    return "datasets/fashion-mnist";
  }
  if (is_dir("datasets/mnist")) return "datasets/mnist";
  if (is_dir("datasets/mnist-npm10k")) return "datasets/mnist-npm10k";
  PDNN_FAIL(
      "no MNIST in datasets/mnist or datasets/mnist-npm10k: run datasets/get_mnist.sh "
      "(or pass --data DIR)");
}

}  // namespace

int mnist_app(int argc, char** argv, pdnn::FaultHook* faults) {
  using namespace pdnn;
  Options o;
  RunConfig rc;
  rc.app = "mnist";
  rc.epochs = 5;
  RunFlagText text;
  CLI::App app{"Trains the MNIST CNNs of SPEC.md (W2 small, W3 keras) with pdnn on the CPU or GPU"};
  // A flag given twice takes its last value, so Makefile targets can be overridden by
  // appending flags (make mnist MNIST_ARGS="--epochs 1").
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--model", o.model, classifier_model_help("mnist"))
      ->capture_default_str()
      ->check(CLI::IsMember(classifier_model_names("mnist")));
  app.add_option("--dataset", o.dataset, "mnist or fashion-mnist (picks the default --data)")
      ->capture_default_str()
      ->check(CLI::IsMember({"mnist", "fashion-mnist"}));
  app.add_option("--data", o.data,
                 "folder with the four IDX files (default datasets/mnist, else "
                 "datasets/mnist-npm10k; datasets/fashion-mnist)");
  app.add_option("--batch", o.batch,
                 "batch size (default: the model's, see --model; larger than the training "
                 "set: one batch of all of it)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--optimizer", o.optimizer,
                 "default: the model's, see --model; one of\n" + optimizer_help())
      ->check(CLI::IsMember(optimizer_name_list()));
  app.add_option("--lr", o.lr, "learning rate (default: the optimizer's)")
      ->check(positive_finite_validator());
  add_run_flags(app, rc, o.threads, text, "mnist");
  add_memory_flags(app, rc);
  if (const int status = parse_run_flags(app, rc, text, argc, argv); status >= 0) return status;
  if (o.batch == 0) o.batch = classifier_model(o.model, "mnist").batch;

  // Everything that can be wrong with the input is checked before any output file is touched
  // (the run loop checks the outputs before its first step).
  const std::string dir = resolve_data_dir(o);
  const auto t_load = Clock::now();
  const ImageDataset data = load_idx_dataset(dir, o.dataset);
  const Shape img = data.train.images.shape();
  PDNN_CHECK(img.h() == img.w() && img.h() >= 6,
             "%s: images are %lldx%lld; the MNIST models need square images of at least 6x6",
             dir.c_str(), static_cast<long long>(img.h()), static_cast<long long>(img.w()));

  std::string batch_note;
  o.batch = fit_batch(o.batch, data.train.size(), "the training set", &batch_note);

  // --device cuda without a GPU (or a CUDA build) fails here, in one line.
  Context ctx(o.threads, rc.seed, run_device(rc), run_gpu(rc));
  ctx.set_fault_hook(faults);
  apply_device_flags(ctx, rc);
  Sequential model = classifier_model(o.model, "mnist").build(img.h(), data.num_classes);
  model.reset_parameters(ctx.rng());  // initial weights: the first draws of the seed's stream
  model.to(ctx.device(), ctx);
  std::unique_ptr<Optimizer> opt =
      make_model_optimizer(o.model, o.optimizer, model.parameters(), o.lr);
  const std::string opt_name = model_optimizer_name(o.model, o.optimizer);

  rc.model = o.model;
  rc.dataset = data.name;
  rc.batch = o.batch;
  rc.inputs = data.files;
  // The same batch size and training set, or a resumed run would not be the same run.
  rc.must_match = {{"batch", o.batch}, {"train_images", data.train.size()}};
  if (rc.out.empty()) rc.out = "runs/mnist/" + o.model + "_" + data.name + ".csv";
  if (rc.profile_out.empty())
    rc.profile_out = "runs/mnist/profile_" + o.model + "_" + data.name + "_b" +
                     std::to_string(o.batch) + "_t" + std::to_string(ctx.threads()) + ".csv";

  // The sets are in memory: batches are copied out between steps (no prefetch thread).
  const TensorDataset train_set(data.train, data.num_classes), test_set(data.test, data.num_classes);
  ClassifierTaskOptions to;
  to.train.batch = o.batch;
  to.eval.batch =
      std::min(std::max<int64_t>(o.batch, 128), std::max<int64_t>(data.test.size(), 1));
  to.cuda_graph = rc.cuda_graph;
  to.overlap_batch_copy = rc.overlap_batch_copy;
  ClassifierTask task(ctx, model, *opt, train_set, test_set, to);
  RunLoop loop(ctx, rc, task);  // checks the outputs and resumes before anything is printed
  const RunInfo info = run_info(ctx);
  const std::string device_line = run_device_text(rc, info.gpu);
  if (!batch_note.empty()) std::printf("%s\n", batch_note.c_str());
  std::printf(
      "mnist: model %s, dataset %s (%s: %lld train / %lld test, %lldx%lld), batch %lld, "
      "%s%s, %d threads, seed %llu | %s | %s | BLAS %s | rev %s\n",
      o.model.c_str(), data.name.c_str(), dir.c_str(), static_cast<long long>(data.train.size()),
      static_cast<long long>(data.test.size()), static_cast<long long>(img.h()),
      static_cast<long long>(img.w()), static_cast<long long>(o.batch), opt_name.c_str(),
      o.lr > 0 ? strprintf(" lr %g", o.lr).c_str() : "", ctx.threads(),
      static_cast<unsigned long long>(loop.seed()), device_line.c_str(), info.host.c_str(),
      info.blas_text.c_str(), info.git_rev.c_str());
  std::printf("data loaded in %.2f s\n%s", seconds_since(t_load),
              model.summary(img.with_n(o.batch)).c_str());
  plan_step_memory(ctx, model, *opt, img.with_n(o.batch), rc, rc.steps > 0 ? 0 : to.eval.batch);
  const int status = loop.run();
  report_plan_as_run(ctx, model, *opt, img.with_n(o.batch), rc, rc.steps > 0 ? 0 : to.eval.batch);
  return status;
}
