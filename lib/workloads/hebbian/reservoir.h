// The W6 state the app steps forward, in Tensors on a Context's device (the CPU or the GPU):
// the same four calls on both, so the timing loop, progress line and non-finite handling in
// main.cpp are written once.
//   reset()                  W = W_0, x = 0 (waits for the device)
//   advance(first, len)      steps first+1 .. first+len (inputs u[first ..]); returns the
//                            first non-finite step counted from `first` (0 = the state at
//                            `first`), or -1; on the GPU it waits for the device
//   x(), W()                 copies of the state on the host
#pragma once
#include <cstdint>
#include <vector>

#include "workloads/hebbian/hebbian_problem.h"
#include "core/context.h"
#include "core/tensor.h"
#include "workloads/hebbian/hebbian_ops.h"

namespace pdnn {

template <typename T>
class Reservoir {
 public:
  // The state lives on ctx.device() (which must outlive the reservoir), CPU threads from
  // ctx.threads(). A context made with Device::CUDA has already checked that there is a GPU.
  Reservoir(Context& ctx, const HebbianProblem& pb, const HebbianParams<T>& p);
  void reset();
  int64_t advance(int64_t first, int64_t len);
  std::vector<T> x() const { return host(x_); }
  std::vector<T> W() const { return host(W_); }

 private:
  std::vector<T> host(const Tensor& t) const;

  Context& ctx_;
  HebbianParams<T> p_;
  Tensor W0_, W_, x_, xs_, win_, u_, bad_;  // on ctx_.device(); bad_: (1) int64
};

}  // namespace pdnn
