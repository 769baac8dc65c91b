// The GPU's convolution algorithms, one entry point per algorithm and pass. cuda::conv2d_forward
// and cuda::conv2d_backward (conv2d.h) call the one the ops layer chose for the shape
// (conv2d_algo.h); tests and apps/bench_conv_gpu call them directly.
//
// Every pass of every algorithm takes the CPU twin's operands (conv_args.h: ConvFwd, ConvBwd;
// the algorithm field is not read here): g is the convolution's (input c x h x w, kernel
// kh x kw, stride, padding, output oh x ow), n images, k output channels; x (n,c,h,w),
// w (k,c,kh,kw), y and dy (n,k,oh,ow). A ConvTranspose2d runs forward as backward_data and
// backward-data as forward, with the roles of x and y swapped.
//   forward           y = act(conv(x, w) + b)                         (b, act optional)
//   backward_data     dx = conv^T(act'(y) . dy, w); written, not accumulated
//   backward_weights  dw += conv_w(x, act'(y) . dy); db += the sums of act'(y) . dy per channel
// act'(y) . dy is dy through the fused activation's derivative, read off y in the operand load
// (y may be null when act is None). With e.tf32 the products run on the tensor cores in TF32
// (inputs rounded to 10-bit mantissas, fp32 sums).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/exec.h"
#include "ops/activation.h"
#include "ops/conv/conv2d.h"
#include "ops/conv/im2col.h"

namespace pdnn {
namespace cuda {

// g = act'(y) dy over `total` elements (conv2d.cu): the backward passes that gather dy many
// times (implicit GEMM, cuDNN) read it once through the activation into a workspace instead of
// reading y beside every gathered dy.
void conv2d_act_grad(int64_t total, const float* y, const float* dy, Act act, float* g,
                     CudaExec e);
// Floats of that workspace (0 without an activation), rounded up to keep what follows aligned.
inline size_t conv2d_act_grad_floats(const ConvGeom& g, int64_t n, int64_t k, Act act) {
  return act.kind == FusedAct::None ? 0 : static_cast<size_t>((n * k * g.oh * g.ow + 63) / 64 * 64);
}

// ---- implicit GEMM (conv2d_implicit_gemm.cu; strided backward-data in
// conv2d_implicit_backward_data.cu) ----------------------------------------------------------
// The block tiles (outputs a block: rows = the pass's M, output or input channels; columns = N)
// the forward and backward-weights kernels are built in. Auto: conv_implicit_tile's choice for
// the shape; tests and apps/bench_conv_gpu force each.
enum class ConvTile { Auto, T128x128, T64x128, T32x256, T32x128, T32x32 };
const char* conv_tile_name(ConvTile t);
ConvTile conv_implicit_tile(ConvPass pass, const ConvGeom& g, int64_t n, int64_t k);

void conv2d_implicit_forward(const ConvFwd& a, CudaExec e, ConvTile tile = ConvTile::Auto);
// Strided layers' kernel: dx = (dy through act'(y)) (the dx_act fields are not read).
void conv2d_implicit_backward_data(const ConvBwd& a, CudaExec e);
// ws: conv2d_implicit_backward_weights_ws() floats (the split-K partial sums). With an
// activation, dy goes through act'(y) as its tiles arrive (y read beside dy).
void conv2d_implicit_backward_weights(const ConvBwd& a, float* ws, CudaExec e,
                                      ConvTile tile = ConvTile::Auto);
// The split over the reduction is chosen to fill the current device's multiprocessors.
size_t conv2d_implicit_backward_weights_ws(const ConvGeom& g, int64_t n, int64_t k,
                                           ConvTile tile = ConvTile::Auto);
// A stride-1 backward-data runs as the forward kernel over flipped weights (conv2d.cu), kept
// in this many floats of workspace.
size_t conv2d_implicit_backward_data_ws(const ConvGeom& g, int64_t n, int64_t k);

// ---- direct 3x3 stride-1 with halo tiles (conv2d_direct.cu; conv3x3_applies shapes) ------
// The block tiles: M rows (output channels; input channels in backward-data) a block. Auto:
// by the rows, the image size and the precision, as measured (conv2d_direct.cu's fwd_tile;
// backward-weights: 64 above 32 rows, else 32). Forced by tests and apps/bench_conv_gpu.
enum class DirectTile { Auto, M128, M64, M32 };
const char* direct_tile_name(DirectTile t);
// Workspace floats of a pass: the re-laid-out weights (forward, backward-data) or the split
// partial sums (backward-weights).
size_t conv2d_direct_ws(ConvPass pass, const ConvGeom& g, int64_t n, int64_t k);
void conv2d_direct_forward(const ConvFwd& a, float* ws, CudaExec e,
                           DirectTile tile = DirectTile::Auto);
// dx = written, dy already through the activation (a.act must be None); with a.dx_act,
// dx = act'(a.dx_src) . dL/dx in the output write (dx_src: the convolution's input, made by a
// layer with that activation).
void conv2d_direct_backward_data(const ConvBwd& a, float* ws, CudaExec e,
                                 DirectTile tile = DirectTile::Auto);
// dw +=, db += (when given); with an activation, dy goes through act'(y) as it arrives.
void conv2d_direct_backward_weights(const ConvBwd& a, float* ws, CudaExec e,
                                    DirectTile tile = DirectTile::Auto);

// ---- cuDNN, opened at run time (conv2d_cudnn.cu; e.cudnn must hold the context's handle) ---
// The workspace of a pass (floats): cuDNN's, plus dy through the activation in backward.
size_t conv2d_cudnn_workspace_floats(ConvPass pass, const ConvGeom& g, int64_t n, int64_t k,
                                     Act act, CudaExec e);
void conv2d_cudnn_forward(const ConvFwd& a, float* ws, CudaExec e);
// dw += and db += when given; dx = when given (the dx_act fields are not read).
void conv2d_cudnn_backward(const ConvBwd& a, float* ws, CudaExec e);

}  // namespace cuda
}  // namespace pdnn
