// Throughput of the image-folder data path, to size the loader's core budget (a benchmark,
// not a test): at each thread count, how many photos per second are decoded into the cache
// (once per run), and how many training samples (augmented) and test samples (plain) per
// second are packed into batches at --size. Also the train split's per-channel mean and std
// (the normalisation the loader uses), against ImageNet's. With --masks, --data is an
// image/mask pair folder (data/image_mask_pairs.h) and the batches carry their per-pixel
// targets (segmentation).
//   build/bin/bench_loader [--data datasets/caltech101-6] [--size 224] [--threads 1,2]
//                          [--batches 20] [--csv results/bench/loader.csv]
//   build/bin/bench_loader --data datasets/ccp-200 --masks masks --size 256 --batch 16
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "core/context.h"
#include "data/dataset_loader.h"
#include "run/csv.h"
#include "run/run_info.h"
#include "run/timing.h"
#ifdef PDNN_HAVE_OPENCV
#include "data/image_folder.h"
#include "data/image_mask_pairs.h"
#endif

using namespace pdnn;

namespace {

#ifdef PDNN_HAVE_OPENCV
int run(int argc, char** argv) {
  CLI::App app{"bench_loader: images/s of decoding and of batch packing (augmented and plain)"};
  std::string data = "datasets/caltech101-6", csv_path, masks;
  int size = 224, batches = 20, repeats = 3;
  int64_t batch = 64;
  std::vector<int> threads = {1, 2};
  app.add_option("--data", data, "image folder (one subfolder per class)")->capture_default_str();
  app.add_option("--size", size, "sample side")->capture_default_str()->check(CLI::Range(1, 4096));
  app.add_option("--batch", batch, "images per batch")->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--batches", batches, "batches timed per pass")->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--repeats", repeats, "passes over the batches; the median batch is reported")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  app.add_option("--threads", threads, "thread counts")->delimiter(',')->capture_default_str();
  app.add_option("--csv", csv_path, "append one row per measurement to this CSV");
  app.add_option("--masks", masks,
                 "read --data as an image/mask pair folder with this label set (masks, masks59): "
                 "segmentation batches, images and per-pixel targets");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  std::unique_ptr<CsvWriter> csv;
  if (!csv_path.empty())
    csv = std::make_unique<CsvWriter>(
        csv_path, std::vector<std::string>{"bench", "what", "data", "size", "cache", "batch",
                                           "threads", "images", "images_per_s", "median_ms",
                                           "min_ms", "max_ms", "git_rev", "host", "cpu",
                                           "timestamp"});
  std::printf("bench_loader: %s at %dx%d, batch %lld, %d batches x %d repeats; the machine may "
              "be shared: compare rows of one run only\n",
              data.c_str(), size, size, static_cast<long long>(batch), batches, repeats);
  std::printf("%-22s %7s %10s %12s %24s\n", "what", "threads", "images", "images/s",
              "ms per unit: median (min-max)");
  bool stats_done = false;
  for (const int t : threads) {
    Context ctx(t);
    const RunInfo info = run_info(ctx);
    // The folder as one of the two kinds; the rest reads it as Datasets.
    std::optional<ImageFolder> folder;
    std::optional<ImageMaskFolder> pairs;
    const auto t0 = std::chrono::steady_clock::now();
    if (masks.empty()) {
      ImageFolderOptions opt;
      opt.size = size;
      opt.threads = t;
      opt.log = nullptr;
      folder.emplace(load_image_folder(data, opt));
    } else {
      ImageMaskOptions opt;
      opt.masks = masks;
      opt.size = size;
      opt.threads = t;
      opt.log = nullptr;
      pairs.emplace(load_image_mask_folder(data, opt));
    }
    const double decode_s = seconds_since(t0);
    struct View {
      const Dataset& train;
      const Dataset& test;
      int64_t files;
      int cache_size;
      size_t cache_bytes;
      Normalization norm;
    };
    const View f = folder ? View{folder->train, folder->test, folder->files, folder->cache_size,
                                 folder->cache_bytes, folder->norm}
                          : View{pairs->train, pairs->test, pairs->train.size() + pairs->test.size(),
                                 pairs->cache_size, pairs->cache_bytes, pairs->norm};
    const int64_t photos = f.train.size() + f.test.size();
    auto report = [&](const char* what, int64_t images, double ips, const TimingStats& ms) {
      std::printf("%-22s %7d %10lld %12.0f %10.2f (%.2f-%.2f)\n", what, t,
                  static_cast<long long>(images), ips, ms.median, ms.min, ms.max);
      if (csv)
        csv->row({"loader", what, data, std::to_string(size), std::to_string(f.cache_size),
                  std::to_string(batch), std::to_string(t), std::to_string(images), fmt(ips, 1),
                  fmt(ms.median, 3), fmt(ms.min, 3), fmt(ms.max, 3), info.git_rev, info.host,
                  info.cpu_model, info.timestamp});
    };
    const double per_photo_ms = decode_s * 1e3 / static_cast<double>(f.files);
    report("decode+resize (once)", f.files, static_cast<double>(f.files) / decode_s,
           TimingStats{per_photo_ms, per_photo_ms, per_photo_ms, 1});
    if (!stats_done) {
      std::printf("# %lld photos, cache %dx%d = %.0f MB; train split RGB mean %.3f %.3f %.3f, "
                  "std %.3f %.3f %.3f (ImageNet: 0.485 0.456 0.406 / 0.229 0.224 0.225)\n",
                  static_cast<long long>(photos), f.cache_size, f.cache_size,
                  static_cast<double>(f.cache_bytes) / 1e6, f.norm.mean[0], f.norm.mean[1],
                  f.norm.mean[2], f.norm.std[0], f.norm.std[1], f.norm.std[2]);
      if (pairs) std::printf("# %s\n", pairs->describe().c_str());
      stats_done = true;
    }
    for (const bool augment : {true, false}) {
      const Dataset& split = augment ? f.train : f.test;
      LoaderOptions lo;
      lo.batch = batch;
      lo.augment = augment;
      lo.threads = t;
      lo.seed = 1;
      DatasetLoader loader(split, lo);
      Tensor x, target;
      std::vector<int32_t> y;
      loader.load(0, x, y, &target);  // warm-up: the batch buffer's pages
      std::vector<double> ms;
      int64_t images = 0;
      double total = 0;
      for (int r = 0; r < repeats; ++r) {
        loader.start_epoch(r);
        for (int64_t b = 0; b < std::min<int64_t>(batches, loader.num_batches()); ++b) {
          const auto s = std::chrono::steady_clock::now();
          images += loader.load(b, x, y, &target);
          const double took = seconds_since(s);
          total += took;
          ms.push_back(took * 1e3);
        }
      }
      report(augment ? "train batch (augment)" : "test batch (plain)", images,
             static_cast<double>(images) / total, timing_stats(ms));
    }
  }
  return 0;
}
#else
int run(int, char**) {
  std::fprintf(stderr, "bench_loader: built without OpenCV, no image folders to measure\n");
  return 1;
}
#endif

}  // namespace

int main(int argc, char** argv) { return run_app("bench_loader", run, argc, argv); }
