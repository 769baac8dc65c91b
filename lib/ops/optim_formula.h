// The optimizers' per-element updates and per-step factors, one definition for the CPU kernels
// (optim.cpp), the GPU kernels (optim.cu) and the host's update of optimizer state a memory
// plan moved off the GPU (optim/optimizer.h): the weights come out bit for bit the same on
// both. Every product that is summed is an explicit fused multiply-add, so neither compiler's
// contraction (-ffp-contract on the host, nvcc's --fmad, on by default) can make the two
// differ; the other operations (+, -, /, sqrt, the double factors) are single IEEE-rounded
// operations on both (nvcc's defaults -prec-div=true -prec-sqrt=true; no fast-math flags; GCC
// with -fno-math-errno vectorises sqrtf and fmaf into their exact instructions). Checked in the
// PTX of optim.cu: fma.rn.f32, sqrt.rn.f32, div.rn.f32 (nvcc --ptx). The fused forms are what
// nvcc's contraction made of the earlier kernels' expressions (the same PTX), so GPU results
// are unchanged by this file.
//
// One exception: Adam's bias corrections 1 - beta^step use pow, whose double result may
// differ by an ulp or two between the host's libm and CUDA's (documented at 2 ulp); rounded to
// float, the step size then differs by at most one float ulp (2^-24 relative), and only when
// the double lands that close to a float rounding boundary.
#pragma once
#include <cmath>
#include <cstdint>

#include "ops/kit/host_device.h"

namespace pdnn {
namespace formula {

// g + weight_decay * w (PyTorch's L2 penalty), or g.
PDNN_HD float decayed(float g, float w, float weight_decay) {
  return weight_decay != 0.f ? fmaf(weight_decay, w, g) : g;
}

// Adagrad's rate at `step` (1 on the first): lr / (1 + (step - 1) lr_decay), rounded once to
// float.
PDNN_HD float adagrad_rate(double lr, double lr_decay, int64_t step) {
  return static_cast<float>(lr / fma(static_cast<double>(step - 1), lr_decay, 1.0));
}
// sum += d^2; w -= clr d / (sqrt(sum) + eps).
PDNN_HD void adagrad(float& w, float& sum, float g, float clr, float weight_decay, float eps) {
  const float d = decayed(g, w, weight_decay);
  sum = fmaf(d, d, sum);
  w = fmaf(-clr, d / (sqrtf(sum) + eps), w);
}

// c = {lr / (1 - beta1^step), sqrt(1 - beta2^step), beta1, 1 - beta1, beta2, 1 - beta2}.
// m = beta1 m + (1 - beta1) d; v = beta2 v + (1 - beta2) d^2;
// w -= c0 m / (sqrt(v) / c1 + eps).
PDNN_HD void adam(float& w, float& m, float& v, float g, const float* c, float weight_decay,
                  float eps) {
  const float d = decayed(g, w, weight_decay);
  m = fmaf(m, c[2], c[3] * d);
  v = fmaf(v, c[4], c[5] * (d * d));
  const float denom = sqrtf(v) / c[1] + eps;
  w = fmaf(-c[0], m / denom, w);
}

// With a momentum buffer: buf = d on the first step, else momentum buf + keep d; the step
// direction d (nesterov: d + momentum buf) or buf; w -= lr d.
PDNN_HD void sgd(float& w, float* buf, float g, bool first, float lr, float momentum, float keep,
                 float weight_decay, bool nesterov) {
  float d = decayed(g, w, weight_decay);
  if (buf) {
    *buf = first ? d : fmaf(keep, d, *buf * momentum);
    d = nesterov ? fmaf(momentum, *buf, d) : *buf;
  }
  w = fmaf(-lr, d, w);
}

// sq = rho sq + keep d^2; delta = sqrt(acc + eps) / sqrt(sq + eps) d;
// acc = rho acc + keep delta^2; w -= lr delta.
PDNN_HD void adadelta(float& w, float& sq, float& acc, float g, float lr, float rho, float keep,
                      float eps, float weight_decay) {
  const float d = decayed(g, w, weight_decay);
  sq = fmaf(sq, rho, keep * (d * d));
  const float std_ = sqrtf(sq + eps);
  const float delta = sqrtf(acc + eps) / std_ * d;
  acc = fmaf(acc, rho, keep * (delta * delta));
  w = fmaf(-lr, delta, w);
}

}  // namespace formula
}  // namespace pdnn
