// The one way an op reaches a kernel: on the device of its tensors, call the cpu:: or cuda::
// twin of the same name with the same arguments plus that backend's execution argument.
//   PDNN_DISPATCH(ctx, x.device(), relu_forward, n, x.data(), y.data());
// A build without CUDA compiles no call to a cuda:: twin (they are not linked in), and a CUDA
// tensor cannot exist there; the branch still fails loudly rather than silently.
#pragma once
#include <type_traits>

#include "core/context.h"
#include "core/device.h"
#include "core/error.h"
#include "core/exec.h"
#include "core/tensor.h"

namespace pdnn {
[[noreturn]] inline void fail_no_cuda(const char* op) {
  PDNN_FAIL("%s on a CUDA tensor: this pdnn was built without CUDA", op);
}
// bfloat16 tensors have GPU kernels only (core/precision.h: never a silent fp32 run).
[[noreturn]] inline void fail_bf16_on_cpu(const char* op) {
  PDNN_FAIL("%s: bfloat16 tensors on the CPU: the CPU has no bf16 path (bf16 runs on the GPU)",
            op);
}

// The device every given tensor is on (null entries skipped); pdnn::Error naming the op and the
// first tensor elsewhere.
inline Device op_device(const char* op, std::initializer_list<const Tensor*> ts) {
  const Tensor* first = nullptr;
  for (const Tensor* t : ts)
    if (t && !first) first = t;
  PDNN_CHECK(first != nullptr, "%s: no tensors", op);
  int i = 0;
  for (const Tensor* t : ts) {
    PDNN_CHECK(!t || t->device() == first->device(),
               "%s: tensor %d %s is on %s, tensor 0 %s on %s (copy it with to() first)", op, i,
               t->shape().str().c_str(), device_name(t->device()), first->shape().str().c_str(),
               device_name(first->device()));
    ++i;
  }
  return first->device();
}

// f(float{}) or f(bf16{}) by a tensor's type (PDNN_DISPATCH_TYPED).
template <class F>
void with_element_type(DType t, F&& f) {
  if (t == DType::BF16)
    f(bf16{});
  else
    f(float{});
}

// Throws unless every given tensor (null entries skipped) has the first one's type, naming the
// op and the first that differs.
inline void check_same_dtype(const char* op, std::initializer_list<const Tensor*> ts) {
  const Tensor* first = nullptr;
  int i = 0;
  for (const Tensor* t : ts) {
    if (t && !first) first = t;
    PDNN_CHECK(!t || t->dtype() == first->dtype(), "%s: tensor %d is %s, tensor 0 %s", op, i,
               dtype_name(t->dtype()), dtype_name(first->dtype()));
    ++i;
  }
}
}  // namespace pdnn

// The ops of bfloat16 tensors: the cuda:: twin, or one line saying the CPU has none.
//   PDNN_DISPATCH_GPU(ctx, x.device(), relu_forward, n, x.data<bf16>(), y.data<bf16>());
#if PDNN_HAVE_CUDA
#define PDNN_DISPATCH_GPU(ctx, dev, fn, ...)                        \
  do {                                                              \
    if ((dev) != ::pdnn::Device::CUDA) ::pdnn::fail_bf16_on_cpu(#fn); \
    ::pdnn::cuda::fn(__VA_ARGS__, (ctx).cuda_exec());               \
  } while (0)
#else
#define PDNN_DISPATCH_GPU(ctx, dev, fn, ...)                        \
  do {                                                              \
    if ((dev) == ::pdnn::Device::CUDA) ::pdnn::fail_no_cuda(#fn);   \
    ::pdnn::fail_bf16_on_cpu(#fn);                                  \
  } while (0)
#endif

// fn over the tensors' element type E, named in the arguments: float on either device
// (PDNN_DISPATCH), bfloat16 on the GPU (PDNN_DISPATCH_GPU; the CPU refuses it). Any other
// type takes the float path, whose data<float>() refuses it naming both types.
//   PDNN_DISPATCH_TYPED(ctx, d, x.dtype(), relu_forward, n, x.data<E>(), y.data<E>());
#define PDNN_DISPATCH_TYPED(ctx, dev, dtype, fn, ...)            \
  ::pdnn::with_element_type((dtype), [&](auto elem_tag_) {       \
    using E = decltype(elem_tag_);                               \
    if constexpr (std::is_same<E, float>::value)                 \
      PDNN_DISPATCH(ctx, dev, fn, __VA_ARGS__);                  \
    else                                                         \
      PDNN_DISPATCH_GPU(ctx, dev, fn, __VA_ARGS__);              \
  })

#if PDNN_HAVE_CUDA
#define PDNN_DISPATCH(ctx, dev, fn, ...)                            \
  do {                                                              \
    if ((dev) == ::pdnn::Device::CUDA)                              \
      ::pdnn::cuda::fn(__VA_ARGS__, (ctx).cuda_exec());             \
    else                                                            \
      ::pdnn::cpu::fn(__VA_ARGS__, (ctx).cpu_exec());               \
  } while (0)
#else
#define PDNN_DISPATCH(ctx, dev, fn, ...)                            \
  do {                                                              \
    if ((dev) == ::pdnn::Device::CUDA)                              \
      ::pdnn::fail_no_cuda(#fn);                                    \
    else                                                            \
      ::pdnn::cpu::fn(__VA_ARGS__, (ctx).cpu_exec());               \
  } while (0)
#endif
