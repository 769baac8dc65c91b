// What the 3x3 stride-1 kernels (conv2d_winograd.h, conv2d_direct.h) share: the geometry
// they handle, its check, and how they split work over threads.
#pragma once
#include <algorithm>
#include <cstdint>

#include "ops/conv/im2col.h"

namespace pdnn {

// True for a 3x3 kernel, stride 1, equal padding 0..2 (backward data runs the forward kernel
// with padding 2 - p).
bool conv3x3_applies(const ConvGeom& g);

// Throws pdnn::Error naming `kernel` and g's kernel, stride and padding unless conv3x3_applies.
void conv3x3_check(const ConvGeom& g, const char* kernel);

namespace conv3x3 {

inline int64_t round_up(int64_t a, int64_t m) { return (a + m - 1) / m * m; }

// Threads worth starting for `items` independent items.
inline int threads_for(int threads, int64_t items) {
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, items)));
}

// Items [lo, hi) of part t of nt: contiguous static chunks.
inline void chunk(int64_t n, int64_t t, int64_t nt, int64_t* lo, int64_t* hi) {
  *lo = n * t / nt;
  *hi = n * (t + 1) / nt;
}

// Weight gradients sum their items in this many fixed groups (fewer if there are fewer items),
// each into its own partial sums, added in group order at the end: the same sums in the same
// order at any thread count, so dW is bit-identical at 1, 2, ... 16 threads. With one partial
// per thread instead, Winograd's dW differed by up to 5e-5 relative between 1 and 2 threads
// (its rounding is ~100x a direct sum's), which four Adam steps of test_determinism's net
// turned into 1e-5 differences in the weights.
constexpr int64_t kWgradGroups = 16;
inline int64_t wgrad_groups(int64_t items) { return std::min(items, kWgradGroups); }

}  // namespace conv3x3
}  // namespace pdnn
