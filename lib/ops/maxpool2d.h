// Max pooling, kernel k, stride s, no padding, over planes = N*C planes of H x W.
// Forward records, per output, where its maximum is: the offset inside its window, ky*k + kx, in
// one byte (uint8: kernels up to 16x16; an int32 index into the plane took four times the
// memory, 4.2 GiB of W4's 35 GiB of fixed bytes at 1120x1120). Ties: the first in row-major
// window order wins, as PyTorch; a NaN propagates (the last NaN of a window is its maximum).
// Backward is then a straight pass: each dx plane zeroed and dy added at the recorded place
// (added, because windows overlap when s < k). No search and no mask in backward: the blog's
// CuPy version spent 98.6% of the pool's backward time there. Where the memory plan prefers
// (MaxPool2d::set_keep_argmax(false)), forward records nothing and backward finds each maximum
// again in x, by the same rule, so the gradient is the same bit for bit; it then reads x (the
// input, which the convolution before keeps for its own backward anyway). On the GPU backward
// is a gather (one thread per input pixel looks at the outputs whose window holds it), so no
// atomics.
#pragma once
#include <cstdint>

#include "core/context.h"
#include "core/exec.h"
#include "core/tensor.h"
#include "ops/activation.h"

namespace pdnn {

// Geometry of one pooling call: planes = N*C, each H x W in and OH x OW out.
struct Pool2d {
  int64_t planes, h, w, oh, ow, k, s;
};
// The largest kernel side whose window offsets fit the one-byte argmax.
constexpr int64_t kMaxPoolKernelMax = 16;

// Max pooling followed by inverted dropout(p), the mask applied in the pool's own pass (each
// plane's outputs while they are in cache; on the GPU in the same thread): y = max * mask and
// mask exactly as maxpool2d_forward then dropout_forward with the same base and skip
// (ops/dropout.h's draw: output i kept iff Rng::to_unit(Rng::at(seed, base + skip + i + 1)) >= p;
// skip is a data-parallel rank's offset into the global batch's draw, 0 otherwise). Backward writes
// dy * mask at the argmax: the two layers' backward passes in one. Only for windows that do not
// overlap (stride >= kernel, as every pool in W2..W4): there each input gets at most one
// product, so no sum whose rounding a compiler's FMA contraction could change.
//
// Backward through the activation of the layer before (Layer::fold_input_activation), for
// windows that do not overlap: y (the pool's output) and act given, what reaches an input at
// its window's argmax is act'(y) . dy (y = that input, or 0 where dropout dropped it, where
// dy * mask is 0 anyway): one multiply on the output's side instead of a pass over the input's.

// argmax (planes,OH,OW): the window offsets, or nullptr: forward records none and backward
// finds them again in x (then required; with a recorded argmax x is not read and may be null).
namespace cpu {
// x (planes,H,W) -> y (planes,OH,OW).
void maxpool2d_forward(const Pool2d& g, const float* x, float* y, uint8_t* argmax, CpuExec e);
// dy (planes,OH,OW) -> dx (planes,H,W) =. y: null, or the output with act (see above).
void maxpool2d_backward(const Pool2d& g, const float* x, const float* dy, const uint8_t* argmax,
                        const float* y, Act act, float* dx, CpuExec e);
// mask (planes,OH,OW) = 1/(1-p) or 0; base read, not changed (as dropout_forward).
void maxpool2d_dropout_forward(const Pool2d& g, float p, uint64_t seed, const int64_t* base,
                               uint64_t skip, const float* x, float* y, uint8_t* argmax,
                               float* mask, CpuExec e);
void maxpool2d_dropout_backward(const Pool2d& g, const float* x, const float* dy,
                                const uint8_t* argmax, const float* mask, const float* y, Act act,
                                float* dx, CpuExec e);
}  // namespace cpu

// The GPU twins are templates over x's, y's, dy's and dx's type T, float or bf16 (the argmax
// rule on their float values; the mask stays float32), both instantiated in maxpool2d.cu.
namespace cuda {
template <class T>
void maxpool2d_forward(const Pool2d& g, const T* x, T* y, uint8_t* argmax, CudaExec e);
template <class T>
void maxpool2d_backward(const Pool2d& g, const T* x, const T* dy, const uint8_t* argmax,
                        const T* y, Act act, T* dx, CudaExec e);
template <class T>
void maxpool2d_dropout_forward(const Pool2d& g, float p, uint64_t seed, const int64_t* base,
                               uint64_t skip, const T* x, T* y, uint8_t* argmax, float* mask,
                               CudaExec e);
template <class T>
void maxpool2d_dropout_backward(const Pool2d& g, const T* x, const T* dy, const uint8_t* argmax,
                                const float* mask, const T* y, Act act, T* dx, CudaExec e);
}  // namespace cuda

namespace ops {
// x, y, dy, dx: float32, or bfloat16 on the GPU (one type for all four).
// argmax (nullable): uint8, y's size. x (nullable in backward when argmax is given). y, act:
// see above (y null: none).
void maxpool2d_forward(Context& ctx, const Pool2d& g, const Tensor& x, Tensor& y, Tensor* argmax);
void maxpool2d_backward(Context& ctx, const Pool2d& g, const Tensor* x, const Tensor& dy,
                        const Tensor* argmax, Tensor& dx, const Tensor* y = nullptr,
                        Act act = {});
// Draws y.numel() values from the context's RNG, as ops::dropout_forward (under a row shard:
// the global batch's, Rng::plan_rows). mask: float32, y's size.
void maxpool2d_dropout_forward(Context& ctx, const Pool2d& g, float p, const Tensor& x, Tensor& y,
                               Tensor* argmax, Tensor& mask);
void maxpool2d_dropout_backward(Context& ctx, const Pool2d& g, const Tensor* x, const Tensor& dy,
                                const Tensor* argmax, const Tensor& mask, Tensor& dx,
                                const Tensor* y = nullptr, Act act = {});
}  // namespace ops

}  // namespace pdnn
