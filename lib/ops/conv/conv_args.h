// One convolution call's operands, one struct for every pass and every backend: cpu::, cuda::
// and each GPU algorithm's entry point (conv2d_gpu.h) take the raw pointers (ConvFwd, ConvBwd),
// ops:: takes the Tensors (ConvFwdTensors, ConvBwdTensors) of the same fields. A null pointer is
// an operand not given or an output not wanted. Shapes, for geometry g (input c x h x w ->
// output oh x ow), n images and k output channels: x (n,c,h,w), w (k,c,kh,kw), b and db (k),
// y and dy (n,k,oh,ow), dx (n,c,h,w).
#pragma once
#include <cstdint>

#include "ops/activation.h"
#include "ops/conv/im2col.h"

namespace pdnn {

class Tensor;

enum class ConvAlgo {
  Auto,      // pick per shape: on the CPU by the measured rule (conv_algo_for), on the GPU by
             // timing the candidates at first use (conv2d_algo.h)
  PerImage,  // CPU: images in parallel, single-threaded GEMM per image
  Batched,   // CPU: one GEMM over the batch with threaded BLAS
  Winograd,  // F(4x4, 3x3) for 3x3 stride-1 kernels (ops/conv/conv2d_winograd.h), images in parallel
  Direct,    // 3x3 stride-1 only. CPU: register-blocked direct kernels for few input channels
             // (ops/conv/conv2d_direct.h), images in parallel; GPU: halo tiles in shared
             // memory, any channel count (conv2d_direct.cu)
  Im2col,    // GPU: batched im2col + cuBLAS in chunks of bounded memory
  Implicit,  // GPU: implicit GEMM, the im2col tile formed in shared memory (conv2d_gpu.h)
  Cudnn,     // GPU: cuDNN, opened at run time where present (conv2d_cudnn.h)
};

// Forward: y = act(conv(x, w) + b).
template <class T>
struct ConvFwdOf {
  ConvGeom g{};
  int64_t n = 0, k = 0;
  const T* x = nullptr;
  const T* w = nullptr;
  const T* b = nullptr;  // optional
  T* y = nullptr;        // written
  Act act{};
  ConvAlgo algo = ConvAlgo::Auto;  // the dispatchers' choice; a kernel's own entry ignores it
  // A buffer the caller keeps from forward to backward (a layer's own scratch): on the GPU, when
  // the batch fits one chunk, im2col's forward leaves the batch's columns there and backward
  // reuses them; ops:: resizes it, the CPU ignores it.
  T* saved_cols = nullptr;
};

// Backward: dw += dL/dw, db += dL/db, dx = dL/dx, each skipped when null (x may then be null
// too when dw is). dy is with respect to y = act(z) (y is read only with an activation).
// dx_act: dx = act'(src) . dL/dx, the activation of the layer before (Layer::
// fold_input_activation), with src = dx_src in cpu::/cuda:: and x in ops::.
template <class T>
struct ConvBwdOf {
  ConvGeom g{};
  int64_t n = 0, k = 0;
  const T* x = nullptr;
  const T* w = nullptr;
  const T* dy = nullptr;
  const T* y = nullptr;
  T* dw = nullptr;
  T* db = nullptr;
  T* dx = nullptr;
  Act act{};
  ConvAlgo algo = ConvAlgo::Auto;
  const T* saved_cols = nullptr;  // ConvFwdOf::saved_cols, as forward left it
  Act dx_act{};
  const T* dx_src = nullptr;
};

using ConvFwd = ConvFwdOf<float>;
using ConvBwd = ConvBwdOf<float>;
using ConvFwdTensors = ConvFwdOf<Tensor>;
using ConvBwdTensors = ConvBwdOf<Tensor>;

}  // namespace pdnn
