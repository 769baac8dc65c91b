// Convolution as im2col + GEMM over a batch (Caffe's scheme), in two ways of using the cores:
// images in parallel (each thread im2cols its images and runs single-threaded GEMMs, weight
// gradients summed from per-thread partials in thread order) or one big GEMM over the whole
// batch (all images' columns side by side, threaded BLAS). 3x3 stride-1 convolutions go to
// kernels that skip im2col (Winograd, or direct for few input channels: conv3x3_*.h); the
// entry points below dispatch on ConvAlgo. Conv2d uses them directly; ConvTranspose2d runs
// them with forward and backward swapped.
//
// Shapes, for geometry g (input c x h x w -> output oh x ow) and k output channels:
//   x (n, c, h, w), w (k, c*kh*kw), b (k), y / dy (n, k, oh, ow).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "core/context.h"
#include "core/exec.h"
#include "core/tensor.h"
#include "ops/activation.h"
#include "ops/conv/conv_args.h"
#include "ops/conv/im2col.h"

namespace pdnn {

const char* conv_algo_name(ConvAlgo a);

// The three passes of a convolution, each of which may run its own algorithm on the GPU.
enum class ConvPass { Forward, BackwardData, BackwardWeights };
const char* conv_pass_name(ConvPass p);  // "fwd", "bwd-data", "bwd-weights"
// What cuDNN's own algorithm asks at the least (bytes) for a pass of a convolution of n images
// and k output channels, tensors of the given type, on the device a memory plan is made for
// (gpu_conv_cudnn_least, conv2d_algo.h); empty where no device with cuDNN is at hand.
using CudnnLeastFn =
    std::function<int64_t(ConvPass, const ConvGeom&, int64_t n, int64_t k, DType dtype)>;
// The algorithm named `name` (conv_algo_name's names); false when there is none.
bool parse_conv_algo(const std::string& name, ConvAlgo* a);

// The measured-faster algorithm for a shape at a thread count (never Auto). Winograd and Direct
// only where conv3x3_applies(g).
ConvAlgo conv_algo_for(const ConvGeom& g, int64_t n, int64_t k, int threads);

// Floats of scratch the CPU kernels below need (pass at least this much as `ws`).
size_t conv_workspace_floats(const ConvGeom& g, int64_t n, int64_t k, ConvAlgo algo, int threads);

// With a fused activation, cpu::conv2d_backward passes dy through the activation's derivative
// into the workspace, then runs the plain backward on it: a chunk of this many images at a
// time, so that the masked copy stays under about 64 MB whatever the batch (W4's first two
// layers at batch 64 would need 411 MB at once). Depends on the shape only, so results are
// the same at any thread count; a batch that fits one chunk is computed exactly as before.
int64_t conv_act_chunk(const ConvGeom& g, int64_t n, int64_t k);
// Floats of scratch cpu::conv2d_backward needs with activation `act` (the algorithm's for one
// chunk, plus the chunk's masked dy when act is not None).
size_t conv_backward_workspace_floats(const ConvGeom& g, int64_t n, int64_t k, ConvAlgo algo,
                                      Act act, int threads);

// The GPU runs every convolution as batched im2col + one GEMM per chunk of images (the CPU's
// Batched scheme): columns of `chunk` images side by side, then the product. The chunk keeps
// the column buffer under about 256 MB (W4 at batch 64 would need 3.7 GB at once).
int64_t cuda_conv_chunk(const ConvGeom& g, int64_t n, int64_t k);
// The workspace holds the columns, then (at this offset, in floats) the product. A window
// covering the whole image has no columns of its own (its GEMMs read the images: conv2d.cu).
inline int64_t cuda_conv_product_offset(const ConvGeom& g, int64_t chunk) {
  if (whole_image_window(g)) return 0;
  return (g.col_rows() * chunk * g.col_cols() + 15) / 16 * 16;
}
size_t cuda_conv_workspace_floats(const ConvGeom& g, int64_t n, int64_t k);
// Whether the GPU's im2col forward keeps the batch's columns for backward (ConvFwdOf::
// saved_cols): where the batch is one chunk, and the window does not cover the whole image (its
// columns are the images themselves).
inline bool cuda_conv_kept_columns(const ConvGeom& g, int64_t n, int64_t k) {
  return !whole_image_window(g) && cuda_conv_chunk(g, n, k) == n;
}

// Fused activation: forward writes y = act(conv(x, w) + b); backward takes dy with respect to
// that y (and y itself, to read the activation's derivative off it) and gives the gradients
// through the activation (conv_args.h: the operands).
namespace cpu {

// ws: conv_workspace_floats() floats.
void conv2d_forward(const ConvFwd& a, float* ws, CpuExec e);
// dx_src, dx_act: dx = act'(dx_src) . dL/dx when dx_act is not None (ops::conv2d_backward), in
// the 4x4 stride-2 Winograd kernel's own output write, in place after the others.
// ws: conv_backward_workspace_floats() floats.
void conv2d_backward(const ConvBwd& a, float* ws, CpuExec e);

// y (n, k, p) += b[k]; db[k] += sum over n, p of dy (n, k, p) (fixed order).
void bias_add(int64_t n, int64_t k, int64_t p, const float* b, float* y, CpuExec e);
void bias_backward(int64_t n, int64_t k, int64_t p, const float* dy, float* db, CpuExec e);

}  // namespace cpu

namespace cuda {
// a.algo: the algorithm the ops layer chose (conv2d_algo.h); ws: that algorithm's workspace.
void conv2d_forward(const ConvFwd& a, float* ws, CudaExec e);
void conv2d_backward(const ConvBwd& a, float* ws, CudaExec e);
void bias_add(int64_t n, int64_t k, int64_t p, const float* b, float* y, CudaExec e);
void bias_backward(int64_t n, int64_t k, int64_t p, const float* dy, float* db, CudaExec e);
// bf16 (conv2d_gpu.h: bf16 activations and weights, fp32 bias and parameter gradients; im2col,
// implicit or cuDNN; the same workspace sizes as fp32 suffice).
void conv2d_forward(const ConvFwdBf16& a, float* ws, CudaExec e);
void conv2d_backward(const ConvBwdBf16& a, float* ws, CudaExec e);
// y (bf16) = y + b, rounded once; db += sums of a bf16 dy (in double).
void bias_add(int64_t n, int64_t k, int64_t p, const float* b, bf16* y, CudaExec e);
void bias_backward(int64_t n, int64_t k, int64_t p, const bf16* dy, float* db, CudaExec e);
}  // namespace cuda

// Tensor ops: the workspace comes from ctx on the tensors' device. saved_cols (ConvFwdOf) is
// resized here; pass the same buffer to both, with nothing else in between that changes x.
// dx_act: dx is written as act'(x) . dL/dx (x required), on the GPU in the kernel's own output
// write where it can (direct) and in place after it elsewhere.
// Mixed precision by the tensors' type: bfloat16 x, w, y, dy, dx with float32 b, dw, db run the
// GPU's bf16 algorithms (chosen per shape as in fp32, "bf16" in the key); the CPU has no bf16
// path and refuses them in one line.
namespace ops {
// The tensors' pointers (saved_cols left null; dx_src = x when dx is given, as ops:: reads it).
ConvFwd conv_ptrs(const ConvFwdTensors& t);
ConvBwd conv_ptrs(const ConvBwdTensors& t);
// The same for bf16 tensors (bf16 x, w, y, dy, dx; float32 b, dw, db).
ConvFwdBf16 conv_ptrs_bf16(const ConvFwdTensors& t);
ConvBwdBf16 conv_ptrs_bf16(const ConvBwdTensors& t);
void conv2d_forward(Context& ctx, const ConvFwdTensors& a);
void conv2d_backward(Context& ctx, const ConvBwdTensors& a);
void bias_add(Context& ctx, int64_t n, int64_t k, int64_t p, const Tensor& b, Tensor& y);
void bias_backward(Context& ctx, int64_t n, int64_t k, int64_t p, const Tensor& dy, Tensor& db);
}  // namespace ops

}  // namespace pdnn
