// Dense: CPU kernels over cpu::gemm, and dispatch (see dense.h).
#include "ops/dense.h"

#include "ops/activation.h"
#include "ops/dispatch.h"
#include "ops/gemm.h"

namespace pdnn {

namespace cpu {

void dense_forward(int64_t n, int64_t in, int64_t out, const float* x, const float* w,
                   const float* b, float* y, Act act, CpuExec e) {
  // Broadcast the bias into y, then one GEMM accumulates x W^T on top (beta = 1).
  float beta = 0.f;
  if (b) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t o = 0; o < out; ++o) y[i * out + o] = b[o];
    beta = 1.f;
  }
  gemm(false, true, n, out, in, 1.f, x, w, beta, y, e);
  if (act.kind == FusedAct::ReLU) relu_forward(n * out, y, y, e);
  if (act.kind == FusedAct::LeakyReLU) leaky_relu_forward(n * out, act.slope, y, y, e);
}

void dense_backward(int64_t n, int64_t in, int64_t out, const float* x, const float* w,
                    const float* dy, const float* y, float* dw, float* db, float* dx, Act act,
                    float* ws, bool dw_zero, CpuExec e) {
  if (act.kind == FusedAct::ReLU) relu_backward(n * out, y, dy, ws, e);
  if (act.kind == FusedAct::LeakyReLU) leaky_relu_backward(n * out, act.slope, y, dy, ws, e);
  if (act.kind != FusedAct::None) dy = ws;
  gemm(true, false, out, in, n, 1.f, dy, x, dw_zero ? 0.f : 1.f, dw, e);
  if (db) {
    // Rows in order: a fixed summation order at any thread count.
    for (int64_t i = 0; i < n; ++i)
      for (int64_t o = 0; o < out; ++o) db[o] += dy[i * out + o];
  }
  if (dx) gemm(false, false, n, in, out, 1.f, dy, w, 0.f, dx, e);
}

}  // namespace cpu

namespace ops {

void dense_forward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y,
                   Act act) {
  const int64_t out = w.shape(0), in = w.shape(1), n = x.shape(0);
  PDNN_CHECK(x.numel() == n * in && y.numel() == n * out && (b.empty() || b.numel() == out),
             "dense_forward: x %s, w %s, b %s, y %s do not agree", x.shape().str().c_str(),
             w.shape().str().c_str(), b.shape().str().c_str(), y.shape().str().c_str());
  const Device d = op_device("dense_forward", {&x, &w, b.empty() ? nullptr : &b, &y});
  check_same_dtype("dense_forward", {&x, &w, &y});
  if (x.dtype() == DType::BF16) {
    float* ws = d == Device::CUDA ? ctx.workspace(d, static_cast<size_t>(n * out)) : nullptr;
    PDNN_DISPATCH_GPU(ctx, d, dense_forward, n, in, out, x.data<bf16>(), w.data<bf16>(),
                      b.empty() ? nullptr : b.data(), y.data<bf16>(), act, ws);
    return;
  }
  PDNN_DISPATCH(ctx, d, dense_forward, n, in, out, x.data(), w.data(),
                b.empty() ? nullptr : b.data(), y.data(), act);
}

void dense_backward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& dy,
                    const Tensor& y, Tensor& dw, Tensor& db, Tensor* dx, Act act, bool dw_zero) {
  const int64_t out = w.shape(0), in = w.shape(1), n = x.shape(0);
  PDNN_CHECK(x.numel() == n * in && dy.numel() == n * out && dw.numel() == w.numel() &&
                 (db.empty() || db.numel() == out) && (!dx || dx->numel() == x.numel()) &&
                 (act.kind == FusedAct::None || y.numel() == dy.numel()),
             "dense_backward: x %s, w %s, dy %s do not agree", x.shape().str().c_str(),
             w.shape().str().c_str(), dy.shape().str().c_str());
  const Device d = op_device("dense_backward", {&x, &w, &dy, act.kind == FusedAct::None ? nullptr : &y,
                                                &dw, db.empty() ? nullptr : &db, dx});
  check_same_dtype("dense_backward",
                   {&x, &w, &dy, act.kind == FusedAct::None ? nullptr : &y, dx});
  if (x.dtype() == DType::BF16) {
    if (d != Device::CUDA) fail_bf16_on_cpu("dense_backward");
    float* ws = act.kind == FusedAct::None ? nullptr
                                           : ctx.workspace(d, static_cast<size_t>(n * out + 1) / 2);
    PDNN_DISPATCH_GPU(ctx, d, dense_backward, n, in, out, x.data<bf16>(), w.data<bf16>(),
                      dy.data<bf16>(), act.kind == FusedAct::None ? nullptr : y.data<bf16>(),
                      dw.data(), db.empty() ? nullptr : db.data(),
                      dx ? dx->data<bf16>() : nullptr, act, ws, dw_zero);
    return;
  }
  float* ws = act.kind == FusedAct::None ? nullptr : ctx.workspace(d, static_cast<size_t>(n * out));
  PDNN_DISPATCH(ctx, d, dense_backward, n, in, out, x.data(), w.data(), dy.data(),
                act.kind == FusedAct::None ? nullptr : y.data(), dw.data(),
                db.empty() ? nullptr : db.data(), dx ? dx->data() : nullptr, act, ws, dw_zero);
}

}  // namespace ops
}  // namespace pdnn
