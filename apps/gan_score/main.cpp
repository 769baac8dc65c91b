// build/bin/gan_score: the quality of generated images, judged by a pdnn classifier trained on
// the real data: for each set of samples (IDX files: build/bin/dcgan --samples, and
// scripts/twins/torch_reference.py dcgan's), and for the held-out real images through the same path,
// the entropy of the predicted classes, the mean confidence, the Inception-score analogue and
// the Fréchet distance of the classifier's penultimate features to the real training images'
// (lib/workloads/dcgan/gan_quality.h). One CSV row per set; a table on stdout.
//   MNIST and Fashion-MNIST (--dataset fashion-mnist|mnist, the IDX folder): the judge is W3
//     (build/bin/mnist --model keras --checkpoint F); the samples are the grey 64x64 IDX files,
//     the real images go 28 -> 64 -> bytes -> 28 as the samples do.
//   The Caltech photos (--dataset caltech, or --data any folder of class folders): the judge is
//     the photo judge "photo64" (build/bin/caltech101 --model photo64 --size 64 --center-crop
//     on --normalize half --save-weights F, results/dcgan/judge/); the samples are colour
//     64x64 IDX files; the real photos are the dcgan app's own (centre-cropped, 64x64 bytes),
//     split as the judge's training split: the training half is the reference of the Fréchet
//     distance, the test half the held-out set.
#include <CLI/CLI.hpp>
#include <omp.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "data/idx.h"
#include "model/checkpoint.h"
#include "run/csv.h"
#include "run/output_files.h"
#include "run/run_flags.h"
#include "run/run_info.h"
#include "run/timing.h"
#include "workloads/classifier/caltech_models.h"
#include "workloads/dcgan/gan_quality.h"
#include "workloads/model_zoo.h"
#ifdef PDNN_HAVE_OPENCV
#include "data/image_folder.h"
#endif

namespace {

using namespace pdnn;

const std::vector<std::string> kColumns = {
    "app",        "set",           "file",        "dataset",         "classifier", "images",
    "accuracy",   "class_entropy", "mean_confidence", "inception_score", "fid",  "min_class_fraction",
    "class_fractions", "git_rev",  "host",        "timestamp"};

Tensor first_images(const Tensor& images, int64_t n) {
  const Shape& s = images.shape();
  Tensor out(s.with_n(n));
  std::copy(images.data(), images.data() + n * (s.numel() / s.n()), out.data());
  return out;
}

// The real images of one data set as the judge sees them: the reference (training images) and
// the held-out set with its labels, already in the samples' path.
struct RealImages {
  std::string name;
  std::vector<std::string> files;  // inputs no output may be
  Tensor reference, heldout;
  std::vector<int32_t> heldout_labels;
  int side = 0, channels = 1;
};

#ifdef PDNN_HAVE_OPENCV
// The first n images of a split as colour planes of bytes (N x 3 x side x side), from the
// folder's cache (side x side x 3 RGB).
IdxImages split_bytes(const ImageFolderDataset& split, int64_t n) {
  const int64_t side = split.cache_size();
  IdxImages im;
  im.n = n;
  im.channels = 3;
  im.rows = im.cols = side;
  im.pixels.resize(static_cast<size_t>(n * 3 * side * side));
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* p = split.cached(i);
    uint8_t* o = im.pixels.data() + i * 3 * side * side;
    for (int64_t y = 0; y < side; ++y)
      for (int64_t x = 0; x < side; ++x)
        for (int64_t c = 0; c < 3; ++c) o[(c * side + y) * side + x] = p[(y * side + x) * 3 + c];
  }
  return im;
}
#endif

// The shipped photos or any folder of class folders, as the dcgan app reads them (centre-
// cropped to 64x64 bytes), split as the caltech101 app splits them (the judge's training half).
// Both halves whole (about 1,300 photos each for the shipped six classes): a reference or a
// held-out set cut to the first n would be a few classes only (the split is in class order).
RealImages real_photos(const std::string& dir, const std::vector<std::string>& classes,
                       uint64_t split_seed, int threads) {
#ifdef PDNN_HAVE_OPENCV
  ImageFolderOptions fo;
  fo.classes = classes;
  fo.size = 64;
  fo.cache_size = 64;
  fo.center_crop = true;
  fo.split_seed = split_seed;
  fo.threads = threads;
  fo.augment = AugmentOptions::none();
  Normalization half;  // the dcgan app's and the judge's [-1, 1] (photo_input applies it)
  for (int c = 0; c < 3; ++c) half.mean[c] = half.std[c] = 0.5f;
  fo.norm = half;
  const ImageFolder f = load_image_folder(dir, fo);
  RealImages r;
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  r.name = d.substr(d.find_last_of('/') + 1);
  for (const ImageFolderDataset* split : {&f.train, &f.test})
    for (int64_t i = 0; i < split->size(); ++i) r.files.push_back(dir + "/" + split->path(i));
  const int64_t n_ref = f.train.size(), n_test = f.test.size();
  r.reference = photo_input(split_bytes(f.train, n_ref), dir + " (training split)");
  r.heldout = photo_input(split_bytes(f.test, n_test), dir + " (test split)");
  for (int64_t i = 0; i < n_test; ++i) r.heldout_labels.push_back(f.test.label(i));
  r.side = 64;
  r.channels = 3;
  return r;
#else
  (void)classes, (void)split_seed, (void)threads;
  PDNN_FAIL("--data %s: photos need OpenCV, and this pdnn was built without it", dir.c_str());
#endif
}

double accuracy(const Classified& c, const std::vector<int32_t>& labels) {
  int64_t ok = 0;
  for (int64_t i = 0; i < c.count; ++i) {
    const float* p = c.probs.data() + i * c.classes;
    ok += std::max_element(p, p + c.classes) - p == labels[static_cast<size_t>(i)];
  }
  return static_cast<double>(ok) / static_cast<double>(c.count);
}

int run(int argc, char** argv) {
  std::string classifier, model, data, dataset = "fashion-mnist", out, device = "cpu";
  std::vector<std::string> sets, classes = caltech_paper_classes();
  int64_t n = 10000;
  uint64_t split_seed = 0;
  int threads = 0;
  CLI::App app{"Scores generated images with a pdnn classifier (Inception-score and FID "
               "analogues)"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--classifier", classifier,
                 "the judge's weights (build/bin/mnist --checkpoint, or build/bin/caltech101 "
                 "--save-weights for the photos)")
      ->required();
  app.add_option("--model", model,
                 "the judge's model (default keras for the IDX data sets, photo64 for "
                 "photos): " + classifier_model_help())
      ->check(CLI::IsMember(classifier_model_names()));
  app.add_option("--dataset", dataset,
                 "fashion-mnist or mnist (IDX), or caltech (the shipped photos): picks the "
                 "default --data")
      ->capture_default_str()
      ->check(CLI::IsMember({"fashion-mnist", "mnist", "caltech"}));
  app.add_option("--data", data,
                 "the real data: an IDX folder (training images: the reference; test images: "
                 "the held-out set) or, with --dataset caltech, a folder of class folders "
                 "(split in halves as caltech101 splits it: the training half is the "
                 "reference, the test half the held-out set)");
  app.add_option("--classes", classes,
                 "photos: the class folders in the judge's label order (default: the paper's "
                 "six)")
      ->delimiter(',')
      ->expected(1, 1000);
  app.add_option("--split-seed", split_seed, "photos: the split's seed (the judge's, 0)")
      ->capture_default_str();
  app.add_option("--set", sets, "NAME=FILE: a set of generated images (IDX, any size)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--images", n,
                 "at most this many samples per set, and real IDX images per set (the "
                 "photos' halves are taken whole)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 24));
  app.add_option("--out", out, "CSV to append to (default runs/dcgan/quality_<dataset>.csv)");
  app.add_option("--threads", threads,
                 strprintf("threads (0: all cores, %d here)", omp_get_num_procs()))
      ->capture_default_str();
  app.add_option("--device", device, "cpu or cuda")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda"}));
  if (const int status = parse_flags(app, "gan_score", argc, argv); status >= 0) return status;
  const bool photos = dataset == "caltech";
  if (data.empty())
    data = photos ? "datasets/caltech101-6"
           : dataset == "fashion-mnist" ? "datasets/fashion-mnist"
                                         : (std::ifstream("datasets/mnist/NAME").good()
                                                ? "datasets/mnist"
                                                : "datasets/mnist-npm10k");
  if (model.empty()) model = photos ? "photo64" : "keras";
  const ClassifierModel& judge = classifier_model(model);
  const char* judge_app = photos ? "caltech101" : "mnist";
  if (std::string(judge.app) != judge_app) {
    std::string known;
    for (const std::string& m : classifier_model_names(judge_app))
      known += (known.empty() ? "" : ", ") + m;
    PDNN_FAIL("--model %s is not a judge of %s: --dataset %s takes %s", model.c_str(),
              photos ? "photos" : "IDX images", dataset.c_str(), known.c_str());
  }
  // Inputs first: everything that can be wrong is found before any output is written.
  Context ctx(threads, 1, device == "cuda" ? Device::CUDA : Device::CPU);
  RealImages real;
  Tensor direct_images;  // IDX: the held-out images as stored, for the judge's own accuracy
  if (photos) {
    real = real_photos(data, classes, split_seed, ctx.threads());
  } else {
    const ImageDataset idx = load_idx_dataset(data, dataset);
    real.name = idx.name;
    real.files = idx.files;
    real.side = static_cast<int>(idx.train.images.shape().h());
    const int64_t n_ref = std::min(n, idx.train.size()), n_test = std::min(n, idx.test.size());
    // Real images take the samples' path: upscaled to 64x64, stored as bytes, averaged back.
    real.reference = real_through_sample_path(first_images(idx.train.images, n_ref), 64, real.side);
    real.heldout = real_through_sample_path(first_images(idx.test.images, n_test), 64, real.side);
    direct_images = first_images(idx.test.images, n_test);
    real.heldout_labels.assign(idx.test.labels.begin(), idx.test.labels.begin() + n_test);
  }
  std::vector<std::pair<std::string, std::string>> named;
  std::vector<std::string> inputs = real.files;
  inputs.push_back(classifier);
  for (const std::string& s : sets) {
    const size_t eq = s.find('=');
    PDNN_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < s.size(),
               "--set %s: expected NAME=FILE", s.c_str());
    named.push_back({s.substr(0, eq), s.substr(eq + 1)});
    inputs.push_back(s.substr(eq + 1));
  }
  if (out.empty()) out = "runs/dcgan/quality_" + real.name + ".csv";
  check_output_files({{"--out", out}}, inputs);
  // All read (and validated) before any row is written; kept as bytes (10,000 colour images are
  // 123 MB so, 0.5 GB as floats) and turned into the judge's input one set at a time.
  std::vector<IdxImages> samples;
  for (const auto& nf : named) {
    IdxImages im = read_idx_images(nf.second);
    if (im.n > n) {
      im.pixels.resize(static_cast<size_t>(n * im.channels * im.rows * im.cols));
      im.n = n;
    }
    PDNN_CHECK(im.n >= 2, "%s: %lld images; the statistics need at least 2", nf.second.c_str(),
               static_cast<long long>(im.n));
    if (photos) {
      PDNN_CHECK(im.channels == 3 && im.rows == real.side && im.cols == real.side,
                 "%s: images of %lld x %lldx%lld; the photo judge takes colour %dx%d images "
                 "(3 channels)",
                 nf.second.c_str(), static_cast<long long>(im.channels),
                 static_cast<long long>(im.rows), static_cast<long long>(im.cols), real.side,
                 real.side);
    } else {
      PDNN_CHECK(im.channels == 1, "%s: colour images; the W3 judge scores grey IDX files",
                 nf.second.c_str());
    }
    samples.push_back(std::move(im));
  }
  CsvWriter csv(out, kColumns);

  Sequential net = judge.build(real.side, photos ? static_cast<int64_t>(classes.size()) : 10);
  load_checkpoint(classifier, net, nullptr);
  net.to(ctx.device(), ctx);
  const size_t feat = judge.feature_layer;
  const RunInfo info = run_info(ctx);

  std::printf("gan_score: classifier %s (%s) on %s: reference %lld training images, held-out "
              "%lld test images; %zu sample set(s)\n",
              classifier.c_str(), model.c_str(), real.name.c_str(),
              static_cast<long long>(real.reference.shape(0)),
              static_cast<long long>(real.heldout.shape(0)), named.size());
  if (!photos) {
    const Classified direct = classify(ctx, net, feat, direct_images);
    std::printf("classifier accuracy on the held-out images as stored (%dx%d): %.4f\n",
                real.side, real.side, accuracy(direct, real.heldout_labels));
  }
  const Classified ref = classify(ctx, net, feat, real.reference);
  const Gaussian ref_g = fit_gaussian(ref.features, ref.count, ref.dim);

  std::printf("%-14s %7s %9s %8s %10s %8s %9s %9s\n", "set", "images", "accuracy", "entropy",
              "confidence", "IS", "FID", "min class");
  std::vector<double> is_of, fid_of;
  auto report = [&](const std::string& name, const std::string& file, const Classified& c,
                    double acc) {
    const ClassScores s = class_scores(c.probs, c.count, c.classes);
    const double fid = frechet_distance(ref_g, fit_gaussian(c.features, c.count, c.dim));
    std::string fr;
    for (double f : s.fractions) fr += (fr.empty() ? "" : " ") + fmt(f, 4);
    std::printf("%-14s %7lld %9s %8.4f %10.4f %8.4f %9.4f %9.4f\n", name.c_str(),
                static_cast<long long>(c.count), acc >= 0 ? fmt(acc, 4).c_str() : "-",
                s.class_entropy, s.mean_confidence, s.inception_score, fid,
                s.min_class_fraction);
    csv.row({"pdnn", name, file, real.name, classifier + " (" + model + ")",
             std::to_string(c.count), acc >= 0 ? fmt(acc, 6) : "", fmt(s.class_entropy, 6),
             fmt(s.mean_confidence, 6), fmt(s.inception_score, 6), fmt(fid, 6),
             fmt(s.min_class_fraction, 6), fr, info.git_rev, info.host, iso8601_utc_now()});
    is_of.push_back(s.inception_score);
    fid_of.push_back(fid);
  };
  const Classified held = classify(ctx, net, feat, real.heldout);
  report("real-heldout", data + (photos ? " (test split)" : " (test)"), held,
         accuracy(held, real.heldout_labels));
  for (size_t i = 0; i < named.size(); ++i) {
    const Tensor x = photos ? photo_input(samples[i], named[i].second)
                            : classifier_input(samples[i], real.side);
    samples[i] = IdxImages();
    report(named[i].first, named[i].second, classify(ctx, net, feat, x), -1);
  }
  for (size_t i = 2; i < is_of.size(); ++i)
    std::printf("%s vs %s: IS ratio %.3f, FID ratio %.3f\n", named[i - 1].first.c_str(),
                named[0].first.c_str(), is_of[i] / is_of[1], fid_of[i] / fid_of[1]);
  std::printf("rows appended to %s\n", out.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return pdnn::run_app("gan_score", run, argc, argv); }
