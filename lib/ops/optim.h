// The optimizers' updates, each one fused pass over the flat parameter, gradient and state
// buffers of a model (llm.c's layout): formulas in optim/<name>.h, PyTorch 1.13's.
// `step` is the step count after this step's increment, read from memory (device memory on the
// GPU) so that a captured CUDA graph sees it move; whatever depends on it (Adam's bias
// corrections, Adagrad's decayed rate, SGD's first-step rule) is computed from it inside the
// kernel, in double as PyTorch's Python-float arithmetic, then rounded once.
#pragma once
#include <cstdint>

#include "core/context.h"
#include "core/exec.h"
#include "core/tensor.h"

namespace pdnn {

struct SgdArgs {
  float lr, momentum, keep;  // keep = 1 - dampening
  float weight_decay;
  bool nesterov, has_buffer;  // has_buffer: momentum != 0 (buf is used)
};
struct AdagradArgs {
  double lr, lr_decay;
  float weight_decay, eps;
};
struct AdadeltaArgs {
  float lr, rho, keep, eps, weight_decay;  // keep = 1 - rho
};
struct AdamArgs {
  double lr, beta1, beta2;
  float eps, weight_decay;
};

namespace cpu {
void sgd_update(int64_t n, const SgdArgs& a, const int64_t* step, const float* g, float* w,
                float* buf, CpuExec e);
void adagrad_update(int64_t n, const AdagradArgs& a, const int64_t* step, const float* g, float* w,
                    float* sum, CpuExec e);
void adadelta_update(int64_t n, const AdadeltaArgs& a, const float* g, float* w,
                     float* square_avg, float* acc_delta, CpuExec e);
void adam_update(int64_t n, const AdamArgs& a, const int64_t* step, const float* g, float* w,
                 float* m, float* v, CpuExec e);
}  // namespace cpu

namespace cuda {
void sgd_update(int64_t n, const SgdArgs& a, const int64_t* step, const float* g, float* w,
                float* buf, CudaExec e);
void adagrad_update(int64_t n, const AdagradArgs& a, const int64_t* step, const float* g, float* w,
                    float* sum, CudaExec e);
void adadelta_update(int64_t n, const AdadeltaArgs& a, const float* g, float* w,
                     float* square_avg, float* acc_delta, CudaExec e);
void adam_update(int64_t n, const AdamArgs& a, const int64_t* step, const float* g, float* w,
                 float* m, float* v, CudaExec e);
}  // namespace cuda

// Tensor ops over flat buffers of equal size on one device; step: (1) int64 there.
namespace ops {
void sgd_update(Context& ctx, const SgdArgs& a, const Tensor& step, const Tensor& g, Tensor& w,
                Tensor& buf);
void adagrad_update(Context& ctx, const AdagradArgs& a, const Tensor& step, const Tensor& g,
                    Tensor& w, Tensor& sum);
void adadelta_update(Context& ctx, const AdadeltaArgs& a, const Tensor& g, Tensor& w,
                     Tensor& square_avg, Tensor& acc_delta);
void adam_update(Context& ctx, const AdamArgs& a, const Tensor& step, const Tensor& g, Tensor& w,
                 Tensor& m, Tensor& v);
}  // namespace ops

}  // namespace pdnn
