// The W6 state the app steps forward, on the CPU or the GPU: the same four calls on both, so
// the timing loop, progress line and non-finite handling in main.cpp are written once.
//   reset()                  W = W_0, x = 0
//   advance(first, len)      steps first+1 .. first+len (inputs u[first ..]); returns the
//                            first non-finite step counted from `first` (0 = the state at
//                            `first`), or -1; on the GPU it waits for the device
//   x(), W()                 copies of the state on the host
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "bench/hebbian.h"
#include "ops/hebbian.h"

namespace pdnn {

template <typename T>
class CpuReservoir {
 public:
  CpuReservoir(const HebbianProblem& pb, const HebbianParams<T>& p, int threads);
  void reset();
  int64_t advance(int64_t first, int64_t len);
  std::vector<T> x() const { return x_; }
  std::vector<T> W() const { return W_; }

 private:
  HebbianParams<T> p_;
  int threads_;
  std::vector<T> W0_, W_, x_, xs_, win_, u_;
};

// CUDA builds with a GPU only: the constructor throws pdnn::Error naming the reason otherwise.
template <typename T>
class GpuReservoir {
 public:
  GpuReservoir(const HebbianProblem& pb, const HebbianParams<T>& p);
  ~GpuReservoir();
  void reset();
  int64_t advance(int64_t first, int64_t len);
  std::vector<T> x() const;
  std::vector<T> W() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pdnn
