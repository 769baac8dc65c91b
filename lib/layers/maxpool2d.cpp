// MaxPool2d: shape logic and CPU kernels (see maxpool2d.h).
#include "layers/maxpool2d.h"

#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/parallel.h"

namespace pdnn {

namespace cpu {

namespace {

// The common 2x2 stride-2 window (every pool in W2..W4): the four candidates of an output are
// two adjacent pairs of two rows, compared in row-major order with selects, not branches.
void maxpool2x2_plane(const Pool2d& g, const float* __restrict xp, float* __restrict yp,
                      int32_t* __restrict ap) {
  const int32_t w = static_cast<int32_t>(g.w), ow = static_cast<int32_t>(g.ow);
  for (int32_t oy = 0; oy < static_cast<int32_t>(g.oh); ++oy) {
    const int32_t r0 = 2 * oy * w, r1 = r0 + w;
    const float* __restrict x0 = xp + r0;
    const float* __restrict x1 = xp + r1;
    float* __restrict yr = yp + oy * ow;
    int32_t* __restrict ar = ap + oy * ow;
    for (int32_t ox = 0; ox < ow; ++ox) {
      const float a = x0[2 * ox], b = x0[2 * ox + 1], c = x1[2 * ox], d = x1[2 * ox + 1];
      float best = a;
      int32_t bi = r0 + 2 * ox;
      // Strict '>' keeps the first maximum; 'v != v' lets a NaN win, as in PyTorch ('|', not
      // '||': no branch).
      bool t = (b > best) | (b != b);
      best = t ? b : best;
      bi = t ? r0 + 2 * ox + 1 : bi;
      t = (c > best) | (c != c);
      best = t ? c : best;
      bi = t ? r1 + 2 * ox : bi;
      t = (d > best) | (d != d);
      best = t ? d : best;
      bi = t ? r1 + 2 * ox + 1 : bi;
      yr[ox] = best;
      ar[ox] = bi;
    }
  }
}

}  // namespace

void maxpool2d_forward(const Pool2d& g, const float* x, float* y, int32_t* argmax) {
  const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
  const int32_t s = static_cast<int32_t>(g.s);
  // Planes are independent: parallel over N*C, each plane's outputs in order (deterministic).
#pragma omp parallel for if(PDNN_PAR(g.planes * in_plane)) schedule(static)
  for (int64_t p = 0; p < g.planes; ++p) {
    const float* __restrict xp = x + p * in_plane;
    if (g.k == 2 && g.s == 2) {
      maxpool2x2_plane(g, xp, y + p * out_plane, argmax + p * out_plane);
      continue;
    }
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      // One output row at a time, window offsets (ky, kx) outermost and outputs innermost: the
      // comparisons become branch-free selects over a row (a compare-and-branch per element
      // mispredicts half the time on real data and cost ~4 ns per input). Each output still
      // sees its window in row-major order, so the first maximum wins.
      float* __restrict yr = y + p * out_plane + oy * g.ow;
      int32_t* __restrict ar = argmax + p * out_plane + oy * g.ow;
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        yr[ox] = -std::numeric_limits<float>::infinity();
        ar[ox] = static_cast<int32_t>(oy * g.s * g.w + ox * g.s);
      }
      for (int64_t ky = 0; ky < g.k; ++ky) {
        const int32_t row = static_cast<int32_t>((oy * g.s + ky) * g.w);
        for (int64_t kx = 0; kx < g.k; ++kx) {
          const float* __restrict xr = xp + row + kx;
          const int32_t first = row + static_cast<int32_t>(kx);
          for (int32_t ox = 0; ox < static_cast<int32_t>(g.ow); ++ox) {
            const float v = xr[ox * s];
            // Strict '>' keeps the first maximum; 'v != v' lets a NaN win, as in PyTorch ('|', not
            // '||': no branch).
            const bool take = (v > yr[ox]) | (v != v);
            yr[ox] = take ? v : yr[ox];
            ar[ox] = take ? first + ox * s : ar[ox];
          }
        }
      }
    }
  }
}

void maxpool2d_backward(const Pool2d& g, const float* dy, const int32_t* argmax, float* dx) {
  const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
#pragma omp parallel for if(PDNN_PAR(g.planes * in_plane)) schedule(static)
  for (int64_t p = 0; p < g.planes; ++p) {
    float* dxp = dx + p * in_plane;
    const float* dyp = dy + p * out_plane;
    const int32_t* ap = argmax + p * out_plane;
    std::memset(dxp, 0, static_cast<size_t>(in_plane) * sizeof(float));
    for (int64_t o = 0; o < out_plane; ++o) dxp[ap[o]] += dyp[o];
  }
}

}  // namespace cpu

MaxPool2d::MaxPool2d(int kernel, int stride) : k_(kernel), s_(stride > 0 ? stride : kernel) {
  PDNN_CHECK(kernel >= 1, "MaxPool2d: kernel %d must be >= 1", kernel);
}

std::string MaxPool2d::describe() const { return strprintf("MaxPool2d(k%d s%d)", k_, s_); }

Pool2d MaxPool2d::geometry(const Shape& in) const {
  PDNN_CHECK(in.rank() == 4, "MaxPool2d: input %s must be NCHW (rank 4)", in.str().c_str());
  PDNN_CHECK(in.h() >= k_ && in.w() >= k_,
             "MaxPool2d(k%d s%d): input %s is smaller than the kernel", k_, s_, in.str().c_str());
  // The argmax is an int32 index within one plane.
  PDNN_CHECK(in.h() * in.w() <= std::numeric_limits<int32_t>::max(),
             "MaxPool2d: input plane of %s too large for int32 indices", in.str().c_str());
  return Pool2d{in.n() * in.c(),        in.h(), in.w(), (in.h() - k_) / s_ + 1,
                (in.w() - k_) / s_ + 1, k_,     s_};
}

Shape MaxPool2d::output_shape(const Shape& in) const {
  const Pool2d g = geometry(in);
  return Shape{in.n(), in.c(), g.oh, g.ow};
}

double MaxPool2d::flops(const Shape& in) const {
  const Pool2d g = geometry(in);
  return static_cast<double>(g.planes * g.oh * g.ow * g.k * g.k);
}

void MaxPool2d::forward(Context& ctx, const Tensor& x, Tensor& y) {
  (void)ctx;
  const Pool2d g = geometry(x.shape());
  check_same_shape("MaxPool2d forward: y vs expected", y.shape(), output_shape(x.shape()));
  const size_t n_out = static_cast<size_t>(y.numel());
  if (argmax_.size() < n_out) argmax_.resize(n_out);
  cpu::maxpool2d_forward(g, x.data(), y.data(), argmax_.data());
  last_ = x.shape();
}

void MaxPool2d::backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                         Tensor* dx) {
  (void)ctx;
  if (!dx) return;
  check_same_shape("MaxPool2d backward: x vs last forward's input", x.shape(), last_);
  check_same_shape("MaxPool2d backward: dy vs y", dy.shape(), y.shape());
  check_same_shape("MaxPool2d backward: dx vs x", dx->shape(), x.shape());
  cpu::maxpool2d_backward(geometry(x.shape()), dy.data(), argmax_.data(), dx->data());
}

}  // namespace pdnn
