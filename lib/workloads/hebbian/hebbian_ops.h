// W6 kernels (SPEC.md, issue 10): an echo-state reservoir whose recurrent weights learn by Oja's
// rule at every step. With x (n), W (n,n) row-major, win (n) and one scalar input u[s-1] per step:
//   step s = 1..T:  pre = W x + win u[s-1];  x <- keep x + gain tanh(pre);
//                   W[i][j] += lr (x_i x_j - x_i^2 W[i][j])        (with the new x)
// keep = gain = 1 is W6 as written: x is not leaky, grows, and W can overflow on long runs;
// keep = 1-a, gain = a is the leaky variant, whose x stays in [-1, 1].
//
// Two levels, each with cpu:: and cuda:: twins of the same name and arguments (only the last,
// the execution argument, differs; on cuda:: every pointer is device memory), and an ops::
// function over Tensors that checks them and dispatches to the twin of their device:
//  - the four ops of one step: gemv, reservoir_update (the tanh recurrence), oja_update (the
//    rank-1 update) and first_nonfinite (a reduction);
//  - hebbian_run: T steps in one call. It fuses each step's Oja update with the next step's
//    W x, so W is read and written once per step (2 n^2 elements of memory traffic), and it
//    never returns to the caller between steps (the CUDA twin is one persistent kernel).
// Steps are counted from 1; "step 0" is the initial state. first_nonfinite_step is the first
// step s whose x_s or W_s holds a NaN or an infinity (0: W_0 already does), or -1 if none.
#pragma once
#include <cstdint>

#include "core/context.h"
#include "core/exec.h"
#include "core/tensor.h"

namespace pdnn {

template <typename T>
struct HebbianParams {
  int64_t n = 0;          // reservoir units
  T lr = T(1e-6);         // Oja's learning rate
  T keep = 1, gain = 1;   // x <- keep x + gain tanh(pre)
  // CUDA only: keep W in shared memory for the whole run when it fits (fp32 up to n ~ 2,800 on
  // an H100: 132 SMs x 227 KB), instead of streaming it from L2/HBM every step.
  bool w_on_chip = true;
};

// n units, Oja rate lr, leak a in [0, 1]: a = 0 is W6 as written (keep = gain = 1), a > 0 the
// leaky variant (keep = 1 - a, gain = a). Throws pdnn::Error on n < 1, a outside [0, 1] or a
// negative or non-finite lr.
template <typename T>
HebbianParams<T> hebbian_params(int64_t n, double lr, double leak);

namespace cpu {

// y (m) = A (m,n) x (n). Rows over e.threads threads; each row's sum in the same order at any
// thread count.
template <typename T>
void gemv(T* y, const T* A, const T* x, int64_t m, int64_t n, CpuExec e);

// x_out (n) = keep x + gain tanh(pre + win u[0]); u points at this step's one input value.
// x_out may be x.
template <typename T>
void reservoir_update(T* x_out, const T* x, const T* pre, const T* win, const T* u,
                      const HebbianParams<T>& p, CpuExec e);

// W (n,n) += lr (x x^T - diag(x)^2 W), in place.
template <typename T>
void oja_update(T* W, const T* x, T lr, int64_t n, CpuExec e);

// *index = the smallest i with v[i] NaN or infinite, or -1.
template <typename T>
void first_nonfinite(int64_t* index, const T* v, int64_t n, CpuExec e);

// `steps` steps of the reservoir from state (W, x), inputs u[0 .. steps-1]; W and x are updated
// in place. Stops after the step where a non-finite value first appears (*first_nonfinite_step,
// see above); W and x then hold that step's partly computed values. x_scratch: n elements, not
// x. One OpenMP region for all steps (a barrier per step, no fork/join); rows are split
// statically, so the result is bit-identical at any thread count.
template <typename T>
void hebbian_run(T* W, T* x, int64_t* first_nonfinite_step, const T* win, const T* u,
                 int64_t steps, const HebbianParams<T>& p, T* x_scratch, CpuExec e);

}  // namespace cpu

// The CUDA twins (lib/workloads/hebbian/hebbian_ops.cu, CUDA builds only: calls need PDNN_HAVE_CUDA). Pointers are
// device memory, u and index included; nothing is read back to the host, and calls are
// asynchronous on e.stream.
namespace cuda {

template <typename T>
void gemv(T* y, const T* A, const T* x, int64_t m, int64_t n, CudaExec e);
template <typename T>
void reservoir_update(T* x_out, const T* x, const T* pre, const T* win, const T* u,
                      const HebbianParams<T>& p, CudaExec e);
template <typename T>
void oja_update(T* W, const T* x, T lr, int64_t n, CudaExec e);
template <typename T>
void first_nonfinite(int64_t* index, const T* v, int64_t n, CudaExec e);
// One cooperative (persistent) kernel for all steps, a grid-wide barrier per step. W stays in
// shared memory when p.w_on_chip and it fits, else it streams from global memory every step.
template <typename T>
void hebbian_run(T* W, T* x, int64_t* first_nonfinite_step, const T* win, const T* u,
                 int64_t steps, const HebbianParams<T>& p, T* x_scratch, CudaExec e);
// Whether hebbian_run with p keeps W on chip on the current device (for logs and results).
template <typename T>
bool hebbian_w_on_chip(const HebbianParams<T>& p);

}  // namespace cuda

// The ops over Tensors. Every tensor of a call is on one device (the CPU, or the GPU of ctx),
// of T's dtype (F32 for float, F64 for double) unless said otherwise, with the shapes given;
// anything else is a pdnn::Error naming the op. Nothing is read back to the host: on the GPU
// the calls are asynchronous on ctx's stream.
namespace ops {

// y (m) = A (m,n) x (n).
template <typename T>
void gemv(Context& ctx, Tensor& y, const Tensor& A, const Tensor& x);
// x_out (n) = keep x + gain tanh(pre + win u) for x, pre, win (n) and u (1), this step's input
// (a slice of the input sequence). x_out may be x. n = p.n.
template <typename T>
void reservoir_update(Context& ctx, Tensor& x_out, const Tensor& x, const Tensor& pre,
                      const Tensor& win, const Tensor& u, const HebbianParams<T>& p);
// W (n,n) += lr (x x^T - diag(x)^2 W), x (n).
template <typename T>
void oja_update(Context& ctx, Tensor& W, const Tensor& x, T lr);
// index (1, int64) = the smallest i with v.data()[i] NaN or infinite, or -1; v any shape.
template <typename T>
void first_nonfinite(Context& ctx, Tensor& index, const Tensor& v);
// `steps` steps from state (W (n,n), x (n)) with inputs u[first .. first+steps-1] of the input
// sequence u (rank 1, at least first+steps values), win (n); first_nonfinite_step (1, int64)
// as cpu::hebbian_run says (counted from `first`). x_scratch (n) must not share x's memory.
template <typename T>
void hebbian_run(Context& ctx, Tensor& W, Tensor& x, Tensor& first_nonfinite_step,
                 const Tensor& win, const Tensor& u, int64_t first, int64_t steps,
                 const HebbianParams<T>& p, Tensor& x_scratch);
// Whether hebbian_run on ctx's device keeps W on chip with p: false on a CPU context (and in
// builds without CUDA), cuda::hebbian_w_on_chip on a GPU one.
template <typename T>
bool hebbian_w_on_chip(const Context& ctx, const HebbianParams<T>& p);

}  // namespace ops
}  // namespace pdnn
