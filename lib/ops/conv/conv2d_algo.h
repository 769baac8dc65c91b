// The GPU's per-shape choice of a convolution algorithm, pass by pass (the large-model study's
// "pick algorithms by the memory that is free"): the first time a pass of a shape runs, each
// candidate algorithm whose workspace fits the free device memory is timed on the real tensors
// (one warm-up, then the best of three, CUDA events), the fastest is kept in the context's
// Tuning (core/tuning.h: printed in the run's header, cached in a file per GPU name and shape),
// and every later call of that shape runs it. Choices are made in eager steps, before a CUDA
// graph is captured; a pass that would have to choose during a capture throws.
//
// Policies (--conv-algo): "auto" (every algorithm, cuDNN included when it was found), "own"
// (pdnn's own kernels only), or one algorithm's name (where it cannot run a pass, the choice
// among pdnn's own is made for that pass, and the summary says so). A pass may be given its own
// policy: "own,bwd-weights=implicit", "fwd=cudnn,bwd-data=im2col,bwd-weights=implicit" (passes
// not named take the bare word, "auto" when there is none). Forcing each pass is how the tests
// cover every mix of algorithms, whatever the timing would pick.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/context.h"
#include "ops/activation.h"
#include "ops/conv/conv2d.h"

namespace pdnn {

// Policies --conv-algo accepts, comma separated (for --help and errors).
const char* gpu_conv_policies();
bool valid_gpu_conv_policy(const std::string& policy);
// The policy of one pass under a (per-pass) policy string: "auto", "own" or an algorithm.
std::string gpu_conv_pass_policy(const std::string& policy, ConvPass pass);

// Whether an image of the shape, its input (c x h x w) or its output (k x oh x ow), has 2^31 - 1
// elements or more: the direct kernels and cuDNN index an image in 32 bits and cannot run it;
// the implicit GEMM's 64-bit instantiation can (and im2col's, a chunk of one image, where its
// input's image still fits). A plan made at such a size takes those layers' times from a
// profile of the implicit GEMM (--layer-times-wide).
bool gpu_conv_image_past_32bit(const ConvGeom& g, int64_t k);

// The algorithms that can run `pass` of this shape on the GPU under `policy` for tensors of
// dtype, in a fixed order (every algorithm takes bf16; direct runs 4x4 stride-2 padding-1
// shapes in bf16 only).
std::vector<ConvAlgo> gpu_conv_candidates(ConvPass pass, const ConvGeom& g, int64_t n, int64_t k,
                                          const std::string& policy, bool have_cudnn,
                                          DType dtype = DType::F32);

// What one convolution's three passes on the GPU ask of the shared workspace (bytes) under a
// memory plan, for the plan (Layer::backward_needs): tensors of dtype (F32: fp32 or TF32, the
// same sizes), dy through `act` in the workspace in backward where it is not None, on a device
// of `sms` multiprocessors (conv2d_gpu_ws.h), the algorithms those the chooser may run under a
// plan: the pass's policy's candidates (cuDNN's under `auto` count toward most, not least), or the
// layer's `forced` algorithm (not Auto, PerImage or Batched).
//   least    the largest over the passes of what the pass's candidate asking the least asks:
//            under auto and own, the implicit GEMM's or the direct kernels' (no columns: their
//            weights or split sums) wherever one of them runs the pass; im2col's columns where
//            it alone does (a shape past the implicit GEMM's 32-bit planes or batch pixels,
//            conv_implicit_fits; images past 2^31 elements run its 64-bit instantiation, and
//            im2col is no candidate there) or is forced; for cuDNN (forced) what it keeps
//            beside its own algorithm, which it picks within what the workspace leaves, and
//            what that algorithm asks at the least (cudnn_least: only cuDNN knows it; none
//            where it is empty);
//   most     the most a candidate may ask (cuDNN at kCudnnPlanWorkspaceBytes);
//   columns  im2col's (a chunk's columns and product): a workspace below it leaves im2col out;
//            0 where im2col is no candidate (an image past its 32-bit indexing that the
//            implicit GEMM runs).
// Under a workspace limit the chooser runs only what fits: least is what every pass can be
// held to, and a workspace between least and most leaves the faster algorithms out.
// The device memory the chooser allocates beside the workspace while it times a convolution's
// weight gradient (at the first step of a shape, under auto or own, the layer not forced to one
// algorithm): a scratch dw and db (weight_elems, bias_elems float32, each a 512-byte block of
// the caching allocator at the least), since the real ones accumulate. 0 where nothing is timed.
int64_t gpu_conv_timing_bytes(const std::string& policy, ConvAlgo forced, int64_t weight_elems,
                              int64_t bias_elems);

struct ConvWorkspaceBounds {
  int64_t least = 0, most = 0, columns = 0;
};
ConvWorkspaceBounds gpu_conv_workspace_bounds(const ConvGeom& g, int64_t n, int64_t k, Act act,
                                              DType dtype, int sms,
                                              const std::string& policy = "auto",
                                              ConvAlgo forced = ConvAlgo::Auto,
                                              const CudnnLeastFn& cudnn_least = {});

// cuDNN's least for the plans made on ctx's device (cuda::conv2d_cudnn_least_bytes at the
// context's precision; its handle opened on first use); empty without a GPU.
CudnnLeastFn gpu_conv_cudnn_least(Context& ctx);

// The precision part of a pass's key, by the tensors' type (bf16) and the context's TF32 and
// transforms: arithmetic_name's (core/precision.h), so that fp32 with --conv-transforms, where
// cuDNN may choose FFT or Winograd, keeps its choices apart.
const char* gpu_conv_precision(bool bf16, bool tf32, bool transforms);

// The tuning cache's key of a pass: "conv2d fwd n64 c3x224x224 k32 3x3 s1 p1 relu fp32";
// precision: gpu_conv_precision's.
std::string gpu_conv_key(ConvPass pass, const ConvGeom& g, int64_t n, int64_t k, Act act,
                         const char* precision);

// The algorithm for a pass: `requested` when it is not Auto; else the context's tuned choice;
// else the fastest candidate, timed now. ws_floats(a): the workspace algorithm a needs; run(a):
// queues the pass with algorithm a on the context's stream (writing only what timing may
// overwrite: the caller points accumulating outputs at scratch while timing). dtype: the
// tensors' (F32: fp32 or TF32 by the context; BF16).
// Under a workspace limit (Context::set_workspace_limit: a memory plan's budget) one rule holds
// for every path: no algorithm asking more is run. Timing leaves it out (and says so), a tuned
// choice that does not fit is made again, a forced one (by the layer or --conv-algo) fails
// naming the pass, the layer (the context's memory role), the algorithm, its bytes and the
// workspace's; no candidate fitting fails alike. A choice under a limit has a key of its own
// ("... auto-planned"); it is the unplanned choice of the shape, untimed, where that one is
// pdnn's own and fits (own algorithms run the same under a plan; cuDNN, found within what the
// plan leaves, is timed again).
ConvAlgo gpu_conv_choose(Context& ctx, ConvPass pass, const ConvGeom& g, int64_t n, int64_t k,
                         Act act, DType dtype, ConvAlgo requested,
                         const std::function<size_t(ConvAlgo)>& ws_floats,
                         const std::function<void(ConvAlgo, bool timing)>& run);

}  // namespace pdnn
