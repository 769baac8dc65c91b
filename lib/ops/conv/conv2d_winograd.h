// Winograd F(4x4, 3x3) convolution (Lavin & Gray, "Fast Algorithms for Convolutional Neural
// Networks", 2016) for 3x3 stride-1 kernels with padding 0..2, forward and both backward
// passes. Each 4x4 output tile comes from a 6x6 input tile as
//     Y = A^T [ sum_c (G g_c G^T) . (B^T d_c B) ] A        (. = elementwise),
// 36 multiplies per tile and channel pair instead of the direct 144: the products become 36
// independent GEMMs (one per point of the 6x6 transformed tile) over a block of tiles.
// Backward data is the same forward pass over dy with the kernels rotated by 180 degrees and
// the channel roles swapped (padding 2 - p); backward weights multiplies the transformed
// input with the adjoint-transformed dy (A dY A^T) and maps back with G^T . G.
//
// Layout: tiles are transformed channel-last (channels, or output channels, in SIMD lanes),
// so the NCHW input is transposed into a zero-padded strip of rows first and the output
// transposed back; the output transform is the one place that writes y (bias added there: the
// epilogue where bias + ReLU fusion belongs).
//
// Accuracy (float32, unit roundoff u = 2^-24): with the rows of B^T, G, A^T used here (points
// 0, +-1, +-2, inf) each output satisfies, to first order,
//     |y~ - y| <= gamma_m * sum_c |A^T| ( (|G| |g_c| |G|^T) . (|B^T| |d_c| |B|) ) |A|,
//     gamma_m = m u / (1 - m u),  m = c + 30
// (the bilinear-algorithm bound: every rounding error is relative to the sum of absolute
// values it is computed from; c sequential adds in the GEMM, <= 30 in the transforms; the
// filter transform is done in double and rounded once). For |g| = |d| = 1 the bracket is
// up to 256x the direct convolution's sum_c |g||d| = 9c: F(4x4) loses about two decimal
// digits against a direct sum, F(2x2) (not used) about one. Exactly: the bracket over
// sum_c |g||d| is kappa_i kappa_j / 9 at output (i, j) of a tile, kappa = (16, 17, 24, 48):
// 28x at (0,0), 256x at (3,3), 76x averaged over the tile (F(2x2): 7x). Backward weights sums over all
// tiles of the batch instead of channels: m = n * tiles + 30 there. test_conv_winograd.cpp
// checks every result against this bound computed elementwise.
// Non-finite values: an inf or NaN anywhere in a 6x6 input tile makes its whole 4x4 output tile
// NaN (the transforms mix the tile), where a direct sum confines it to the outputs reading it.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/exec.h"
#include "ops/conv/conv2d_3x3.h"
#include "ops/conv/conv_args.h"

namespace pdnn {

namespace cpu {

// Floats of scratch any of the three functions below needs for geometry g, batch n, k output
// channels and `threads` threads (pass at least this much as `ws`).
size_t conv3x3_winograd_workspace_floats(const ConvGeom& g, int64_t n, int64_t k, int threads);

// y = act(conv(x, w) + b) (conv_args.h; a.act: ReLU or LeakyReLU with slope in [0, 1], or
// none). Writes y.
void conv3x3_winograd_forward(const ConvFwd& a, float* ws, CpuExec e);

// dx = dL/dx from dy (with respect to the convolution's output: a.act is not read). Writes dx.
void conv3x3_winograd_backward_data(const ConvBwd& a, float* ws, CpuExec e);

// dw += dL/dw from dy and x. Partial sums per fixed group of tiles, added in group order:
// bit-identical at any thread count.
void conv3x3_winograd_backward_weights(const ConvBwd& a, float* ws, CpuExec e);

}  // namespace cpu
}  // namespace pdnn
