// cuDNN as a convolution algorithm (conv2d_gpu.h), through the entry points lib/cuda/cudnn.h
// opens at run time. Descriptors are made per call (host work only: a replayed CUDA graph skips
// it); the algorithm of each pass is the fastest by cuDNN's own timing (cudnnFind..., as
// PyTorch's cudnn.benchmark; its heuristic first choice measured up to 2.2x slower, W4 conv2's
// weight gradient 8.5 ms against 3.8) that is deterministic, strict fp32 (summation only: no
// FFT or Winograd, see sums_directly) unless TF32 is on
// (CUDNN_FMA_MATH, else its default math, which allows TF32), and needs at most kMaxWorkspace.
// It is found once per shape and context, at the call that sizes the workspace (before a
// capture), so the workspace and the algorithm agree with the call that runs. The fused bias and
// activation run as a pass of pdnn's own after the forward; in backward, dy goes through the
// activation's derivative into the workspace first, and the bias gradient is summed from it.
// cuDNN's 4-d descriptors hold at most 2^31 - 1 elements (W4's conv2 at 1120 x 1120 has 2.57
// billion): a larger batch runs in slices of images that fit, in order (the weight gradient
// accumulates slice by slice, so the result stays deterministic).
#include <algorithm>
#include <climits>

#include "core/error.h"
#include "cuda/cudnn.h"
#include "cuda/launch.h"
#include "ops/conv/conv2d.h"
#include "ops/conv/conv2d_algo.h"
#include "ops/conv/conv2d_gpu.h"
#include "ops/kit/act.h"

namespace pdnn {
namespace cuda {

#if PDNN_CUDNN_HEADER
namespace {

constexpr size_t kMaxWorkspace = size_t{1} << 30;

// y (n, k, p) = act(y + b[c]) in place.
__global__ void bias_act_k(int64_t total, int k, int p, const float* __restrict__ b, Act a,
                           float* __restrict__ y) {
  PDNN_GRID_LOOP(i, total) {
    y[i] = kit::act_apply(y[i] + (b ? b[(i / p) % k] : 0.f), a);
  }
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
  Descs(const ConvGeom& g, int64_t n, int64_t k) : a(api()) {
    a.check(a.create_tensor(&x), "cudnnCreateTensorDescriptor");
    a.check(a.create_tensor(&y), "cudnnCreateTensorDescriptor");
    a.check(a.create_filter(&w), "cudnnCreateFilterDescriptor");
    a.check(a.create_conv(&conv), "cudnnCreateConvolutionDescriptor");
    a.check(a.set_tensor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, int(n), int(g.c), int(g.h), int(g.w)),
            "cudnnSetTensor4dDescriptor (x)");
    a.check(a.set_tensor(y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, int(n), int(k), int(g.oh), int(g.ow)),
            "cudnnSetTensor4dDescriptor (y)");
    a.check(a.set_filter(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, int(k), int(g.c), int(g.kh), int(g.kw)),
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
// leaves them out; TF32's own rounding (2^-11) is larger than theirs, so TF32 keeps them.
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

template <class Perf, class Query>
Pick pick_from(const Descs& d, bool tf32, Query query, const char* what) {
  Perf perf[16];
  int count = 0;
  d.a.check(query(perf, &count), what);
  for (int i = 0; i < count; ++i) {
    const Perf& p = perf[i];
    if (p.status != CUDNN_STATUS_SUCCESS || p.determinism != CUDNN_DETERMINISTIC ||
        p.memory > kMaxWorkspace || (!tf32 && (p.mathType != CUDNN_FMA_MATH || !sums_directly(p.algo))))
      continue;
    d.a.check(d.a.set_math(d.conv, p.mathType), "cudnnSetConvolutionMathType");
    return Pick{static_cast<int>(p.algo), static_cast<int>(p.mathType), p.memory};
  }
  PDNN_FAIL("convolution algorithm cudnn: no deterministic %s algorithm of cuDNN fits (%s)",
            tf32 ? "" : "strict fp32", what);
}

Pick query(ConvPass pass, const Descs& d, bool tf32, cudnnHandle_t h) {
  d.a.check(d.a.set_math(d.conv, tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH),
            "cudnnSetConvolutionMathType");
  if (pass == ConvPass::Forward)
    return pick_from<cudnnConvolutionFwdAlgoPerf_t>(
        d, tf32, [&](cudnnConvolutionFwdAlgoPerf_t* p, int* n) {
          return d.a.fwd_algos(h, d.x, d.w, d.conv, d.y, 16, n, p);
        }, "forward");
  if (pass == ConvPass::BackwardData)
    return pick_from<cudnnConvolutionBwdDataAlgoPerf_t>(
        d, tf32, [&](cudnnConvolutionBwdDataAlgoPerf_t* p, int* n) {
          return d.a.bwd_data_algos(h, d.w, d.y, d.conv, d.x, 16, n, p);
        }, "backward-data");
  return pick_from<cudnnConvolutionBwdFilterAlgoPerf_t>(
      d, tf32, [&](cudnnConvolutionBwdFilterAlgoPerf_t* p, int* n) {
        return d.a.bwd_filter_algos(h, d.x, d.y, d.conv, d.w, 16, n, p);
      }, "backward-weights");
}

CudnnContext& cudnn_of(CudaExec e) {
  PDNN_CHECK(e.cudnn, "convolution algorithm cudnn: no cuDNN handle on this context");
  return *static_cast<CudnnContext*>(e.cudnn);
}
cudnnHandle_t handle_of(CudaExec e) { return cudnn_of(e).handle; }

// The pick for this shape and pass, queried once per context (and the descriptor's math type
// set to it).
Pick pick(ConvPass pass, const ConvGeom& g, int64_t n, int64_t k, const Descs& d, CudaExec e) {
  // The algorithm choice's key less the activation (applied outside cuDNN's call).
  const std::string key = gpu_conv_key(pass, g, n, k, Act{}, e.tf32);
  CudnnContext& c = cudnn_of(e);
  auto it = c.picks.find(key);
  if (it == c.picks.end()) it = c.picks.emplace(key, query(pass, d, e.tf32, c.handle)).first;
  d.a.check(d.a.set_math(d.conv, static_cast<cudnnMathType_t>(it->second.math)),
            "cudnnSetConvolutionMathType");
  return it->second;
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

size_t conv2d_cudnn_workspace_floats(ConvPass pass, const ConvGeom& g, int64_t n, int64_t k,
                                     Act act, CudaExec e) {
  const int64_t s = slice_of(g, n, k, e);
  size_t ws = 0;
  for (int64_t m : {s, n % s}) {  // the slices, and the last one's when it is shorter
    if (m == 0) continue;
    Descs d(g, m, k);
    ws = std::max(ws, pick(pass, g, m, k, d, e).ws);
  }
  return (pass == ConvPass::Forward ? 0 : conv2d_act_grad_floats(g, n, k, act)) + (ws + 3) / 4 +
         1;
}

void conv2d_cudnn_forward(const ConvFwd& a, float* ws, CudaExec e) {
  const ConvGeom& g = a.g;
  const int64_t n = a.n, k = a.k;
  const float *x = a.x, *w = a.w, *b = a.b;
  float* y = a.y;
  const Act act = a.act;
  cudnnHandle_t h = handle_of(e);
  const int64_t s = slice_of(g, n, k, e);
  for (int64_t i0 = 0; i0 < n; i0 += s) {
    const int64_t m = std::min(s, n - i0);
    Descs d(g, m, k);
    const Pick p = pick(ConvPass::Forward, g, m, k, d, e);
    const float one = 1.f, zero = 0.f;
    d.a.check(d.a.forward(h, &one, d.x, x + i0 * g.image_size(), d.w, w, d.conv,
                          static_cast<cudnnConvolutionFwdAlgo_t>(p.algo), ws, p.ws, &zero, d.y,
                          y + i0 * k * g.oh * g.ow),
              "cudnnConvolutionForward");
  }
  if (b || act.kind != FusedAct::None) {
    const int64_t total = n * k * g.oh * g.ow;
    bias_act_k<<<blocks_for(total), kThreads, 0, stream_of(e)>>>(
        total, static_cast<int>(k), static_cast<int>(g.oh * g.ow), b, act, y);
    PDNN_CUDA_LAUNCH_CHECK("cudnn forward bias/activation");
  }
}

void conv2d_cudnn_backward(const ConvBwd& a, float* ws, CudaExec e) {
  const ConvGeom& g = a.g;
  const int64_t n = a.n, k = a.k;
  const float *x = a.x, *w = a.w, *dy = a.dy, *y = a.y;
  float *dw = a.dw, *db = a.db, *dx = a.dx;
  const Act act = a.act;
  cudnnHandle_t h = handle_of(e);
  const float* gy = dy;
  float* rest = ws;
  if (act.kind != FusedAct::None) {
    const int64_t total = n * k * g.oh * g.ow;
    conv2d_act_grad(total, y, dy, act, ws, e);
    gy = ws;
    rest = ws + conv2d_act_grad_floats(g, n, k, act);
  }
  const float one = 1.f, zero = 0.f;
  if (db) bias_backward(n, k, g.oh * g.ow, gy, db, e);
  const int64_t s = slice_of(g, n, k, e), per_y = k * g.oh * g.ow;
  for (int64_t i0 = 0; i0 < n; i0 += s) {
    const int64_t m = std::min(s, n - i0);
    Descs d(g, m, k);
    if (dw) {
      const Pick p = pick(ConvPass::BackwardWeights, g, m, k, d, e);
      d.a.check(d.a.backward_filter(h, &one, d.x, x + i0 * g.image_size(), d.y, gy + i0 * per_y,
                                    d.conv, static_cast<cudnnConvolutionBwdFilterAlgo_t>(p.algo),
                                    rest, p.ws, &one, d.w, dw),
                "cudnnConvolutionBackwardFilter");
    }
    if (dx) {
      const Pick p = pick(ConvPass::BackwardData, g, m, k, d, e);
      d.a.check(d.a.backward_data(h, &one, d.w, w, d.y, gy + i0 * per_y, d.conv,
                                  static_cast<cudnnConvolutionBwdDataAlgo_t>(p.algo), rest, p.ws,
                                  &zero, d.x, dx + i0 * g.image_size()),
                "cudnnConvolutionBackwardData");
    }
  }
}

#else

size_t conv2d_cudnn_workspace_floats(ConvPass, const ConvGeom&, int64_t, int64_t, Act, CudaExec) {
  PDNN_FAIL("convolution algorithm cudnn: this pdnn was built without cudnn.h");
}
void conv2d_cudnn_forward(const ConvFwd&, float*, CudaExec) {
  PDNN_FAIL("convolution algorithm cudnn: this pdnn was built without cudnn.h");
}
void conv2d_cudnn_backward(const ConvBwd&, float*, CudaExec) {
  PDNN_FAIL("convolution algorithm cudnn: this pdnn was built without cudnn.h");
}

#endif

}  // namespace cuda
}  // namespace pdnn
