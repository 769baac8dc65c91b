// BatchNorm over (N, C, HW) with an optional fused activation after it (ReLU or LeakyReLU, as
// the PyCUDA DCGAN study fused them: one pass over memory instead of two, each way).
//   train:  mean_c, var_c over N*HW (biased; sums in double, two passes against cancellation);
//           running_mean = (1-momentum) running_mean + momentum mean_c
//           running_var  = (1-momentum) running_var  + momentum var_c * M/(M-1)   (M = N*HW)
//   eval:   mean_c = running_mean, var_c = running_var
//   both:   invstd_c = 1/sqrt(var_c + eps) (in double); z = (x - mean_c) invstd_c gamma_c + beta_c;
//           y = act(z)  (gamma/beta nullptr mean 1/0)
//   backward: g = dy * act'(from y: y > 0 ? 1 : slope; exact since slope >= 0), xhat = (x-mean) invstd;
//           dgamma += sum g xhat, dbeta += sum g (either may be nullptr);
//           dx = gamma invstd (g - [train] (sum g + xhat sum g xhat) / M)   (dx may be nullptr)
#pragma once
#include <cstdint>

#include "core/context.h"
#include "core/exec.h"
#include "core/tensor.h"
#include "ops/activation.h"

namespace pdnn {


struct BnGeom {
  int64_t n, c, hw;
  float eps, momentum;
  FusedAct act;
  float slope;  // LeakyReLU's; ignored otherwise
  // The GPU's blocks a channel (1, 2, 4 or 8, a thread block cluster): 0 picks by the shape
  // (cuda::batchnorm2d_splits); the tests force each. The CPU ignores it.
  int splits = 0;
};

namespace cpu {
void batchnorm2d_forward_train(const BnGeom& g, const float* x, const float* gamma,
                               const float* beta, float* running_mean, float* running_var,
                               float* mean, float* invstd, float* y, CpuExec e);
void batchnorm2d_forward_eval(const BnGeom& g, const float* x, const float* gamma,
                              const float* beta, const float* running_mean,
                              const float* running_var, float* mean, float* invstd, float* y,
                              CpuExec e);
void batchnorm2d_backward(const BnGeom& g, bool batch_stats, const float* x, const float* y,
                          const float* dy, const float* mean, const float* invstd,
                          const float* gamma, float* dgamma, float* dbeta, float* dx, CpuExec e);
}  // namespace cpu

// The GPU twins are templates over x's, y's, dy's and dx's type T, float or bf16 (the
// statistics, gamma, beta and their gradients float32, sums in double in both; a bf16 y or dx
// rounded once), both instantiated in batchnorm2d.cu.
namespace cuda {
// The blocks (a thread block cluster) each channel of g takes in the training forward and the
// backward: g.splits where set, else by the shape alone (batchnorm2d.cu says how).
int batchnorm2d_splits(const BnGeom& g);
template <class T>
void batchnorm2d_forward_train(const BnGeom& g, const T* x, const float* gamma,
                               const float* beta, float* running_mean, float* running_var,
                               float* mean, float* invstd, T* y, CudaExec e);
template <class T>
void batchnorm2d_forward_eval(const BnGeom& g, const T* x, const float* gamma,
                              const float* beta, const float* running_mean,
                              const float* running_var, float* mean, float* invstd, T* y,
                              CudaExec e);
template <class T>
void batchnorm2d_backward(const BnGeom& g, bool batch_stats, const T* x, const T* y,
                          const T* dy, const float* mean, const float* invstd,
                          const float* gamma, float* dgamma, float* dbeta, T* dx, CudaExec e);
}  // namespace cuda

namespace ops {
// gamma, beta: (C) or empty (no affine). mean, invstd: (C), written. x, y (dy, dx): float32,
// or bfloat16 on the GPU; everything else float32.
void batchnorm2d_forward_train(Context& ctx, const BnGeom& g, const Tensor& x, const Tensor& gamma,
                               const Tensor& beta, Tensor& running_mean, Tensor& running_var,
                               Tensor& mean, Tensor& invstd, Tensor& y);
void batchnorm2d_forward_eval(Context& ctx, const BnGeom& g, const Tensor& x, const Tensor& gamma,
                              const Tensor& beta, const Tensor& running_mean,
                              const Tensor& running_var, Tensor& mean, Tensor& invstd, Tensor& y);
// dgamma, dbeta empty when not affine; dx nullptr when not wanted.
void batchnorm2d_backward(Context& ctx, const BnGeom& g, bool batch_stats, const Tensor& x,
                          const Tensor& y, const Tensor& dy, const Tensor& mean,
                          const Tensor& invstd, const Tensor& gamma, Tensor& dgamma,
                          Tensor& dbeta, Tensor* dx);
}  // namespace ops

}  // namespace pdnn
