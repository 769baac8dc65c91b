// The soft Dice loss's totals and its gradient at one pixel, one definition for the CPU
// (loss.cpp) and GPU (loss.cu) kernels. With T_c = P_c + G_c + s (ops/loss.h's sums and the
// smoothing s) and L = 1 - (1/K) sum_c (2 I_c + s) / T_c:
//   dL/dp_c(x) = (1/K) (2 I_c + s) / T_c^2 - (2/K) [label(x) = c] / T_c,
// and through the softmax dL/dz_j = p_j (dL/dp_j - sum_c p_c dL/dp_c). In double (the sums are
// over up to millions of pixels).
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define PDNN_DICE_HD __host__ __device__ __forceinline__
#else
#define PDNN_DICE_HD inline
#endif

namespace pdnn {

// stats: I (k), P (k), G (k), as ops::dice_forward leaves them.
PDNN_DICE_HD double dice_dp(int64_t k, float smooth, const double* stats, int64_t c,
                            bool is_label) {
  const double t = stats[k + c] + stats[2 * k + c] + static_cast<double>(smooth);
  const double kk = static_cast<double>(k);
  const double r = (2.0 * stats[c] + static_cast<double>(smooth)) / (t * t * kk);
  return is_label ? r - 2.0 / (t * kk) : r;
}

// stats = the per-chunk sums (chunks, k, 3) added over the chunks in order, then the loss
// (also into *loss, as float).
PDNN_DICE_HD void dice_totals(int64_t chunks, int64_t k, float smooth, const double* parts,
                              double* stats, float* loss) {
  double mean = 0;
  for (int64_t cls = 0; cls < k; ++cls) {
    double sums[3] = {0, 0, 0};
    for (int64_t c = 0; c < chunks; ++c)
      for (int q = 0; q < 3; ++q) sums[q] += parts[(c * k + cls) * 3 + q];
    for (int q = 0; q < 3; ++q) stats[q * k + cls] = sums[q];
    mean += (2 * sums[0] + smooth) / (sums[1] + sums[2] + smooth);
  }
  stats[3 * k] = 1.0 - mean / static_cast<double>(k);
  *loss = static_cast<float>(stats[3 * k]);
}

// dz (=, or += when add) = scale * dL/dz at one pixel: its k probabilities p and gradients dz
// `plane` apart, its label.
PDNN_DICE_HD void dice_pixel_backward(int64_t k, int64_t plane, float smooth, float scale,
                                      const float* p, int32_t label, const double* stats,
                                      float* dz, bool add) {
  double dot = 0;
  for (int64_t c = 0; c < k; ++c) dot += p[c * plane] * dice_dp(k, smooth, stats, c, label == c);
  for (int64_t j = 0; j < k; ++j) {
    const double g = scale * p[j * plane] * (dice_dp(k, smooth, stats, j, label == j) - dot);
    float& d = dz[j * plane];
    d = add ? d + static_cast<float>(g) : static_cast<float>(g);
  }
}

}  // namespace pdnn
