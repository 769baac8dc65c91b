// The shared workspace each of the GPU's own convolution algorithms asks for a pass, as host
// arithmetic (no device, no CUDA header; compiled in every build): a memory plan made on the
// CPU counts the bytes the GPU's passes will ask (layers/conv2d.cpp: Conv2d::backward_needs),
// the GPU's chooser (conv2d_algo.h) compares the same numbers with the workspace the plan left,
// and the kernels (conv2d*.cu) size their splits with the same functions, so the three cannot
// drift apart. Where a size depends on the device (the weight gradients split their reduction
// over about four blocks a multiprocessor: kit/split_k.h), the multiprocessor count is an
// argument: the context's device's on the GPU, an H100's in a plan made on the CPU
// (core/cuda_state.h: kPlanGpuSms).
// cuDNN's workspace is its own choice among its algorithms (conv2d_cudnn.cu) and needs its
// handle; here only its cap.
//
// Floats, as the context's workspace counts them. What each algorithm keeps there, per pass:
//   im2col    columns of a chunk of images, then the product (cuda_conv_workspace_floats, the
//             same for the three passes): at batch 1 one whole image's columns, the c*kh*kw
//             rows times its output pixels, which grows with the pixels as the activations do;
//   implicit  forward none (1 float); backward-data the flipped weights of a stride-1 layer
//             (none for a strided one, fp32 and bf16 alike on the register-staged kernel, so
//             none in bf16 at all); backward-weights the split partial sums, splits x k x
//             (c*kh*kw + 1);
//   direct    forward and backward-data the weights re-laid out (c*9 x k rounded to 128;
//             bf16's 4x4 stride-2 layers also their input's space-to-depth phases in forward
//             and backward-weights); backward-weights the split partial sums;
// plus, in both backward passes of implicit and direct (and cuDNN's), dy through the fused
// activation (conv2d_act_grad_floats) when the layer did not do it in place.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "ops/activation.h"
#include "ops/conv/conv2d.h"
#include "ops/conv/conv2d_3x3.h"
#include "ops/conv/conv2d_k4s2.h"
#include "ops/conv/im2col.h"
#include "ops/kit/split_k.h"

namespace pdnn {

namespace cuda {

// True where the direct kernels run the shape for tensors of dtype: 3x3 stride-1 layers in
// fp32, TF32 and bf16; 4x4 stride-2 padding-1 ones (W5's) in bf16.
inline bool direct_applies(const ConvGeom& g, DType dtype) {
  return conv3x3_applies(g) || (dtype == DType::BF16 && conv4x4s2_applies(g));
}

// Floats of dy through the fused activation (0 without one), rounded up to keep what follows
// aligned: the backward passes that gather dy many times (implicit GEMM, direct, cuDNN) read
// it once through the activation into the workspace instead of reading y beside every
// gathered dy.
inline size_t conv2d_act_grad_floats(const ConvGeom& g, int64_t n, int64_t k, Act act) {
  return act.kind == FusedAct::None ? 0 : static_cast<size_t>((n * k * g.oh * g.ow + 63) / 64 * 64);
}

// ---- implicit GEMM ----------------------------------------------------------------------
// Index arithmetic (conv2d_implicit_gemm.cu, conv2d_implicit_staged.cu): 32-bit within an
// image, 64-bit image offsets and output addresses. The one within-image offset that passes
// 2^31 first is an input channel's plane, ci*h*w (in every gather address of x), once an image
// reaches 2^31 elements (the U-Net's 128-channel concatenation at side 4096, its 64-channel
// layers from ~5,800): such shapes run the kernels' 64-bit instantiation, whose tap offsets are
// 64-bit (one wide multiply-add per address), chosen on the host (conv_implicit_wide; Wide
// forces it, for tests), so the 32-bit instantiation every other shape runs is unchanged.
// What stays 32-bit in both (conv_implicit_fits): a plane (h*w, oh*ow: < 2^31 up to a side of
// 46,000), the batch's pixels (n*oh*ow, n*h*w: the product's N or K), the weights (k*c*kh*kw).
enum class ConvIndex { Auto, Wide };
bool conv_implicit_fits(const ConvGeom& g, int64_t n, int64_t k);
// True where a tap's offset within an image (ci*h*w + r*w + q, the forward's x or a stride-1
// backward-data's dy) may pass 2^31 - 1.
bool conv_implicit_wide(const ConvGeom& g);
// The block tiles (outputs a block: rows = the pass's M, output or input channels; columns = N)
// the forward and backward-weights kernels are built in. Auto: conv_implicit_tile's choice for
// the shape; tests and apps/bench_conv_gpu force each.
enum class ConvTile { Auto, T128x128, T64x128, T32x256, T32x128, T32x32 };
const char* conv_tile_name(ConvTile t);
ConvTile conv_implicit_tile(ConvPass pass, const ConvGeom& g, int64_t n, int64_t k);
// A tile's BM x BN outputs and its BK reduction elements a step (conv2d_implicit_gemm.cu checks
// them against the kernels' configurations at compile time).
struct ConvTileDims {
  int bm, bn, bk;
};
constexpr ConvTileDims conv_tile_dims(ConvTile t) {
  return t == ConvTile::T64x128   ? ConvTileDims{64, 128, 16}
         : t == ConvTile::T32x256 ? ConvTileDims{32, 256, 16}
         : t == ConvTile::T32x128 ? ConvTileDims{32, 128, 16}
         : t == ConvTile::T32x32  ? ConvTileDims{32, 32, 8}
                                  : ConvTileDims{128, 128, 16};
}
// fp32/TF32 backward-weights (M = k rows, N = c*kh*kw taps, K = n*oh*ow): its split on `sms`
// multiprocessors, and the floats of its partial sums.
kit::KSplit conv2d_implicit_backward_weights_split(ConvTile tile, int64_t M, int64_t N, int64_t K,
                                                int sms);
size_t conv2d_implicit_backward_weights_ws(const ConvGeom& g, int64_t n, int64_t k, int sms,
                                           ConvTile tile = ConvTile::Auto);
// A stride-1 backward-data runs as the forward kernel over flipped weights (conv2d.cu), kept
// in this many floats of workspace; a strided one needs none (1 float).
bool conv2d_implicit_data_as_forward(const ConvGeom& g);
size_t conv2d_implicit_backward_data_ws(const ConvGeom& g, int64_t n, int64_t k);
// The register-staged kernel's block rows for M rows (conv2d_implicit_staged.cu), and its bf16
// backward-weights split and partial sums.
int conv2d_implicit_staged_rows(int64_t M);
kit::KSplit conv2d_implicit_bf16_backward_weights_split(const ConvGeom& g, int64_t n, int64_t k,
                                                     int sms);
size_t conv2d_implicit_bf16_backward_weights_ws(const ConvGeom& g, int64_t n, int64_t k, int sms);

// ---- direct ---------------------------------------------------------------------------------
// The block tiles: M rows (output channels; input channels in backward-data) a block. Auto:
// by the rows, the image size and the precision, as measured (conv2d_direct.cu's fwd_tile;
// backward-weights: 64 above 32 rows, else 32). Forced by tests and apps/bench_conv_gpu.
enum class DirectTile { Auto, M128, M64, M32 };
const char* direct_tile_name(DirectTile t);
// Several images a block where an image's outputs are smaller than a block's patch of pixels
// (bf16, the 4x4 stride-2 layers: W5's at 4x4 and 8x8 outputs; conv2d_direct.cu's header).
// Auto: where four images or more fit the patch (W5's 4x4 outputs; two, at 8x8, lost to one on
// the H200); Many: wherever one fits (else an error); One:
// one image a block, as the 3x3 kernels always run. Forced by tests and apps/bench_conv_gpu.
enum class DirectImages { Auto, One, Many };
const char* direct_images_name(DirectImages m);
// Floats of the split sums of a bf16 4x4 stride-2 forward-kind pass (ph phases: 1 forward, 4
// backward-data) from in_ch to out_ch channels at oh x ow outputs a phase, run with several
// images a block (conv2d_direct.cu's fwd_imgs_splits): a bound that holds for every tile and
// device (at most 16 splits of the in_ch / 16 steps, 4 steps a split at least; the kernels
// check it), 0 where no tile's patch (256 output pixels at the most) holds an image. W5 on an
// H200 runs 4 splits of D.conv4's 64 steps where this counts 16 (33.5 MiB).
size_t conv2d_direct_fwd_imgs_part_floats(int64_t in_ch, int64_t out_ch, int64_t oh, int64_t ow,
                                          int64_t n, int ph);
// Backward-weights' walk: BM output channels a block, patches of 8 x 16 output pixels, split
// over blockIdx.z for at most four blocks a multiprocessor, in whole waves of the `resident`
// blocks a multiprocessor holds (0: unknown, four: the bound the workspace is sized by), at
// least 8 patches a split.
struct DirectBwwPlan {
  int bm, tiles_x, tiles_y, tiles, splits, per_split;
};
// imgs > 0: a patch is the outputs of imgs images (never more patches than one image a patch
// makes, so never more splits: the workspace's bound holds).
DirectBwwPlan conv2d_direct_bww_plan(const ConvGeom& g, int64_t n, int64_t k, DirectTile tile,
                                     int sms, int resident = 0, int imgs = 0);
// Floats of the re-laid-out weights of a forward-kind pass from in_ch to out_ch, kk taps (a
// multiple of 64, Mp being one of 128: what follows stays 256-byte aligned).
size_t conv2d_direct_weights_floats(int64_t in_ch, int64_t out_ch, bool is_bf16, int64_t kk = 9);
// Floats of the split partial sums of a weight gradient over cx channels, kk taps (the larger
// of either tile's split; rounded up to 64: what follows stays 256-byte aligned).
size_t conv2d_direct_bww_part_floats(const ConvGeom& g, int64_t cx, int64_t n, int64_t k,
                                     int64_t kk, int sms);
// A 4x4 stride-2 layer's space-to-depth phases of x: 4c channels of h x w (direct_taps.h), and
// their floats (bf16, two a float; the channels rounded up to 16, as the channel-minor copy
// holds them).
struct S2dDims {
  int64_t c, h, w;
};
S2dDims conv2d_direct_s2d_dims(const ConvGeom& g);
size_t conv2d_direct_s2d_floats(const ConvGeom& g, int64_t n);
// Floats of the channel-minor copy of n images of c x h x w in bf16 (conv2d_gpu.h's
// conv2d_direct_channel_minor: c rounded up to 16; rounded up to 64: what follows stays 256-byte
// aligned).
size_t conv2d_direct_cm16_floats(int64_t c, int64_t h, int64_t w, int64_t n);
// Workspace floats of a pass: the re-laid-out weights (forward, backward-data; dtype: the
// tensors', bf16 weights are laid out in bf16) or the split partial sums (backward-weights,
// fp32 in either), plus a 4x4 stride-2 layer's phases.
size_t conv2d_direct_ws(ConvPass pass, const ConvGeom& g, int64_t n, int64_t k, DType dtype,
                        int sms);

// Without a limit cuDNN's algorithms are picked among those asking at most this
// (conv2d_cudnn.cu; the chooser then leaves out one the free memory cannot hold), as PyTorch's
// autotuner takes any its free memory holds (held to 1 GiB under a plan, the U-Net's
// fp32+transforms step at 2048 x 2048 was 9% slower: 451.4 ms against 413.4 with the plan's
// 5.3 GiB, results/scale/unet-study-h200).
// Under a limit, at most what the shared workspace's limit leaves
// (CudaExec::workspace_limit_bytes).
constexpr size_t kCudnnMaxWorkspaceBytes = size_t{16} << 30;
// What a memory plan counts cuDNN's algorithm may ask beside what it keeps (the plan's most;
// under the plan cuDNN then takes all the workspace the limit leaves).
constexpr size_t kCudnnPlanWorkspaceBytes = size_t{1} << 30;
// bf16: floats of cuDNN's bf16 weight gradient (backward-weights), before it is added to dw.
inline size_t conv2d_cudnn_dw16_floats(ConvPass pass, const ConvGeom& g, int64_t k, bool is_bf16) {
  if (!is_bf16 || pass != ConvPass::BackwardWeights) return 0;
  return static_cast<size_t>((k * g.col_rows() + 127) / 128 * 64);
}
// Floats a cuDNN pass keeps in the workspace beside its own algorithm's: dy through the
// activation in backward, bf16's weight gradient, one float of margin.
inline size_t conv2d_cudnn_beside_floats(ConvPass pass, const ConvGeom& g, int64_t n, int64_t k,
                                         Act act, bool is_bf16) {
  return (pass == ConvPass::Forward ? 0 : conv2d_act_grad_floats(g, n, k, act)) +
         conv2d_cudnn_dw16_floats(pass, g, k, is_bf16) + 1;
}
// Under a memory plan cuDNN finds the weight gradient's algorithm with its output in a scratch
// at the start of its part of the workspace (the real dw accumulates; conv2d_cudnn.cu): its
// floats, 256-byte aligned (0 for the other passes); the algorithm then asks at most what the
// workspace leaves beside it.
inline size_t conv2d_cudnn_find_scratch_floats(ConvPass pass, const ConvGeom& g, int64_t k,
                                               bool is_bf16) {
  if (pass != ConvPass::BackwardWeights) return 0;
  const size_t bytes = static_cast<size_t>(k * g.col_rows()) * (is_bf16 ? 2 : 4);
  return (bytes + 255) / 256 * 64;
}

}  // namespace cuda

// The workspace floats GPU algorithm a (im2col, implicit or direct: pdnn's own) asks for pass
// `pass` of this shape, dy through `act` in the workspace where it is not None, tensors of
// dtype (F32: fp32 or TF32), on a device of `sms` multiprocessors. An algorithm that cannot run
// the shape (direct on a 1x1 layer) is run as im2col (conv2d.cu), and asks what im2col asks.
size_t gpu_conv_own_ws_floats(ConvPass pass, ConvAlgo a, const ConvGeom& g, int64_t n, int64_t k,
                              Act act, DType dtype, int sms);

}  // namespace pdnn
