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

#include "ops/activation.h"
#include "ops/conv/conv2d_3x3.h"

namespace pdnn {

namespace cpu {

// Floats of scratch any of the three functions below needs.
size_t conv3x3_direct_workspace_floats(const ConvGeom& g, int64_t n, int64_t k, int threads);

// y (n, k, oh, ow) = conv(x (n, c, h, w), w (k, c, 3, 3)) + b (k); b may be nullptr. Writes y.
void conv3x3_direct_forward(float* y, const float* x, const float* w, const float* b,
                            const ConvGeom& g, int64_t n, int64_t k, int threads, float* ws,
    Act act = {});

// dx (n, c, h, w) = dL/dx from dy (n, k, oh, ow). Writes dx.
void conv3x3_direct_backward_data(float* dx, const float* dy, const float* w, const ConvGeom& g,
                                  int64_t n, int64_t k, int threads, float* ws);

// dw (k, c, 3, 3) += dL/dw. Partial sums per fixed group of images, added in group order:
// bit-identical at any thread count.
void conv3x3_direct_backward_weights(float* dw, const float* dy, const float* x,
                                     const ConvGeom& g, int64_t n, int64_t k, int threads,
                                     float* ws);

}  // namespace cpu
}  // namespace pdnn
