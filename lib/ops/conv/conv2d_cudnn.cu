// cuDNN as a convolution algorithm (conv2d_gpu.h), through the entry points lib/cuda/cudnn.h
// opens at run time. Descriptors are made per call (host work only: a replayed CUDA graph skips
// it); the algorithm of each pass is the fastest by cuDNN's own timing (cudnnFind..., as
// PyTorch's cudnn.benchmark; its heuristic first choice measured up to 2.2x slower, W4 conv2's
// weight gradient 8.5 ms against 3.8) that is deterministic, strict fp32 (summation only: no
// FFT or Winograd, see sums_directly; --conv-transforms allows them in fp32, as PyTorch's fp32
// does: its U-Net 3x3 weight gradients ran 1.8-3.5x faster than pdnn's strict ones on an H200,
// results/bench/unet-conv-h200) unless TF32 is on
// (CUDNN_FMA_MATH, else its default math, which allows TF32), and needs at most
// kCudnnMaxWorkspaceBytes (conv2d_gpu_ws.h) or, under a memory plan, at most what the shared
// workspace's limit leaves beside dy through the activation (the rule every algorithm keeps:
// conv2d_algo.h).
// It is found once per shape and context, at the call that sizes the workspace (before a
// capture), so the workspace and the algorithm agree with the call that runs. Under a workspace
// limit (a memory plan) it is found at the pass's first call instead, in the pass's own buffers
// and the workspace (cudnnFind...Ex: cuDNN's own cudnnFind allocates device memory outside the
// plan, which failed W4 at 1120 under 77G on the H100); until then the pass asks all the
// limit leaves. The fused bias and
// activation run as a pass of pdnn's own after the forward; in backward, dy goes through the
// activation's derivative into the workspace first, and the bias gradient is summed from it.
// cuDNN's 4-d descriptors hold at most 2^31 - 1 elements (W4's conv2 at 1120 x 1120 has 2.57
// billion): a larger batch runs in slices of images that fit, in order (the weight gradient
// accumulates slice by slice, so the result stays deterministic).
// bf16 (cuDNN's bfloat16 configuration: bf16 tensor and filter descriptors, fp32 compute) takes
// any deterministic algorithm, as TF32 does; cuDNN writes the weight gradient in the filter's
// type, so it lands in a bf16 scratch (rounded once per slice) and is added to the fp32 dw.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>

#include "core/error.h"
#include "cuda/cudnn.h"
#include "cuda/launch.h"
#include "ops/conv/conv2d.h"
#include "ops/conv/conv2d_algo.h"
#include "ops/conv/conv2d_gpu.h"
#include "ops/kit/act.h"
#include "ops/kit/round.h"

namespace pdnn {
namespace cuda {

#if PDNN_CUDNN_HEADER
namespace {

// y (n, k, p) = act(y + b[c]) in place (bf16: in fp32, rounded once).
template <class E>
__global__ void bias_act_k(int64_t total, int k, int p, const float* __restrict__ b, Act a,
                           E* __restrict__ y) {
  PDNN_GRID_LOOP(i, total) {
    y[i] = kit::from_f32<E>(kit::act_apply(kit::to_f32(y[i]) + (b ? b[(i / p) % k] : 0.f), a));
  }
}

// dw += w16 (cuDNN's bf16 weight gradient of one slice).
__global__ void add_bf16_k(int64_t total, const bf16* __restrict__ w16, float* __restrict__ dw) {
  PDNN_GRID_LOOP(i, total) dw[i] += kit::to_f32(w16[i]);
}

template <class E>
constexpr cudnnDataType_t data_type() {
  return std::is_same<E, bf16>::value ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}


const CudnnApi& api() {
  std::string why;
  const CudnnApi* a = cudnn_api(&why);
  PDNN_CHECK(a, "convolution algorithm cudnn: %s", why.c_str());
  return *a;
}

struct Descs {
  const CudnnApi& a;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  // t: the tensors' and filter's type; the convolution computes in fp32 either way.
  Descs(const ConvGeom& g, int64_t n, int64_t k, cudnnDataType_t t = CUDNN_DATA_FLOAT) : a(api()) {
    a.check(a.create_tensor(&x), "cudnnCreateTensorDescriptor");
    a.check(a.create_tensor(&y), "cudnnCreateTensorDescriptor");
    a.check(a.create_filter(&w), "cudnnCreateFilterDescriptor");
    a.check(a.create_conv(&conv), "cudnnCreateConvolutionDescriptor");
    a.check(a.set_tensor(x, CUDNN_TENSOR_NCHW, t, int(n), int(g.c), int(g.h), int(g.w)),
            "cudnnSetTensor4dDescriptor (x)");
    a.check(a.set_tensor(y, CUDNN_TENSOR_NCHW, t, int(n), int(k), int(g.oh), int(g.ow)),
            "cudnnSetTensor4dDescriptor (y)");
    a.check(a.set_filter(w, t, CUDNN_TENSOR_NCHW, int(k), int(g.c), int(g.kh), int(g.kw)),
            "cudnnSetFilter4dDescriptor");
    a.check(a.set_conv(conv, int(g.ph), int(g.pw), int(g.sh), int(g.sw), 1, 1,
                       CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
            "cudnnSetConvolution2dDescriptor");
  }
  ~Descs() {
    a.destroy_conv(conv);
    a.destroy_filter(w);
    a.destroy_tensor(y);
    a.destroy_tensor(x);
  }
};

// cuDNN's first acceptable choice for a pass, and its workspace bytes; the descriptor's math
// type is set to the choice's.
using Pick = CudnnContext::Pick;
// Whether an algorithm sums the products as a convolution does (GEMM-like). FFT and Winograd
// transform the operands first; their fp32 rounding error is larger (seen on the H100: W3's
// conv2 weight gradient 4e-4 off relative, where summation is within 2e-5), so strict fp32
// leaves them out unless --conv-transforms lets them in; TF32's own rounding (2^-11) is larger
// than theirs, so TF32 keeps them.
bool sums_directly(cudnnConvolutionFwdAlgo_t a) {
  return a != CUDNN_CONVOLUTION_FWD_ALGO_FFT && a != CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING &&
         a != CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD && a != CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}
bool sums_directly(cudnnConvolutionBwdDataAlgo_t a) {
  return a != CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT &&
         a != CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING &&
         a != CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD &&
         a != CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
}
bool sums_directly(cudnnConvolutionBwdFilterAlgo_t a) {
  return a != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT &&
         a != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING &&
         a != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
}

// Which of cuDNN's algorithms pdnn may run at a context's precision (pick_from says why):
// strict fp32 math, direct sums only, or (--conv-transforms with transforms_only, a test's
// setting) FFT and Winograd only.
struct Rules {
  bool strict, direct, transforms_only;
};
Rules rules_of(CudaExec e, bool is_bf16, bool transforms_only) {
  const bool direct = is_bf16 || (!e.tf32 && !e.transforms);
  return Rules{!is_bf16 && !e.tf32, direct, transforms_only && !direct};
}

// Whether pdnn may run algorithm p of cuDNN's list (strict, direct, transforms_only: Rules).
template <class Perf>
bool allowed(const Perf& p, bool strict, bool direct, bool transforms_only) {
  return p.status == CUDNN_STATUS_SUCCESS && p.determinism == CUDNN_DETERMINISTIC &&
         (!strict || p.mathType == CUDNN_FMA_MATH) && (!direct || sums_directly(p.algo)) &&
         (!transforms_only || !sums_directly(p.algo));
}

// strict: fp32's FMA math only (else tensor-op math too: TF32, bf16); direct: direct summation
// only (fp32; and bf16, whose fp32 sums are all its tests' bounds allow beyond the roundings
// to bf16; TF32's own rounding is larger than FFT's or Winograd's).
template <class Perf, class Query>
Pick pick_from(const Descs& d, bool strict, bool direct, bool transforms_only, size_t cap,
               Query query, const char* what) {
  Perf perf[16];
  int count = 0;
  d.a.check(query(perf, &count), what);
  for (int i = 0; i < count; ++i) {
    const Perf& p = perf[i];
    if (!allowed(p, strict, direct, transforms_only) || p.memory > cap) continue;
    d.a.check(d.a.set_math(d.conv, p.mathType), "cudnnSetConvolutionMathType");
    return Pick{static_cast<int>(p.algo), static_cast<int>(p.mathType), p.memory};
  }
  PDNN_FAIL("convolution algorithm cudnn: no deterministic %s%s%salgorithm of cuDNN asks at "
            "most %.1f MiB of workspace (%s)", strict ? "strict fp32" : "", strict ? " " : "",
            transforms_only ? "FFT or Winograd " : "", static_cast<double>(cap) / 1048576.0,
            what);
}

// The pass's own buffers for cuDNN's timing of its algorithms under a workspace limit
// (cudnnFind...Ex), so that it allocates nothing outside the memory plan: its two inputs, an
// output the call that follows writes again (a scratch in the workspace for the weight gradient,
// which accumulates), and the workspace beside them.
struct FindIn {
  const void* a = nullptr;  // x (forward, backward-weights), w (backward-data)
  const void* b = nullptr;  // w (forward), dy (the backward passes)
  void* out = nullptr;      // y, dx, or the weight gradient's scratch
  void* ws = nullptr;
  size_t ws_bytes = 0;
};

// in: nullptr: cuDNN times its algorithms in buffers of its own (cudnnFind...).
Pick query(ConvPass pass, const Descs& d, bool strict, bool direct, bool transforms_only,
           size_t cap, cudnnHandle_t h, const FindIn* in) {
  d.a.check(d.a.set_math(d.conv, strict ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH),
            "cudnnSetConvolutionMathType");
  if (pass == ConvPass::Forward)
    return pick_from<cudnnConvolutionFwdAlgoPerf_t>(
        d, strict, direct, transforms_only, cap, [&](cudnnConvolutionFwdAlgoPerf_t* p, int* n) {
          return in ? d.a.fwd_algos_ex(h, d.x, in->a, d.w, in->b, d.conv, d.y, in->out, 16, n, p,
                                       in->ws, in->ws_bytes)
                    : d.a.fwd_algos(h, d.x, d.w, d.conv, d.y, 16, n, p);
        }, "forward");
  if (pass == ConvPass::BackwardData)
    return pick_from<cudnnConvolutionBwdDataAlgoPerf_t>(
        d, strict, direct, transforms_only, cap, [&](cudnnConvolutionBwdDataAlgoPerf_t* p, int* n) {
          return in ? d.a.bwd_data_algos_ex(h, d.w, in->a, d.y, in->b, d.conv, d.x, in->out, 16,
                                            n, p, in->ws, in->ws_bytes)
                    : d.a.bwd_data_algos(h, d.w, d.y, d.conv, d.x, 16, n, p);
        }, "backward-data");
  return pick_from<cudnnConvolutionBwdFilterAlgoPerf_t>(
      d, strict, direct, transforms_only, cap, [&](cudnnConvolutionBwdFilterAlgoPerf_t* p, int* n) {
        return in ? d.a.bwd_filter_algos_ex(h, d.x, in->a, d.y, in->b, d.conv, d.w, in->out, 16,
                                            n, p, in->ws, in->ws_bytes)
                  : d.a.bwd_filter_algos(h, d.x, d.y, d.conv, d.w, 16, n, p);
      }, "backward-weights");
}

CudnnContext& cudnn_of(CudaExec e) {
  PDNN_CHECK(e.cudnn, "convolution algorithm cudnn: no cuDNN handle on this context");
  return *static_cast<CudnnContext*>(e.cudnn);
}
cudnnHandle_t handle_of(CudaExec e) { return cudnn_of(e).handle; }

// The key of a pick: the algorithm choice's less the activation (applied outside cuDNN's call),
// with the cap where a workspace limit lowers it, and "planned" under a limit (found in pdnn's
// buffers).
std::string pick_key(ConvPass pass, const ConvGeom& g, int64_t n, int64_t k, CudaExec e,
                     size_t cap, bool is_bf16) {
  std::string key = gpu_conv_key(pass, g, n, k, Act{}, gpu_conv_precision(is_bf16, e.tf32, e.transforms));
  if (e.workspace_limit_bytes > 0)
    key += " ws<=" + std::to_string(cap) + " planned";
  else if (cap < kCudnnMaxWorkspaceBytes)
    key += " ws<=" + std::to_string(cap);
  return key;
}

// The pick made for this shape and pass, or nullptr.
const Pick* picked(ConvPass pass, const ConvGeom& g, int64_t n, int64_t k, CudaExec e, size_t cap,
                   bool is_bf16) {
  const CudnnContext& c = cudnn_of(e);
  auto it = c.picks.find(pick_key(pass, g, n, k, e, cap, is_bf16));
  return it == c.picks.end() ? nullptr : &it->second;
}

// The pick for this shape and pass among the algorithms asking at most cap bytes (cudnn_cap),
// queried once per context (and the descriptor's math type set to it). bf16: the descriptors'
// type. Under a workspace limit it is found in the pass's buffers (in), at its first call.
Pick pick(ConvPass pass, const ConvGeom& g, int64_t n, int64_t k, const Descs& d, CudaExec e,
          size_t cap, bool is_bf16 = false, const FindIn* in = nullptr) {
  const std::string key = pick_key(pass, g, n, k, e, cap, is_bf16);
  CudnnContext& c = cudnn_of(e);
  auto it = c.picks.find(key);
  if (it == c.picks.end()) {
    PDNN_CHECK(e.workspace_limit_bytes == 0 || in,
               "convolution algorithm cudnn: %s: under a workspace limit the algorithm is found "
               "in the pass's own buffers, at its call", key.c_str());
    const Rules r = rules_of(e, is_bf16, c.transforms_only);
    it = c.picks.emplace(key, query(pass, d, r.strict, r.direct, r.transforms_only, cap, c.handle,
                                    e.workspace_limit_bytes > 0 ? in : nullptr))
             .first;
  }
  d.a.check(d.a.set_math(d.conv, static_cast<cudnnMathType_t>(it->second.math)),
            "cudnnSetConvolutionMathType");
  return it->second;
}

// The least workspace (bytes) of the algorithms pick may choose for the pass on m images, from
// cuDNN's heuristic list (cudnnGet..._v7: it allocates nothing and times nothing); 0 where it
// allows none (pick then says so).
size_t least_of(ConvPass pass, const Descs& d, CudaExec e, bool is_bf16) {
  const CudnnContext& c = cudnn_of(e);
  const Rules r = rules_of(e, is_bf16, c.transforms_only);
  d.a.check(d.a.set_math(d.conv, r.strict ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH),
            "cudnnSetConvolutionMathType");
  size_t least = SIZE_MAX;
  auto scan = [&](const auto* perf, int count) {
    for (int i = 0; i < count; ++i)
      if (allowed(perf[i], r.strict, r.direct, r.transforms_only))
        least = std::min(least, perf[i].memory);
  };
  int count = 0;
  if (pass == ConvPass::Forward) {
    cudnnConvolutionFwdAlgoPerf_t perf[16];
    d.a.check(d.a.fwd_heuristics(c.handle, d.x, d.w, d.conv, d.y, 16, &count, perf),
              "cudnnGetConvolutionForwardAlgorithm_v7");
    scan(perf, count);
  } else if (pass == ConvPass::BackwardData) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[16];
    d.a.check(d.a.bwd_data_heuristics(c.handle, d.w, d.y, d.conv, d.x, 16, &count, perf),
              "cudnnGetConvolutionBackwardDataAlgorithm_v7");
    scan(perf, count);
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[16];
    d.a.check(d.a.bwd_filter_heuristics(c.handle, d.x, d.y, d.conv, d.w, 16, &count, perf),
              "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
    scan(perf, count);
  }
  return least == SIZE_MAX ? 0 : least;
}

// Images a cuDNN call takes: the whole batch when its tensors fit a 4-d descriptor.
int64_t slice_of(const ConvGeom& g, int64_t n, int64_t k, CudaExec e) {
  const int64_t limit = std::min<int64_t>(INT_MAX, cudnn_of(e).max_tensor_elements);
  const int64_t per = std::max(g.c * g.h * g.w, k * g.oh * g.ow);
  PDNN_CHECK(per <= limit, "convolution algorithm cudnn: one image of %lld x %lld x %lld is "
             "beyond cuDNN's %lld elements a tensor", (long long)g.c, (long long)g.h,
             (long long)g.w, (long long)limit);
  return std::max<int64_t>(1, std::min<int64_t>(n, limit / per));
}

}  // namespace

namespace {
// The most cuDNN's own algorithm may ask for the pass: kCudnnMaxWorkspaceBytes, and under a
// workspace limit all the limit leaves beside the rest (the plan sized it, as PyTorch's
// autotuner takes what the free memory holds).
size_t cudnn_cap(ConvPass pass, const ConvGeom& g, int64_t n, int64_t k, Act act, bool is_bf16,
                 CudaExec e) {
  if (e.workspace_limit_bytes == 0) return kCudnnMaxWorkspaceBytes;
  const size_t rest = 4 * conv2d_cudnn_beside_floats(pass, g, n, k, act, is_bf16);
  return e.workspace_limit_bytes > rest ? (e.workspace_limit_bytes - rest) / 4 * 4 : 0;
}
// Bytes of the weight gradient's scratch its algorithm is found with under a workspace limit
// (conv2d_cudnn_find_scratch_floats); 0 without one, where cuDNN finds in buffers of its own.
size_t find_scratch_bytes(ConvPass pass, const ConvGeom& g, int64_t k, bool is_bf16, CudaExec e) {
  return e.workspace_limit_bytes == 0 ? 0 : 4 * conv2d_cudnn_find_scratch_floats(pass, g, k, is_bf16);
}
size_t pick_cap(ConvPass pass, const ConvGeom& g, int64_t n, int64_t k, Act act, bool is_bf16,
                CudaExec e) {
  const size_t cap = cudnn_cap(pass, g, n, k, act, is_bf16, e),
               scratch = find_scratch_bytes(pass, g, k, is_bf16, e);
  return cap > scratch ? (cap - scratch) / 4 * 4 : 0;
}
}  // namespace

// Under a workspace limit, before the pass's first call has found its algorithm: all the cap,
// which the finding may use.
size_t conv2d_cudnn_workspace_floats(ConvPass pass, const ConvGeom& g, int64_t n, int64_t k,
                                     Act act, CudaExec e, DType dtype) {
  const bool is_bf16 = dtype == DType::BF16;
  const int64_t s = slice_of(g, n, k, e);
  const size_t cap = pick_cap(pass, g, n, k, act, is_bf16, e);
  size_t ws = 0;
  for (int64_t m : {s, n % s}) {  // the slices, and the last one's when it is shorter
    if (m == 0) continue;
    if (e.workspace_limit_bytes > 0) {
      const Pick* p = picked(pass, g, m, k, e, cap, is_bf16);
      ws = std::max(ws, p ? p->ws : cudnn_cap(pass, g, n, k, act, is_bf16, e));
      continue;
    }
    Descs d(g, m, k, is_bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT);
    ws = std::max(ws, pick(pass, g, m, k, d, e, cap, is_bf16).ws);
  }
  return conv2d_cudnn_beside_floats(pass, g, n, k, act, is_bf16) + (ws + 3) / 4;
}

namespace {
// The pass's pick keys without a workspace limit, one per slice size (as
// conv2d_cudnn_workspace_floats picks them), with the cap they were picked under.
std::vector<std::string> pick_keys_of(ConvPass pass, const ConvGeom& g, int64_t n, int64_t k,
                                      Act act, CudaExec e, bool is_bf16, size_t* cap) {
  std::vector<std::string> keys;
  if (e.workspace_limit_bytes > 0) return keys;
  const int64_t s = slice_of(g, n, k, e);
  *cap = pick_cap(pass, g, n, k, act, is_bf16, e);
  for (int64_t m : {s, n % s})
    if (m > 0) keys.push_back(pick_key(pass, g, m, k, e, *cap, is_bf16));
  return keys;
}
// Whether `algo` is one of cuDNN's algorithms of the pass's kind.
bool algo_of_pass(ConvPass pass, int algo) {
  const int count = pass == ConvPass::Forward        ? CUDNN_CONVOLUTION_FWD_ALGO_COUNT
                    : pass == ConvPass::BackwardData ? CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT
                                                     : CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  return algo >= 0 && algo < count;
}
// Whether algorithm `algo` of the pass's kind is one of cuDNN's and sums directly.
bool algo_sums_directly(ConvPass pass, int algo) {
  if (!algo_of_pass(pass, algo)) return false;
  if (pass == ConvPass::Forward)
    return sums_directly(static_cast<cudnnConvolutionFwdAlgo_t>(algo));
  if (pass == ConvPass::BackwardData)
    return sums_directly(static_cast<cudnnConvolutionBwdDataAlgo_t>(algo));
  return sums_directly(static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo));
}
}  // namespace

std::vector<std::pair<std::string, std::string>> conv2d_cudnn_picks(
    ConvPass pass, const ConvGeom& g, int64_t n, int64_t k, Act act, CudaExec e, DType dtype) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t cap = 0;
  const CudnnContext& c = cudnn_of(e);
  for (const std::string& key : pick_keys_of(pass, g, n, k, act, e, dtype == DType::BF16, &cap)) {
    auto it = c.picks.find(key);
    if (it == c.picks.end()) continue;
    out.emplace_back(key, strprintf("cudnn %zu algo %d math %d ws %zu", cudnn_api()->version,
                                    it->second.algo, it->second.math, it->second.ws));
  }
  return out;
}

int conv2d_cudnn_adopt_picks(ConvPass pass, const ConvGeom& g, int64_t n, int64_t k, Act act,
                             CudaExec e, DType dtype,
                             const std::function<const std::string*(const std::string&)>& cached) {
  CudnnContext& c = cudnn_of(e);
  const bool is_bf16 = dtype == DType::BF16;
  if (c.transforms_only) return 0;  // a test's setting: cuDNN finds among the transforms
  const Rules r = rules_of(e, is_bf16, c.transforms_only);
  size_t cap = 0;
  int took = 0;
  for (const std::string& key : pick_keys_of(pass, g, n, k, act, e, is_bf16, &cap)) {
    const std::string* v = cached(key);
    if (!v || c.picks.count(key)) continue;
    size_t version = 0, ws = 0;
    int algo = -1, math = -1, used = 0;
    if (std::sscanf(v->c_str(), "cudnn %zu algo %d math %d ws %zu%n", &version, &algo, &math,
                    &ws, &used) != 4 ||
        static_cast<size_t>(used) != v->size() || version != cudnn_api()->version || ws > cap ||
        (r.strict && math != CUDNN_FMA_MATH) ||
        (math != CUDNN_FMA_MATH && math != CUDNN_DEFAULT_MATH &&
         math != CUDNN_TENSOR_OP_MATH && math != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) ||
        (r.direct ? !algo_sums_directly(pass, algo) : !algo_of_pass(pass, algo)))
      continue;
    c.picks.emplace(key, Pick{algo, math, ws});
    ++took;
  }
  return took;
}

size_t conv2d_cudnn_least_bytes(ConvPass pass, const ConvGeom& g, int64_t n, int64_t k,
                                CudaExec e, DType dtype) {
  const bool is_bf16 = dtype == DType::BF16;
  const int64_t s = slice_of(g, n, k, e);
  size_t least = 0;
  for (int64_t m : {s, n % s}) {  // the slices, and the last one's when it is shorter
    if (m == 0) continue;
    Descs d(g, m, k, is_bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT);
    least = std::max(least, least_of(pass, d, e, is_bf16));
  }
  return least;
}

namespace {
template <class E>
void forward(const ConvFwdOf<E, float>& a, float* ws, CudaExec e) {
  const ConvGeom& g = a.g;
  const int64_t n = a.n, k = a.k;
  constexpr bool kBf16 = std::is_same<E, bf16>::value;
  cudnnHandle_t h = handle_of(e);
  const int64_t s = slice_of(g, n, k, e);
  const size_t cap = pick_cap(ConvPass::Forward, g, n, k, Act{}, kBf16, e);
  for (int64_t i0 = 0; i0 < n; i0 += s) {
    const int64_t m = std::min(s, n - i0);
    Descs d(g, m, k, data_type<E>());
    const FindIn in{a.x + i0 * g.image_size(), a.w, a.y + i0 * k * g.oh * g.ow, ws, cap};
    const Pick p = pick(ConvPass::Forward, g, m, k, d, e, cap, kBf16, &in);
    const float one = 1.f, zero = 0.f;
    d.a.check(d.a.forward(h, &one, d.x, a.x + i0 * g.image_size(), d.w, a.w, d.conv,
                          static_cast<cudnnConvolutionFwdAlgo_t>(p.algo), ws, p.ws, &zero, d.y,
                          a.y + i0 * k * g.oh * g.ow),
              "cudnnConvolutionForward");
  }
  if (a.b || a.act.kind != FusedAct::None) {
    const int64_t total = n * k * g.oh * g.ow;
    bias_act_k<<<blocks_for(total), kThreads, 0, stream_of(e)>>>(
        total, static_cast<int>(k), static_cast<int>(g.oh * g.ow), a.b, a.act, a.y);
    PDNN_CUDA_LAUNCH_CHECK("cudnn forward bias/activation");
  }
}

template <class E>
void backward(const ConvBwdOf<E, float>& a, float* ws, CudaExec e) {
  const ConvGeom& g = a.g;
  const int64_t n = a.n, k = a.k;
  constexpr bool kBf16 = std::is_same<E, bf16>::value;
  cudnnHandle_t h = handle_of(e);
  const E* gy = a.dy;
  float* rest = ws;
  if (a.act.kind != FusedAct::None) {
    const int64_t total = n * k * g.oh * g.ow;
    E* masked = reinterpret_cast<E*>(ws);
    conv2d_act_grad(total, a.y, a.dy, a.act, masked, e);
    gy = masked;
    rest = ws + conv2d_act_grad_floats(g, n, k, a.act);
  }
  // bf16: cuDNN's weight gradient (of the filter's type) lands at dw16, then is added to dw;
  // the backward-data call after it (on the same stream) may reuse that memory.
  bf16* dw16 = reinterpret_cast<bf16*>(rest);
  float* rest_w =
      rest + (a.dw ? conv2d_cudnn_dw16_floats(ConvPass::BackwardWeights, g, k, kBf16) : 0);
  const size_t cap_w = pick_cap(ConvPass::BackwardWeights, g, n, k, a.act, kBf16, e);
  const size_t cap_d = pick_cap(ConvPass::BackwardData, g, n, k, a.act, kBf16, e);
  const size_t scratch_w = find_scratch_bytes(ConvPass::BackwardWeights, g, k, kBf16, e);
  if (a.dw && scratch_w > 0) {
    const size_t all_w = cudnn_cap(ConvPass::BackwardWeights, g, n, k, a.act, kBf16, e);
    PDNN_CHECK(scratch_w <= all_w,
               "convolution algorithm cudnn: the memory plan's workspace leaves %.1f MiB beside "
               "dy, less than the %.1f MiB of the weight gradient its algorithm is found with",
               all_w / 1048576.0, scratch_w / 1048576.0);
  }
  const float one = 1.f, zero = 0.f;
  if (a.db) bias_backward(n, k, g.oh * g.ow, gy, a.db, e);
  const int64_t s = slice_of(g, n, k, e), per_y = k * g.oh * g.ow;
  for (int64_t i0 = 0; i0 < n; i0 += s) {
    const int64_t m = std::min(s, n - i0);
    Descs d(g, m, k, data_type<E>());
    if (a.dw) {
      const FindIn in{a.x + i0 * g.image_size(), gy + i0 * per_y, rest_w,
                      reinterpret_cast<char*>(rest_w) + scratch_w, cap_w};
      const Pick p = pick(ConvPass::BackwardWeights, g, m, k, d, e, cap_w, kBf16, &in);
      void* dw_out = kBf16 ? static_cast<void*>(dw16) : static_cast<void*>(a.dw);
      d.a.check(d.a.backward_filter(h, &one, d.x, a.x + i0 * g.image_size(), d.y, gy + i0 * per_y,
                                    d.conv, static_cast<cudnnConvolutionBwdFilterAlgo_t>(p.algo),
                                    rest_w, p.ws, kBf16 ? &zero : &one, d.w, dw_out),
                "cudnnConvolutionBackwardFilter");
      if (kBf16) {
        const int64_t total = k * g.col_rows();
        add_bf16_k<<<blocks_for(total), kThreads, 0, stream_of(e)>>>(total, dw16, a.dw);
        PDNN_CUDA_LAUNCH_CHECK("cudnn bf16 weight gradient");
      }
    }
    if (a.dx) {
      const FindIn in{a.w, gy + i0 * per_y, a.dx + i0 * g.image_size(), rest, cap_d};
      const Pick p = pick(ConvPass::BackwardData, g, m, k, d, e, cap_d, kBf16, &in);
      d.a.check(d.a.backward_data(h, &one, d.w, a.w, d.y, gy + i0 * per_y, d.conv,
                                  static_cast<cudnnConvolutionBwdDataAlgo_t>(p.algo), rest, p.ws,
                                  &zero, d.x, a.dx + i0 * g.image_size()),
                "cudnnConvolutionBackwardData");
    }
  }
}
}  // namespace

void conv2d_cudnn_forward(const ConvFwd& a, float* ws, CudaExec e) { forward(a, ws, e); }
void conv2d_cudnn_backward(const ConvBwd& a, float* ws, CudaExec e) { backward(a, ws, e); }
void conv2d_cudnn_forward(const ConvFwdBf16& a, float* ws, CudaExec e) { forward(a, ws, e); }
void conv2d_cudnn_backward(const ConvBwdBf16& a, float* ws, CudaExec e) { backward(a, ws, e); }

#else

[[noreturn]] void no_cudnn() {
  PDNN_FAIL("convolution algorithm cudnn: this pdnn was built without cudnn.h");
}
size_t conv2d_cudnn_workspace_floats(ConvPass, const ConvGeom&, int64_t, int64_t, Act, CudaExec,
                                     DType) {
  no_cudnn();
}
size_t conv2d_cudnn_least_bytes(ConvPass, const ConvGeom&, int64_t, int64_t, CudaExec, DType) {
  no_cudnn();
}
std::vector<std::pair<std::string, std::string>> conv2d_cudnn_picks(ConvPass, const ConvGeom&,
                                                                    int64_t, int64_t, Act,
                                                                    CudaExec, DType) {
  return {};
}
int conv2d_cudnn_adopt_picks(ConvPass, const ConvGeom&, int64_t, int64_t, Act, CudaExec, DType,
                             const std::function<const std::string*(const std::string&)>&) {
  return 0;
}
void conv2d_cudnn_forward(const ConvFwd&, float*, CudaExec) { no_cudnn(); }
void conv2d_cudnn_backward(const ConvBwd&, float*, CudaExec) { no_cudnn(); }
void conv2d_cudnn_forward(const ConvFwdBf16&, float*, CudaExec) { no_cudnn(); }
void conv2d_cudnn_backward(const ConvBwdBf16&, float*, CudaExec) { no_cudnn(); }

#endif

}  // namespace cuda
}  // namespace pdnn
