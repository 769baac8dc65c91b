// Direct 3x3 stride-1 convolution with register blocking, for layers with few input channels
// (the first layers of W2, W3, W4: 1 or 3 channels). There im2col + GEMM runs a GEMM whose
// inner dimension is only 9c (9 or 27), far from BLAS's rate, after copying the input 9 times;
// and Winograd spends its time transforming tiles of 1-3 channels padded to a whole vector.
// Here each output row is computed in registers: 8 output channels x up to 3 vectors of
// pixels, from the 9c taps of a zero-padded copy of the input rows, and written once.
// Backward data runs the same kernel over dy padded by 2 - p with the kernels rotated by 180
// degrees and the channel roles swapped; backward weights keeps 8 channels x 3 taps of
// per-lane partial sums in registers over strips of rows.
// Exact up to the order of the 9c-term sums (same accuracy as a direct sum: no transforms).
// Non-finite values: lanes past a row's end multiply zeros of dy with input pixels of the
// row's margin, so an inf there can make a neighbouring weight tap's gradient NaN.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/exec.h"
#include "ops/conv/conv2d_3x3.h"
#include "ops/conv/conv_args.h"

namespace pdnn {

namespace cpu {

// Floats of scratch any of the three functions below needs.
size_t conv3x3_direct_workspace_floats(const ConvGeom& g, int64_t n, int64_t k, int threads);

// y = act(conv(x, w) + b) (conv_args.h; a.act: ReLU or LeakyReLU with slope in [0, 1], or
// none). Writes y.
void conv3x3_direct_forward(const ConvFwd& a, float* ws, CpuExec e);

// dx = dL/dx from dy (with respect to the convolution's output: a.act is not read). Writes dx.
void conv3x3_direct_backward_data(const ConvBwd& a, float* ws, CpuExec e);

// dw += dL/dw from dy and x. Partial sums per fixed group of images, added in group order:
// bit-identical at any thread count.
void conv3x3_direct_backward_weights(const ConvBwd& a, float* ws, CpuExec e);

}  // namespace cpu
}  // namespace pdnn
