// im2col/col2im: unrolls image patches into a column matrix so a convolution becomes one GEMM
// (Caffe's scheme), for any kernel, stride and zero padding. Shared by Conv2d and
// ConvTranspose2d (whose forward is convolution's backward-data).
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "core/exec.h"

namespace pdnn {

// Geometry of one convolution over one image: input (c, h, w), kernel (kh, kw), stride (sh, sw),
// zero padding (ph, pw); output spatial size (oh, ow). Make it with conv_geom(), which checks.
struct ConvGeom {
  int64_t c, h, w, kh, kw, sh, sw, ph, pw, oh, ow;
  int64_t col_rows() const { return c * kh * kw; }  // rows of the column matrix
  int64_t col_cols() const { return oh * ow; }      // columns: one per output pixel
  int64_t col_size() const { return col_rows() * col_cols(); }
  int64_t image_size() const { return c * h * w; }
};

// One window covering the unpadded image exactly (DCGAN's 4x4 <-> 1x1 layers): the column of an
// image is the image itself, row (ci, ki, kj) = pixel (ci, ki, kj), and the convolution is a
// dense layer over the flattened image.
inline bool whole_image_window(const ConvGeom& g) {
  return g.oh == 1 && g.ow == 1 && g.ph == 0 && g.pw == 0 && g.kh == g.h && g.kw == g.w;
}

// oh = (h + 2 ph - kh) / sh + 1 (floor), likewise ow. Throws pdnn::Error, naming `op` and the
// offending sizes, unless every size is positive, padding >= 0 and the kernel fits the padded input.
ConvGeom conv_geom(const char* op, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw,
                   int64_t sh, int64_t sw, int64_t ph, int64_t pw);

namespace cpu {

// cols (c*kh*kw, oh*ow) row-major, row (ci, ki, kj), column (oy, ox):
// x_img[ci][oy*sh - ph + ki][ox*sw - pw + kj], or 0 outside the image. x_img (c, h, w).
// `ld` is the distance between rows of cols (oh*ow for one image alone; n*oh*ow when images of a
// batch sit side by side in one column matrix).
void im2col(const ConvGeom& g, const float* x_img, float* cols, int64_t ld);
inline void im2col(const ConvGeom& g, const float* x_img, float* cols) {
  im2col(g, x_img, cols, g.col_cols());
}

// The adjoint of im2col: x_img (c, h, w) = sum of every column entry at the pixel it was read
// from (overlapping windows add up; padding entries are dropped). Writes x_img (=).
void col2im(const ConvGeom& g, const float* cols, float* x_img, int64_t ld);
inline void col2im(const ConvGeom& g, const float* cols, float* x_img) {
  col2im(g, cols, x_img, g.col_cols());
}

// The batch-level twins below (both backends) work on all n images at once: their columns side
// by side, cols (c*kh*kw, n*oh*ow), image i at column offset i*oh*ow (the layout of one big
// GEMM over the batch). On the GPU col2im is a gather (one thread per input pixel sums the
// column entries that read it), so no atomics.
void im2col_batch(const ConvGeom& g, int64_t n, const float* x, float* cols, CpuExec e);
void col2im_batch(const ConvGeom& g, int64_t n, const float* cols, float* x, CpuExec e);
// Permutes (n, c, p) to (c, n, p) and back: the layouts of a batch of images and of a batched
// GEMM's columns/rows.
void nchw_to_cnhw(int64_t n, int64_t c, int64_t p, const float* x, float* y, CpuExec e);
void cnhw_to_nchw(int64_t n, int64_t c, int64_t p, const float* x, float* y, CpuExec e);

}  // namespace cpu

namespace cuda {
// The GPU's im2col kernels: Any picks the fastest that fits (K4S2, else Four, else One); the
// tests force each. One: a column a thread. Four: 4 columns a thread (n*oh*ow % 4 == 0), each
// tap's row a block. K4S2: 4x4 stride-2 padding-1 (the DCGAN's layers), all 16 taps of 4
// columns a thread from 4-element vectors of x (also w % 4 == 0, ow % 4 == 0, x and cols
// aligned to 4 elements). Forcing one that does not fit throws.
enum class Im2colKernel { Any, One, Four, K4S2 };
Im2colKernel im2col_kernel_for(const ConvGeom& g, int64_t n, const void* x, const void* cols,
                               size_t elem_bytes);
void im2col_batch(const ConvGeom& g, int64_t n, const float* x, float* cols, CudaExec e,
                  Im2colKernel k);
void im2col_batch(const ConvGeom& g, int64_t n, const bf16* x, bf16* cols, CudaExec e,
                  Im2colKernel k);
void im2col_batch(const ConvGeom& g, int64_t n, const float* x, float* cols, CudaExec e);
void col2im_batch(const ConvGeom& g, int64_t n, const float* cols, float* x, CudaExec e);
// bf16 convolutions: bf16 columns; col2im from fp32 columns (the product's) into bf16 x, each
// pixel's sum in fp32 rounded once.
void im2col_batch(const ConvGeom& g, int64_t n, const bf16* x, bf16* cols, CudaExec e);
void col2im_batch(const ConvGeom& g, int64_t n, const float* cols, bf16* x, CudaExec e);
void nchw_to_cnhw(int64_t n, int64_t c, int64_t p, const float* x, float* y, CudaExec e);
void cnhw_to_nchw(int64_t n, int64_t c, int64_t p, const float* x, float* y, CudaExec e);
}  // namespace cuda

}  // namespace pdnn
