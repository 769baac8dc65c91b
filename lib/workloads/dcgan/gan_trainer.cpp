// GanTrainer: the DCGAN iteration inside the step shell (gan_trainer.h).
#include "workloads/dcgan/gan_trainer.h"

#include "core/error.h"
#include "core/rng.h"
#include "ops/basic.h"
#include "ops/loss.h"
#include "ops/metrics.h"
#include "ops/random.h"

namespace pdnn {

GanTrainer::GanTrainer(Model& g, Model& d, Optimizer& opt_g, Optimizer& opt_d,
                       int64_t nz, int64_t history_rows, bool cuda_graph, bool overlap_copy)
    : g_(g), d_(d), opt_g_(opt_g), opt_d_(opt_d), nz_(nz), history_rows_(history_rows),
      shell_({&opt_d, &opt_g}, "dcgan trainer", cuda_graph, overlap_copy) {
  PDNN_CHECK(nz >= 1 && history_rows >= 1, "GanTrainer: nz %lld and history rows %lld must be >= 1",
             static_cast<long long>(nz), static_cast<long long>(history_rows));
  PDNN_CHECK(g.device() == d.device(), "GanTrainer: G is on %s, D on %s",
             device_name(g.device()), device_name(d.device()));
  PDNN_CHECK(opt_g.updates(g.parameters()) && opt_d.updates(d.parameters()),
             "GanTrainer: each optimizer must be built over its own model's parameters");
  // The profiler's rows for the two updates ("G.update", "D.update").
  for (auto [opt, m] : {std::pair<Optimizer*, Model*>{&opt_g, &g}, {&opt_d, &d}})
    opt->set_label(m->name().empty() ? "update" : m->name() + ".update");
}

GanTrainer::~GanTrainer() = default;

void GanTrainer::ensure_buffers(Context& ctx, int64_t n) {
  const Device dev = g_.device();
  if (acc_.empty() || acc_.device() != dev) {
    acc_ = Tensor::empty(Shape{kGanSlots}, DType::F64, dev, ctx);
    history_ = Tensor::empty(Shape{history_rows_, kGanSlots}, DType::F64, dev, ctx);
    row_ = Tensor::empty(Shape{1}, DType::I64, dev, ctx);
    far_ = Tensor::empty(Shape{4}, DType::F64, dev, ctx);
    ops::zero(ctx, acc_);
    ops::zero(ctx, history_);
    ops::zero(ctx, row_);
    ops::zero(ctx, far_);
  }
  if (n != batch_ || ones_.device() != dev) {
    // Grow-only buffers: a smaller last batch reuses them (same addresses).
    z_.resize(Shape{n, nz_, 1, 1}, DType::F32, dev, ctx);
    ones_.resize(Shape{n, 1, 1, 1}, DType::F32, dev, ctx);
    zeros_.resize(Shape{n, 1, 1, 1}, DType::F32, dev, ctx);
    ops::fill(ctx, ones_, 1.f);
    ops::fill(ctx, zeros_, 0.f);
    batch_ = n;
  }
}

void GanTrainer::distribute(Communicator& comm, Context& ctx) {
  PDNN_CHECK(!sync_g_, "GanTrainer: distribute() twice");
  PDNN_CHECK(!g_pending_, "GanTrainer: distribute() after training began");
  sync_g_ = std::make_unique<GradSync>(comm, g_, ctx);
  sync_d_ = std::make_unique<GradSync>(comm, d_, ctx);
  shell_.reset_graph();  // a graph captured before holds no all-reduce
}

void GanTrainer::set_defer_g(DeferG d) {
  PDNN_CHECK(!g_pending_, "GanTrainer: set_defer_g() while G's update is pending (flush first)");
  defer_ = d;
}

bool GanTrainer::defers_g() const {
  // Eagerly, on 2 H200s, deferring made the 2-GPU step slower (9.97 ms against 8.32 without
  // overlap); captured, it is as fast or faster (results/scale/w5-defer-h200x2/).
  if (defer_ == DeferG::kAuto)
    return sync_g_ && sync_g_->overlapped() && g_.device() == Device::CUDA && shell_.captures();
  return defer_ == DeferG::kAlways;
}

void GanTrainer::apply_g_update(Context& ctx) {
  if (sync_g_) sync_g_->finish(ctx);
  opt_g_.step(ctx);
  g_pending_ = false;
}

void GanTrainer::flush(Context& ctx) {
  if (!g_pending_) return;
  if (sync_g_) sync_g_->start_all(ctx);
  apply_g_update(ctx);
}

void GanTrainer::prob_mean(Context& ctx, const Tensor& p, int64_t slot) {
  if (global_batch_ == 0) return ops::prob_mean_into(ctx, p, acc_, slot);
  // This rank's share of the global batch mean (the ranks' shares sum to it); the distance
  // from 0 or 1 is its shard's, kept apart.
  ops::sum_into(ctx, static_cast<float>(1.0 / static_cast<double>(global_batch_)), p, acc_, slot);
  ops::prob_mean_into(ctx, p, far_, slot == kGanDx ? 0 : 2);
}

void GanTrainer::shard_far(Context& ctx, double* d_x_far, double* d_g_z_far) {
  *d_x_far = *d_g_z_far = 0;
  if (far_.empty()) return;
  const Tensor h = far_.device() == Device::CPU ? far_ : far_.to(Device::CPU, ctx);
  *d_x_far = h.data<double>()[1];
  *d_g_z_far = h.data<double>()[3];
}

void GanTrainer::run_step(Context& ctx) {
  const Tensor& real = *x_;
  const int64_t gb = global_batch_;  // 0: the batch is all there is
  // The last iteration's deferred G update: its sum runs under D's real-batch pass.
  const bool pending = g_pending_;
  if (pending && sync_g_) sync_g_->start_all(ctx);
  // D step: real batch, then fake batch, each forward followed by its backward.
  d_.zero_grad(ctx);
  const Tensor& p_real = d_.forward(ctx, real);
  bce_real_.forward(ctx, p_real, ones_);
  bce_real_.accumulate(ctx, acc_, kGanDLoss, gb);
  prob_mean(ctx, p_real, kGanDx);
  bce_real_.backward(ctx, dp_, gb);
  d_.backward(ctx, dp_);
  if (pending) apply_g_update(ctx);  // G is read from here on

  ops::normal_fill(ctx, z_);
  const Tensor& fake = g_.forward(ctx, z_);
  const Tensor& p_fake = d_.forward(ctx, fake);
  bce_fake_.forward(ctx, p_fake, zeros_);
  bce_fake_.accumulate(ctx, acc_, kGanDLoss, gb);
  prob_mean(ctx, p_fake, kGanDgz);
  bce_fake_.backward(ctx, dp_, gb);
  // D's gradients now hold the real and the fake batch's: summed over the ranks during this
  // backward, each layer's as soon as it is done.
  if (sync_d_) sync_d_->begin(ctx);
  d_.backward(ctx, dp_);
  if (sync_d_) sync_d_->finish(ctx);
  opt_d_.step(ctx);

  // G step: the updated D on the same fake batch, gradient through D into G.
  g_.zero_grad(ctx);
  const Tensor& p_g = d_.forward(ctx, fake);
  bce_g_.forward(ctx, p_g, ones_);
  bce_g_.accumulate(ctx, acc_, kGanGLoss, gb);
  bce_g_.backward(ctx, dp_, gb);
  // D's own gradients are not needed here (zeroed before its next step): skip computing them.
  d_.backward(ctx, dp_, /*want_input_grad=*/true, /*want_param_grads=*/false);
  if (defers_g()) {
    g_.backward(ctx, d_.input_grad());
    g_pending_ = true;  // summed and applied by the next step (or flush())
  } else {
    if (sync_g_) sync_g_->begin(ctx);
    g_.backward(ctx, d_.input_grad());
    if (sync_g_) sync_g_->finish(ctx);
    opt_g_.step(ctx);
  }
  ops::append_row(ctx, acc_, history_, row_);
}

void GanTrainer::step(Context& ctx, const Tensor& real, int64_t global_batch) {
  PDNN_CHECK(real.rank() == 4 && real.dtype() == DType::F32 && real.shape(0) >= 1,
             "dcgan trainer: the real batch %s must be (N,C,H,W) float32",
             real.shape().str().c_str());
  PDNN_CHECK(global_batch == 0 || (sync_g_ && global_batch >= real.shape(0)),
             "dcgan trainer: a shard of %lld rows of a global batch of %lld needs distribute() "
             "first", static_cast<long long>(real.shape(0)), static_cast<long long>(global_batch));
  global_batch_ = global_batch;
  const Device dev = g_.device();
  const int64_t n = real.shape(0);
  ensure_buffers(ctx, n);
  // The caller refills `real` (a pinned buffer) for the next iteration as soon as this returns.
  shell_.stage(ctx, dev, {{&real, DType::F32}});
  x_ = &shell_.batch(0);
  ++steps_;
  // A step with no deferred G update to finish (the first, or the first after flush()) is not
  // the captured one: it runs eagerly.
  shell_.run(ctx, [this, &ctx] { run_step(ctx); }, /*eager=*/!g_pending_ && defers_g());
}

GanMetrics GanTrainer::metrics(Context& ctx) {
  GanMetrics m;
  m.steps = steps_;
  if (acc_.empty()) return m;
  const Tensor h = acc_.device() == Device::CPU ? acc_ : acc_.to(Device::CPU, ctx);
  const double* a = h.data<double>();
  m.d_loss = a[kGanDLoss];
  m.g_loss = a[kGanGLoss];
  m.d_x = a[kGanDx];
  m.d_x_far = a[kGanDxFar];
  m.d_g_z = a[kGanDgz];
  m.d_g_z_far = a[kGanDgzFar];
  return m;
}

void GanTrainer::reset_metrics(Context& ctx) {
  steps_ = 0;
  if (acc_.empty()) return;
  ops::zero(ctx, acc_);
  ops::zero(ctx, row_);
  ops::zero(ctx, far_);
}

std::vector<GanIteration> GanTrainer::history(Context& ctx) {
  std::vector<GanIteration> out;
  if (history_.empty()) return out;
  const Tensor h = history_.device() == Device::CPU ? history_ : history_.to(Device::CPU, ctx);
  const double* p = h.data<double>();
  const int64_t rows = std::min(steps_, history_rows_);
  double prev[kGanSlots] = {0, 0, 0, 0, 0, 0};
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = p + r * kGanSlots;
    out.push_back({row[kGanDLoss] - prev[kGanDLoss], row[kGanGLoss] - prev[kGanGLoss],
                   row[kGanDx] - prev[kGanDx], row[kGanDgz] - prev[kGanDgz]});
    std::copy(row, row + kGanSlots, prev);
  }
  return out;
}

}  // namespace pdnn
