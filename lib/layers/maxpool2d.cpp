// MaxPool2d: shape logic and CPU kernels (see maxpool2d.h).
#include "layers/maxpool2d.h"

#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/parallel.h"

namespace pdnn {

namespace cpu {

void maxpool2d_forward(const Pool2d& g, const float* x, float* y, int32_t* argmax) {
  const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
  // Planes are independent: parallel over N*C, each plane's outputs in order (deterministic).
#pragma omp parallel for if(PDNN_PAR(g.planes * in_plane)) schedule(static)
  for (int64_t p = 0; p < g.planes; ++p) {
    const float* xp = x + p * in_plane;
    float* yp = y + p * out_plane;
    int32_t* ap = argmax + p * out_plane;
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        const int64_t start = oy * g.s * g.w + ox * g.s;
        float best = -std::numeric_limits<float>::infinity();
        int64_t best_i = start;
        for (int64_t ky = 0; ky < g.k; ++ky) {
          const int64_t row = start + ky * g.w;
          for (int64_t kx = 0; kx < g.k; ++kx) {
            const float v = xp[row + kx];
            // Strict '>' keeps the first maximum; 'v != v' lets a NaN win, as in PyTorch.
            if (v > best || v != v) {
              best = v;
              best_i = row + kx;
            }
          }
        }
        yp[oy * g.ow + ox] = best;
        ap[oy * g.ow + ox] = static_cast<int32_t>(best_i);
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
  PDNN_CHECK(in.h() >= k_ && in.w() >= k_, "MaxPool2d(k%d s%d): input %s is smaller than the kernel",
             k_, s_, in.str().c_str());
  // The argmax is an int32 index within one plane.
  PDNN_CHECK(in.h() * in.w() <= std::numeric_limits<int32_t>::max(),
             "MaxPool2d: input plane of %s too large for int32 indices", in.str().c_str());
  return Pool2d{in.n() * in.c(), in.h(), in.w(), (in.h() - k_) / s_ + 1, (in.w() - k_) / s_ + 1,
                k_, s_};
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
