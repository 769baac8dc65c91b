// The one way an op reaches a kernel: on the device of its tensors, call the cpu:: or cuda::
// twin of the same name with the same arguments plus that backend's execution argument.
//   PDNN_DISPATCH(ctx, x.device(), relu_forward, n, x.data(), y.data());
// A build without CUDA compiles no call to a cuda:: twin (they are not linked in), and a CUDA
// tensor cannot exist there; the branch still fails loudly rather than silently.
#pragma once
#include "core/context.h"
#include "core/device.h"
#include "core/error.h"
#include "core/exec.h"
#include "core/tensor.h"

namespace pdnn {
[[noreturn]] inline void fail_no_cuda(const char* op) {
  PDNN_FAIL("%s on a CUDA tensor: this pdnn was built without CUDA", op);
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
}  // namespace pdnn

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
