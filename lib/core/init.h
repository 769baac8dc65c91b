// Weight initialisation (He, Glorot, PyTorch's per-layer default). Values are drawn from the
// context's Rng in row-major order, one draw per uniform value (two per normal), so
// scripts/twins/torch_reference.py can rebuild the same initial weights from the same seed.
#pragma once
#include <cstdint>

#include "core/rng.h"
#include "core/tensor.h"

namespace pdnn {
namespace init {

// fan_in, fan_out of a weight as PyTorch computes them: dim 1 x receptive field, dim 0 x
// receptive field (Dense (out,in); Conv2d (K,C,kh,kw); ConvTranspose2d (Cin,Cout,kh,kw)).
struct Fans {
  int64_t in, out;
};
Fans fans(const Shape& weight);

void uniform(Tensor& t, float lo, float hi, Rng& rng);
void normal(Tensor& t, float mean, float stddev, Rng& rng);
void constant(Tensor& t, float v);
// He/Kaiming for ReLU: U(+-sqrt(6/fan_in)) or N(0, sqrt(2/fan_in)).
void he_uniform(Tensor& w, Rng& rng);
void he_normal(Tensor& w, Rng& rng);
// Glorot/Xavier: U(+-sqrt(6/(fan_in+fan_out))) or N(0, sqrt(2/(fan_in+fan_out))).
void glorot_uniform(Tensor& w, Rng& rng);
void glorot_normal(Tensor& w, Rng& rng);
// PyTorch's default for Linear/Conv*: kaiming_uniform_(a=sqrt(5)) on the weight, which is
// U(+-1/sqrt(fan_in)), then the bias (if any) U(+-1/sqrt(fan_in)). Weight first, then bias.
void torch_default(Tensor& w, Tensor* bias, Rng& rng);

}  // namespace init
}  // namespace pdnn
