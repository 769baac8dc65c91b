// Helpers shared by the optimizers: per-parameter state tensors allocated at construction (so a
// checkpoint can restore them before the first step), their checkpoint names, parameter checks.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "layers/layer.h"

namespace pdnn {

using StateList = std::vector<std::pair<std::string, Tensor*>>;

// One tensor per parameter, shaped like it and filled with v.
std::vector<Tensor> state_like(const std::vector<Param>& params, float v);

// ("<i>.<slot>", &tensors[i]) for every parameter i and every (slot, tensors) pair, parameter
// by parameter: e.g. "0.exp_avg", "0.exp_avg_sq", "1.exp_avg", ...
StateList name_state(const std::vector<std::pair<const char*, std::vector<Tensor>*>>& slots);

// Throws unless the parameter has a value and a gradient of the same shape on the CPU.
void check_param(const char* op, size_t i, const Param& p);

}  // namespace pdnn
