// The Caltech101 network of SPEC.md (W4, "caltech9": the Cython paper's table 1), built in one
// place so the app, the tests and the benchmarks train the same thing (scripts/twins/torch_reference.py
// and scripts/twins/torch_gpu_bench.py build its PyTorch twin):
//   x (N,3,S,S) -> Conv(3->32) ReLU, Conv(32->32) ReLU, MaxPool 2, Conv(32->64) ReLU,
//   Conv(64->64) ReLU, MaxPool 2, Conv(64->128) ReLU, Conv(128->128) ReLU, MaxPool 2,
//   Flatten, Dense(128 (S/8)^2 -> 1024) ReLU, Dropout 0.5, Dense(1024->1024) ReLU, Dropout 0.5,
//   Dense(1024 -> classes) -> logits (N,classes) for softmax cross-entropy.
// Every convolution is 3x3, stride 1, padding 1. At S = 224 the first Dense is 100352 -> 1024
// (103 M of the model's 105 M parameters) and a forward pass costs about 4.0 GFLOP per image.
// AdaGrad lr 0.01, batch 64, 1,280 training images per epoch. Layers are built with zero
// parameters: call reset_parameters(ctx.rng()) once after seeding, as the app does.
//
// The photo judge of the DCGAN's quality score ("photo64", make_photo_scorer): a small CNN of
// the six classes at the DCGAN's 64x64 colour input, trained by the caltech101 app on the
// training split (centre-cropped as the DCGAN sees the photos, values in [-1, 1]) and read by
// build/bin/gan_score:
//   x (N,3,S,S) -> [Conv 3x3 (c->k, padding 1) ReLU, MaxPool 2] for k = 32, 64, 128, 128,
//   Flatten, Dense(128 (S/16)^2 -> 128) ReLU (the penultimate features: the FID analogue's),
//   Dropout 0.5, Dense(128 -> classes).
// At S = 64: 0.50 M parameters (2.0 MB of weights), 0.10 GFLOP per image forward.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/sequential.h"

namespace pdnn {

// The paper's six classes (SPEC.md, W4) in its order: label k is the k-th. The caltech101
// app's default --classes, and the photo judge's labels.
const std::vector<std::string>& caltech_paper_classes();

// side: the input's height and width, a multiple of 8 (the three poolings halve it exactly),
// at least 8. Throws pdnn::Error otherwise.
Sequential make_caltech_model(int64_t side = 224, int64_t classes = 6);

// The photo judge; side a multiple of 16 (four poolings), at least 16.
Sequential make_photo_scorer(int64_t side = 64, int64_t classes = 6);

}  // namespace pdnn
