// CpuReservoir (reservoir.h): host vectors and cpu::hebbian_run.
#include <algorithm>

#include "reservoir.h"

namespace pdnn {

template <typename T>
CpuReservoir<T>::CpuReservoir(const HebbianProblem& pb, const HebbianParams<T>& p, int threads)
    : p_(p),
      threads_(threads),
      W0_(pb.W.begin(), pb.W.end()),
      W_(W0_),
      x_(static_cast<size_t>(pb.n), T(0)),
      xs_(static_cast<size_t>(pb.n)),
      win_(pb.win.begin(), pb.win.end()),
      u_(pb.u.begin(), pb.u.end()) {}

template <typename T>
void CpuReservoir<T>::reset() {
  std::copy(W0_.begin(), W0_.end(), W_.begin());
  std::fill(x_.begin(), x_.end(), T(0));
}

template <typename T>
int64_t CpuReservoir<T>::advance(int64_t first, int64_t len) {
  int64_t bad = -1;
  cpu::hebbian_run(W_.data(), x_.data(), &bad, win_.data(), u_.data() + first, len, p_, xs_.data(),
                   CpuExec{threads_});
  return bad;
}

template class CpuReservoir<float>;
template class CpuReservoir<double>;

}  // namespace pdnn
