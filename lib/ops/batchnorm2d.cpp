// BatchNorm (+ fused activation): CPU kernels and dispatch (see batchnorm2d.h).
#include "ops/batchnorm2d.h"

#include <cmath>

#include "core/parallel.h"
#include "ops/dispatch.h"

namespace pdnn {

namespace cpu {

namespace {

// Per-channel batch statistics of x (n,c,hw), accumulated in double: mean, biased var. One
// channel per iteration, its sums in a fixed order: deterministic at any thread count. Two
// passes (mean, then squared deviations) avoid the cancellation of E[x^2] - E[x]^2. 'omp simd'
// sums in vector lanes: a fixed order for a given build, at any thread count.
void stats(const BnGeom& g, const float* x, float* mean, float* var, CpuExec e) {
  const int64_t n = g.n, c = g.c, hw = g.hw;
  const double m = static_cast<double>(n * hw);
  parallel_for(e, c, PDNN_PAR(n * c * hw), [=](int64_t ch) PDNN_INLINE {
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const float* p = x + (i * c + ch) * hw;
#pragma omp simd reduction(+ : s)
      for (int64_t j = 0; j < hw; ++j) s += p[j];
    }
    const double mu = s / m;
    double ss = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const float* p = x + (i * c + ch) * hw;
#pragma omp simd reduction(+ : ss)
      for (int64_t j = 0; j < hw; ++j) {
        const double d = p[j] - mu;
        ss += d * d;
      }
    }
    mean[ch] = static_cast<float>(mu);
    var[ch] = static_cast<float>(ss / m);
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
  parallel_for(e, c, PDNN_PAR(n * c * hw), [=](int64_t ch) PDNN_INLINE {
    const double mu = mean[ch], is = invstd[ch];
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const float* xp = x + (i * c + ch) * hw;
      const float* dyp = dy + (i * c + ch) * hw;
      const float* yp = y + (i * c + ch) * hw;
#pragma omp simd reduction(+ : sum_dy, sum_dy_xhat)
      for (int64_t j = 0; j < hw; ++j) {
        const float gj = yp[j] > 0.f ? dyp[j] : lo * dyp[j];
        sum_dy += gj;
        sum_dy_xhat += gj * ((xp[j] - mu) * is);
      }
    }
    if (dgamma) dgamma[ch] += static_cast<float>(sum_dy_xhat);
    if (dbeta) dbeta[ch] += static_cast<float>(sum_dy);
    if (!dx) return;
    const float gs = static_cast<float>((gamma ? gamma[ch] : 1.f) * is);
    // dx = gs * (g - a - xhat * b); in eval mode the statistics are constants, so a = b = 0.
    const float a = batch_stats ? static_cast<float>(sum_dy / m) : 0.f;
    const float b = batch_stats ? static_cast<float>(sum_dy_xhat / m) : 0.f;
    const float muf = mean[ch], isf = invstd[ch];
    for (int64_t i = 0; i < n; ++i) {
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
  PDNN_DISPATCH(ctx, d, batchnorm2d_forward_train, g, x.data(), opt(gamma), opt(beta),
                running_mean.data(), running_var.data(), mean.data(), invstd.data(), y.data());
}

void batchnorm2d_forward_eval(Context& ctx, const BnGeom& g, const Tensor& x, const Tensor& gamma,
                              const Tensor& beta, const Tensor& running_mean,
                              const Tensor& running_var, Tensor& mean, Tensor& invstd, Tensor& y) {
  check_geom("batchnorm2d_forward_eval", g, x, y, gamma, beta);
  const Device d = op_device("batchnorm2d_forward_eval",
                             {&x, &y, gamma.empty() ? nullptr : &gamma,
                              beta.empty() ? nullptr : &beta, &running_mean, &running_var, &mean,
                              &invstd});
  PDNN_DISPATCH(ctx, d, batchnorm2d_forward_eval, g, x.data(), opt(gamma), opt(beta),
                running_mean.data(), running_var.data(), mean.data(), invstd.data(), y.data());
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
  PDNN_DISPATCH(ctx, d, batchnorm2d_backward, g, batch_stats, x.data(), y.data(), dy.data(),
                mean.data(), invstd.data(), opt(gamma), opt(dgamma), opt(dbeta),
                dx ? dx->data() : nullptr);
}

}  // namespace ops
}  // namespace pdnn
