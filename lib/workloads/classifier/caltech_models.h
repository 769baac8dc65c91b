// The Caltech101 network of SPEC.md (W4, "caltech9": the Cython paper's table 1), built in one
// place so the app, the tests and the benchmarks train the same thing (scripts/torch_reference.py
// and scripts/torch_gpu_bench.py build its PyTorch twin):
//   x (N,3,S,S) -> Conv(3->32) ReLU, Conv(32->32) ReLU, MaxPool 2, Conv(32->64) ReLU,
//   Conv(64->64) ReLU, MaxPool 2, Conv(64->128) ReLU, Conv(128->128) ReLU, MaxPool 2,
//   Flatten, Dense(128 (S/8)^2 -> 1024) ReLU, Dropout 0.5, Dense(1024->1024) ReLU, Dropout 0.5,
//   Dense(1024 -> classes) -> logits (N,classes) for softmax cross-entropy.
// Every convolution is 3x3, stride 1, padding 1. At S = 224 the first Dense is 100352 -> 1024
// (103 M of the model's 105 M parameters) and a forward pass costs about 4.0 GFLOP per image.
// AdaGrad lr 0.01, batch 64, 1,280 training images per epoch. Layers are built with zero
// parameters: call reset_parameters(ctx.rng()) once after seeding, as the app does.
#pragma once
#include <cstdint>

#include "model/sequential.h"

namespace pdnn {

// side: the input's height and width, a multiple of 8 (the three poolings halve it exactly),
// at least 8. Throws pdnn::Error otherwise.
Sequential make_caltech_model(int64_t side = 224, int64_t classes = 6);

}  // namespace pdnn
