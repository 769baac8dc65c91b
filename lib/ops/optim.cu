// The fused optimizer updates on the GPU (see optim.h): one grid-stride pass over the flat
// buffers; the step-dependent factors are computed from the device step count by each thread
// (a few double operations, beside 16-20 bytes of memory traffic per element).
#include <cmath>

#include "cuda/launch.h"
#include "ops/optim.h"

namespace pdnn {
namespace cuda {

namespace {

__global__ void sgd_k(int64_t n, SgdArgs a, const int64_t* step, const float* g, float* w,
                      float* buf) {
  const bool first = *step <= 1;
  PDNN_GRID_LOOP(i, n) {
    float d = a.weight_decay != 0.f ? g[i] + a.weight_decay * w[i] : g[i];
    if (a.has_buffer) {
      buf[i] = first ? d : buf[i] * a.momentum + a.keep * d;
      d = a.nesterov ? d + a.momentum * buf[i] : buf[i];
    }
    w[i] -= a.lr * d;
  }
}

__global__ void adagrad_k(int64_t n, AdagradArgs a, const int64_t* step, const float* g, float* w,
                          float* sum) {
  const float clr = static_cast<float>(a.lr / (1.0 + static_cast<double>(*step - 1) * a.lr_decay));
  PDNN_GRID_LOOP(i, n) {
    const float d = a.weight_decay != 0.f ? g[i] + a.weight_decay * w[i] : g[i];
    const float s = sum[i] + d * d;
    sum[i] = s;
    w[i] -= clr * (d / (sqrtf(s) + a.eps));
  }
}

__global__ void adadelta_k(int64_t n, AdadeltaArgs a, const float* g, float* w, float* sq,
                           float* acc) {
  PDNN_GRID_LOOP(i, n) {
    const float d = a.weight_decay != 0.f ? g[i] + a.weight_decay * w[i] : g[i];
    const float s = sq[i] * a.rho + a.keep * (d * d);
    sq[i] = s;
    const float std_ = sqrtf(s + a.eps);
    const float delta = sqrtf(acc[i] + a.eps) / std_ * d;
    acc[i] = acc[i] * a.rho + a.keep * (delta * delta);
    w[i] -= a.lr * delta;
  }
}

__global__ void adam_k(int64_t n, AdamArgs a, const int64_t* step, const float* g, float* w,
                       float* m, float* v) {
  const double s = static_cast<double>(*step);
  const double bc1 = 1.0 - pow(a.beta1, s), bc2 = 1.0 - pow(a.beta2, s);
  const float step_size = static_cast<float>(a.lr / bc1), bc2_sqrt = static_cast<float>(sqrt(bc2));
  const float beta1 = static_cast<float>(a.beta1), keep1 = static_cast<float>(1.0 - a.beta1);
  const float beta2 = static_cast<float>(a.beta2), keep2 = static_cast<float>(1.0 - a.beta2);
  PDNN_GRID_LOOP(i, n) {
    const float d = a.weight_decay != 0.f ? g[i] + a.weight_decay * w[i] : g[i];
    const float mi = m[i] * beta1 + keep1 * d;
    const float vi = v[i] * beta2 + keep2 * (d * d);
    m[i] = mi;
    v[i] = vi;
    const float denom = sqrtf(vi) / bc2_sqrt + a.eps;
    w[i] -= step_size * (mi / denom);
  }
}

}  // namespace

void sgd_update(int64_t n, const SgdArgs& a, const int64_t* step, const float* g, float* w,
                float* buf, CudaExec e) {
  sgd_k<<<blocks_for(n, tpb(e)), tpb(e), 0, stream_of(e)>>>(n, a, step, g, w, buf);
  PDNN_CUDA_LAUNCH_CHECK("sgd_update");
}

void adagrad_update(int64_t n, const AdagradArgs& a, const int64_t* step, const float* g, float* w,
                    float* sum, CudaExec e) {
  adagrad_k<<<blocks_for(n, tpb(e)), tpb(e), 0, stream_of(e)>>>(n, a, step, g, w, sum);
  PDNN_CUDA_LAUNCH_CHECK("adagrad_update");
}

void adadelta_update(int64_t n, const AdadeltaArgs& a, const float* g, float* w,
                     float* square_avg, float* acc_delta, CudaExec e) {
  adadelta_k<<<blocks_for(n, tpb(e)), tpb(e), 0, stream_of(e)>>>(n, a, g, w, square_avg, acc_delta);
  PDNN_CUDA_LAUNCH_CHECK("adadelta_update");
}

void adam_update(int64_t n, const AdamArgs& a, const int64_t* step, const float* g, float* w,
                 float* m, float* v, CudaExec e) {
  adam_k<<<blocks_for(n, tpb(e)), tpb(e), 0, stream_of(e)>>>(n, a, step, g, w, m, v);
  PDNN_CUDA_LAUNCH_CHECK("adam_update");
}

}  // namespace cuda
}  // namespace pdnn
