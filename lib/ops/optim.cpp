// Optimizer updates: CPU kernels and dispatch (see optim.h).
#include "ops/optim.h"

#include <cmath>

#include "core/parallel.h"
#include "ops/dispatch.h"
#include "ops/optim_formula.h"

namespace pdnn {

namespace cpu {

// The elements' arithmetic is ops/optim_formula.h's, shared with the GPU kernels.
void sgd_update(int64_t n, const SgdArgs& a, const int64_t* step, const float* g, float* w,
                float* buf, CpuExec e) {
  const bool first = *step <= 1;
  const SgdArgs c = a;
  parallel_for(e, n, PDNN_PAR(n), [=](int64_t i) {
    formula::sgd(w[i], c.has_buffer ? buf + i : nullptr, g[i], first, c.lr, c.momentum, c.keep,
                 c.weight_decay, c.nesterov);
  });
}

void adagrad_update(int64_t n, const AdagradArgs& a, const int64_t* step, const float* g, float* w,
                    float* sum, CpuExec e) {
  const float clr = formula::adagrad_rate(a.lr, a.lr_decay, *step);
  const float wd = a.weight_decay, eps = a.eps;
  parallel_for(e, n, PDNN_PAR(n), [=](int64_t i) {
    formula::adagrad(w[i], sum[i], g[i], clr, wd, eps);
  });
}

void adadelta_update(int64_t n, const AdadeltaArgs& a, const float* g, float* w,
                     float* square_avg, float* acc_delta, CpuExec e) {
  const float lr = a.lr, rho = a.rho, keep = a.keep, eps = a.eps, wd = a.weight_decay;
  parallel_for(e, n, PDNN_PAR(n), [=](int64_t i) {
    formula::adadelta(w[i], square_avg[i], acc_delta[i], g[i], lr, rho, keep, eps, wd);
  });
}

void adam_update(int64_t n, const AdamArgs& a, const int64_t* step, const float* g, float* w,
                 float* m, float* v, CpuExec e) {
  const double s = static_cast<double>(*step);
  const double bc1 = 1.0 - std::pow(a.beta1, s), bc2 = 1.0 - std::pow(a.beta2, s);
  const float c[6] = {static_cast<float>(a.lr / bc1), static_cast<float>(std::sqrt(bc2)),
                      static_cast<float>(a.beta1), static_cast<float>(1.0 - a.beta1),
                      static_cast<float>(a.beta2), static_cast<float>(1.0 - a.beta2)};
  const float eps = a.eps, wd = a.weight_decay;
  parallel_for(e, n, PDNN_PAR(n), [=, &c](int64_t i) {
    formula::adam(w[i], m[i], v[i], g[i], c, wd, eps);
  });
}

}  // namespace cpu

namespace ops {

namespace {
Device check_flat(const char* op, const Tensor* step, std::initializer_list<const Tensor*> ts) {
  const Tensor* first = *ts.begin();
  for (const Tensor* t : ts)
    PDNN_CHECK(!t || t->numel() == first->numel(), "%s: flat buffers of %lld and %lld values",
               op, static_cast<long long>(first->numel()), static_cast<long long>(t->numel()));
  if (step)
    PDNN_CHECK(step->numel() == 1 && step->dtype() == DType::I64,
               "%s: step must be one int64", op);
  std::initializer_list<const Tensor*> all = ts;
  const Device d = op_device(op, all);
  if (step) op_device(op, {first, step});
  return d;
}
}  // namespace

void sgd_update(Context& ctx, const SgdArgs& a, const Tensor& step, const Tensor& g, Tensor& w,
                Tensor& buf) {
  const Device d = check_flat("sgd_update", &step, {&g, &w, a.has_buffer ? &buf : nullptr});
  PDNN_DISPATCH(ctx, d, sgd_update, w.numel(), a, step.data<int64_t>(), g.data(), w.data(),
                a.has_buffer ? buf.data() : nullptr);
}

void adagrad_update(Context& ctx, const AdagradArgs& a, const Tensor& step, const Tensor& g,
                    Tensor& w, Tensor& sum) {
  const Device d = check_flat("adagrad_update", &step, {&g, &w, &sum});
  PDNN_DISPATCH(ctx, d, adagrad_update, w.numel(), a, step.data<int64_t>(), g.data(), w.data(),
                sum.data());
}

void adadelta_update(Context& ctx, const AdadeltaArgs& a, const Tensor& g, Tensor& w,
                     Tensor& square_avg, Tensor& acc_delta) {
  const Device d = check_flat("adadelta_update", nullptr, {&g, &w, &square_avg, &acc_delta});
  PDNN_DISPATCH(ctx, d, adadelta_update, w.numel(), a, g.data(), w.data(), square_avg.data(),
                acc_delta.data());
}

void adam_update(Context& ctx, const AdamArgs& a, const Tensor& step, const Tensor& g, Tensor& w,
                 Tensor& m, Tensor& v) {
  const Device d = check_flat("adam_update", &step, {&g, &w, &m, &v});
  PDNN_DISPATCH(ctx, d, adam_update, w.numel(), a, step.data<int64_t>(), g.data(), w.data(),
                m.data(), v.data());
}

}  // namespace ops
}  // namespace pdnn
