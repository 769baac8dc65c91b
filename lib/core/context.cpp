// Context: thread count, the device's state, workspaces, counters.
#include "core/context.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <string>

#include "core/error.h"
#include "core/cuda_state.h"


namespace pdnn {

namespace {
void delete_cuda_state(CudaState* s) {
#if PDNN_HAVE_CUDA
  delete s;
#else
  (void)s;  // a CPU build never makes one
#endif
}
}  // namespace

Context::Context(int threads, uint64_t seed, Device dev, int gpu)
    : device_(dev), rng_(seed), cuda_(nullptr, delete_cuda_state) {
  if (dev == Device::CUDA) {
    std::string why;
    if (!cuda_usable(&why)) PDNN_FAIL("--device cuda: %s", why.c_str());
#if PDNN_HAVE_CUDA
    cuda_.reset(new CudaState(gpu));
#else
    (void)gpu;
#endif
  }
  set_threads(threads);
}

Context::~Context() = default;

// Only this Context's count: every parallel region and BLAS call takes it from the CpuExec it
// is given (core/parallel.h), so the process's OpenMP and OpenBLAS settings stay as they were.
void Context::set_threads(int n) {
  threads_ = n > 0 ? n : omp_get_num_procs();
  rng_.set_threads(threads_);  // its bulk draws (initial weights) on this context's threads
}

void Context::set_precision(Precision p) {
  precision_ = p;
  if (cuda_) cuda_->set_tf32(p == Precision::Tf32);
}

CudaState& Context::cuda() const {
  PDNN_CHECK(cuda_ != nullptr,
             "context: this run has no GPU (made with --device cpu); a CUDA tensor needs a "
             "context made with Device::CUDA");
  return *cuda_;
}

CudaExec Context::cuda_exec() const {
  return CudaExec{work_stream_ ? work_stream_ : cuda().stream(), cuda().cublas(), 0,
                  precision_ == Precision::Tf32, cuda().cudnn_if_open(),
                  ws_limit_[1] * sizeof(float), conv_transforms_};
}

std::shared_ptr<Allocator> Context::allocator(Device dev) const {
  return dev == Device::CPU ? host_allocator() : cuda().allocator();
}

std::shared_ptr<Allocator> Context::staging_allocator() const {
  return cuda_ ? cuda_->pinned() : host_allocator();
}

float* Context::workspace(Device dev, size_t n_floats) {
  const int d = dev == Device::CPU ? 0 : 1;
  if (timing_ == 0) ws_needed_[d] = std::max(ws_needed_[d], n_floats);
  Tensor& ws = ws_[d];
  if (ws.empty() || static_cast<size_t>(ws.numel()) < n_floats) {
    PDNN_CHECK(ws_limit_[d] == 0 || n_floats <= ws_limit_[d],
               "workspace of %.1f MiB asked for on %s, past the memory plan's budget of %.1f MiB",
               static_cast<double>(n_floats) * 4.0 / 1048576.0, device_name(dev),
               static_cast<double>(ws_limit_[d]) * 4.0 / 1048576.0);
    const int64_t n = static_cast<int64_t>(n_floats > 0 ? n_floats : 1);
    MemoryRole role(*this, "the shared workspace");
    ws = Tensor();  // give the old block back before taking a bigger one
    ws = Tensor::empty(Shape{n}, DType::F32, dev, *this);
  }
  return ws.data();
}

size_t Context::fit_workspace(Device dev) {
  const int d = dev == Device::CPU ? 0 : 1;
  Tensor& ws = ws_[d];
  const size_t held = workspace_size(dev), need = std::max<size_t>(ws_needed_[d], 1);
  if (ws.empty() || held <= need) return 0;
  MemoryRole role(*this, "the shared workspace");
  ws = Tensor();
  // The old block goes back to the system first, with every cached block: kept in a caching
  // allocator's cache it stays on the device (the U-Net at 1024 held its 4.75 GiB after a fit
  // to 1.7 GiB, then as the new block, when a cached block served any request up to half its
  // size), and the peaks start again from what the step holds.
  allocator(dev)->trim();
  ws = Tensor::empty(Shape{static_cast<int64_t>(need)}, DType::F32, dev, *this);
  return (held - need) * sizeof(float);
}

size_t Context::workspace_size(Device dev) const {
  const Tensor& ws = ws_[dev == Device::CPU ? 0 : 1];
  return ws.empty() ? 0 : static_cast<size_t>(ws.numel());
}

std::string Context::memory_role() const {
  std::string r;
  for (size_t i = roles_.size(); i-- > 0;) r += (r.empty() ? "" : ", in ") + roles_[i]();
  return r;
}

void Context::count_transfer(Device dst, Device src, size_t bytes) {
  if (dst == src) return;
  if (dst == Device::CUDA) {
    transfers_.h2d_bytes += bytes;
    ++transfers_.h2d_copies;
  } else {
    transfers_.d2h_bytes += bytes;
    ++transfers_.d2h_copies;
  }
}

AllocStats Context::device_alloc_stats() const {
  return cuda_ ? cuda_->allocator()->stats() : AllocStats{};
}

Tensor& Context::device_rng_counter() {
  if (rng_dev_.empty()) rng_dev_ = Tensor::empty(Shape{1}, DType::I64, Device::CUDA, *this);
  if (!rng_dev_valid_ || rng_dev_counter_ != rng_.counter() || rng_dev_seed_ != rng_.seed()) {
    Tensor host(Shape{1}, DType::I64);
    host.data<int64_t>()[0] = static_cast<int64_t>(rng_.counter());
    copy_into(rng_dev_, host, *this);
    rng_dev_counter_ = rng_.counter();
    rng_dev_seed_ = rng_.seed();
    rng_dev_valid_ = true;
  }
  return rng_dev_;
}

void Context::mirror_rng_advance(uint64_t n) {
  rng_.reserve(n);
  rng_dev_counter_ += n;
}

void Context::rewind_rng(uint64_t counter) {
  rng_.set_counter(counter);
  rng_dev_counter_ = counter;
}

void Context::synchronize() {
  if (cuda_) cuda_->synchronize();
}

const char* blas_core_name() { return openblas_get_corename(); }
const char* blas_config() { return openblas_get_config(); }

}  // namespace pdnn
