// The fused activation (ops/activation.h's Act) as every kernel applies it, on both backends:
// one definition, so that the CPU and the GPU, and a kernel's fused write and a separate pass,
// compute the same expression (DESIGN.md rule 14).
//   act_apply(z, a)     = a(z): z > 0 ? z : (ReLU ? 0 : slope z); z itself without an activation
//   act_grad(y, dy, a)  = a'(y) dy read off the output y (y > 0 iff z > 0, slope >= 0);
//                         a must be an activation (callers test for None where they may see it)
//   grad_through_act(y, dy, a) = act_grad, or dy itself without an activation
#pragma once

#include "ops/activation.h"
#include "ops/kit/host_device.h"

namespace pdnn {
namespace kit {

PDNN_HD float act_apply(float z, Act a) {
  if (a.kind == FusedAct::None) return z;
  return z > 0.f ? z : (a.kind == FusedAct::ReLU ? 0.f : a.slope * z);
}

PDNN_HD float act_grad(float y, float dy, Act a) {
  return y > 0.f ? dy : (a.kind == FusedAct::ReLU ? 0.f : a.slope * dy);
}

PDNN_HD float grad_through_act(float y, float dy, Act a) {
  if (a.kind == FusedAct::None) return dy;
  return act_grad(y, dy, a);
}

}  // namespace kit
}  // namespace pdnn
