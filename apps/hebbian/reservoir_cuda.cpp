// GpuReservoir (reservoir.h): device copies of the W6 state and cuda::hebbian_run. Device memory
// is taken here with cudaMalloc until the CUDA allocator of the core refactor (issue 7) lands;
// then these buffers become Tensors on the GPU. Without CUDA in the build, every entry point
// says so.
#include "reservoir.h"

#include "bench/cuda_probe.h"
#include "core/error.h"

#ifdef PDNN_HAVE_CUDA
#include <cuda_runtime.h>

#define APP_CUDA_CHECK(call)                                                                \
  do {                                                                                      \
    const cudaError_t err_ = (call);                                                        \
    if (err_ != cudaSuccess)                                                                \
      ::pdnn::throw_error(__FILE__, __LINE__, ::pdnn::strprintf("CUDA: %s: %s", #call,      \
                                                                 cudaGetErrorString(err_))); \
  } while (0)
#endif

namespace pdnn {

#ifdef PDNN_HAVE_CUDA

namespace {

template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : n_(n) {
    APP_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), (n ? n : 1) * sizeof(T)));
  }
  ~DeviceArray() { cudaFree(p_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  void put(const T* h) { APP_CUDA_CHECK(cudaMemcpy(p_, h, n_ * sizeof(T), cudaMemcpyHostToDevice)); }
  void get(T* h) const { APP_CUDA_CHECK(cudaMemcpy(h, p_, n_ * sizeof(T), cudaMemcpyDeviceToHost)); }
  T* data() { return p_; }
  size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  size_t n_;
};

}  // namespace

template <typename T>
struct GpuReservoir<T>::Impl {
  HebbianParams<T> p;
  std::vector<T> W0;
  DeviceArray<T> W, x, xs, win, u;
  DeviceArray<int64_t> bad{1};
  Impl(const HebbianProblem& pb, const HebbianParams<T>& params)
      : p(params), W0(pb.W.begin(), pb.W.end()), W(W0.size()), x(pb.n), xs(pb.n), win(pb.n),
        u(pb.u.size()) {
    const std::vector<T> win_h(pb.win.begin(), pb.win.end()), u_h(pb.u.begin(), pb.u.end());
    win.put(win_h.data());
    u.put(u_h.data());
  }
};

template <typename T>
GpuReservoir<T>::GpuReservoir(const HebbianProblem& pb, const HebbianParams<T>& p) {
  const std::string why = cuda_unavailable_reason();
  PDNN_CHECK(why.empty(), "--device cuda: %s", why.c_str());
  impl_ = std::make_unique<Impl>(pb, p);
  reset();
}

template <typename T>
GpuReservoir<T>::~GpuReservoir() = default;

template <typename T>
void GpuReservoir<T>::reset() {
  impl_->W.put(impl_->W0.data());
  APP_CUDA_CHECK(cudaMemset(impl_->x.data(), 0, impl_->x.size() * sizeof(T)));
  APP_CUDA_CHECK(cudaDeviceSynchronize());
}

template <typename T>
int64_t GpuReservoir<T>::advance(int64_t first, int64_t len) {
  cuda::hebbian_run(impl_->W.data(), impl_->x.data(), impl_->bad.data(), impl_->win.data(),
                    impl_->u.data() + first, len, impl_->p, impl_->xs.data(), CudaExec{});
  int64_t bad = -1;
  impl_->bad.get(&bad);  // waits for the run
  return bad;
}

template <typename T>
std::vector<T> GpuReservoir<T>::x() const {
  std::vector<T> h(impl_->x.size());
  impl_->x.get(h.data());
  return h;
}

template <typename T>
std::vector<T> GpuReservoir<T>::W() const {
  std::vector<T> h(impl_->W.size());
  impl_->W.get(h.data());
  return h;
}

#else  // no CUDA in this build

template <typename T>
struct GpuReservoir<T>::Impl {};

template <typename T>
GpuReservoir<T>::GpuReservoir(const HebbianProblem&, const HebbianParams<T>&) {
  PDNN_FAIL("--device cuda: %s", cuda_unavailable_reason().c_str());
}
template <typename T>
GpuReservoir<T>::~GpuReservoir() = default;
template <typename T>
void GpuReservoir<T>::reset() {}
template <typename T>
int64_t GpuReservoir<T>::advance(int64_t, int64_t) { return -1; }
template <typename T>
std::vector<T> GpuReservoir<T>::x() const { return {}; }
template <typename T>
std::vector<T> GpuReservoir<T>::W() const { return {}; }

#endif

template class GpuReservoir<float>;
template class GpuReservoir<double>;

}  // namespace pdnn
