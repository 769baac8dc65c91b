// BatchNorm (+ fused activation): CPU kernels and dispatch (see batchnorm2d.h).
#include "ops/batchnorm2d.h"

#include <algorithm>
#include <cmath>

#include "core/parallel.h"
#include "ops/dispatch.h"

namespace pdnn {

namespace cpu {

namespace {

// Channels per block of the per-channel loops: a block's planes of one image lie together in
// memory, at least 1 KB of them, and a block walks the batch image by image. One channel at a
// time (the former order) read 64 bytes of each image at W5's 4x4 layers (hw = 16), every read
// on another page: D.9's backward took 3.5 ms a call, PyTorch's 1.2.
inline int64_t channel_block(int64_t hw) { return std::max<int64_t>(1, 256 / std::max<int64_t>(1, hw)); }

// body(ch0, ch1) over blocks of channels [ch0, ch1), in parallel.
template <typename F>
void for_channel_blocks(const BnGeom& g, CpuExec e, const F& body) {
  const int64_t cb = channel_block(g.hw), blocks = (g.c + cb - 1) / cb;
  parallel_for(e, blocks, PDNN_PAR(g.n * g.c * g.hw), [=](int64_t b) PDNN_INLINE {
    body(b * cb, std::min(g.c, (b + 1) * cb));
  });
}

// Per-channel batch statistics of x (n,c,hw), accumulated in double: mean, biased var. Each
// channel's sums in a fixed order: deterministic at any thread count. Two passes (mean, then
// squared deviations) avoid the cancellation of E[x^2] - E[x]^2. 'omp simd' sums in vector
// lanes: a fixed order for a given build, at any thread count.
void stats(const BnGeom& g, const float* x, float* mean, float* var, CpuExec e) {
  const int64_t n = g.n, c = g.c, hw = g.hw;
  const double m = static_cast<double>(n * hw);
  for_channel_blocks(g, e, [=](int64_t ch0, int64_t ch1) PDNN_INLINE {
    double s[256], ss[256];
    for (int64_t ch = ch0; ch < ch1; ++ch) s[ch - ch0] = ss[ch - ch0] = 0.0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t ch = ch0; ch < ch1; ++ch) {
        const float* p = x + (i * c + ch) * hw;
        double t = 0.0;
#pragma omp simd reduction(+ : t)
        for (int64_t j = 0; j < hw; ++j) t += p[j];
        s[ch - ch0] += t;
      }
    for (int64_t i = 0; i < n; ++i)
      for (int64_t ch = ch0; ch < ch1; ++ch) {
        const float* p = x + (i * c + ch) * hw;
        const double mu = s[ch - ch0] / m;
        double t = 0.0;
#pragma omp simd reduction(+ : t)
        for (int64_t j = 0; j < hw; ++j) {
          const double d = p[j] - mu;
          t += d * d;
        }
        ss[ch - ch0] += t;
      }
    for (int64_t ch = ch0; ch < ch1; ++ch) {
      mean[ch] = static_cast<float>(s[ch - ch0] / m);
      var[ch] = static_cast<float>(ss[ch - ch0] / m);
    }
  });
}

// y = act((x - mean) * invstd * gamma + beta) per channel, over all N*C planes (more parallel
// work than channels alone).
void apply(const BnGeom& g, const float* x, const float* mean, const float* invstd,
           const float* gamma, const float* beta, float* y, CpuExec e) {
  const int64_t n = g.n, c = g.c, hw = g.hw;
  const float lo = g.act == FusedAct::ReLU ? 0.f : g.slope;
  parallel_for(e, n * c, PDNN_PAR(n * c * hw), [=](int64_t p) {
    const int64_t ch = p % c;
    const float scale = invstd[ch] * (gamma ? gamma[ch] : 1.f);
    const float shift = (beta ? beta[ch] : 0.f) - mean[ch] * scale;
    const float* xp = x + p * hw;
    float* yp = y + p * hw;
    if (g.act == FusedAct::None) {
      for (int64_t j = 0; j < hw; ++j) yp[j] = xp[j] * scale + shift;
    } else {
      for (int64_t j = 0; j < hw; ++j) {
        const float z = xp[j] * scale + shift;
        yp[j] = z > 0.f ? z : lo * z;
      }
    }
  });
}

}  // namespace

void batchnorm2d_forward_train(const BnGeom& g, const float* x, const float* gamma,
                               const float* beta, float* running_mean, float* running_var,
                               float* mean, float* invstd, float* y, CpuExec e) {
  float* var = invstd;  // holds the variance until invstd replaces it below
  stats(g, x, mean, var, e);
  const double unbias = static_cast<double>(g.n * g.hw) / static_cast<double>(g.n * g.hw - 1);
  for (int64_t ch = 0; ch < g.c; ++ch) {
    running_mean[ch] = (1.f - g.momentum) * running_mean[ch] + g.momentum * mean[ch];
    running_var[ch] = (1.f - g.momentum) * running_var[ch] +
                      g.momentum * static_cast<float>(var[ch] * unbias);
    invstd[ch] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(var[ch]) + g.eps));
  }
  apply(g, x, mean, invstd, gamma, beta, y, e);
}

void batchnorm2d_forward_eval(const BnGeom& g, const float* x, const float* gamma,
                              const float* beta, const float* running_mean,
                              const float* running_var, float* mean, float* invstd, float* y,
                              CpuExec e) {
  for (int64_t ch = 0; ch < g.c; ++ch) {
    mean[ch] = running_mean[ch];
    invstd[ch] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(running_var[ch]) + g.eps));
  }
  apply(g, x, mean, invstd, gamma, beta, y, e);
}

void batchnorm2d_backward(const BnGeom& g, bool batch_stats, const float* x, const float* y,
                          const float* dy, const float* mean, const float* invstd,
                          const float* gamma, float* dgamma, float* dbeta, float* dx, CpuExec e) {
  const int64_t n = g.n, c = g.c, hw = g.hw;
  const double m = static_cast<double>(n * hw);
  // One loop for every activation, no activation being a LeakyReLU of slope 1 (1 * dy == dy):
  // the unfused model (BatchNorm, then the activation's layer) must give the fused one's
  // numbers bit for bit, and two loops are two chances for the compiler to compile them apart
  // (for x86-64-v3 it kept the fused dx loop scalar, the other vectorised: issue 24).
  const float lo = g.act == FusedAct::ReLU ? 0.f : g.act == FusedAct::LeakyReLU ? g.slope : 1.f;
  for_channel_blocks(g, e, [=](int64_t ch0, int64_t ch1) PDNN_INLINE {
    double sum_dy[256], sum_dy_xhat[256];
    for (int64_t ch = ch0; ch < ch1; ++ch) sum_dy[ch - ch0] = sum_dy_xhat[ch - ch0] = 0.0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t ch = ch0; ch < ch1; ++ch) {
        const double mu = mean[ch], is = invstd[ch];
        const float* xp = x + (i * c + ch) * hw;
        const float* dyp = dy + (i * c + ch) * hw;
        const float* yp = y + (i * c + ch) * hw;
        double a = 0.0, b = 0.0;
#pragma omp simd reduction(+ : a, b)
        for (int64_t j = 0; j < hw; ++j) {
          const float gj = yp[j] > 0.f ? dyp[j] : lo * dyp[j];
          a += gj;
          b += gj * ((xp[j] - mu) * is);
        }
        sum_dy[ch - ch0] += a;
        sum_dy_xhat[ch - ch0] += b;
      }
    for (int64_t ch = ch0; ch < ch1; ++ch) {
      if (dgamma) dgamma[ch] += static_cast<float>(sum_dy_xhat[ch - ch0]);
      if (dbeta) dbeta[ch] += static_cast<float>(sum_dy[ch - ch0]);
    }
    if (!dx) return;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t ch = ch0; ch < ch1; ++ch) {
        const double is = invstd[ch];
        const float gs = static_cast<float>((gamma ? gamma[ch] : 1.f) * is);
        // dx = gs * (g - a - xhat * b); in eval mode the statistics are constants, so a = b = 0.
        const float a = batch_stats ? static_cast<float>(sum_dy[ch - ch0] / m) : 0.f;
        const float b = batch_stats ? static_cast<float>(sum_dy_xhat[ch - ch0] / m) : 0.f;
        const float muf = mean[ch], isf = invstd[ch];
        const float* xp = x + (i * c + ch) * hw;
        const float* dyp = dy + (i * c + ch) * hw;
        const float* yp = y + (i * c + ch) * hw;
        float* dxp = dx + (i * c + ch) * hw;
        for (int64_t j = 0; j < hw; ++j) {
          const float gj = yp[j] > 0.f ? dyp[j] : lo * dyp[j];
          dxp[j] = gs * (gj - a - (xp[j] - muf) * isf * b);
        }
      }
  });
}

}  // namespace cpu

namespace ops {

namespace {
void check_geom(const char* op, const BnGeom& g, const Tensor& x, const Tensor& y,
                const Tensor& gamma, const Tensor& beta) {
  PDNN_CHECK(x.numel() == g.n * g.c * g.hw && y.numel() == x.numel(),
             "%s: x %s / y %s do not hold (%lld,%lld,%lld)", op, x.shape().str().c_str(),
             y.shape().str().c_str(), static_cast<long long>(g.n), static_cast<long long>(g.c),
             static_cast<long long>(g.hw));
  PDNN_CHECK((gamma.empty() || gamma.numel() == g.c) && (beta.empty() || beta.numel() == g.c),
             "%s: gamma/beta must hold %lld values", op, static_cast<long long>(g.c));
}
const float* opt(const Tensor& t) { return t.empty() ? nullptr : t.data(); }
float* opt(Tensor& t) { return t.empty() ? nullptr : t.data(); }
}  // namespace

void batchnorm2d_forward_train(Context& ctx, const BnGeom& g, const Tensor& x, const Tensor& gamma,
                               const Tensor& beta, Tensor& running_mean, Tensor& running_var,
                               Tensor& mean, Tensor& invstd, Tensor& y) {
  check_geom("batchnorm2d_forward_train", g, x, y, gamma, beta);
  PDNN_CHECK(g.n * g.hw > 1, "batchnorm2d: training needs more than one value per channel");
  const Device d = op_device("batchnorm2d_forward_train",
                             {&x, &y, gamma.empty() ? nullptr : &gamma,
                              beta.empty() ? nullptr : &beta, &running_mean, &running_var, &mean,
                              &invstd});
  check_same_dtype("batchnorm2d_forward_train", {&x, &y});
  PDNN_DISPATCH_TYPED(ctx, d, x.dtype(), batchnorm2d_forward_train, g, x.data<E>(), opt(gamma),
                      opt(beta), running_mean.data(), running_var.data(), mean.data(),
                      invstd.data(), y.data<E>());
}

void batchnorm2d_forward_eval(Context& ctx, const BnGeom& g, const Tensor& x, const Tensor& gamma,
                              const Tensor& beta, const Tensor& running_mean,
                              const Tensor& running_var, Tensor& mean, Tensor& invstd, Tensor& y) {
  check_geom("batchnorm2d_forward_eval", g, x, y, gamma, beta);
  const Device d = op_device("batchnorm2d_forward_eval",
                             {&x, &y, gamma.empty() ? nullptr : &gamma,
                              beta.empty() ? nullptr : &beta, &running_mean, &running_var, &mean,
                              &invstd});
  check_same_dtype("batchnorm2d_forward_eval", {&x, &y});
  PDNN_DISPATCH_TYPED(ctx, d, x.dtype(), batchnorm2d_forward_eval, g, x.data<E>(), opt(gamma),
                      opt(beta), running_mean.data(), running_var.data(), mean.data(),
                      invstd.data(), y.data<E>());
}

void batchnorm2d_backward(Context& ctx, const BnGeom& g, bool batch_stats, const Tensor& x,
                          const Tensor& y, const Tensor& dy, const Tensor& mean,
                          const Tensor& invstd, const Tensor& gamma, Tensor& dgamma,
                          Tensor& dbeta, Tensor* dx) {
  check_geom("batchnorm2d_backward", g, x, y, gamma, gamma);
  check_same_shape("batchnorm2d_backward: dy vs x", dy.shape(), x.shape());
  if (dx) check_same_shape("batchnorm2d_backward: dx vs x", dx->shape(), x.shape());
  const Device d = op_device("batchnorm2d_backward",
                             {&x, &y, &dy, &mean, &invstd, gamma.empty() ? nullptr : &gamma,
                              dgamma.empty() ? nullptr : &dgamma, dbeta.empty() ? nullptr : &dbeta,
                              dx});
  check_same_dtype("batchnorm2d_backward", {&x, &y, &dy, dx});
  PDNN_DISPATCH_TYPED(ctx, d, x.dtype(), batchnorm2d_backward, g, batch_stats, x.data<E>(),
                      y.data<E>(), dy.data<E>(), mean.data(), invstd.data(), opt(gamma),
                      opt(dgamma), opt(dbeta), dx ? dx->data<E>() : nullptr);
}

}  // namespace ops
}  // namespace pdnn
