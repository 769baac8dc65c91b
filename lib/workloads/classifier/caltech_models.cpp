// The Caltech101 network W4 (see caltech_models.h).
#include "workloads/classifier/caltech_models.h"

#include "core/error.h"
#include "layers/activation.h"
#include "layers/conv2d.h"
#include "layers/dense.h"
#include "layers/dropout.h"
#include "layers/flatten.h"
#include "layers/maxpool2d.h"

namespace pdnn {

const std::vector<std::string>& caltech_paper_classes() {
  static const std::vector<std::string> classes = {"airplanes", "Motorbikes", "Faces_easy",
                                                   "watch",     "Leopards",   "bonsai"};
  return classes;
}

Sequential make_caltech_model(int64_t side, int64_t classes) {
  PDNN_CHECK(side >= 8 && side % 8 == 0,
             "caltech model: input side %lld must be a multiple of 8 (three 2x2 poolings), at "
             "least 8",
             static_cast<long long>(side));
  PDNN_CHECK(classes >= 2, "caltech model: %lld classes (need at least 2)",
             static_cast<long long>(classes));
  Sequential m;
  int64_t c = 3;
  for (const int64_t k : {32, 64, 128}) {
    m.emplace<Conv2d>(c, k, 3, 1, 1);
    m.emplace<ReLU>();
    m.emplace<Conv2d>(k, k, 3, 1, 1);
    m.emplace<ReLU>();
    m.emplace<MaxPool2d>(2);
    c = k;
  }
  m.emplace<Flatten>();
  m.emplace<Dense>(128 * (side / 8) * (side / 8), 1024);
  m.emplace<ReLU>();
  m.emplace<Dropout>(0.5f);
  m.emplace<Dense>(1024, 1024);
  m.emplace<ReLU>();
  m.emplace<Dropout>(0.5f);
  m.emplace<Dense>(1024, classes);
  return m;
}

Sequential make_photo_scorer(int64_t side, int64_t classes) {
  PDNN_CHECK(side >= 16 && side % 16 == 0,
             "photo judge: input side %lld must be a multiple of 16 (four 2x2 poolings), at "
             "least 16",
             static_cast<long long>(side));
  PDNN_CHECK(classes >= 2, "photo judge: %lld classes (need at least 2)",
             static_cast<long long>(classes));
  Sequential m;
  int64_t c = 3;
  for (const int64_t k : {32, 64, 128, 128}) {
    m.emplace<Conv2d>(c, k, 3, 1, 1);
    m.emplace<ReLU>();
    m.emplace<MaxPool2d>(2);
    c = k;
  }
  m.emplace<Flatten>();
  m.emplace<Dense>(128 * (side / 16) * (side / 16), 128);
  m.emplace<ReLU>();
  m.emplace<Dropout>(0.5f);
  m.emplace<Dense>(128, classes);
  return m;
}

}  // namespace pdnn
