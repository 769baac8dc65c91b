// Max pooling's rule for the maximum of a window, on both backends (ops/maxpool2d.h): the window
// in row-major order, strict '>' (the first of equal maxima wins, as PyTorch), and a NaN wins
// (the last NaN of a window is its maximum, so a NaN propagates). The CPU's vectorised row loops
// apply argmax_takes lane by lane; a search of one window (the GPU's forward, and both backward
// passes that find the maximum again in x) is window_max.
#pragma once
#include <cmath>

#include "ops/kit/host_device.h"
#include "ops/kit/round.h"

namespace pdnn {
namespace kit {

// Whether candidate v replaces the current best ('|', not '||': no branch).
PDNN_HD bool argmax_takes(float v, float best) { return (v > best) | (v != v); }

struct WindowMax {
  float value;
  int at;  // ky * k + kx
};

// The maximum of the k x k window at output (oy, ox), stride s, of a plane w wide starting at
// xp. I: the index type of the caller's geometry (int on the GPU, int64_t on the CPU); E: the
// plane's type (float, or bf16 compared as the floats they are).
template <class I, class E = float>
PDNN_HD WindowMax window_max(const E* xp, I w, I k, I s, I oy, I ox) {
  WindowMax m{-INFINITY, 0};
  for (I ky = 0; ky < k; ++ky) {
    const E* xr = xp + (oy * s + ky) * w + ox * s;
    for (I kx = 0; kx < k; ++kx) {
      const float v = to_f32(xr[kx]);
      if (argmax_takes(v, m.value)) {
        m.value = v;
        m.at = static_cast<int>(ky * k + kx);
      }
    }
  }
  return m;
}

}  // namespace kit
}  // namespace pdnn
