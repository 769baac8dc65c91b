// Elementwise activations on the GPU (see activation.h): one grid-stride loop each; memory
// bound (8-12 bytes per element in fp32, 4-6 in bf16), so nothing more elaborate pays. Each
// kernel is a template over the tensors' type E: float, or bf16 computed in fp32 and rounded
// once where it is written (kit::to_f32 / from_f32; the float instantiation is the same code as
// the plain fp32 kernel).
#include "cuda/launch.h"
#include "ops/activation.h"
#include "ops/kit/round.h"

namespace pdnn {
namespace cuda {

namespace {
using kit::from_f32;
using kit::to_f32;

template <class E>
__global__ void relu_f(int64_t n, const E* x, E* y) {
  PDNN_GRID_LOOP(i, n) {
    const float v = to_f32(x[i]);
    y[i] = from_f32<E>(v > 0.f ? v : 0.f);
  }
}
template <class E>
__global__ void relu_b(int64_t n, const E* x, const E* dy, E* dx) {
  PDNN_GRID_LOOP(i, n) dx[i] = from_f32<E>(to_f32(x[i]) > 0.f ? to_f32(dy[i]) : 0.f);
}
template <class E>
__global__ void leaky_f(int64_t n, float slope, const E* x, E* y) {
  PDNN_GRID_LOOP(i, n) {
    const float v = to_f32(x[i]);
    y[i] = from_f32<E>(v > 0.f ? v : slope * v);
  }
}
template <class E>
__global__ void leaky_b(int64_t n, float slope, const E* x, const E* dy, E* dx) {
  PDNN_GRID_LOOP(i, n) {
    const float d = to_f32(dy[i]);
    dx[i] = from_f32<E>(to_f32(x[i]) > 0.f ? d : slope * d);
  }
}
template <class E>
__global__ void sigmoid_f(int64_t n, const E* x, E* y) {
  // expf(-x) overflows to inf for x < -88, giving 0: the right limit (as on the CPU).
  PDNN_GRID_LOOP(i, n) y[i] = from_f32<E>(1.f / (1.f + expf(-to_f32(x[i]))));
}
template <class E>
__global__ void sigmoid_b(int64_t n, const E* y, const E* dy, E* dx) {
  PDNN_GRID_LOOP(i, n) {
    const float v = to_f32(y[i]);
    dx[i] = from_f32<E>(to_f32(dy[i]) * v * (1.f - v));
  }
}
template <class E>
__global__ void tanh_f(int64_t n, const E* x, E* y) {
  PDNN_GRID_LOOP(i, n) y[i] = from_f32<E>(tanhf(to_f32(x[i])));
}
template <class E>
__global__ void tanh_b(int64_t n, const E* y, const E* dy, E* dx) {
  PDNN_GRID_LOOP(i, n) {
    const float v = to_f32(y[i]);
    dx[i] = from_f32<E>(to_f32(dy[i]) * (1.f - v * v));
  }
}
}  // namespace

#define PDNN_LAUNCH_1D(kernel, n, e, ...)                                        \
  do {                                                                           \
    if ((n) <= 0) return;                                                        \
    kernel<<<blocks_for(n, tpb(e)), tpb(e), 0, stream_of(e)>>>((n), __VA_ARGS__);      \
    PDNN_CUDA_LAUNCH_CHECK(#kernel);                                             \
  } while (0)

template <class T>
void relu_forward(int64_t n, const T* x, T* y, CudaExec e) {
  PDNN_LAUNCH_1D(relu_f<T>, n, e, x, y);
}
template <class T>
void relu_backward(int64_t n, const T* x, const T* dy, T* dx, CudaExec e) {
  PDNN_LAUNCH_1D(relu_b<T>, n, e, x, dy, dx);
}
template <class T>
void leaky_relu_forward(int64_t n, float slope, const T* x, T* y, CudaExec e) {
  PDNN_LAUNCH_1D(leaky_f<T>, n, e, slope, x, y);
}
template <class T>
void leaky_relu_backward(int64_t n, float slope, const T* x, const T* dy, T* dx, CudaExec e) {
  PDNN_LAUNCH_1D(leaky_b<T>, n, e, slope, x, dy, dx);
}
template <class T>
void sigmoid_forward(int64_t n, const T* x, T* y, CudaExec e) {
  PDNN_LAUNCH_1D(sigmoid_f<T>, n, e, x, y);
}
template <class T>
void sigmoid_backward(int64_t n, const T* y, const T* dy, T* dx, CudaExec e) {
  PDNN_LAUNCH_1D(sigmoid_b<T>, n, e, y, dy, dx);
}
template <class T>
void tanh_forward(int64_t n, const T* x, T* y, CudaExec e) {
  PDNN_LAUNCH_1D(tanh_f<T>, n, e, x, y);
}
template <class T>
void tanh_backward(int64_t n, const T* y, const T* dy, T* dx, CudaExec e) {
  PDNN_LAUNCH_1D(tanh_b<T>, n, e, y, dy, dx);
}

// Both precisions' entry points (activation.h).
#define PDNN_INSTANTIATE(T)                                                            \
  template void relu_forward(int64_t, const T*, T*, CudaExec);                         \
  template void relu_backward(int64_t, const T*, const T*, T*, CudaExec);              \
  template void leaky_relu_forward(int64_t, float, const T*, T*, CudaExec);            \
  template void leaky_relu_backward(int64_t, float, const T*, const T*, T*, CudaExec); \
  template void sigmoid_forward(int64_t, const T*, T*, CudaExec);                      \
  template void sigmoid_backward(int64_t, const T*, const T*, T*, CudaExec);           \
  template void tanh_forward(int64_t, const T*, T*, CudaExec);                         \
  template void tanh_backward(int64_t, const T*, const T*, T*, CudaExec);
PDNN_INSTANTIATE(float)
PDNN_INSTANTIATE(bf16)
#undef PDNN_INSTANTIATE

}  // namespace cuda
}  // namespace pdnn
