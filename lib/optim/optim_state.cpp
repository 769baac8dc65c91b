// Optimizer state helpers (see optim_state.h).
#include "optim/optim_state.h"

#include "core/error.h"

namespace pdnn {

std::vector<Tensor> state_like(const std::vector<Param>& params, float v) {
  std::vector<Tensor> out;
  out.reserve(params.size());
  for (const Param& p : params) {
    PDNN_CHECK(p.value != nullptr, "optimizer: parameter '%s' has no value tensor", p.name.c_str());
    out.emplace_back(p.value->shape(), p.value->device());
    out.back().fill(v);
  }
  return out;
}

StateList name_state(const std::vector<std::pair<const char*, std::vector<Tensor>*>>& slots) {
  StateList out;
  if (slots.empty()) return out;
  const size_t n = slots.front().second->size();
  for (size_t i = 0; i < n; ++i)
    for (const auto& s : slots)
      out.emplace_back(std::to_string(i) + "." + s.first, &(*s.second)[i]);
  return out;
}

void check_param(const char* op, size_t i, const Param& p) {
  PDNN_CHECK(p.value != nullptr && p.grad != nullptr, "%s: parameter %zu ('%s') lacks %s", op, i,
             p.name.c_str(), p.value == nullptr ? "a value" : "a gradient");
  PDNN_CHECK(p.value->shape() == p.grad->shape(),
             "%s: parameter %zu ('%s') has shape %s but its gradient %s", op, i, p.name.c_str(),
             p.value->shape().str().c_str(), p.grad->shape().str().c_str());
  PDNN_CHECK(p.value->device() == Device::CPU && p.grad->device() == Device::CPU,
             "%s: parameter %zu ('%s') is on %s, only the CPU update exists", op, i, p.name.c_str(),
             device_name(p.value->device()));
}

}  // namespace pdnn
