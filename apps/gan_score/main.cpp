// build/bin/gan_score: the quality of generated images, judged by pdnn's W3 classifier trained
// on the real data (build/bin/mnist --model keras --checkpoint F): for each set of samples (IDX
// files, e.g. the 64x64 grey samples of build/bin/dcgan --samples and of
// scripts/torch_reference.py dcgan), and for the held-out real images through the same path,
// the entropy of the predicted classes, the mean confidence, the Inception-score analogue and
// the Fréchet distance of the classifier's penultimate features to the real training images'
// (lib/workloads/dcgan/gan_quality.h). One CSV row per set; a table on stdout.
#include <CLI/CLI.hpp>
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
#include "workloads/dcgan/gan_quality.h"
#include "workloads/model_zoo.h"
#include "run/output_files.h"
#include "run/run_info.h"
#include "run/run_flags.h"
#include "run/timing.h"

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

double accuracy(const Classified& c, const std::vector<int32_t>& labels) {
  int64_t ok = 0;
  for (int64_t i = 0; i < c.count; ++i) {
    const float* p = c.probs.data() + i * c.classes;
    ok += std::max_element(p, p + c.classes) - p == labels[static_cast<size_t>(i)];
  }
  return static_cast<double>(ok) / static_cast<double>(c.count);
}

int run(int argc, char** argv) {
  std::string classifier, model = "keras", data, dataset = "fashion-mnist", out, device = "cpu";
  std::vector<std::string> sets;
  int64_t n = 10000;
  int threads = 0;
  CLI::App app{"Scores generated images with a pdnn classifier (Inception-score and FID "
               "analogues)"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--classifier", classifier, "checkpoint of build/bin/mnist (the classifier)")
      ->required();
  app.add_option("--model", model, "the classifier's model: " + classifier_model_help("mnist"))
      ->capture_default_str()
      ->check(CLI::IsMember(classifier_model_names("mnist")));
  app.add_option("--dataset", dataset, "fashion-mnist or mnist: picks the default --data")
      ->capture_default_str()
      ->check(CLI::IsMember({"fashion-mnist", "mnist"}));
  app.add_option("--data", data, "the real IDX data (training images: the reference; test "
                                 "images: the held-out real set)");
  app.add_option("--set", sets, "NAME=FILE: a set of generated images (IDX, any size)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--images", n, "real images per set (and at most this many samples)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 24));
  app.add_option("--out", out, "CSV to append to (default results/dcgan/quality_<dataset>.csv)");
  app.add_option("--threads", threads, "threads (0: all cores)")->capture_default_str();
  app.add_option("--device", device, "cpu or cuda")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda"}));
  if (const int status = parse_flags(app, "gan_score", argc, argv); status >= 0) return status;
  if (data.empty())
    data = dataset == "fashion-mnist" ? "datasets/fashion-mnist"
                                      : (std::ifstream("datasets/mnist/NAME").good()
                                             ? "datasets/mnist"
                                             : "datasets/mnist-npm10k");
  // Inputs first: everything that can be wrong is found before any output is written.
  const ImageDataset real = load_idx_dataset(data, dataset);
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
  if (out.empty()) out = "results/dcgan/quality_" + real.name + ".csv";
  check_output_files({{"--out", out}}, inputs);
  std::vector<IdxImages> samples;  // all read (and validated) before any row is written
  for (const auto& nf : named) {
    samples.push_back(read_idx_images(nf.second));
    IdxImages& im = samples.back();
    if (im.n > n) {
      im.pixels.resize(static_cast<size_t>(n * im.rows * im.cols));
      im.n = n;
    }
    PDNN_CHECK(im.n >= 2, "%s: %lld images; the statistics need at least 2", nf.second.c_str(),
               static_cast<long long>(im.n));
  }
  CsvWriter csv(out, kColumns);

  Context ctx(threads, 1, device == "cuda" ? Device::CUDA : Device::CPU);
  const int side = static_cast<int>(real.train.images.shape().h());
  Sequential net = classifier_model(model, "mnist").build(side, real.num_classes);
  load_checkpoint(classifier, net, nullptr);
  net.to(ctx.device(), ctx);
  const size_t feat = classifier_model(model, "mnist").feature_layer;
  const RunInfo info = run_info(ctx);

  const int64_t n_ref = std::min(n, real.train.size()), n_test = std::min(n, real.test.size());
  std::printf("gan_score: classifier %s (%s) on %s: reference %lld training images, held-out "
              "%lld test images; %zu sample set(s)\n",
              classifier.c_str(), model.c_str(), real.name.c_str(),
              static_cast<long long>(n_ref), static_cast<long long>(n_test), named.size());
  const Classified direct = classify(ctx, net, feat, first_images(real.test.images, n_test));
  std::printf("classifier accuracy on the held-out images as stored (%dx%d): %.4f\n", side,
              side, accuracy(direct, real.test.labels));
  // Real images take the samples' path: upscaled to 64x64, stored as bytes, averaged back.
  const Classified ref = classify(
      ctx, net, feat, real_through_sample_path(first_images(real.train.images, n_ref), 64, side));
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
  const Classified held = classify(
      ctx, net, feat, real_through_sample_path(first_images(real.test.images, n_test), 64, side));
  report("real-heldout", data + " (test)", held, accuracy(held, real.test.labels));
  for (size_t i = 0; i < named.size(); ++i)
    report(named[i].first, named[i].second,
           classify(ctx, net, feat, classifier_input(samples[i], side)), -1);
  for (size_t i = 2; i < is_of.size(); ++i)
    std::printf("%s vs %s: IS ratio %.3f, FID ratio %.3f\n", named[i - 1].first.c_str(),
                named[0].first.c_str(), is_of[i] / is_of[1], fid_of[i] / fid_of[1]);
  std::printf("rows appended to %s\n", out.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return pdnn::run_app("gan_score", run, argc, argv); }
