// Winograd F(4x4, 2x2) over the stride phases, for the 4x4 stride-2 padding-1 convolutions of
// the DCGAN (W5: every Conv2d of the discriminator but the last, and, with forward and backward
// swapped, every ConvTranspose2d of the generator but the first): forward, backward data and
// backward weights.
//
// The phases. Split the zero-padded input into its four stride phases (space to depth):
// xs[c, by, bx][j][i] = x[c][2j + by - 1][2i + bx - 1]. Then the 4x4 stride-2 convolution is a
// 2x2 stride-1 convolution over the 4C phase channels, with the 2x2 kernels
// w_b[ay][ax] = w[k][c][2 ay + by][2 ax + bx]: no tap reads a zero that stride 2 would skip.
// Its backward data (the generator's transposed convolution) splits the other way, by output
// phase: dx[c][2u + py][2v + px] = sum_k sum_(ay,ax) dyp[k][u + py + ay][v + px + ax]
// w[k][c][3 - 2ay - py][3 - 2ax - px] (dyp: dy zero-padded by 1), four 2x2 stride-1
// convolutions of dy, each writing one phase of dx: no col2im scatter, no zero work.
//
// The 2x2 stride-1 convolutions run as Winograd F(4x4, 2x2) (Lavin & Gray 2016): each 4x4
// output tile from a 5x5 input tile, Y = A^T [ sum (G g G^T) . (B^T d B) ] A, 25 multiplies
// per tile and channel pair instead of 64, so the step's arithmetic is 2.56x smaller than
// im2col's. The products are 25 GEMMs (one per point of the transformed tile) over all tiles
// of a chunk of images, done by OpenBLAS; the transforms run channel-last, 16 channels in a
// vector. Backward weights multiplies the transformed input with the adjoint-transformed dy
// (A dY A^T) and maps back with G^T . G.
//
// Interpolation points 0, 1, -1, 2 and infinity, scaled so that B^T and A^T are integer:
//   B^T = [2 -1 -2  1  0;  0  2  1 -1  0;  0 -2  3 -1  0;  0 -1  0  1  0;  0  2 -1 -2  1]
//   G   = [3 0; 3 3; 1 -1; 1 2; 0 6] / 6
//   A^T = [1  1  1  1  0;  0  1 -1  2  0;  0  1  1  4  0;  0  1 -1  8  1]
// Accuracy (float32, u = 2^-24): to first order every output satisfies
//     |y~ - y| <= gamma_m sum_c |A^T| ((|G| |g_c| |G|^T) . (|B^T| |d_c| |B|)) |A|,
//     gamma_m = m u / (1 - m u),  m = 4C + 20
// (the bilinear-algorithm bound: every rounding error is relative to the sum of absolute values
// it is computed from; 4C sequential adds in the GEMM, at most 17 roundings in the transforms,
// the kernels' included: they are transformed in float, as g / 36 through the integer matrix
// 6G); backward data sums over K output channels (m = K + 20), backward weights over the
// batch's tiles (m = tiles + 20).
// For |g| = |d| = 1 the bracket over the direct sum's sum_c |g||d| is kappa_i kappa_j / 4 at
// output (i, j) of a tile, kappa = (10, 8, 10, 20): 25x at (0,0), 100x at (3,3), 36x averaged
// over the tile (F(4x4, 3x3) of conv2d_winograd.h: 76x). test_conv_k4s2.cpp checks every
// element against this bound.
// Non-finite values: an inf or NaN in a 5x5 input tile makes its whole 4x4 output tile NaN.
//
// Results do not depend on the thread count: the work is cut into pieces by shape alone
// (chunks of images, blocks of each GEMM), so every sum runs in the same order at 1, 2 or 16
// threads, and the weight gradient of a batch is one sum over its tiles.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/exec.h"
#include "ops/activation.h"
#include "ops/conv/conv_args.h"
#include "ops/conv/im2col.h"

namespace pdnn {

// True for a 4x4 kernel, stride 2, padding 1, on an input of even height and width (so the
// output is exactly half the input).
bool conv4x4s2_applies(const ConvGeom& g);
// Throws pdnn::Error naming `kernel` and g's kernel, stride, padding and size unless
// conv4x4s2_applies.
void conv4x4s2_check(const ConvGeom& g, const char* kernel);

namespace cpu {

// Floats of scratch any of the three functions below needs for geometry g, batch n and k
// output channels (pass at least this much as `ws`).
size_t conv4x4s2_workspace_floats(const ConvGeom& g, int64_t n, int64_t k, int threads);

// y = act(conv(x, w) + b) (conv_args.h). Writes y. a.act: any fused activation (applied in the
// output transform's write).
void conv4x4s2_forward(const ConvFwd& a, float* ws, CpuExec e);

// dx = dL/dx from dy (with respect to the convolution's output: a.act is not read). Writes dx.
// With a.dx_act (ReLU or LeakyReLU): dx = act'(a.dx_src) . dL/dx, dx_src (n, c, h, w) the
// activation's output that is this convolution's input (Layer::fold_input_activation), in the
// same write.
void conv4x4s2_backward_data(const ConvBwd& a, float* ws, CpuExec e);

// dw += dL/dw from dy and x.
void conv4x4s2_backward_weights(const ConvBwd& a, float* ws, CpuExec e);

}  // namespace cpu
}  // namespace pdnn
