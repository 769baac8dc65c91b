// The model zoo table (see model_zoo.h).
#include "workloads/model_zoo.h"

#include <utility>

#include "core/error.h"
#include "workloads/classifier/caltech_models.h"
#include "workloads/classifier/mnist_models.h"

namespace pdnn {

namespace {

Sequential mnist_small(int64_t side, int64_t classes) {
  return make_mnist_model("small", side, classes);
}
Sequential mnist_keras(int64_t side, int64_t classes) {
  return make_mnist_model("keras", side, classes);
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

}  // namespace

const std::vector<ClassifierModel>& classifier_models() {
  static const std::vector<ClassifierModel> zoo = {
      {"small", "mnist", "W2, the CuPy blog's CNN, Adam 1e-3, batch 8", "adam", {}, 8, 5,
       mnist_small},
      {"keras", "mnist", "W3, the Keras mnist_cnn example, Adadelta rho 0.95, batch 128",
       "adadelta", {{"rho", 0.95}, {"eps", 1e-6}}, 128, 8, mnist_keras},
      {"caltech9", "caltech101", "W4, the Cython paper's 9-layer CNN, AdaGrad 0.01, batch 64",
       "adagrad", {}, 64, 20, make_caltech_model},
      {"photo64", "caltech101",
       "the DCGAN's photo judge (gan_score): 4 conv blocks at 64x64 colour, 128 features, "
       "Adam 1e-3, batch 64; train with --size 64 --center-crop on --normalize half",
       "adam", {}, 64, 14, make_photo_scorer},
  };
  return zoo;
}

const std::vector<SegmentationModel>& segmentation_models() {
  static const std::vector<SegmentationModel> zoo = {
      {"unet", "segment",
       "U-Net (Ronneberger et al. 2015): 4 levels down and up, 3x3 convolutions, 2x2 "
       "transposed-convolution up-sampling, concatenated skips, base width 64; Adam 1e-3, "
       "batch 4",
       "adam", {}, 4, UNetOptions{}, make_unet},
  };
  return zoo;
}

const std::vector<GanModel>& gan_models() {
  static const std::vector<GanModel> zoo = {
      {"dcgan", "dcgan", "W5, the DCGAN tutorial's generator and discriminator",
       make_dcgan_generator, make_dcgan_discriminator},
  };
  return zoo;
}

std::vector<std::string> classifier_model_names(const std::string& app) {
  std::vector<std::string> v;
  for (const auto& m : classifier_models())
    if (app.empty() || app == m.app) v.push_back(m.name);
  return v;
}

std::string classifier_model_help(const std::string& app) {
  std::vector<std::string> v;
  for (const auto& m : classifier_models())
    if (app.empty() || app == m.app) v.push_back(std::string(m.name) + ": " + m.help);
  return join(v, "; ");
}

const ClassifierModel& classifier_model(const std::string& name, const std::string& app) {
  for (const auto& m : classifier_models())
    if (name == m.name && (app.empty() || app == m.app)) return m;
  PDNN_FAIL("unknown model '%s' (known: %s)", name.c_str(),
            join(classifier_model_names(app), ", ").c_str());
}

namespace {

// The entry of `zoo` called `name`; pdnn::Error listing the known ones.
template <class M>
const M& find_model(const std::vector<M>& zoo, const std::string& name, const char* what) {
  std::vector<std::string> known;
  for (const auto& m : zoo) {
    if (name == m.name) return m;
    known.push_back(m.name);
  }
  PDNN_FAIL("unknown %s '%s' (known: %s)", what, name.c_str(), join(known, ", ").c_str());
}

}  // namespace

const GanModel& gan_model(const std::string& name) {
  return find_model(gan_models(), name, "GAN model");
}

const SegmentationModel& segmentation_model(const std::string& name) {
  return find_model(segmentation_models(), name, "segmentation model");
}

namespace {

// SPEC.md's optimizer of a classifier or segmentation model, and its hyper-parameters.
std::pair<std::string, HyperValues> spec_optimizer(const std::string& model) {
  for (const auto& m : segmentation_models())
    if (model == m.name) return {m.optimizer, m.optimizer_hp};
  const ClassifierModel& m = classifier_model(model);
  return {m.optimizer, m.optimizer_hp};
}

}  // namespace

std::string model_optimizer_name(const std::string& model, const std::string& optimizer) {
  return optimizer.empty() ? spec_optimizer(model).first : optimizer;
}

std::unique_ptr<Optimizer> make_model_optimizer(const std::string& model,
                                                const std::string& optimizer, ParamSet& params,
                                                float lr) {
  const auto spec = spec_optimizer(model);
  const std::string name = model_optimizer_name(model, optimizer);
  HyperValues hp;
  if (name == spec.first) hp = spec.second;
  if (lr >= 0.f) hp["lr"] = lr;
  return make_optimizer(name, params, hp);
}

}  // namespace pdnn
