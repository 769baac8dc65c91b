// The MNIST networks W2 and W3 (see mnist_models.h).
#include "workloads/classifier/mnist_models.h"

#include "core/error.h"
#include "layers/activation.h"
#include "layers/conv2d.h"
#include "layers/dense.h"
#include "layers/dropout.h"
#include "layers/flatten.h"
#include "layers/maxpool2d.h"

namespace pdnn {

Sequential make_mnist_model(const std::string& name, int64_t side, int64_t classes) {
  Sequential m;
  if (name == "small") {
    m.emplace<Conv2d>(1, 10, 3, 1, 1);
    m.emplace<ReLU>();
    m.emplace<MaxPool2d>(2);
    m.emplace<Flatten>();
    m.emplace<Dense>(10 * (side / 2) * (side / 2), 100);
    m.emplace<ReLU>();
    m.emplace<Dense>(100, classes);
  } else if (name == "keras") {
    m.emplace<Conv2d>(1, 32, 3);
    m.emplace<ReLU>();
    m.emplace<Conv2d>(32, 64, 3);
    m.emplace<ReLU>();
    m.emplace<MaxPool2d>(2);
    m.emplace<Dropout>(0.25f);
    m.emplace<Flatten>();
    m.emplace<Dense>(64 * ((side - 4) / 2) * ((side - 4) / 2), 128);
    m.emplace<ReLU>();
    m.emplace<Dropout>(0.5f);
    m.emplace<Dense>(128, classes);
  } else {
    PDNN_FAIL("mnist model: unknown model '%s' (known: small, keras)", name.c_str());
  }
  return m;
}

}  // namespace pdnn
