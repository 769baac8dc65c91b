// Convolution through im2col + GEMM, per image in parallel or as one batched GEMM
// (see conv_gemm.h).
#include "ops/conv_gemm.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/parallel.h"
#include "ops/gemm.h"

namespace pdnn {

namespace {

// 16 floats = one 64-byte line, so per-thread slots never share a cache line.
inline int64_t round_line(int64_t n) { return (n + 15) / 16 * 16; }

// Per-thread slot of the per-image path: columns, then partial dW, then partial db.
inline int64_t slot_floats(const ConvGeom& g, int64_t k) {
  return round_line(g.col_size()) + round_line(k * g.col_rows()) + round_line(k);
}

inline int threads_for(int threads, int64_t n) {
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, n)));
}

// Images [lo, hi) of thread t of nt: contiguous static chunks, so each thread's partial sums
// cover a fixed set of images in a fixed order (bit-identical runs at a given thread count).
inline void chunk(int64_t n, int t, int nt, int64_t* lo, int64_t* hi) {
  *lo = n * t / nt;
  *hi = n * (t + 1) / nt;
}

// Multiply-adds of a convolution GEMM over the batch: the work that decides whether a
// parallel region pays for its fork/join.
inline int64_t macs(const ConvGeom& g, int64_t n, int64_t k) { return n * k * g.col_size(); }

// One image's bias, serial (called inside the per-image parallel regions).
void bias_add_image(int64_t k, int64_t p, const float* b, float* y) {
  for (int64_t c = 0; c < k; ++c) {
    float* r = y + c * p;
    const float bc = b[c];
    for (int64_t q = 0; q < p; ++q) r[q] += bc;
  }
}

void bias_sum_image(int64_t k, int64_t p, const float* dy, float* db) {
  for (int64_t c = 0; c < k; ++c) {
    const float* r = dy + c * p;
    float s = 0.f;
    for (int64_t q = 0; q < p; ++q) s += r[q];
    db[c] += s;
  }
}

}  // namespace

const char* conv_algo_name(ConvAlgo a) {
  switch (a) {
    case ConvAlgo::Auto: return "auto";
    case ConvAlgo::PerImage: return "per-image";
    case ConvAlgo::Batched: return "batched";
  }
  return "?";
}

ConvAlgo conv_algo_for(const ConvGeom& g, int64_t n, int64_t k, int threads) {
  (void)g;
  (void)n;
  (void)k;
  (void)threads;
  return ConvAlgo::PerImage;
}

size_t conv_workspace_floats(const ConvGeom& g, int64_t n, int64_t k, ConvAlgo algo,
                             int threads) {
  if (algo == ConvAlgo::Auto) algo = conv_algo_for(g, n, k, threads);
  if (algo == ConvAlgo::Batched)
    return static_cast<size_t>(round_line(g.col_rows() * n * g.col_cols()) +
                               k * n * g.col_cols());
  return static_cast<size_t>(threads_for(threads, n) * slot_floats(g, k));
}

namespace cpu {

void bias_add(int64_t n, int64_t k, int64_t p, const float* b, float* y) {
#pragma omp parallel for schedule(static) if (PDNN_PAR(n * k * p))
  for (int64_t i = 0; i < n; ++i) bias_add_image(k, p, b, y + i * k * p);
}

void bias_backward(int64_t n, int64_t k, int64_t p, const float* dy, float* db) {
#pragma omp parallel for schedule(static) if (PDNN_PAR(n * k * p))
  for (int64_t c = 0; c < k; ++c) {
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const float* r = dy + (i * k + c) * p;
      float si = 0.f;
      for (int64_t q = 0; q < p; ++q) si += r[q];
      s += si;
    }
    db[c] += static_cast<float>(s);
  }
}

namespace {

void forward_per_image(const ConvGeom& g, int64_t n, int64_t k, const float* x, const float* w,
                       const float* b, float* y, int threads, float* ws) {
  const int64_t rows = g.col_rows(), p = g.col_cols(), slot = slot_floats(g, k);
  const int nt_req = threads_for(threads, n);
#pragma omp parallel num_threads(nt_req) if (nt_req > 1 && PDNN_PAR(macs(g, n, k)))
  {
    const int t = omp_get_thread_num();
    int64_t lo, hi;
    chunk(n, t, omp_get_num_threads(), &lo, &hi);
    float* cols = ws + t * slot;
    for (int64_t i = lo; i < hi; ++i) {
      float* yi = y + i * k * p;
      im2col(g, x + i * g.image_size(), cols);
      gemm(false, false, k, p, rows, 1.f, w, cols, 0.f, yi);
      if (b) bias_add_image(k, p, b, yi);
    }
  }
}

void backward_per_image(const ConvGeom& g, int64_t n, int64_t k, const float* x,
                        const float* w, const float* dy, float* dw, float* db, float* dx,
                        int threads, float* ws) {
  const int64_t rows = g.col_rows(), p = g.col_cols(), slot = slot_floats(g, k);
  const int64_t dw_off = round_line(g.col_size()), db_off = dw_off + round_line(k * rows);
  const int nt_req = threads_for(threads, n);
  int nt_used = 1;
#pragma omp parallel num_threads(nt_req) if (nt_req > 1 && PDNN_PAR(macs(g, n, k)))
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    if (t == 0) nt_used = nt;
    int64_t lo, hi;
    chunk(n, t, nt, &lo, &hi);
    float* cols = ws + t * slot;
    float* pdw = cols + dw_off;
    float* pdb = cols + db_off;
    if (dw) std::memset(pdw, 0, sizeof(float) * k * rows);
    if (db) std::memset(pdb, 0, sizeof(float) * k);
    for (int64_t i = lo; i < hi; ++i) {
      const float* dyi = dy + i * k * p;
      if (dw) {
        im2col(g, x + i * g.image_size(), cols);
        gemm(false, true, k, rows, p, 1.f, dyi, cols, 1.f, pdw);
      }
      if (db) bias_sum_image(k, p, dyi, pdb);
      if (dx) {
        gemm(true, false, rows, p, k, 1.f, w, dyi, 0.f, cols);
        col2im(g, cols, dx + i * g.image_size());
      }
    }
  }
  // Partials summed in thread order: the same order on every run at this thread count.
  for (int t = 0; t < nt_used; ++t) {
    const float* pdw = ws + t * slot + dw_off;
    const float* pdb = ws + t * slot + db_off;
    if (dw)
      for (int64_t j = 0; j < k * rows; ++j) dw[j] += pdw[j];
    if (db)
      for (int64_t j = 0; j < k; ++j) db[j] += pdb[j];
  }
}

// Columns of all images side by side: cols (rows, n*p), image i at column offset i*p.
void im2col_batch(const ConvGeom& g, int64_t n, const float* x, float* cols) {
  const int64_t p = g.col_cols();
#pragma omp parallel for schedule(static) if (PDNN_PAR(n * g.col_size()))
  for (int64_t i = 0; i < n; ++i) im2col(g, x + i * g.image_size(), cols + i * p, n * p);
}

void forward_batched(const ConvGeom& g, int64_t n, int64_t k, const float* x, const float* w,
                     const float* b, float* y, float* ws) {
  const int64_t rows = g.col_rows(), p = g.col_cols();
  float* cols = ws;
  float* tmp = ws + round_line(rows * n * p);  // y as (k, n*p)
  im2col_batch(g, n, x, cols);
  gemm(false, false, k, n * p, rows, 1.f, w, cols, 0.f, tmp);
  cnhw_to_nchw(n, k, p, tmp, y);
  if (b) bias_add(n, k, p, b, y);
}

void backward_batched(const ConvGeom& g, int64_t n, int64_t k, const float* x, const float* w,
                      const float* dy, float* dw, float* db, float* dx, float* ws) {
  const int64_t rows = g.col_rows(), p = g.col_cols();
  float* cols = ws;
  float* dyt = ws + round_line(rows * n * p);  // dy as (k, n*p)
  if (db) bias_backward(n, k, p, dy, db);
  if (!dw && !dx) return;
  nchw_to_cnhw(n, k, p, dy, dyt);
  if (dw) {
    im2col_batch(g, n, x, cols);
    gemm(false, true, k, rows, n * p, 1.f, dyt, cols, 1.f, dw);
  }
  if (dx) {
    gemm(true, false, rows, n * p, k, 1.f, w, dyt, 0.f, cols);
#pragma omp parallel for schedule(static) if (PDNN_PAR(n * g.col_size()))
    for (int64_t i = 0; i < n; ++i) col2im(g, cols + i * p, dx + i * g.image_size(), n * p);
  }
}

}  // namespace

void conv2d_forward(const ConvGeom& g, int64_t n, int64_t k, const float* x, const float* w,
                    const float* b, float* y, ConvAlgo algo, int threads, float* ws) {
  if (algo == ConvAlgo::Auto) algo = conv_algo_for(g, n, k, threads);
  if (algo == ConvAlgo::Batched)
    forward_batched(g, n, k, x, w, b, y, ws);
  else
    forward_per_image(g, n, k, x, w, b, y, threads, ws);
}

void conv2d_backward(const ConvGeom& g, int64_t n, int64_t k, const float* x, const float* w,
                     const float* dy, float* dw, float* db, float* dx, ConvAlgo algo,
                     int threads, float* ws) {
  if (algo == ConvAlgo::Auto) algo = conv_algo_for(g, n, k, threads);
  if (algo == ConvAlgo::Batched)
    backward_batched(g, n, k, x, w, dy, dw, db, dx, ws);
  else
    backward_per_image(g, n, k, x, w, dy, dw, db, dx, threads, ws);
}

}  // namespace cpu
}  // namespace pdnn
