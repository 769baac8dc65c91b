// Max pooling on the GPU (see pool.h). Forward: one thread per output, the window in row-major
// order with the CPU's rule (strict '>', a NaN wins). Backward: a gather, one thread per input
// pixel, adding dy of the outputs whose window holds the pixel and whose argmax it is, in
// ascending output order (the CPU's order, so the sums are bit-identical); no atomics and no
// scatter.
#include <cmath>

#include "cuda/launch.h"
#include "ops/pool.h"

namespace pdnn {
namespace cuda {

namespace {

__global__ void maxpool_f(Pool2d g, int64_t total, const float* x, float* y, int32_t* argmax) {
  PDNN_GRID_LOOP(o, total) {
    const int64_t ox = o % g.ow, oy = (o / g.ow) % g.oh, p = o / (g.ow * g.oh);
    const float* xp = x + p * g.h * g.w;
    float best = -INFINITY;
    int32_t bi = static_cast<int32_t>(oy * g.s * g.w + ox * g.s);
    for (int64_t ky = 0; ky < g.k; ++ky) {
      const int64_t row = (oy * g.s + ky) * g.w + ox * g.s;
      for (int64_t kx = 0; kx < g.k; ++kx) {
        const float v = xp[row + kx];
        if (v > best || isnan(v)) {
          best = v;
          bi = static_cast<int32_t>(row + kx);
        }
      }
    }
    y[o] = best;
    argmax[o] = bi;
  }
}

__global__ void maxpool_b(Pool2d g, int64_t total, const float* dy, const int32_t* argmax,
                          float* dx) {
  PDNN_GRID_LOOP(i, total) {
    const int64_t xx = i % g.w, yy = (i / g.w) % g.h, p = i / (g.w * g.h);
    // Outputs oy with oy*s <= yy < oy*s + k.
    const int64_t oy0 = yy >= g.k ? (yy - g.k) / g.s + 1 : 0, oy1 = min(g.oh - 1, yy / g.s);
    const int64_t ox0 = xx >= g.k ? (xx - g.k) / g.s + 1 : 0, ox1 = min(g.ow - 1, xx / g.s);
    const int32_t me = static_cast<int32_t>(yy * g.w + xx);
    const int64_t base = p * g.oh * g.ow;
    float s = 0.f;
    for (int64_t oy = oy0; oy <= oy1; ++oy)
      for (int64_t ox = ox0; ox <= ox1; ++ox) {
        const int64_t o = base + oy * g.ow + ox;
        if (argmax[o] == me) s += dy[o];
      }
    dx[i] = s;
  }
}

}  // namespace

void maxpool2d_forward(const Pool2d& g, const float* x, float* y, int32_t* argmax, CudaExec e) {
  const int64_t total = g.planes * g.oh * g.ow;
  if (total <= 0) return;
  maxpool_f<<<blocks_for(total), kThreads, 0, stream_of(e)>>>(g, total, x, y, argmax);
  PDNN_CUDA_LAUNCH_CHECK("maxpool2d_forward");
}

void maxpool2d_backward(const Pool2d& g, const float* dy, const int32_t* argmax, float* dx,
                        CudaExec e) {
  const int64_t total = g.planes * g.h * g.w;
  if (total <= 0) return;
  maxpool_b<<<blocks_for(total), kThreads, 0, stream_of(e)>>>(g, total, dy, argmax, dx);
  PDNN_CUDA_LAUNCH_CHECK("maxpool2d_backward");
}

}  // namespace cuda
}  // namespace pdnn
