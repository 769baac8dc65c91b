// The MNIST networks of SPEC.md, built in one place so the app, the tests and the benchmarks
// train the same thing (scripts/twins/torch_reference.py builds their PyTorch twins).
//   small (W2, the CuPy blog's CNN): Conv(1->10, 3x3, pad 1) ReLU, MaxPool 2x2, Flatten,
//     Dense(1960->100) ReLU, Dense(100->10); Adam lr 1e-3.
//   keras (W3, the Keras mnist_cnn example): Conv(1->32, 3x3) ReLU, Conv(32->64, 3x3) ReLU,
//     MaxPool 2x2, Dropout 0.25, Flatten, Dense(9216->128) ReLU, Dropout 0.5, Dense(128->10);
//     Adadelta lr 1.0, rho 0.95, eps 1e-6.
// Both end in logits for softmax cross-entropy. SPEC.md's optimizers and batches are in the
// model zoo (workloads/model_zoo.h). Layers are built with zero parameters: call
// reset_parameters(ctx.rng()) once after seeding, as the app does.
#pragma once
#include <memory>
#include <string>

#include "model/sequential.h"

namespace pdnn {

// name: "small" or "keras"; input images are (N,1,side,side). Throws pdnn::Error otherwise.
Sequential make_mnist_model(const std::string& name, int64_t side = 28, int64_t classes = 10);

}  // namespace pdnn
