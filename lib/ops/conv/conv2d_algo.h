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

// The algorithms that can run `pass` of this shape on the GPU under `policy` for tensors of
// dtype, in a fixed order (every algorithm takes bf16; direct runs 4x4 stride-2 padding-1
// shapes in bf16 only).
std::vector<ConvAlgo> gpu_conv_candidates(ConvPass pass, const ConvGeom& g, int64_t n, int64_t k,
                                          const std::string& policy, bool have_cudnn,
                                          DType dtype = DType::F32);

// The tuning cache's key of a pass: "conv2d fwd n64 c3x224x224 k32 3x3 s1 p1 relu fp32";
// precision: "fp32", "tf32" or "bf16".
std::string gpu_conv_key(ConvPass pass, const ConvGeom& g, int64_t n, int64_t k, Act act,
                         const char* precision);

// The algorithm for a pass: `requested` when it is not Auto; else the context's tuned choice;
// else the fastest candidate, timed now. ws_floats(a): the workspace algorithm a needs; run(a):
// queues the pass with algorithm a on the context's stream (writing only what timing may
// overwrite: the caller points accumulating outputs at scratch while timing). dtype: the
// tensors' (F32: fp32 or TF32 by the context; BF16).
ConvAlgo gpu_conv_choose(Context& ctx, ConvPass pass, const ConvGeom& g, int64_t n, int64_t k,
                         Act act, DType dtype, ConvAlgo requested,
                         const std::function<size_t(ConvAlgo)>& ws_floats,
                         const std::function<void(ConvAlgo, bool timing)>& run);

}  // namespace pdnn
