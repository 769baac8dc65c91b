// W6 Hebbian reservoir, CUDA kernels (contracts in hebbian.h; the CPU twins in hebbian.cpp).
//
// hebbian_run is one cooperative kernel for all steps: a grid-wide barrier per step and no host
// round trip. Block b owns a contiguous band of R rows (R = 16 when there are SMs enough), one
// warp per row at a time. Per step each block copies x into shared memory, then for each of its
// rows applies Oja's update with x_t and forms that row's dot product for step t+1 in the same
// pass, as the CPU does. Where W lives across steps:
//  - on chip (p.w_on_chip, when R n elements fit in one SM's shared memory): each block loads
//    its band of W once per call and keeps it in shared memory, so a step moves no W through L2
//    or HBM at all. fp32 n = 2000 needs 16 rows x 8 KB = 128 KB per block on 125 SMs.
//  - streamed: W is read and written in global memory every step (2 n^2 elements: 32 MB at
//    fp32 n = 2000, ~10.7 us at an H100's 3 TB/s; W itself, 16 MB, may stay in its 50 MB L2).
#include <cooperative_groups.h>

#include <climits>
#include <cstdint>
#include <type_traits>

#include "core/error.h"
#include "cuda/launch.h"
#include "workloads/hebbian/hebbian_ops.h"

namespace pdnn {
namespace cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 16;
constexpr int kBlockThreads = kWarp * kWarpsPerBlock;
constexpr unsigned kFullMask = 0xffffffffu;

template <typename T>
__device__ __forceinline__ T device_tanh(T v) {
  if constexpr (std::is_same<T, float>::value) return tanhf(v);
  else return tanh(v);
}

// Oja's update of one element, in the same form as the CPU (b = lr x_i, d = lr x_i^2).
template <typename T>
__device__ __forceinline__ T oja(T w, T xj, T b, T d) {
  return fma(-d, w, fma(b, xj, w));
}

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int off = kWarp / 2; off > 0; off /= 2) v += __shfl_down_sync(kFullMask, v, off);
  return v;
}

template <typename T>
__device__ __forceinline__ bool is_finite(T v) {
  return isfinite(v);
}

// ---- the single-step ops -------------------------------------------------------------------

// One warp per row.
template <typename T>
__global__ void gemv_kernel(T* y, const T* A, const T* x, int64_t m, int64_t n) {
  const int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= m) return;
  const T* a = A + row * n;
  T acc = 0;
  for (int64_t j = lane; j < n; j += kWarp) acc += a[j] * x[j];
  acc = warp_sum(acc);
  if (lane == 0) y[row] = acc;
}

template <typename T>
__global__ void reservoir_update_kernel(T* x_out, const T* x, const T* pre, const T* win,
                                        const T* u, int64_t n, T keep, T gain) {
  const T ut = *u;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x_out[i] = keep * x[i] + gain * device_tanh(pre[i] + win[i] * ut);
}

template <typename T>
__global__ void oja_update_kernel(T* W, const T* x, T lr, int64_t n) {
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n * n;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = k / n;
    const T b = lr * x[i];
    W[k] = oja(W[k], x[k - i * n], b, b * x[i]);
  }
}

// *index starts at a large sentinel (memset 0x7f); atomicMin of every non-finite index.
template <typename T>
__global__ void first_nonfinite_kernel(int64_t* index, const T* v, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    if (!is_finite(v[i])) atomicMin(reinterpret_cast<long long*>(index), static_cast<long long>(i));
}

__global__ void first_nonfinite_finish(int64_t* index, int64_t n) {
  if (*index >= n) *index = -1;
}

// ---- the persistent run --------------------------------------------------------------------

// Arguments of the cooperative kernel (one struct: cudaLaunchCooperativeKernel takes void**).
template <typename T>
struct RunArgs {
  T* W;
  T* x0;            // the caller's x; x_t lives in x0 for even t, in x1 for odd t
  T* x1;
  int64_t* status;  // during the run the key below; at the end the first non-finite step
  const T* win;
  const T* u;
  int64_t steps;
  HebbianParams<T> p;
  int rows_per_block;
};

// Detection as on the CPU: a warp that meets a non-finite value records
// key = 2 pass + (0: in W_pass | 1: in x_{pass+1}) with atomicMin; after the grid barrier every
// block reads the same verdict for this pass (keys from later passes are larger), so all blocks
// leave the loop at the same pass and none waits at a barrier the others skipped.
template <typename T, bool kOnChip>
__global__ void __launch_bounds__(kBlockThreads) hebbian_run_kernel(RunArgs<T> a) {
  extern __shared__ unsigned char smem_raw[];
  T* xs = reinterpret_cast<T*>(smem_raw);  // x_t, all n
  T* ws = xs + a.p.n;                      // this block's rows of W (on chip only)
  cg::grid_group grid = cg::this_grid();
  const int64_t n = a.p.n;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * a.rows_per_block;
  const int64_t rows = a.rows_per_block < n - row0 ? a.rows_per_block : n - row0;
  long long* key = reinterpret_cast<long long*>(a.status);

  if (kOnChip)
    for (int64_t k = threadIdx.x; k < rows * n; k += blockDim.x) ws[k] = a.W[row0 * n + k];

  for (int64_t pass = 0; pass <= a.steps; ++pass) {
    // (selects, not an indexed array: that would put the arguments in local memory)
    const T* xc = (pass & 1) ? a.x1 : a.x0;
    T* xn = (pass & 1) ? a.x0 : a.x1;
    // x was written by other blocks: read it from L2 (__ldcg), not from a stale L1 line.
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) xs[j] = __ldcg(xc + j);
    __syncthreads();
    bool w_bad = false, x_bad = false;
    for (int64_t r = warp; r < rows; r += kWarpsPerBlock) {
      const int64_t i = row0 + r;
      T* w = kOnChip ? ws + r * n : a.W + i * n;
      const T xi = xs[i], b = a.p.lr * xi, d = b * xi;
      T acc = 0, z = 0;  // z: sum of v * 0, NaN iff some v is inf or NaN
      if (pass == a.steps) {
#pragma unroll 8
        for (int64_t j = lane; j < n; j += kWarp) {
          const T v = oja(w[j], xs[j], b, d);
          w[j] = v;
          z += v * T(0);
        }
      } else if (pass == 0) {
#pragma unroll 8
        for (int64_t j = lane; j < n; j += kWarp) {
          const T v = w[j];
          acc += v * xs[j];
          z += v * T(0);
        }
      } else {
#pragma unroll 8
        for (int64_t j = lane; j < n; j += kWarp) {
          const T v = oja(w[j], xs[j], b, d);
          w[j] = v;
          acc += v * xs[j];
          z += v * T(0);
        }
      }
      w_bad |= __any_sync(kFullMask, !(z == T(0)));
      if (pass == a.steps) {
        if (lane == 0 && (pass & 1)) a.x0[i] = xi;  // x_T ends in the caller's x
        continue;
      }
      acc = warp_sum(acc);
      if (lane == 0) {
        const T v = a.p.keep * xi + a.p.gain * device_tanh(acc + a.win[i] * a.u[pass]);
        xn[i] = v;
        x_bad |= !is_finite(v);
      }
    }
    if (lane == 0 && (w_bad || x_bad)) atomicMin(key, 2 * pass + (w_bad ? 0 : 1));
    if (pass == a.steps) break;
    grid.sync();
    if ((*reinterpret_cast<volatile long long*>(key) >> 1) <= pass) break;
  }

  if (kOnChip) {
    __syncthreads();
    for (int64_t k = threadIdx.x; k < rows * n; k += blockDim.x) a.W[row0 * n + k] = ws[k];
  }
  grid.sync();
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const long long k = *reinterpret_cast<volatile long long*>(key);
    // Keys are 2 pass + flag <= 2 steps + 1; the memset's 0x7f7f... sentinel (not LLONG_MAX)
    // means nothing was found.
    a.status[0] = k > 2 * a.steps + 1 ? -1 : (k >> 1) + (k & 1);
  }
}

template <typename T, bool kOnChip>
void launch_run(const RunArgs<T>& args, int blocks, size_t smem, cudaStream_t s) {
  auto kernel = hebbian_run_kernel<T, kOnChip>;
  void* params[] = {const_cast<RunArgs<T>*>(&args)};
  PDNN_CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(kernel), dim3(blocks),
                                              dim3(kBlockThreads), params, smem, s));
  PDNN_CUDA_LAUNCH_CHECK("hebbian");
}

struct DeviceLimits {
  int sms = 0;           // streaming multiprocessors
  int smem_optin = 0;    // the most dynamic shared memory one block may ask for, bytes
};

DeviceLimits device_limits() {
  int dev = 0, coop = 0;
  DeviceLimits d;
  PDNN_CUDA_CHECK(cudaGetDevice(&dev));
  PDNN_CUDA_CHECK(cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, dev));
  PDNN_CUDA_CHECK(cudaDeviceGetAttribute(&d.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  PDNN_CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev));
  PDNN_CHECK(coop, "cuda::hebbian_run: device %d cannot launch cooperative kernels", dev);
  return d;
}

// Blocks of kBlockThreads with `smem` bytes each that the device holds at once (all of a
// cooperative grid must be resident); 0 when smem is more than a block may have.
template <typename T, bool kOnChip>
int64_t resident_blocks(size_t smem, const DeviceLimits& d) {
  if (smem > static_cast<size_t>(d.smem_optin)) return 0;
  auto kernel = hebbian_run_kernel<T, kOnChip>;
  PDNN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem)));
  int per_sm = 0;
  PDNN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kBlockThreads, smem));
  return static_cast<int64_t>(per_sm) * d.sms;
}

// The grid of a run: bands of `rows` rows (16, a row per warp, unless the device has too few
// SMs), one block per band; W on chip when asked for and a band of it fits in shared memory.
struct Layout {
  bool on_chip = false;
  int64_t rows = 0, blocks = 0;
  size_t smem = 0;
};

template <typename T>
Layout layout(const HebbianParams<T>& p) {
  const int64_t n = p.n;
  const DeviceLimits d = device_limits();
  Layout l;
  auto band = [n, &l](int64_t max_blocks) {
    int64_t b = (n + kWarpsPerBlock - 1) / kWarpsPerBlock;
    if (b > max_blocks) b = max_blocks;
    l.rows = (n + b - 1) / b;
    l.blocks = (l.rows > 0) ? (n + l.rows - 1) / l.rows : 0;  // every block gets a row
  };
  if (p.w_on_chip) {  // one block per SM, its band of W in shared memory
    band(d.sms);
    l.smem = static_cast<size_t>((l.rows + 1) * n) * sizeof(T);
    if (resident_blocks<T, true>(l.smem, d) >= l.blocks) {
      l.on_chip = true;
      return l;
    }
  }
  l.smem = static_cast<size_t>(n) * sizeof(T);
  const int64_t resident = resident_blocks<T, false>(l.smem, d);
  PDNN_CHECK(resident >= 1,
             "cuda::hebbian_run: x of %lld units (%zu bytes) does not fit in shared memory (%d bytes a block)",
             static_cast<long long>(n), l.smem, d.smem_optin);
  band(resident);
  return l;
}

}  // namespace

template <typename T>
void gemv(T* y, const T* A, const T* x, int64_t m, int64_t n, CudaExec e) {
  PDNN_CHECK(m >= 0 && n >= 0, "cuda::gemv: negative size %lld x %lld", static_cast<long long>(m),
             static_cast<long long>(n));
  if (m == 0) return;
  const int warps_per_block = 8;
  const int64_t blocks = (m + warps_per_block - 1) / warps_per_block;
  gemv_kernel<<<static_cast<unsigned>(blocks), warps_per_block * kWarp, 0, stream_of(e)>>>(y, A, x, m, n);
  PDNN_CUDA_LAUNCH_CHECK("hebbian");
}

template <typename T>
void reservoir_update(T* x_out, const T* x, const T* pre, const T* win, const T* u,
                      const HebbianParams<T>& p, CudaExec e) {
  PDNN_CHECK(p.n >= 1, "cuda::reservoir_update: n = %lld", static_cast<long long>(p.n));
  reservoir_update_kernel<<<blocks_for(p.n, 256), 256, 0, stream_of(e)>>>(x_out, x, pre, win, u,
                                                                          p.n, p.keep, p.gain);
  PDNN_CUDA_LAUNCH_CHECK("hebbian");
}

template <typename T>
void oja_update(T* W, const T* x, T lr, int64_t n, CudaExec e) {
  PDNN_CHECK(n >= 0, "cuda::oja_update: n = %lld", static_cast<long long>(n));
  if (n == 0) return;
  oja_update_kernel<<<blocks_for(n * n, 256), 256, 0, stream_of(e)>>>(W, x, lr, n);
  PDNN_CUDA_LAUNCH_CHECK("hebbian");
}

template <typename T>
void first_nonfinite(int64_t* index, const T* v, int64_t n, CudaExec e) {
  PDNN_CHECK(n >= 0, "cuda::first_nonfinite: n = %lld", static_cast<long long>(n));
  PDNN_CUDA_CHECK(cudaMemsetAsync(index, 0x7f, sizeof(int64_t), stream_of(e)));  // > any index
  if (n > 0) {
    first_nonfinite_kernel<<<blocks_for(n, 256), 256, 0, stream_of(e)>>>(index, v, n);
    PDNN_CUDA_LAUNCH_CHECK("hebbian");
  }
  first_nonfinite_finish<<<1, 1, 0, stream_of(e)>>>(index, n);
  PDNN_CUDA_LAUNCH_CHECK("hebbian");
}

template <typename T>
void hebbian_run(T* W, T* x, int64_t* first_nonfinite_step, const T* win, const T* u,
                 int64_t steps, const HebbianParams<T>& p, T* x_scratch, CudaExec e) {
  const int64_t n = p.n;
  PDNN_CHECK(n >= 1 && steps >= 0, "cuda::hebbian_run: n = %lld, steps = %lld: need n >= 1, steps >= 0",
             static_cast<long long>(n), static_cast<long long>(steps));
  PDNN_CHECK(W && x && first_nonfinite_step && win && (u || steps == 0) && x_scratch,
             "cuda::hebbian_run: a null pointer");
  PDNN_CHECK(x_scratch != x, "cuda::hebbian_run: x_scratch must not be x (x is double-buffered)");
  cudaStream_t s = stream_of(e);
  if (steps == 0) {
    PDNN_CUDA_CHECK(cudaMemsetAsync(first_nonfinite_step, 0xff, sizeof(int64_t), s));  // -1
    return;
  }
  // 0x7f... is larger than any key a run can produce: "nothing found yet".
  PDNN_CUDA_CHECK(cudaMemsetAsync(first_nonfinite_step, 0x7f, sizeof(int64_t), s));

  RunArgs<T> args{W, x, x_scratch, first_nonfinite_step, win, u, steps, p, 0};
  const Layout l = layout<T>(p);
  args.rows_per_block = static_cast<int>(l.rows);
  if (l.on_chip) launch_run<T, true>(args, static_cast<int>(l.blocks), l.smem, s);
  else launch_run<T, false>(args, static_cast<int>(l.blocks), l.smem, s);
}

template <typename T>
bool hebbian_w_on_chip(const HebbianParams<T>& p) {
  return layout<T>(p).on_chip;
}

#define PDNN_HEBBIAN_CUDA(T)                                                                   \
  template void gemv<T>(T*, const T*, const T*, int64_t, int64_t, CudaExec);                  \
  template void reservoir_update<T>(T*, const T*, const T*, const T*, const T*,               \
                                    const HebbianParams<T>&, CudaExec);                       \
  template void oja_update<T>(T*, const T*, T, int64_t, CudaExec);                            \
  template void first_nonfinite<T>(int64_t*, const T*, int64_t, CudaExec);                    \
  template void hebbian_run<T>(T*, T*, int64_t*, const T*, const T*, int64_t,                 \
                               const HebbianParams<T>&, T*, CudaExec);                        \
  template bool hebbian_w_on_chip<T>(const HebbianParams<T>&);
PDNN_HEBBIAN_CUDA(float)
PDNN_HEBBIAN_CUDA(double)
#undef PDNN_HEBBIAN_CUDA

}  // namespace cuda
}  // namespace pdnn
