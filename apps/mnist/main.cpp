// build/bin/mnist: trains W2 (small) or W3 (keras) of SPEC.md on MNIST-layout IDX data and
// writes one CSV row per epoch (train/test loss and accuracy, time, images/s). Also the
// step-time probe of the benchmarks (--steps) and the per-layer profile (--profile).
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "cuda/cuda_state.h"
#include "data/idx.h"
#include "data/loader.h"
#include "losses/softmax_cross_entropy.h"
#include "model/checkpoint.h"
#include "model/mnist_models.h"
#include "train/classifier_trainer.h"
#include "train/csv.h"
#include "train/progress.h"
#include "train/timing.h"
#include "train/profiler.h"
#include "train/run_info.h"

namespace {

using namespace pdnn;
using Clock = std::chrono::steady_clock;
constexpr int64_t kBlock = 10;  // GPU steps per timed block

struct Options {
  std::string model = "small", dataset = "mnist", data, optimizer, out, checkpoint, profile_out,
              save_init, bench_csv, device = "cpu", cuda_graph = "on";
  bool tf32 = false;
  int epochs = 5, threads = 0;
  int64_t batch = 0, steps = 0;
  float lr = -1.f;
  uint64_t seed = 1;
  bool resume = false, profile = false;
};

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

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

int run(int argc, char** argv) {
  Options o;
  CLI::App app{"Trains the MNIST CNNs of SPEC.md (W2 small, W3 keras) with pdnn on the CPU or GPU"};
  // A flag given twice takes its last value, so Makefile targets can be overridden by
  // appending flags (make mnist MNIST_ARGS="--epochs 1").
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--model", o.model, "small (W2) or keras (W3)")
      ->capture_default_str()
      ->check(CLI::IsMember({"small", "keras"}));
  app.add_option("--dataset", o.dataset, "mnist or fashion-mnist (picks the default --data)")
      ->capture_default_str()
      ->check(CLI::IsMember({"mnist", "fashion-mnist"}));
  app.add_option("--data", o.data,
                 "folder with the four IDX files (default datasets/mnist, else "
                 "datasets/mnist-npm10k; datasets/fashion-mnist)");
  app.add_option("--epochs", o.epochs, "epochs in all (a resumed run continues up to this)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_option("--batch", o.batch, "batch size (default 8 for small, 128 for keras)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--optimizer", o.optimizer,
                 "adam, adadelta, adagrad or sgd (default: adam for small, adadelta rho 0.95 "
                 "for keras)")
      ->check(CLI::IsMember({"adam", "adadelta", "adagrad", "sgd"}));
  app.add_option("--lr", o.lr, "learning rate (default: the optimizer's, adam 1e-3, adadelta 1)")
      ->check(CLI::PositiveNumber);
  app.add_option("--device", o.device, "cpu or cuda (the first GPU)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--cuda-graph", o.cuda_graph,
                 "on the GPU, capture the whole training step as one CUDA graph and replay it")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  app.add_flag("--tf32", o.tf32, "on the GPU, run the fp32 GEMMs on the tensor cores as TF32");
  app.add_option("--threads", o.threads, "OpenMP/OpenBLAS threads (0 = all cores)")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  app.add_option("--seed", o.seed, "seed of the initial weights, data order and dropout")
      ->capture_default_str();
  app.add_option(
      "--out", o.out,
      "CSV to append one row per epoch to (default results/mnist/<model>_<dataset>.csv)");
  app.add_option("--checkpoint", o.checkpoint, "checkpoint file, written at each epoch end");
  app.add_option("--save-init", o.save_init,
                 "also write the initial weights as a checkpoint (for scripts/torch_reference.py)");
  app.add_flag("--resume", o.resume, "continue from --checkpoint (weights, optimizer, epoch, RNG)");
  app.add_option("--steps", o.steps,
                 "benchmark: run this many training steps (over as many epochs as that takes; "
                 "no evaluation, CSV or checkpoint) and print step times")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_option("--bench-csv", o.bench_csv,
                 "with --steps: append the step-time row (median/min/max ms) to this CSV")
      ->needs("--steps");
  app.add_flag("--profile", o.profile, "per-layer time table (printed, and written as CSV)");
  app.add_option(
      "--profile-out", o.profile_out,
      "profile CSV (default results/mnist/profile_<model>_<dataset>_b<batch>_t<threads>.csv)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "mnist: %s (see --help)\n", e.what());
    return 2;
  }
  if (o.resume && o.checkpoint.empty()) {
    std::fprintf(stderr, "mnist: --resume needs --checkpoint PATH (see --help)\n");
    return 2;
  }
  if (o.batch == 0) o.batch = o.model == "keras" ? 128 : 8;

  // Everything that can be wrong with the input is checked before any output file is touched.
  const std::string dir = resolve_data_dir(o);
  const auto t_load = Clock::now();
  const ImageDataset data = load_idx_dataset(dir, o.dataset);
  const Shape img = data.train.images.shape();
  PDNN_CHECK(img.h() == img.w() && img.h() >= 6,
             "%s: images are %lldx%lld; the MNIST models need square images of at least 6x6",
             dir.c_str(), static_cast<long long>(img.h()), static_cast<long long>(img.w()));

  const Device dev = o.device == "cuda" ? Device::CUDA : Device::CPU;
  Context ctx(o.threads, o.seed, dev);  // --device cuda without a GPU fails here, in one line
  if (ctx.has_cuda()) ctx.cuda().set_tf32(o.tf32);
  Sequential model = make_mnist_model(o.model, img.h(), data.num_classes);
  model.reset_parameters(ctx.rng());  // initial weights: the first draws of the seed's stream
  if (!o.save_init.empty()) save_checkpoint(o.save_init, model, nullptr, 0);
  model.to(dev, ctx);
  std::unique_ptr<Optimizer> opt = make_mnist_optimizer(o.model, o.optimizer, model, o.lr);
  const std::string opt_name = o.optimizer.empty() ? default_mnist_optimizer(o.model) : o.optimizer;

  int start_epoch = 0;
  if (o.resume) {
    const CheckpointInfo ck = load_checkpoint(o.checkpoint, model, opt.get(), &ctx);
    const auto seed = ck.values.find("seed"), counter = ck.values.find("rng_counter");
    PDNN_CHECK(seed != ck.values.end() && counter != ck.values.end(),
               "%s: not an mnist checkpoint (no seed / rng_counter values)", o.checkpoint.c_str());
    const uint64_t ck_seed = static_cast<uint64_t>(seed->second);
    PDNN_CHECK(app.count("--seed") == 0 || ck_seed == o.seed,
               "%s was made with --seed %llu, not %llu", o.checkpoint.c_str(),
               static_cast<unsigned long long>(ck_seed), static_cast<unsigned long long>(o.seed));
    // The same batch size and training set, or the resumed run would not be the same run.
    for (const auto& [key, now] :
         {std::pair<const char*, int64_t>{"batch", o.batch}, {"train_images", data.train.size()}}) {
      const auto it = ck.values.find(key);
      PDNN_CHECK(it == ck.values.end() || it->second == now,
                 "%s was made with %s %lld, this run has %lld", o.checkpoint.c_str(), key,
                 static_cast<long long>(it->second), static_cast<long long>(now));
    }
    o.seed = ck_seed;
    ctx.rng().seed(ck_seed);
    ctx.rng().set_counter(static_cast<uint64_t>(counter->second));
    start_epoch = static_cast<int>(ck.epoch);
  }
  // The data order's own stream (value 0 of the run's stream, which draws never use, as they
  // count from 1): epoch e's order depends on the seed and e only, not on dropout's draws.
  const uint64_t data_seed = Rng::at(o.seed, 0);

  const RunInfo info = run_info(ctx);
  const std::string device_line =
      ctx.has_cuda() ? strprintf("cuda: %s | %s, CUDA graph %s", info.gpu.c_str(),
                                 o.tf32 ? "TF32" : "fp32", o.cuda_graph.c_str())
                     : std::string("cpu");
  std::printf(
      "mnist: model %s, dataset %s (%s: %lld train / %lld test, %lldx%lld), batch %lld, "
      "%s%s, %d threads, seed %llu | %s | %s | BLAS %s | rev %s\n",
      o.model.c_str(), data.name.c_str(), dir.c_str(), static_cast<long long>(data.train.size()),
      static_cast<long long>(data.test.size()), static_cast<long long>(img.h()),
      static_cast<long long>(img.w()), static_cast<long long>(o.batch), opt_name.c_str(),
      o.lr > 0 ? (" lr " + fmt(o.lr, 6)).c_str() : "", ctx.threads(),
      static_cast<unsigned long long>(o.seed), device_line.c_str(), info.host.c_str(),
      info.blas_core.c_str(), info.git_rev.c_str());
  std::printf("data loaded in %.2f s\n%s", seconds_since(t_load),
              model.summary(img.with_n(o.batch)).c_str());
  if (o.resume) std::printf("resumed from %s after epoch %d\n", o.checkpoint.c_str(), start_epoch);
  if (start_epoch >= o.epochs) {
    std::printf("nothing to do: the checkpoint has %d epochs, --epochs is %d\n", start_epoch,
                o.epochs);
    return 0;
  }

  std::unique_ptr<CsvWriter> csv;
  const std::string out =
      !o.out.empty() ? o.out : "results/mnist/" + o.model + "_" + data.name + ".csv";
  if (o.steps == 0)
    csv = std::make_unique<CsvWriter>(
        out, std::vector<std::string>{"app", "model", "dataset", "device", "gpu", "threads", "batch",
                                      "epoch", "train_loss", "train_acc", "test_loss", "test_acc",
                                      "seconds", "images_per_s", "git_rev", "host", "timestamp"});
  Profiler profiler;
  if (o.profile) ctx.set_profiler(&profiler);

  BatchLoader loader(data.train, o.batch);
  ClassifierTrainer trainer(model, *opt, o.cuda_graph == "on");
  // Batches are assembled in host memory the GPU can copy from asynchronously (pinned).
  Tensor x(img.with_n(o.batch), DType::F32, ctx.staging_allocator());
  Tensor y(Shape{o.batch}, DType::I32, ctx.staging_allocator());
  std::vector<double> step_ms;
  int64_t steps = 0;
  const int64_t eval_batch = std::max<int64_t>(o.batch, 128);
  for (int epoch = start_epoch; o.steps > 0 ? steps < o.steps : epoch < o.epochs; ++epoch) {
    Rng order = BatchLoader::epoch_rng(data_seed, epoch);
    loader.start_epoch(&order);
    model.train(true);
    Progress progress(epoch, o.epochs, loader.num_batches());
    trainer.reset_metrics(ctx);
    int64_t seen = 0, checked_batch = 0;
    const auto t0 = Clock::now();
    auto tb = Clock::now();  // start of the current block of timed steps
    int64_t in_block = 0;
    for (int64_t b = 0; b < loader.num_batches(); ++b) {
      if (o.profile) profiler.begin_step(ctx);
      const int64_t nb = loader.load(b, x, y);
      trainer.step(ctx, x, y);
      if (o.profile) profiler.end_step(ctx);
      seen += nb;
      ++steps;
      // Step times: on the GPU the work is queued, so steps are timed in blocks of
      // kBlock ending in a synchronisation (per-step syncs would time the launch latency).
      const bool last = b + 1 == loader.num_batches() || (o.steps > 0 && steps >= o.steps);
      if (++in_block == (ctx.has_cuda() ? kBlock : 1) || last) {
        ctx.synchronize();
        step_ms.push_back(1e3 * seconds_since(tb) / static_cast<double>(in_block));
        tb = Clock::now();
        in_block = 0;
      }
      // Metrics are read back (a GPU sync) only when the progress line prints.
      if (progress.due(b + 1)) {
        const ClassifierMetrics m = trainer.metrics(ctx);
        PDNN_CHECK(std::isfinite(m.loss_sum),
                   "training diverged: non-finite loss in epoch %d between batches %lld and %lld",
                   epoch + 1, static_cast<long long>(checked_batch + 1), static_cast<long long>(b + 1));
        checked_batch = b + 1;
        progress.update(b + 1, seen, m.loss(), m.acc());
      }
      if (o.steps > 0 && steps >= o.steps) break;
    }
    const double secs = seconds_since(t0);
    progress.finish();
    if (o.steps > 0) continue;
    const ClassifierMetrics m = trainer.metrics(ctx);

    const EvalResult test = evaluate_classifier(ctx, model, data.test, eval_batch);
    const double train_loss = m.loss(), train_acc = m.acc();
    std::printf(
        "epoch %d/%d  %s  train loss %.4f acc %.4f  test loss %.4f acc %.4f  "
        "%.1f s  %.0f img/s\n",
        epoch + 1, o.epochs, data.name.c_str(), train_loss, train_acc, test.loss, test.acc, secs,
        seen / secs);
    std::fflush(stdout);
    if (!o.checkpoint.empty())
      save_checkpoint(o.checkpoint, model, opt.get(), epoch + 1,
                      {{"seed", static_cast<int64_t>(o.seed)},
                       {"rng_counter", static_cast<int64_t>(ctx.rng().counter())},
                       {"batch", o.batch},
                       {"train_images", data.train.size()}},
                      &ctx);
    csv->row({"pdnn", o.model, data.name, device_name(ctx.device()), info.gpu,
              std::to_string(ctx.threads()),
              std::to_string(o.batch), std::to_string(epoch + 1), fmt(train_loss, 6),
              fmt(train_acc, 6), fmt(test.loss, 6), fmt(test.acc, 6), fmt(secs, 3),
              fmt(seen / secs, 1), info.git_rev, info.host, iso8601_utc_now()});
  }

  if (o.steps > 0) {
    // The first steps (blocks on the GPU) fault in buffers, warm caches and capture the graph:
    // left out of the statistics.
    const size_t skip = step_ms.size() > 4 ? 2 : 0;
    std::vector<double> timed(step_ms.begin() + static_cast<long>(skip), step_ms.end());
    const TimingStats st = timing_stats(timed);
    const double med = st.median, lo = st.min, hi = st.max;
    const std::string mode = !ctx.has_cuda()          ? ""
                             : trainer.graph_replays() > 0 ? "graph"
                                                           : "eager";
    const std::string precision = !ctx.has_cuda() ? "" : o.tf32 ? "tf32" : "fp32";
    std::printf("step_ms model=%s batch=%lld threads=%d steps=%zu median=%.4f min=%.4f max=%.4f%s\n",
                o.model.c_str(), static_cast<long long>(o.batch), ctx.threads(), timed.size(),
                med, lo, hi,
                ctx.has_cuda()
                    ? (" device=cuda mode=" + mode + " precision=" + precision).c_str()
                    : "");
    if (!o.bench_csv.empty())
      CsvWriter(o.bench_csv, {"app", "model", "dataset", "device", "gpu", "mode", "precision",
                              "threads", "batch", "steps", "median_ms", "min_ms", "max_ms",
                              "blas_core", "git_rev", "host", "timestamp"})
          .row({"pdnn", o.model, data.name, device_name(ctx.device()), info.gpu, mode, precision,
                std::to_string(ctx.threads()), std::to_string(o.batch),
                std::to_string(timed.size()), fmt(med, 4), fmt(lo, 4), fmt(hi, 4),
                info.blas_core, info.git_rev, info.host, iso8601_utc_now()});
  }
  if (o.profile) {
    const std::string p = !o.profile_out.empty()
                              ? o.profile_out
                              : "results/mnist/profile_" + o.model + "_" + data.name + "_b" +
                                    std::to_string(o.batch) + "_t" + std::to_string(ctx.threads()) +
                                    ".csv";
    std::printf("%s", profiler.table().c_str());
    profiler.write_csv(p);
    std::printf("profile written to %s\n", p.c_str());
  }
  if (csv) std::printf("results in %s\n", csv->path().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return pdnn::run_app("mnist", run, argc, argv); }
