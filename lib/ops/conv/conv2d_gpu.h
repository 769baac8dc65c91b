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
// (inputs rounded to 10-bit mantissas, fp32 sums). The bf16 twins (ConvFwdBf16, ConvBwdBf16:
// bf16 x, w, y, dy, dx; fp32 b, dw, db) run the products on the tensor cores in bf16 with fp32
// sums, and round once where they write a bf16 tensor (act'(y) . dy included: it is a bf16
// operand). Every algorithm takes bf16 (direct: its 3x3 stride-1 shapes, and in bf16 only the
// 4x4 stride-2 padding-1 ones: direct_applies).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/exec.h"
#include "ops/activation.h"
#include "ops/conv/conv2d.h"
#include "ops/conv/conv2d_3x3.h"
#include "ops/conv/conv2d_gpu_ws.h"
#include "ops/conv/conv2d_k4s2.h"
#include "ops/conv/direct_taps.h"
#include "ops/conv/im2col.h"

namespace pdnn {
namespace cuda {

// The geometry every implicit-GEMM kernel's argument struct A holds in 32-bit ints (n, c, h, w,
// k, kh, kw, sh, sw, ph, pw, oh, ow) and the fused activation; the caller checks the sizes.
template <class A>
void set_conv_geom32(A& a, const ConvGeom& g, int64_t n, int64_t k, Act act) {
  a.n = static_cast<int>(n);
  a.c = static_cast<int>(g.c);
  a.h = static_cast<int>(g.h);
  a.w = static_cast<int>(g.w);
  a.k = static_cast<int>(k);
  a.kh = static_cast<int>(g.kh);
  a.kw = static_cast<int>(g.kw);
  a.sh = static_cast<int>(g.sh);
  a.sw = static_cast<int>(g.sw);
  a.ph = static_cast<int>(g.ph);
  a.pw = static_cast<int>(g.pw);
  a.oh = static_cast<int>(g.oh);
  a.ow = static_cast<int>(g.ow);
  a.act = act;
}

// g = act'(y) dy over `total` elements (conv2d.cu): the backward passes that gather dy many
// times (implicit GEMM, cuDNN) read it once through the activation into a workspace instead of
// reading y beside every gathered dy.
void conv2d_act_grad(int64_t total, const float* y, const float* dy, Act act, float* g,
                     CudaExec e);
void conv2d_act_grad(int64_t total, const bf16* y, const bf16* dy, Act act, bf16* g,
                     CudaExec e);
// (Its floats: conv2d_act_grad_floats, conv2d_gpu_ws.h, with every algorithm's workspace.)

// ---- implicit GEMM (conv2d_implicit_gemm.cu; strided backward-data and the bf16 passes in
// conv2d_implicit_staged.cu; the block tiles, ConvTile, and the workspace: conv2d_gpu_ws.h) ---
// index: Auto runs the 64-bit instantiation only where a shape needs it (conv_implicit_wide,
// conv2d_gpu_ws.h: an image of 2^31 elements or more); Wide forces it (tests).
void conv2d_implicit_forward(const ConvFwd& a, CudaExec e, ConvTile tile = ConvTile::Auto,
                             ConvIndex index = ConvIndex::Auto);
// Strided layers' kernel: dx = (dy through act'(y)) (the dx_act fields are not read). Its
// gathers need no 64-bit offsets within an image (one instantiation).
void conv2d_implicit_backward_data(const ConvBwd& a, CudaExec e);
// ws: conv2d_implicit_backward_weights_ws() floats (the split-K partial sums; the split is
// chosen to fill the current device's multiprocessors). With an activation, dy goes through
// act'(y) as its tiles arrive (y read beside dy).
void conv2d_implicit_backward_weights(const ConvBwd& a, float* ws, CudaExec e,
                                      ConvTile tile = ConvTile::Auto,
                                      ConvIndex index = ConvIndex::Auto);

// bf16, all three passes on the register-staged kernel (conv2d_implicit_staged.cu; its tile by
// M, as its strided backward-data): forward y = act(conv(x, w) + b); backward-data
// dx = conv^T(act'(y) . dy, w) for any stride (dx_act not applied); backward-weights dw +=,
// db += with ws = conv2d_implicit_bf16_backward_weights_ws() floats of split partial sums.
void conv2d_implicit_forward(const ConvFwdBf16& a, CudaExec e, ConvIndex index = ConvIndex::Auto);
void conv2d_implicit_backward_data(const ConvBwdBf16& a, CudaExec e);
void conv2d_implicit_backward_weights(const ConvBwdBf16& a, float* ws, CudaExec e,
                                      ConvIndex index = ConvIndex::Auto);

// ---- direct, with halo tiles (conv2d_direct.cu): 3x3 stride-1 (conv3x3_applies), and in bf16
// 4x4 stride-2 padding-1 (conv4x4s2_applies: W5's) as 2x2 stride-1 kernels over the phases --
// A 4x4 stride-2 padding-1 convolution of x is the 2x2 stride-1 unpadded convolution of x's
// space-to-depth phases xs[4c + 2pr + pq][u][v] = x[c][2u + pr - 1][2v + pq - 1] (zero outside)
// with the 2x2 kernels w'[k][4c + 2pr + pq][a][b] = w[k][c][2a + pr][2b + pq]: forward and
// backward-weights run the 3x3 kernels' code with a 2x2 kernel over xs (made once per call,
// one pass over x), backward-data as four 2x2 convolutions of dy, one per output phase of dx
// (the forward kernel, the phase in blockIdx.z), each writing its pixels of dx. Forward and
// backward-data with one image a block read a channel-minor copy of their input (made once per
// call, conv2d_direct_channel_minor) through cp.async stages; several images a block read it as
// it is. Tiling and floors: conv2d_direct.cu's header.
// Where they apply (direct_applies), their block tiles (DirectTile) and their workspace
// (conv2d_direct_ws): conv2d_gpu_ws.h.
// The bf16 twins (ConvFwdBf16, ConvBwdBf16) run the same tiles on bf16 mma.sync with fp32 sums,
// rounding once where they write a bf16 tensor (y, dx; act'(y) . dy as the operand it is).
void conv2d_direct_forward(const ConvFwd& a, float* ws, CudaExec e,
                           DirectTile tile = DirectTile::Auto);
void conv2d_direct_forward(const ConvFwdBf16& a, float* ws, CudaExec e,
                           DirectTile tile = DirectTile::Auto,
                           DirectImages imgs = DirectImages::Auto);
// The bf16 passes' weights re-laid out (out at direct::prep_index; zero past the channels;
// conv2d_direct_weights_floats(...) floats, four times that with Phase) as each pass makes
// them: Plain (3x3; flip: backward-data's rotated kernels), S2d (a 4x4 stride-2 forward's 2x2
// kernels over the phases) or Phase (its backward-data's, one layout per output phase).
// Returns Mp. Exposed for the tests, which check every element against w_index.
int conv2d_direct_weights(const bf16* w, int64_t k, int64_t c, bool flip, direct::Taps taps,
                          bf16* out, CudaExec e);
// xs = x's space-to-depth phases (n, 4c, s2d_rows(h), s2d_cols(w); ops/conv/direct_taps.h),
// as the 4x4 stride-2 passes make them, at most max_pairs (pr, u, v) pairs (2^30 at most) a
// launch: the tests force several launches.
void conv2d_direct_space_to_depth(const bf16* x, const ConvGeom& g, int64_t n, bf16* xs,
                                  CudaExec e, int64_t max_pairs = int64_t{1} << 30);
// xc = the channel-minor copy (n, ceil(C / 16), H, W, 16; zeros past C) that a 4x4 stride-2
// forward-kind pass of one image a block reads by cp.async: s2d: of x's space-to-depth phases
// (C x H x W = 4c x s2d_rows(h) x s2d_cols(w): the forward's input); else of x itself (c x h x w:
// backward-data's dy, g's c being its channels).
void conv2d_direct_channel_minor(const bf16* x, const ConvGeom& g, int64_t n, bf16* xc,
                                 CudaExec e, bool s2d);
// dx = written, dy already through the activation (a.act must be None); with a.dx_act,
// dx = act'(a.dx_src) . dL/dx in the output write (dx_src: the convolution's input, made by a
// layer with that activation).
void conv2d_direct_backward_data(const ConvBwd& a, float* ws, CudaExec e,
                                 DirectTile tile = DirectTile::Auto);
void conv2d_direct_backward_data(const ConvBwdBf16& a, float* ws, CudaExec e,
                                 DirectTile tile = DirectTile::Auto,
                                 DirectImages imgs = DirectImages::Auto);
// dw +=, db += (when given); with an activation, dy goes through act'(y) as it arrives.
void conv2d_direct_backward_weights(const ConvBwd& a, float* ws, CudaExec e,
                                    DirectTile tile = DirectTile::Auto);
void conv2d_direct_backward_weights(const ConvBwdBf16& a, float* ws, CudaExec e,
                                    DirectTile tile = DirectTile::Auto,
                                    DirectImages imgs = DirectImages::Auto);

// ---- cuDNN, opened at run time (conv2d_cudnn.cu; e.cudnn must hold the context's handle) ---
// The workspace of a pass (floats): cuDNN's, plus dy through the activation in backward (and,
// in bf16, cuDNN's bf16 weight gradient before it is added to the fp32 dw). dtype: the
// tensors' (F32 or BF16). cuDNN's own part is its fastest deterministic algorithm asking at
// most kCudnnMaxWorkspaceBytes, or under a limit what e.workspace_limit_bytes leaves beside the rest.
size_t conv2d_cudnn_workspace_floats(ConvPass pass, const ConvGeom& g, int64_t n, int64_t k,
                                     Act act, CudaExec e, DType dtype = DType::F32);
// What cuDNN's own algorithm asks at the least (bytes) for the pass, among those it may pick at
// e's precision (deterministic; strict fp32 or not), over the batch's slices: the part of a
// memory plan's least workspace only cuDNN knows (conv2d_algo.h, gpu_conv_workspace_bounds).
size_t conv2d_cudnn_least_bytes(ConvPass pass, const ConvGeom& g, int64_t n, int64_t k,
                                CudaExec e, DType dtype = DType::F32);
// cuDNN's own algorithm for a pass, kept in the algorithm cache beside the choice of cuDNN, so
// that a run reading the file runs what the run that timed it ran: cuDNN's timing (cudnnFind)
// ranks its algorithms differently on a GPU that has run nothing yet, as in a run whose choices
// all come from the file (W5 fp32 on an H200: another algorithm for its 64-channel 32x32
// forward, the step 5.53 -> 5.86 ms). Without a workspace limit only (a plan finds cuDNN's
// algorithm in its own buffers, at the pass's first call).
// conv2d_cudnn_picks: the pass's picks made so far in e's context, one per slice size, as
// (key, "cudnn <version> algo <a> math <m> ws <bytes>"). conv2d_cudnn_adopt_picks: takes for
// each of the pass's keys not picked yet the value `cached` gives (nullptr: none) where it is of
// this cuDNN, within the pass's cap and allowed at e's precision; returns how many it took.
std::vector<std::pair<std::string, std::string>> conv2d_cudnn_picks(
    ConvPass pass, const ConvGeom& g, int64_t n, int64_t k, Act act, CudaExec e, DType dtype);
int conv2d_cudnn_adopt_picks(ConvPass pass, const ConvGeom& g, int64_t n, int64_t k, Act act,
                             CudaExec e, DType dtype,
                             const std::function<const std::string*(const std::string&)>& cached);
void conv2d_cudnn_forward(const ConvFwd& a, float* ws, CudaExec e);
// dw += and db += when given; dx = when given (the dx_act fields are not read).
void conv2d_cudnn_backward(const ConvBwd& a, float* ws, CudaExec e);
// bf16 (cuDNN's bfloat16 configuration: bf16 tensors, fp32 compute). cuDNN writes a weight
// gradient of the weights' type: bf16, rounded once per slice of images, then added to dw.
void conv2d_cudnn_forward(const ConvFwdBf16& a, float* ws, CudaExec e);
void conv2d_cudnn_backward(const ConvBwdBf16& a, float* ws, CudaExec e);

}  // namespace cuda
}  // namespace pdnn
