// The model zoo: SPEC.md's networks by name (name -> builder, the app that trains it, SPEC's
// optimizer and batch), so --model flags, their validators and help texts, the tests and
// docs/DESIGN.md read one table. A new model becomes selectable by one entry in model_zoo.cpp.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/sequential.h"
#include "optim/registry.h"
#include "workloads/dcgan/dcgan_models.h"
#include "workloads/segmentation/unet.h"

namespace pdnn {

// A classifier: images (N,C,side,side) -> logits (N,classes).
struct ClassifierModel {
  const char* name;  // --model value, and the name in CSVs and checkpoints
  const char* app;   // the app that trains it ("mnist", "caltech101")
  const char* help;  // one line for --help
  const char* optimizer;   // SPEC.md's optimizer (optimizer_registry() name)
  HyperValues optimizer_hp;  // SPEC.md's departures from that optimizer's defaults
  int64_t batch;             // SPEC.md's batch size
  size_t feature_layer;      // the penultimate layer (the last hidden ReLU): FID features
  Sequential (*build)(int64_t side, int64_t classes);  // zero parameters: reset_parameters next
};

// A generator/discriminator pair trained adversarially (the dcgan app).
struct GanModel {
  const char* name;
  const char* app;
  const char* help;
  Sequential (*generator)(const DcganConfig&);
  Sequential (*discriminator)(const DcganConfig&);
};

// A segmentation network: images (N,C,H,W) -> per-pixel logits (N,classes,H,W), trained with
// the per-pixel cross-entropy (and the Dice loss).
struct SegmentationModel {
  const char* name;
  const char* app;
  const char* help;
  const char* optimizer;     // optimizer_registry() name
  HyperValues optimizer_hp;  // departures from that optimizer's defaults
  int64_t batch;
  UNetOptions defaults;      // width, depth, BatchNorm (channels and classes: the data's)
  Model (*build)(const UNetOptions&);  // zero parameters: reset_parameters next
};

const std::vector<ClassifierModel>& classifier_models();
const std::vector<GanModel>& gan_models();
const std::vector<SegmentationModel>& segmentation_models();

// The classifier called `name`; unknown names throw pdnn::Error listing the known ones (of
// `app` when given).
const ClassifierModel& classifier_model(const std::string& name, const std::string& app = "");
const GanModel& gan_model(const std::string& name);
const SegmentationModel& segmentation_model(const std::string& name);
// The classifiers `app` trains ("" = all), for CLI::IsMember, and as "a: help; b: help".
std::vector<std::string> classifier_model_names(const std::string& app = "");
std::string classifier_model_help(const std::string& app = "");

// The model's optimizer (a classifier's or a segmentation network's): `optimizer` ("" =
// SPEC.md's for the model) with PyTorch's defaults, except SPEC.md's own hyper-parameters when
// it is the model's optimizer (W3's Adadelta keeps rho 0.95). lr < 0: that optimizer's default
// learning rate.
std::string model_optimizer_name(const std::string& model, const std::string& optimizer = "");
std::unique_ptr<Optimizer> make_model_optimizer(const std::string& model,
                                                const std::string& optimizer, ParamSet& params,
                                                float lr);

}  // namespace pdnn
