// im2col / col2im over a batch, and the (n,c,p) <-> (c,n,p) permutes, on the GPU (see
// im2col.h). Index arithmetic is 32-bit (64-bit division is a long software sequence on the
// GPU and made these kernels 5-10x slower); the row of the column matrix or the plane comes from
// blockIdx.y, so its decomposition is done once per block. col2im is a gather (one thread per
// input pixel sums the column entries that read it, in the CPU's (ki, kj) order: bit-identical),
// so there are no atomics. The grid-stride counters are 64-bit (PDNN_GRID_LOOP) though the
// indices are 32: a 32-bit counter's last step past a bound near 2^31 overflows. col2im over the
// U-Net's 64 x 5792 x 5792 values (2,147,024,896 on 67M threads), where its timing took 17 s
// and 6.5 s (up1's forward, head's backward-data; ~0.1 s due): the wrapped counter read and
// wrote where it pointed (test: ConvGpu.Index64Col2imNearTwoToThe31StaysInBounds).
#include <climits>

#include "cuda/launch.h"
#include "ops/conv/im2col.h"
#include "ops/kit/round.h"

namespace pdnn {
namespace cuda {

namespace {

// The geometry in 32 bits (every size the models use is far below 2^31; checked on launch).
struct Geom32 {
  int c, h, w, kh, kw, sh, sw, ph, pw, oh, ow;
};
Geom32 geom32(const ConvGeom& g, int64_t n) {
  PDNN_CHECK(n * g.c * g.h * g.w < INT_MAX && g.col_rows() * n * g.col_cols() < (int64_t{1} << 40),
             "conv on the GPU: sizes beyond 32-bit indexing");
  return {static_cast<int>(g.c),  static_cast<int>(g.h),  static_cast<int>(g.w),
          static_cast<int>(g.kh), static_cast<int>(g.kw), static_cast<int>(g.sh),
          static_cast<int>(g.sw), static_cast<int>(g.ph), static_cast<int>(g.pw),
          static_cast<int>(g.oh), static_cast<int>(g.ow)};
}

// grid.y: rows of cols (c*kh*kw), grid.x: columns (n*p). div_p, div_ow: p and ow. E: float or
// bf16 (the bf16 convolutions' columns: copies, no rounding).
template <class E>
__global__ void im2col_k(Geom32 g, int np, FastDiv div_p, FastDiv div_ow,
                         const E* __restrict__ x, E* __restrict__ cols) {
  const int p = g.oh * g.ow;
  for (int r = blockIdx.y; r < g.c * g.kh * g.kw; r += gridDim.y) {
    const int kj = r % g.kw, ki = (r / g.kw) % g.kh, ci = r / (g.kw * g.kh);
    E* row = cols + static_cast<int64_t>(r) * np;
    PDNN_GRID_LOOP(col64, np) {
      const int col = static_cast<int>(col64);
      const int i = div_p.div(col), q = col - i * p, oy = div_ow.div(q), ox = q - oy * g.ow;
      const int yy = oy * g.sh - g.ph + ki, xx = ox * g.sw - g.pw + kj;
      row[col] = (yy >= 0 && yy < g.h && xx >= 0 && xx < g.w)
                     ? x[((i * g.c + ci) * g.h + yy) * g.w + xx]
                     : E{};
    }
  }
}

// The same with 4 consecutive columns per thread (n*p % 4 == 0): the index arithmetic once per
// 4 values and one 16-byte (float) or 8-byte (bf16) store. bf16 took this path from W5's
// D.conv4 backward-weights on: one 2-byte store a thread ran its 8 MB of columns at 0.25 TB/s.
template <class E>
__global__ void im2col_k4(Geom32 g, int np, FastDiv div_p, FastDiv div_ow,
                          const E* __restrict__ x, E* __restrict__ cols) {
  struct alignas(4 * sizeof(E)) Four {
    E v[4];
  };
  const int p = g.oh * g.ow, np4 = np / 4;
  for (int r = blockIdx.y; r < g.c * g.kh * g.kw; r += gridDim.y) {
    const int kj = r % g.kw, ki = (r / g.kw) % g.kh, ci = r / (g.kw * g.kh);
    Four* row = reinterpret_cast<Four*>(cols + static_cast<int64_t>(r) * np);
    PDNN_GRID_LOOP(c4, np4) {
      const int col = 4 * static_cast<int>(c4);
      int i = div_p.div(col), q = col - i * p, oy = div_ow.div(q), ox = q - oy * g.ow;
      Four v;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int yy = oy * g.sh - g.ph + ki, xx = ox * g.sw - g.pw + kj;
        v.v[j] = (yy >= 0 && yy < g.h && xx >= 0 && xx < g.w)
                   ? x[((i * g.c + ci) * g.h + yy) * g.w + xx]
                   : E{};
        if (++ox == g.ow) {
          ox = 0;
          if (++oy == g.oh) {
            oy = 0;
            ++i;
          }
        }
      }
      row[c4] = v;
    }
  }
}

// 4x4 stride-2 padding-1 (every DCGAN convolution): thread t writes the 16 taps of channel
// blockIdx.y at columns 4t ... 4t + 3, one output row's ox0 ... ox0 + 3 (ow % 4 == 0). For kernel
// row ki they read input row 2 oy - ph + ki at 2 ox0 - 1 ... 2 ox0 + 8, which the thread loads as
// the four aligned 4-element vectors from 2 ox0 - 4 (w % 4 == 0: a vector is wholly inside the
// row or outside) and picks its 4 taps' 4 values from (tap kj, column j: element 2 j + 3 + kj).
// Why: im2col_k4 runs a tap's row a block, so each input value is fetched 16 times by 16 blocks
// (4 scalar loads a thread for one 4-column store); here 16 vector loads feed 16 vector stores.
// Floor: the columns' bytes (16 x the input's) written once, the input read ~2x (rows shared by
// neighbouring output rows), at the copy rate.
template <class E>
__global__ void im2col_k4s2(Geom32 g, int np, FastDiv div_p, FastDiv div_ow,
                            const E* __restrict__ x, E* __restrict__ cols) {
  struct alignas(4 * sizeof(E)) Four {
    E v[4];
  };
  const int p = g.oh * g.ow, np4 = np / 4, hw = g.h * g.w;
  for (int ci = blockIdx.y; ci < g.c; ci += gridDim.y) {
    Four* rows = reinterpret_cast<Four*>(cols + static_cast<int64_t>(ci) * 16 * np);
    PDNN_GRID_LOOP(c4, np4) {
      const int col = 4 * static_cast<int>(c4);
      const int i = div_p.div(col), q = col - i * p, oy = div_ow.div(q), ox0 = q - oy * g.ow;
      const E* plane = x + (i * g.c + ci) * hw;
      const int x0 = 2 * ox0 - 4;
#pragma unroll
      for (int ki = 0; ki < 4; ++ki) {
        const int yy = 2 * oy - g.ph + ki;
        const bool row_ok = yy >= 0 && yy < g.h;
        E win[16];
#pragma unroll
        for (int v = 0; v < 4; ++v) {
          const int xs = x0 + 4 * v;
          Four t{};
          if (row_ok && xs >= 0 && xs < g.w) t = *reinterpret_cast<const Four*>(plane + yy * g.w + xs);
#pragma unroll
          for (int j = 0; j < 4; ++j) win[4 * v + j] = t.v[j];
        }
#pragma unroll
        for (int kj = 0; kj < 4; ++kj) {
          Four o;
#pragma unroll
          for (int j = 0; j < 4; ++j) o.v[j] = win[2 * j + 3 + kj];
          rows[static_cast<int64_t>(ki * 4 + kj) * np4 + c4] = o;
        }
      }
    }
  }
}

// x: float, or bf16 (the sum in fp32, rounded once). div_w, div_h, div_c: w, h and c.
template <bool kStride1, class E>
__global__ void col2im_k(Geom32 g, int total, int np, FastDiv div_w, FastDiv div_h, FastDiv div_c,
                         const float* __restrict__ cols, E* __restrict__ x) {
  const int p = g.oh * g.ow;
  PDNN_GRID_LOOP(t64, total) {
    const int t = static_cast<int>(t64);
    const int a = div_w.div(t), xx = t - a * g.w;
    const int b = div_h.div(a), yy = a - b * g.h;
    const int i = div_c.div(b), ci = b - i * g.c;
    const float* base = cols + i * p;
    float s = 0.f;
    for (int ki = 0; ki < g.kh; ++ki) {
      const int ny = yy + g.ph - ki;
      if (ny < 0) break;  // ny falls as ki grows
      if (!kStride1 && ny % g.sh != 0) continue;
      const int oy = kStride1 ? ny : ny / g.sh;
      if (oy >= g.oh) continue;
      for (int kj = 0; kj < g.kw; ++kj) {
        const int nx = xx + g.pw - kj;
        if (nx < 0) break;
        if (!kStride1 && nx % g.sw != 0) continue;
        const int ox = kStride1 ? nx : nx / g.sw;
        if (ox >= g.ow) continue;
        s += base[static_cast<int64_t>((ci * g.kh + ki) * g.kw + kj) * np + oy * g.ow + ox];
      }
    }
    x[t] = kit::from_f32<E>(s);
  }
}

// y (c, n, p) from x (n, c, p); grid.y over the n*c planes of x.
__global__ void to_cnp(int n, int c, int p, const float* __restrict__ x, float* __restrict__ y) {
  for (int plane = blockIdx.y; plane < n * c; plane += gridDim.y) {
    const int ni = plane / c, ci = plane - ni * c;
    const float* src = x + static_cast<int64_t>(plane) * p;
    float* dst = y + (static_cast<int64_t>(ci) * n + ni) * p;
    for (int q = blockIdx.x * blockDim.x + threadIdx.x; q < p; q += gridDim.x * blockDim.x)
      dst[q] = src[q];
  }
}
__global__ void to_ncp(int n, int c, int p, const float* __restrict__ x, float* __restrict__ y) {
  for (int plane = blockIdx.y; plane < n * c; plane += gridDim.y) {
    const int ni = plane / c, ci = plane - ni * c;
    const float* src = x + (static_cast<int64_t>(ci) * n + ni) * p;
    float* dst = y + static_cast<int64_t>(plane) * p;
    for (int q = blockIdx.x * blockDim.x + threadIdx.x; q < p; q += gridDim.x * blockDim.x)
      dst[q] = src[q];
  }
}

const char* kernel_name(Im2colKernel k) {
  switch (k) {
    case Im2colKernel::Any: return "any";
    case Im2colKernel::One: return "one";
    case Im2colKernel::Four: return "four";
    case Im2colKernel::K4S2: return "k4s2";
  }
  return "?";
}

// K4S2 where it fits, else 4 columns a thread where n*p % 4 == 0 (every row of cols then starts
// 4-aligned), else 1.
template <class E>
void im2col_launch(const ConvGeom& g, int64_t n, const E* x, E* cols, CudaExec e, Im2colKernel k) {
  const int64_t np = n * g.col_cols();
  if (np <= 0) return;
  const Im2colKernel fits = im2col_kernel_for(g, n, x, cols, sizeof(E));
  if (k == Im2colKernel::Any) k = fits;
  PDNN_CHECK(k == Im2colKernel::One || (k == Im2colKernel::Four && fits != Im2colKernel::One) ||
                 k == fits,
             "im2col_batch: kernel %s does not fit this geometry and these pointers (%s does)",
             kernel_name(k), kernel_name(fits));
  const FastDiv dp(static_cast<uint32_t>(g.col_cols())), dow(static_cast<uint32_t>(g.ow));
  const int t = tpb(e, 128);
  if (k == Im2colKernel::K4S2) {
    const int64_t bx = (np / 4 + t - 1) / t;
    const dim3 grid(static_cast<unsigned>(bx < 65535 ? bx : 65535),
                    static_cast<unsigned>(g.c < 65535 ? g.c : 65535));
    im2col_k4s2<<<grid, t, 0, stream_of(e)>>>(geom32(g, n), static_cast<int>(np), dp, dow, x, cols);
  } else if (k == Im2colKernel::Four) {
    im2col_k4<<<grid2d(np / 4, g.col_rows(), t), t, 0, stream_of(e)>>>(
        geom32(g, n), static_cast<int>(np), dp, dow, x, cols);
  } else {
    im2col_k<<<grid2d(np, g.col_rows(), t), t, 0, stream_of(e)>>>(
        geom32(g, n), static_cast<int>(np), dp, dow, x, cols);
  }
  PDNN_CUDA_LAUNCH_CHECK("im2col_batch");
}

}  // namespace

Im2colKernel im2col_kernel_for(const ConvGeom& g, int64_t n, const void* x, const void* cols,
                               size_t elem_bytes) {
  if (n * g.col_cols() % 4 != 0) return Im2colKernel::One;
  if (g.kh == 4 && g.kw == 4 && g.sh == 2 && g.sw == 2 && g.pw == 1 && g.w % 4 == 0 &&
      g.ow % 4 == 0 && aligned(x, 4 * elem_bytes) && aligned(cols, 4 * elem_bytes))
    return Im2colKernel::K4S2;
  return Im2colKernel::Four;
}

void im2col_batch(const ConvGeom& g, int64_t n, const float* x, float* cols, CudaExec e,
                  Im2colKernel k) {
  im2col_launch(g, n, x, cols, e, k);
}
void im2col_batch(const ConvGeom& g, int64_t n, const bf16* x, bf16* cols, CudaExec e,
                  Im2colKernel k) {
  im2col_launch(g, n, x, cols, e, k);
}
void im2col_batch(const ConvGeom& g, int64_t n, const float* x, float* cols, CudaExec e) {
  im2col_launch(g, n, x, cols, e, Im2colKernel::Any);
}
void im2col_batch(const ConvGeom& g, int64_t n, const bf16* x, bf16* cols, CudaExec e) {
  im2col_launch(g, n, x, cols, e, Im2colKernel::Any);
}

namespace {
template <class E>
void col2im_launch(const ConvGeom& g, int64_t n, const float* cols, E* x, CudaExec e) {
  const int64_t total = n * g.image_size(), np = n * g.col_cols();
  if (total <= 0) return;
  const Geom32 g32 = geom32(g, n);
  const FastDiv dw(static_cast<uint32_t>(g.w)), dh(static_cast<uint32_t>(g.h)),
      dc(static_cast<uint32_t>(g.c));
  if (g.sh == 1 && g.sw == 1)
    col2im_k<true><<<blocks_for(total, tpb(e, 128)), tpb(e, 128), 0, stream_of(e)>>>(
        g32, static_cast<int>(total), static_cast<int>(np), dw, dh, dc, cols, x);
  else
    col2im_k<false><<<blocks_for(total, tpb(e, 128)), tpb(e, 128), 0, stream_of(e)>>>(
        g32, static_cast<int>(total), static_cast<int>(np), dw, dh, dc, cols, x);
  PDNN_CUDA_LAUNCH_CHECK("col2im_batch");
}
}  // namespace

void col2im_batch(const ConvGeom& g, int64_t n, const float* cols, float* x, CudaExec e) {
  col2im_launch(g, n, cols, x, e);
}
void col2im_batch(const ConvGeom& g, int64_t n, const float* cols, bf16* x, CudaExec e) {
  col2im_launch(g, n, cols, x, e);
}

void nchw_to_cnhw(int64_t n, int64_t c, int64_t p, const float* x, float* y, CudaExec e) {
  if (n * c * p <= 0) return;
  to_cnp<<<grid2d(p, n * c, tpb(e)), tpb(e), 0, stream_of(e)>>>(static_cast<int>(n), static_cast<int>(c),
                                                          static_cast<int>(p), x, y);
  PDNN_CUDA_LAUNCH_CHECK("nchw_to_cnhw");
}

void cnhw_to_nchw(int64_t n, int64_t c, int64_t p, const float* x, float* y, CudaExec e) {
  if (n * c * p <= 0) return;
  to_ncp<<<grid2d(p, n * c, tpb(e)), tpb(e), 0, stream_of(e)>>>(static_cast<int>(n), static_cast<int>(c),
                                                          static_cast<int>(p), x, y);
  PDNN_CUDA_LAUNCH_CHECK("cnhw_to_nchw");
}

}  // namespace cuda
}  // namespace pdnn
