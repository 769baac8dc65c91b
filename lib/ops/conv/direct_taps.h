// The index algebra of the GPU's direct kernels (conv2d_direct.cu) for the taps they run, on the
// host as on the device, so that a CPU test (test_conv_k4s2.cpp) checks it against the double
// reference without a GPU:
//   Plain  the 3x3 kernel's own taps;
//   S2d    a 4x4 stride-2 padding-1 kernel as 2x2 kernels over the input's space-to-depth phases
//          xs[4c + 2pr + pq][u][v] = x[c][2u + pr - 1][2v + pq - 1] (zero outside x): phase
//          channel ci = 4c + 2pr + pq, tap (a, b) is w's (2a + pr, 2b + pq) of channel c;
//   Phase  its backward-data by output phase (pr, pq): dx[c][2u + pr][2v + pq] is the 2x2
//          convolution of dy over rows u - 1 + pr + a, columns v - 1 + pq + b, tap (a, b) being
//          w's (3 - 2a - pr, 3 - 2b - pq).
#pragma once
#include <cstdint>

#include "ops/kit/host_device.h"

namespace pdnn {
namespace direct {

enum class Taps { Plain, S2d, Phase };

// The index in w (k, c, kh, kw) of the weight of output channel ko, input channel ci (the
// pass's: a phase channel with S2d) and tap (row-major in the kernel the pass runs); c: w's
// channels; phase = 2 pr + pq (Phase only).
PDNN_HD int64_t w_index(Taps t, int ko, int ci, int tap, int c, int phase) {
  if (t == Taps::Plain) return (static_cast<int64_t>(ko) * c + ci) * 9 + tap;
  if (t == Taps::S2d)
    return (static_cast<int64_t>(ko) * c + (ci >> 2)) * 16 +
           (2 * (tap >> 1) + ((ci >> 1) & 1)) * 4 + 2 * (tap & 1) + (ci & 1);
  return (static_cast<int64_t>(ko) * c + ci) * 16 + (3 - 2 * (tap >> 1) - (phase >> 1)) * 4 + 3 -
         2 * (tap & 1) - (phase & 1);
}

// The input channels of a tensor-core stage's row: 32 bytes of a pixel's channels (16 bf16, or
// 8 float32 on the TF32 path), in the input tile and in the weights' layout alike.
PDNN_HD constexpr int row_channels(int elem_bytes) { return 32 / elem_bytes; }

// Where the bf16 passes' re-laid-out weights (conv2d_direct_weights) hold the weight of pass
// input channel i, output channel o and tap: rows of 16 input channels for the mma's A
// fragments, out[phase][i / 16][tap][o][i % 16], o < Mp (a multiple of 128), in16 row groups,
// KK taps; one layout per phase with Phase, else phase = 0.
PDNN_HD int64_t prep_index(int phase, int i, int tap, int o, int in16, int KK, int Mp) {
  return ((static_cast<int64_t>(phase) * in16 + (i >> 4)) * KK + tap) * Mp * 16 +
         static_cast<int64_t>(o) * 16 + (i & 15);
}

// The space-to-depth phases' size for x of h x w: h/2 + 1 rows, w/2 + 1 columns rounded up to
// even (the bf16 kernels load pixel pairs as 4 bytes).
PDNN_HD int64_t s2d_rows(int64_t h) { return h / 2 + 1; }
PDNN_HD int64_t s2d_cols(int64_t w) { return (w / 2 + 2) / 2 * 2; }

// Phase channel cc at (u, v) of xs is x's channel cc / 4 at (*iy, *ix) (outside x: zero).
PDNN_HD int s2d_source(int cc, int u, int v, int* iy, int* ix) {
  *iy = 2 * u + ((cc >> 1) & 1) - 1;
  *ix = 2 * v + (cc & 1) - 1;
  return cc >> 2;
}

// Phase's first row of dy's window for output row u (likewise columns with pq).
PDNN_HD int phase_window_start(int u, int pr) { return u - 1 + pr; }

}  // namespace direct
}  // namespace pdnn
