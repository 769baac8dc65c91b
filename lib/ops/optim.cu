// The fused optimizer updates on the GPU (see optim.h): one grid-stride pass over the flat
// buffers; the step-dependent factors are computed from the device step count by each thread
// (a few double operations, beside 16-20 bytes of memory traffic per element).
#include <cmath>

#include "cuda/launch.h"
#include "ops/optim.h"
#include "ops/optim_formula.h"

namespace pdnn {
namespace cuda {

namespace {

// The elements' arithmetic is ops/optim_formula.h's, shared with the CPU kernels and the host's
// update of offloaded state, bit for bit.
__global__ void sgd_k(int64_t n, SgdArgs a, const int64_t* step, const float* g, float* w,
                      float* buf) {
  const bool first = *step <= 1;
  PDNN_GRID_LOOP(i, n) {
    formula::sgd(w[i], a.has_buffer ? buf + i : nullptr, g[i], first, a.lr, a.momentum, a.keep,
                 a.weight_decay, a.nesterov);
  }
}

// 16-byte accesses (n % 4 == 0, as adam_k) and the step's learning rate once per block: W4's
// update streams five arrays of 104 M floats, so its time is bytes over bandwidth.
__device__ __forceinline__ void adagrad_one(float& w, float& s, float g, float clr,
                                            const AdagradArgs& a) {
  formula::adagrad(w, s, g, clr, a.weight_decay, a.eps);
}
__global__ void adagrad_k(int64_t n, AdagradArgs a, const int64_t* step, const float* g, float* w,
                          float* sum) {
  __shared__ float clr;
  if (threadIdx.x == 0) clr = formula::adagrad_rate(a.lr, a.lr_decay, *step);
  __syncthreads();
  const int64_t n4 = n / 4;
  float4* w4 = reinterpret_cast<float4*>(w);
  float4* s4 = reinterpret_cast<float4*>(sum);
  const float4* g4 = reinterpret_cast<const float4*>(g);
  PDNN_GRID_LOOP(i, n4) {
    float4 wi = w4[i], si = s4[i];
    const float4 gi = g4[i];
    adagrad_one(wi.x, si.x, gi.x, clr, a);
    adagrad_one(wi.y, si.y, gi.y, clr, a);
    adagrad_one(wi.z, si.z, gi.z, clr, a);
    adagrad_one(wi.w, si.w, gi.w, clr, a);
    w4[i] = wi;
    s4[i] = si;
  }
  PDNN_GRID_LOOP(i, n - 4 * n4) adagrad_one(w[4 * n4 + i], sum[4 * n4 + i], g[4 * n4 + i], clr, a);
}

__global__ void adadelta_k(int64_t n, AdadeltaArgs a, const float* g, float* w, float* sq,
                           float* acc) {
  PDNN_GRID_LOOP(i, n) {
    formula::adadelta(w[i], sq[i], acc[i], g[i], a.lr, a.rho, a.keep, a.eps, a.weight_decay);
  }
}

__device__ __forceinline__ void adam_one(float& w, float& m, float& v, float g, const float* c,
                                         const AdamArgs& a) {
  formula::adam(w, m, v, g, c, a.weight_decay, a.eps);
}

// The flat buffers are padded to 16 floats per parameter (ParamSet), so n % 4 == 0 and every
// access is a 16-byte one. The step's constants (two double pow) are computed once per block.
__global__ void adam_k(int64_t n, AdamArgs a, const int64_t* step, const float* g, float* w,
                       float* m, float* v) {
  __shared__ float c[6];  // step size, sqrt(bc2), beta1, 1-beta1, beta2, 1-beta2
  if (threadIdx.x == 0) {
    const double s = static_cast<double>(*step);
    const double bc1 = 1.0 - pow(a.beta1, s), bc2 = 1.0 - pow(a.beta2, s);
    c[0] = static_cast<float>(a.lr / bc1);
    c[1] = static_cast<float>(sqrt(bc2));
    c[2] = static_cast<float>(a.beta1);
    c[3] = static_cast<float>(1.0 - a.beta1);
    c[4] = static_cast<float>(a.beta2);
    c[5] = static_cast<float>(1.0 - a.beta2);
  }
  __syncthreads();
  const int64_t n4 = n / 4;
  float4* w4 = reinterpret_cast<float4*>(w);
  float4* m4 = reinterpret_cast<float4*>(m);
  float4* v4 = reinterpret_cast<float4*>(v);
  const float4* g4 = reinterpret_cast<const float4*>(g);
  PDNN_GRID_LOOP(i, n4) {
    float4 wi = w4[i], mi = m4[i], vi = v4[i];
    const float4 gi = g4[i];
    adam_one(wi.x, mi.x, vi.x, gi.x, c, a);
    adam_one(wi.y, mi.y, vi.y, gi.y, c, a);
    adam_one(wi.z, mi.z, vi.z, gi.z, c, a);
    adam_one(wi.w, mi.w, vi.w, gi.w, c, a);
    w4[i] = wi;
    m4[i] = mi;
    v4[i] = vi;
  }
  PDNN_GRID_LOOP(i, n - 4 * n4) adam_one(w[4 * n4 + i], m[4 * n4 + i], v[4 * n4 + i], g[4 * n4 + i], c, a);
}

}  // namespace

void sgd_update(int64_t n, const SgdArgs& a, const int64_t* step, const float* g, float* w,
                float* buf, CudaExec e) {
  sgd_k<<<blocks_for(n, tpb(e)), tpb(e), 0, stream_of(e)>>>(n, a, step, g, w, buf);
  PDNN_CUDA_LAUNCH_CHECK("sgd_update");
}

void adagrad_update(int64_t n, const AdagradArgs& a, const int64_t* step, const float* g, float* w,
                    float* sum, CudaExec e) {
  for (const void* p : {static_cast<const void*>(g), static_cast<const void*>(w),
                        static_cast<const void*>(sum)})
    PDNN_CHECK(aligned(p, 16),
               "adagrad_update on the GPU: buffers must be 16-byte aligned (flat parameter buffers are)");
  adagrad_k<<<blocks_for(n / 4 + 1, tpb(e)), tpb(e), 0, stream_of(e)>>>(n, a, step, g, w, sum);
  PDNN_CUDA_LAUNCH_CHECK("adagrad_update");
}

void adadelta_update(int64_t n, const AdadeltaArgs& a, const float* g, float* w,
                     float* square_avg, float* acc_delta, CudaExec e) {
  adadelta_k<<<blocks_for(n, tpb(e)), tpb(e), 0, stream_of(e)>>>(n, a, g, w, square_avg, acc_delta);
  PDNN_CUDA_LAUNCH_CHECK("adadelta_update");
}

void adam_update(int64_t n, const AdamArgs& a, const int64_t* step, const float* g, float* w,
                 float* m, float* v, CudaExec e) {
  for (const void* p : {static_cast<const void*>(g), static_cast<const void*>(w),
                        static_cast<const void*>(m), static_cast<const void*>(v)})
    PDNN_CHECK(aligned(p, 16),
               "adam_update on the GPU: buffers must be 16-byte aligned (flat parameter buffers are)");
  adam_k<<<blocks_for(n / 4 + 1, tpb(e)), tpb(e), 0, stream_of(e)>>>(n, a, step, g, w, m, v);
  PDNN_CUDA_LAUNCH_CHECK("adam_update");
}

}  // namespace cuda
}  // namespace pdnn
