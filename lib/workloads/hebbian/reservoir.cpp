// Reservoir (reservoir.h): the problem copied once onto the context's device, then
// ops::hebbian_run, which picks the CPU or the CUDA kernel by the tensors' device.
#include "workloads/hebbian/reservoir.h"

#include <algorithm>

#include "ops/basic.h"

namespace pdnn {
namespace {

// v as a T tensor of `shape` on ctx's device (values are float32 numbers, so exact in T).
template <typename T>
Tensor on_device(Context& ctx, const std::vector<float>& v, const Shape& shape) {
  Tensor h(shape, dtype_of<T>());
  std::copy(v.begin(), v.end(), h.data<T>());
  return ctx.device() == Device::CPU ? h : h.to(ctx.device(), ctx);
}

}  // namespace

template <typename T>
Reservoir<T>::Reservoir(Context& ctx, const HebbianProblem& pb, const HebbianParams<T>& p)
    : ctx_(ctx), p_(p) {
  const int64_t n = pb.n;
  const Device dev = ctx.device();
  W0_ = on_device<T>(ctx, pb.W, Shape{n, n});
  win_ = on_device<T>(ctx, pb.win, Shape{n});
  u_ = on_device<T>(ctx, pb.u, Shape{static_cast<int64_t>(pb.u.size())});
  W_ = Tensor::empty(Shape{n, n}, dtype_of<T>(), dev, ctx);
  x_ = Tensor::empty(Shape{n}, dtype_of<T>(), dev, ctx);
  xs_ = Tensor::empty(Shape{n}, dtype_of<T>(), dev, ctx);
  bad_ = Tensor::empty(Shape{1}, DType::I64, dev, ctx);
  reset();
}

template <typename T>
void Reservoir<T>::reset() {
  copy_into(W_, W0_, ctx_);
  ops::zero(ctx_, x_);
  ctx_.synchronize();  // so that a timed run that follows times only its own steps
}

template <typename T>
int64_t Reservoir<T>::advance(int64_t first, int64_t len) {
  ops::hebbian_run(ctx_, W_, x_, bad_, win_, u_, first, len, p_, xs_);
  return bad_.to(Device::CPU, ctx_).data<int64_t>()[0];  // on the GPU: waits for the run
}

template <typename T>
std::vector<T> Reservoir<T>::host(const Tensor& t) const {
  const Tensor h = t.to(Device::CPU, ctx_);
  return std::vector<T>(h.data<T>(), h.data<T>() + h.numel());
}

template class Reservoir<float>;
template class Reservoir<double>;

}  // namespace pdnn
