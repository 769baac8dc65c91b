// Elementwise activations on the GPU (see activation.h): one grid-stride loop each; memory
// bound (8-12 bytes per element), so nothing more elaborate pays.
#include "cuda/launch.h"
#include "ops/activation.h"

namespace pdnn {
namespace cuda {

namespace {
__global__ void relu_f(int64_t n, const float* x, float* y) {
  PDNN_GRID_LOOP(i, n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
__global__ void relu_b(int64_t n, const float* x, const float* dy, float* dx) {
  PDNN_GRID_LOOP(i, n) dx[i] = x[i] > 0.f ? dy[i] : 0.f;
}
__global__ void leaky_f(int64_t n, float slope, const float* x, float* y) {
  PDNN_GRID_LOOP(i, n) y[i] = x[i] > 0.f ? x[i] : slope * x[i];
}
__global__ void leaky_b(int64_t n, float slope, const float* x, const float* dy, float* dx) {
  PDNN_GRID_LOOP(i, n) dx[i] = x[i] > 0.f ? dy[i] : slope * dy[i];
}
__global__ void sigmoid_f(int64_t n, const float* x, float* y) {
  // expf(-x) overflows to inf for x < -88, giving 0: the right limit (as on the CPU).
  PDNN_GRID_LOOP(i, n) y[i] = 1.f / (1.f + expf(-x[i]));
}
__global__ void sigmoid_b(int64_t n, const float* y, const float* dy, float* dx) {
  PDNN_GRID_LOOP(i, n) dx[i] = dy[i] * y[i] * (1.f - y[i]);
}
__global__ void tanh_f(int64_t n, const float* x, float* y) {
  PDNN_GRID_LOOP(i, n) y[i] = tanhf(x[i]);
}
__global__ void tanh_b(int64_t n, const float* y, const float* dy, float* dx) {
  PDNN_GRID_LOOP(i, n) dx[i] = dy[i] * (1.f - y[i] * y[i]);
}
}  // namespace

#define PDNN_LAUNCH_1D(kernel, n, e, ...)                                        \
  do {                                                                           \
    if ((n) <= 0) return;                                                        \
    kernel<<<blocks_for(n, tpb(e)), tpb(e), 0, stream_of(e)>>>((n), __VA_ARGS__);      \
    PDNN_CUDA_LAUNCH_CHECK(#kernel);                                             \
  } while (0)

void relu_forward(int64_t n, const float* x, float* y, CudaExec e) {
  PDNN_LAUNCH_1D(relu_f, n, e, x, y);
}
void relu_backward(int64_t n, const float* x, const float* dy, float* dx, CudaExec e) {
  PDNN_LAUNCH_1D(relu_b, n, e, x, dy, dx);
}
void leaky_relu_forward(int64_t n, float slope, const float* x, float* y, CudaExec e) {
  PDNN_LAUNCH_1D(leaky_f, n, e, slope, x, y);
}
void leaky_relu_backward(int64_t n, float slope, const float* x, const float* dy, float* dx,
                         CudaExec e) {
  PDNN_LAUNCH_1D(leaky_b, n, e, slope, x, dy, dx);
}
void sigmoid_forward(int64_t n, const float* x, float* y, CudaExec e) {
  PDNN_LAUNCH_1D(sigmoid_f, n, e, x, y);
}
void sigmoid_backward(int64_t n, const float* y, const float* dy, float* dx, CudaExec e) {
  PDNN_LAUNCH_1D(sigmoid_b, n, e, y, dy, dx);
}
void tanh_forward(int64_t n, const float* x, float* y, CudaExec e) {
  PDNN_LAUNCH_1D(tanh_f, n, e, x, y);
}
void tanh_backward(int64_t n, const float* y, const float* dy, float* dx, CudaExec e) {
  PDNN_LAUNCH_1D(tanh_b, n, e, y, dy, dx);
}

}  // namespace cuda
}  // namespace pdnn
