// Optimizer by name, for the apps' --optimizer flag: "sgd", "adagrad", "adadelta", "adam",
// each with PyTorch 1.13's defaults for everything but the learning rate.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace pdnn {

// lr < 0: the optimizer's default (adagrad 0.01, adadelta 1.0, adam 1e-3; sgd has none in
// PyTorch, so "sgd" with lr < 0 throws). Unknown names throw pdnn::Error listing the known ones.
std::unique_ptr<Optimizer> make_optimizer(const std::string& name, ParamSet& params, float lr);

// The names make_optimizer accepts, comma separated (for --help texts and errors).
const char* optimizer_names();

}  // namespace pdnn
