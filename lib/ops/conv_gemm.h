// Convolution as im2col + GEMM over a batch (Caffe's scheme), in two ways of using the cores:
// images in parallel (each thread im2cols its images and runs single-threaded GEMMs, weight
// gradients summed from per-thread partials in thread order) or one big GEMM over the whole
// batch (all images' columns side by side, threaded BLAS). 3x3 stride-1 convolutions go to
// kernels that skip im2col (Winograd, or direct for few input channels: conv3x3_*.h); the
// entry points below dispatch on ConvAlgo. Conv2d uses them directly; ConvTranspose2d runs
// them with forward and backward swapped.
//
// Shapes, for geometry g (input c x h x w -> output oh x ow) and k output channels:
//   x (n, c, h, w), w (k, c*kh*kw), b (k), y / dy (n, k, oh, ow).
#pragma once
#include <cstddef>
#include <cstdint>

#include "ops/im2col.h"

namespace pdnn {

enum class ConvAlgo {
  Auto,      // pick per shape (conv_algo_for)
  PerImage,  // images in parallel, single-threaded GEMM per image
  Batched,   // one GEMM over the batch with threaded BLAS
  Winograd,  // F(4x4, 3x3) for 3x3 stride-1 kernels (ops/conv3x3_winograd.h), images in parallel
  Direct,    // register-blocked direct 3x3 stride-1 kernels for few input channels
             // (ops/conv3x3_direct.h), images in parallel
};
const char* conv_algo_name(ConvAlgo a);

// The measured-faster algorithm for a shape at a thread count (never Auto). Winograd and Direct
// only where conv3x3_applies(g).
ConvAlgo conv_algo_for(const ConvGeom& g, int64_t n, int64_t k, int threads);

// Floats of scratch the functions below need (pass at least this much as `ws`).
size_t conv_workspace_floats(const ConvGeom& g, int64_t n, int64_t k, ConvAlgo algo, int threads);

namespace cpu {

// y = conv(x, w) (+ b when b != nullptr). Writes y.
void conv2d_forward(const ConvGeom& g, int64_t n, int64_t k, const float* x, const float* w,
                    const float* b, float* y, ConvAlgo algo, int threads, float* ws);

// dw += dL/dw, db += dL/db, dx = dL/dx; each skipped when nullptr (x may then be nullptr
// too when dw is). dy (n, k, oh, ow).
void conv2d_backward(const ConvGeom& g, int64_t n, int64_t k, const float* x, const float* w,
                     const float* dy, float* dw, float* db, float* dx, ConvAlgo algo,
                     int threads, float* ws);

// y (n, k, p) += b[k]; db[k] += sum over n, p of dy (n, k, p) (fixed order).
void bias_add(int64_t n, int64_t k, int64_t p, const float* b, float* y);
void bias_backward(int64_t n, int64_t k, int64_t p, const float* dy, float* db);

}  // namespace cpu
}  // namespace pdnn
