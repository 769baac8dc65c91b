// Binary cross-entropy on probabilities and on logits: checks, dispatch and CPU kernels.
#include "losses/binary_cross_entropy.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/parallel.h"

namespace pdnn {

namespace {

int64_t num_chunks(int64_t n) { return (n + cpu::kLossChunk - 1) / cpu::kLossChunk; }

// Checks shapes, device and value ranges; copies x and t into the loss's own buffers.
void keep_inputs(const char* op, const Tensor& x, const Tensor& t, bool x_is_prob, Tensor& x_keep,
                 Tensor& t_keep, Tensor& parts) {
  check_same_shape(op, x.shape(), t.shape());
  PDNN_CHECK(x.device() == Device::CPU && t.device() == Device::CPU,
             "%s: tensors on %s and %s, only the CPU kernel exists", op, device_name(x.device()),
             device_name(t.device()));
  PDNN_CHECK(x.numel() > 0, "%s: empty input %s", op, x.shape().str().c_str());
  const int64_t n = x.numel();
  const float* xs = x.data();
  const float* ts = t.data();
  for (int64_t i = 0; i < n; ++i) {
    // Written so that NaN fails too.
    PDNN_CHECK(ts[i] >= 0.f && ts[i] <= 1.f, "%s: target %g at %lld is outside [0,1]", op,
               static_cast<double>(ts[i]), static_cast<long long>(i));
    PDNN_CHECK(!x_is_prob || (xs[i] >= 0.f && xs[i] <= 1.f),
               "%s: input %g at %lld is not a probability in [0,1] (use the logits form?)", op,
               static_cast<double>(xs[i]), static_cast<long long>(i));
  }
  x_keep.resize(x.shape());
  t_keep.resize(t.shape());
  std::copy(xs, xs + n, x_keep.data());
  std::copy(ts, ts + n, t_keep.data());
  parts.resize(Shape{num_chunks(n)});
}

float mean_of_parts(const Tensor& parts, int64_t n) {
  double s = 0.0;
  for (int64_t c = 0; c < parts.numel(); ++c) s += parts[c];
  return static_cast<float>(s / static_cast<double>(n));
}

// Sums f(i) over each chunk in double; chunks in parallel, each summed in index order.
template <typename F>
void chunk_sums(float* parts, int64_t n, F f) {
  const int64_t chunks = num_chunks(n);
#pragma omp parallel for if(PDNN_PAR(n))
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t end = std::min(n, (c + 1) * cpu::kLossChunk);
    double s = 0.0;
    for (int64_t i = c * cpu::kLossChunk; i < end; ++i) s += f(i);
    parts[c] = static_cast<float>(s);
  }
}

}  // namespace

namespace cpu {

void binary_cross_entropy_forward(float* parts, const float* p, const float* t, int64_t n) {
  chunk_sums(parts, n, [=](int64_t i) {
    const double lp = std::max(std::log(static_cast<double>(p[i])), -100.0);
    const double lq = std::max(std::log1p(-static_cast<double>(p[i])), -100.0);
    return -(t[i] * lp + (1.0 - t[i]) * lq);
  });
}

void binary_cross_entropy_backward(float* dp, const float* p, const float* t, int64_t n,
                                   float scale) {
  // ATen's guard: the denominator never drops below 1e-12, so p = 0 or 1 gives a large but
  // finite gradient.
  constexpr float kEps = 1e-12f;
#pragma omp parallel for if(PDNN_PAR(n))
  for (int64_t i = 0; i < n; ++i)
    dp[i] = scale * (p[i] - t[i]) / std::max((1.f - p[i]) * p[i], kEps);
}

void binary_cross_entropy_with_logits_forward(float* parts, const float* z, const float* t,
                                              int64_t n) {
  chunk_sums(parts, n, [=](int64_t i) {
    const double zi = z[i];
    return std::max(zi, 0.0) - zi * t[i] + std::log1p(std::exp(-std::fabs(zi)));
  });
}

void binary_cross_entropy_with_logits_backward(float* dz, const float* z, const float* t, int64_t n,
                                               float scale) {
#pragma omp parallel for if(PDNN_PAR(n))
  for (int64_t i = 0; i < n; ++i) {
    // sigmoid without overflow: exp of a non-positive number only.
    const float e = std::exp(-std::fabs(z[i]));
    const float s = z[i] >= 0.f ? 1.f / (1.f + e) : e / (1.f + e);
    dz[i] = scale * (s - t[i]);
  }
}

}  // namespace cpu

float BinaryCrossEntropy::forward(Context& ctx, const Tensor& p, const Tensor& t) {
  (void)ctx;
  keep_inputs("binary_cross_entropy", p, t, true, p_, t_, parts_);
  cpu::binary_cross_entropy_forward(parts_.data(), p_.data(), t_.data(), p_.numel());
  return mean_of_parts(parts_, p_.numel());
}

void BinaryCrossEntropy::backward(Context& ctx, Tensor& dp) {
  (void)ctx;
  PDNN_CHECK(!p_.empty(), "binary_cross_entropy: backward before forward");
  dp.resize(p_.shape());
  cpu::binary_cross_entropy_backward(dp.data(), p_.data(), t_.data(), p_.numel(),
                                     static_cast<float>(1.0 / static_cast<double>(p_.numel())));
}

float BinaryCrossEntropyWithLogits::forward(Context& ctx, const Tensor& z, const Tensor& t) {
  (void)ctx;
  keep_inputs("binary_cross_entropy_with_logits", z, t, false, z_, t_, parts_);
  cpu::binary_cross_entropy_with_logits_forward(parts_.data(), z_.data(), t_.data(), z_.numel());
  return mean_of_parts(parts_, z_.numel());
}

void BinaryCrossEntropyWithLogits::backward(Context& ctx, Tensor& dz) {
  (void)ctx;
  PDNN_CHECK(!z_.empty(), "binary_cross_entropy_with_logits: backward before forward");
  dz.resize(z_.shape());
  cpu::binary_cross_entropy_with_logits_backward(
      dz.data(), z_.data(), t_.data(), z_.numel(),
      static_cast<float>(1.0 / static_cast<double>(z_.numel())));
}

}  // namespace pdnn
