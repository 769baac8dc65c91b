// One convolution call's operands, one struct for every pass and every backend: cpu::, cuda::
// and each GPU algorithm's entry point (conv2d_gpu.h) take the raw pointers (ConvFwd, ConvBwd),
// ops:: takes the Tensors (ConvFwdTensors, ConvBwdTensors) of the same fields. A null pointer is
// an operand not given or an output not wanted. Shapes, for geometry g (input c x h x w ->
// output oh x ow), n images and k output channels: x (n,c,h,w), w (k,c,kh,kw), b and db (k),
// y and dy (n,k,oh,ow), dx (n,c,h,w). T: the activations' and weights' element type, F: the
// bias's and the parameter gradients' (float; in bf16 mixed precision T = bf16, F = float:
// ConvFwdBf16, ConvBwdBf16).
//
// A call is filled by name, or in one line: ConvFwdOf::of from its shape and operands in the
// kernels' order (inputs, then the output); ConvBwdOf::of from its forward (the shape, x, w, y,
// the activation, the algorithm and the saved columns they share) and what backward adds (dy
// in, the gradients out); ConvBwdOf::data, backward-data alone.
#pragma once
#include <cstdint>

#include "core/dtype.h"
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
             // memory, any channel count (conv2d_direct.cu), and in bf16 4x4 stride-2
             // padding-1 layers too
  Im2col,    // GPU: batched im2col + cuBLAS in chunks of bounded memory
  Implicit,  // GPU: implicit GEMM, the im2col tile formed in shared memory (conv2d_gpu.h)
  Cudnn,     // GPU: cuDNN, opened at run time where present (conv2d_cudnn.h)
};

// What every pass of one convolution has in common: g, n images, k output channels.
struct ConvShape {
  ConvGeom g{};
  int64_t n = 0, k = 0;
};

// Forward: y = act(conv(x, w) + b).
template <class T, class F = T>
struct ConvFwdOf : ConvShape {
  const T* x = nullptr;
  const T* w = nullptr;
  const F* b = nullptr;  // optional
  T* y = nullptr;        // written
  Act act{};
  ConvAlgo algo = ConvAlgo::Auto;  // the dispatchers' choice; a kernel's own entry ignores it
  // A buffer the caller keeps from forward to backward (a layer's own scratch): on the GPU, when
  // the batch fits one chunk, im2col's forward leaves the batch's columns there and backward
  // reuses them; ops:: resizes it, the CPU ignores it.
  T* saved_cols = nullptr;

  // b may be null.
  static ConvFwdOf of(const ConvShape& s, const T* x, const T* w, const F* b, T* y, Act act = {},
                      ConvAlgo algo = ConvAlgo::Auto) {
    return {s, x, w, b, y, act, algo};
  }
};

// Backward: dw += dL/dw, db += dL/db, dx = dL/dx, each skipped when null (x may then be null
// too when dw is). dy is with respect to y = act(z) (y is read only with an activation).
// dx_act: dx = act'(src) . dL/dx, the activation of the layer before (Layer::
// fold_input_activation), with src = dx_src in cpu::/cuda:: and x in ops::.
template <class T, class F = T>
struct ConvBwdOf : ConvShape {
  const T* x = nullptr;
  const T* w = nullptr;
  const T* dy = nullptr;
  const T* y = nullptr;
  F* dw = nullptr;
  F* db = nullptr;
  T* dx = nullptr;
  Act act{};
  ConvAlgo algo = ConvAlgo::Auto;
  const T* saved_cols = nullptr;  // ConvFwdOf::saved_cols, as forward left it
  Act dx_act{};
  const T* dx_src = nullptr;

  // The backward of forward f; dw, db, dx: the gradients wanted (each may be null).
  static ConvBwdOf of(const ConvFwdOf<T, F>& f, const T* dy, F* dw, F* db, T* dx) {
    return {f, f.x, f.w, dy, f.y, dw, db, dx, f.act, f.algo, f.saved_cols};
  }
  // Backward-data alone, dy with respect to the convolution's own output: dx = conv^T(dy, w).
  static ConvBwdOf data(const ConvShape& s, const T* w, const T* dy, T* dx,
                        ConvAlgo algo = ConvAlgo::Auto) {
    return {s, nullptr, w, dy, nullptr, nullptr, nullptr, dx, Act{}, algo};
  }
};

using ConvFwd = ConvFwdOf<float>;
using ConvBwd = ConvBwdOf<float>;
using ConvFwdBf16 = ConvFwdOf<bf16, float>;
using ConvBwdBf16 = ConvBwdOf<bf16, float>;
using ConvFwdTensors = ConvFwdOf<Tensor>;
using ConvBwdTensors = ConvBwdOf<Tensor>;

}  // namespace pdnn
