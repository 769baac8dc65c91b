// Sequential: forward/backward through the layers with model-owned, reused buffers; summary.
#include "model/sequential.h"

#include <algorithm>

#include "core/cuda_state.h"
#include "core/error.h"
#include "ops/basic.h"
#include "ops/cast.h"
#include "core/profile_hook.h"

namespace pdnn {

// The copy stream of a planned step on the GPU and its events, per executed layer: its output
// written (ready), copied out (d2h), its slot free for the copy back (issue), copied back (h2d).
struct CopyLane {
  CUstream_st* stream = nullptr;
  std::vector<CUevent_st*> ready, d2h, issue, h2d;
  explicit CopyLane(size_t n) : ready(n), d2h(n), issue(n), h2d(n) {
    stream = cuda_stream_create();
    for (auto* v : {&ready, &d2h, &issue, &h2d})
      for (CUevent_st*& e : *v) e = cuda_event_create();
  }
  ~CopyLane() {
    for (auto* v : {&ready, &d2h, &issue, &h2d})
      for (CUevent_st* e : *v) cuda_event_destroy(e);
    cuda_stream_destroy(stream);
  }
  CopyLane(const CopyLane&) = delete;
  CopyLane& operator=(const CopyLane&) = delete;
};

Layer& Sequential::add(std::unique_ptr<Layer> layer) {
  PDNN_CHECK(layer != nullptr, "sequential: add(nullptr)");
  PDNN_CHECK(device() == Device::CPU, "sequential: add a layer before moving the model to %s",
             device_name(device()));
  layers_.push_back(std::move(layer));
  acts_.resize(layers_.size());
  absorbed_.resize(layers_.size(), false);
  fusion_checked_ = false;
  *params_ = ParamSet();  // gathered again, with the new layer's, on next use
  have_forward_ = false;
  return *layers_.back();
}

std::unique_ptr<Layer> Sequential::replace(size_t i, std::unique_ptr<Layer> layer) {
  PDNN_CHECK(layer != nullptr && i < layers_.size(), "sequential: replace(%zu) of %zu layers%s",
             i, layers_.size(), layer ? "" : " with nullptr");
  PDNN_CHECK(device() == Device::CPU && !fusion_checked_,
             "sequential: replace a layer before the model's first forward and before it moves");
  std::swap(layers_[i], layer);
  *params_ = ParamSet();
  have_forward_ = false;
  return layer;
}

std::string Sequential::label(size_t i) const {
  return name_.empty() ? std::to_string(i) : name_ + "." + std::to_string(i);
}

std::string Sequential::who(size_t i) const {
  return "layer " + label(i) + " (" + layers_[i]->describe() + ")";
}

ParamSet& Sequential::parameters() {
  if (!params_->built()) {
    std::vector<Param> ps;
    for (size_t i = 0; i < layers_.size(); ++i)
      for (Param p : layers_[i]->params()) {
        p.name = std::to_string(i) + "." + p.name;
        ps.push_back(p);
      }
    params_->build(std::move(ps));
  }
  return *params_;
}

Device Sequential::device() { return params_->built() ? params_->device() : Device::CPU; }

void Sequential::to(Device dev, Context& ctx) {
  parameters().to(dev, ctx);
  for (Param& b : buffers())
    if (b.value->device() != dev) *b.value = b.value->to(dev, ctx);
  // Activation buffers are made again on the new device by the next forward.
  for (Tensor& a : acts_) a = Tensor();
  grads_[0] = grads_[1] = x_in_ = dx_in_ = Tensor();
  w16_ = x16_ = dx16_ = out32_ = dy16_ = Tensor();
  w16_given_ = nullptr;
  arena_ = rng_slots_ = Tensor();  // a memory plan's buffers, likewise
  layout_key_ = Shape();
  for (Tensor& h : host_) h = Tensor();
  have_forward_ = false;
  awaiting_backward_ = false;
  overwritten_ = 0;
}

void Sequential::fuse_activations() {
  fusion_checked_ = true;
  if (!fusion_) return;
  for (size_t i = 1; i < layers_.size(); ++i) {
    if (absorbed_[i] || absorbed_[i - 1]) continue;
    const Act a = layers_[i]->fusable_activation();
    if (a.kind != FusedAct::None && layers_[i - 1]->fuse_activation(a)) absorbed_[i] = true;
    const float p = layers_[i]->fusable_dropout();
    if (p >= 0.f && layers_[i - 1]->fuse_dropout(p)) absorbed_[i] = true;
  }
  // A fused activation's derivative, folded into the next executed layer's backward.
  for (size_t i = 0; i + 1 < layers_.size(); ++i) {
    if (absorbed_[i] || i + 1 >= layers_.size() || !absorbed_[i + 1]) continue;
    const Act a = layers_[i + 1]->fusable_activation();
    if (a.kind == FusedAct::None || !layers_[i]->can_take_activation_grad()) continue;
    size_t j = i + 1;
    while (j < layers_.size() && absorbed_[j]) ++j;
    if (j < layers_.size() && layers_[j]->fold_input_activation(a))
      layers_[i]->take_activation_grad(true);
  }
}

void Sequential::set_fusion(bool on) {
  PDNN_CHECK(on || !fusion_checked_ || std::none_of(absorbed_.begin(), absorbed_.end(),
                                                    [](bool b) { return b; }),
             "sequential: set_fusion(false) after layers were fused (call it before the first "
             "forward)");
  fusion_ = on;
}

void Sequential::refresh_bf16(Context& ctx) {
  PDNN_CHECK(device() == Device::CUDA,
             "sequential: --precision bf16 on the %s: the CPU has no bf16 path (pdnn's bf16 "
             "kernels run on the GPU); use fp32", device_name(device()));
  PDNN_CHECK(!has_placements(),
             "sequential: --precision bf16 under a memory plan (--gpu-memory-limit) is not "
             "implemented yet: the plan's buffer holds float32 activations; run bf16 uncapped");
  ParamSet& ps = parameters();
  ops::refresh_bf16_copy(ctx, ps.values(), w16_);
  if (w16_.raw_data() == w16_given_) return;
  size_t k = 0;
  for (auto& l : layers_) {
    std::vector<Tensor> views;
    for (const Param& p : l->params()) views.push_back(w16_.slice(ps.offset(k++), p.value->shape()));
    l->set_bf16_params(views);
  }
  w16_given_ = w16_.raw_data();
}

const Tensor& Sequential::forward(Context& ctx, const Tensor& x) {
  PDNN_CHECK(!layers_.empty(), "sequential: forward through an empty model");
  if (!fusion_checked_) fuse_activations();
  PDNN_CHECK(x.device() == device(),
             "sequential: input %s is on %s, the model on %s (move one: model.to() or x.to())",
             x.shape().str().c_str(), device_name(x.device()), device_name(device()));
  ProfileHook* prof = ctx.profile_hook();
  overwritten_ = awaiting_backward_ ? overwritten_ + 1 : 0;
  awaiting_backward_ = training_;
  planned_step_ = has_placements() && training_;
  const bool bf16 = ctx.precision() == Precision::Bf16;
  const DType act_dtype = bf16 ? DType::BF16 : DType::F32;
  in_dtype_ = x.dtype();
  x_in_ = x;
  if (bf16) {
    refresh_bf16(ctx);
    if (x.dtype() != DType::BF16) {
      MemoryRole role(ctx, "the model's input in bf16");
      x16_.resize(x.shape(), DType::BF16, x.device(), ctx);
      ops::cast(ctx, x, x16_);
      x_in_ = x16_;
    }
  }
  if (planned_step_) prepare_arena(ctx, x.shape());
  const Tensor* in = &x_in_;
  for (size_t i = 0; i < layers_.size(); ++i) {
    Layer& l = *layers_[i];
    if (absorbed_[i]) {  // the layer before applied it: its output is this layer's output
      acts_[i] = acts_[i - 1];
      in = &acts_[i];
      continue;
    }
    const Shape out = l.output_shape(in->shape());
    if (planned_step_) {  // its place in the arena; the RNG position, for recomputation
      copies_at(ctx, order_[i]);
      acts_[i] = arena_.slice(layout_.out_offset[static_cast<size_t>(order_[i])], out);
      rng_at_[i] = ctx.rng().counter();
      if (where_[i] == Placement::Recompute) save_rng(ctx, static_cast<size_t>(order_[i]));
      present_[i] = 1;
    } else if (has_placements() && !arena_.empty() && arena_.device() == x.device() &&
               out.numel() <= slot_floats_[static_cast<size_t>(order_[i])]) {
      // Evaluation under a plan: the training forward's slot (it and the slot of the layer
      // before never overlap), so evaluation allocates nothing either.
      acts_[i] = arena_.slice(layout_.out_offset[static_cast<size_t>(order_[i])], out);
    } else {
      if (has_placements()) acts_[i] = Tensor();  // not a view of the arena: its own buffer
      MemoryRole role(ctx, [this, i] { return "the activation (output) of " + who(i); });
      acts_[i].resize(out, act_dtype, x.device(), ctx);
    }
    MemoryRole role(ctx, [this, i] { return who(i) + " forward"; });
    if (prof) {
      prof->begin_pass(ctx);
      l.forward(ctx, *in, acts_[i]);
      prof->end_forward(ctx, {&l, label(i), l.kind(), l.describe(), out, l.flops(in->shape())});
    } else {
      l.forward(ctx, *in, acts_[i]);
    }
    in = &acts_[i];
    if (has_placements()) {  // the layer before has had its last forward use
      const int j = executed_before(i);
      const Placement p = j >= 0 ? where_[static_cast<size_t>(j)] : Placement::Keep;
      // Evaluation: nothing is read again; training: as planned.
      if (j >= 0 && (!training_ || p != Placement::Keep))
        drop_output(ctx, static_cast<size_t>(j), training_ && p == Placement::Offload);
    }
  }
  have_forward_ = true;
  if (!bf16) return acts_.back();
  MemoryRole role(ctx, "the model's output in float32");
  out32_.resize(acts_.back().shape(), DType::F32, x.device(), ctx);
  ops::cast(ctx, acts_.back(), out32_);
  return out32_;
}

void Sequential::backward(Context& ctx, const Tensor& dy, bool want_input_grad,
                          bool want_param_grads) {
  PDNN_CHECK(have_forward_, "sequential: backward() before forward()");
  PDNN_CHECK(overwritten_ == 0,
             "sequential%s%s: backward() after %d forwards with no backward in between, the "
             "earlier ones in training mode: the model holds the activations of its last forward only, so a gradient "
             "meant for an earlier one would be computed against the wrong activations. Run "
             "forward + backward for each batch in turn (a GAN's discriminator: real batch, "
             "then fake batch), or call forget_forward() after a forward that needs no backward",
             name_.empty() ? "" : " ", name_.c_str(), overwritten_ + 1);
  awaiting_backward_ = false;
  check_same_shape("sequential backward: dy vs the last output", dy.shape(), acts_.back().shape());
  ProfileHook* prof = ctx.profile_hook();
  const Tensor* g = &dy;
  const bool bf16 = acts_.back().dtype() == DType::BF16;
  if (bf16 && dy.dtype() != DType::BF16) {  // the autocast boundary (see forward)
    MemoryRole role(ctx, "the gradient of the model's output in bf16");
    dy16_.resize(dy.shape(), DType::BF16, dy.device(), ctx);
    ops::cast(ctx, dy, dy16_);
    g = &dy16_;
  }
  int gi = -1;  // which of grads_ holds g (-1: the caller's dy); dx goes to the other one
  for (size_t i = layers_.size(); i-- > 0;) {
    if (absorbed_[i]) {  // dy passes through: the layer before takes it w.r.t. its output
      if (hook_) hook_(ctx, i);
      if (grads_hook_) grads_hook_(ctx, i);
      continue;
    }
    Layer& l = *layers_[i];
    if (planned_step_) {  // what this backward reads: its output and its input
      copies_at(ctx, 2 * static_cast<int>(layout_.out_offset.size()) - 1 - order_[i]);
      restore_output(ctx, i);
      if (const int j = executed_before(i); j >= 0) restore_output(ctx, static_cast<size_t>(j));
    }
    const Tensor& in = i == 0 ? x_in_ : acts_[i - 1];
    Tensor* dx = nullptr;
    if (i > 0 || want_input_grad) {
      const int di = gi == 0 ? 1 : 0;
      dx = i > 0 ? &grads_[di] : bf16 && in_dtype_ != DType::BF16 ? &dx16_ : &dx_in_;
      if (planned_step_ && i > 0) {
        *dx = arena_.slice(layout_.grad_offset[static_cast<size_t>(order_[i])], in.shape());
      } else {
        MemoryRole role(ctx, [this, i] { return "the gradient w.r.t. the input of " + who(i); });
        dx->resize(in.shape(), in.dtype(), in.device(), ctx);
      }
      gi = i > 0 ? di : -1;
    }
    l.set_param_grads(want_param_grads);
    l.set_dy_writable(gi >= 0);  // the model's own gradient buffer, dead after this backward
    MemoryRole role(ctx, [this, i] { return who(i) + " backward"; });
    if (prof) {
      prof->begin_pass(ctx);
      l.backward(ctx, in, acts_[i], *g, dx);
      prof->end_backward(ctx, &l);
    } else {
      l.backward(ctx, in, acts_[i], *g, dx);
    }
    l.set_param_grads(true);
    l.set_dy_writable(false);
    if (hook_) hook_(ctx, i);
    if (grads_hook_) grads_hook_(ctx, i);
    g = dx;
    // Its last use; the logits stay (the trainer reads them after backward).
    bool last = true;
    for (size_t f = i + 1; f < layers_.size(); ++f) last = last && absorbed_[f];
    if (planned_step_ && !last) drop_output(ctx, i, false);
  }
  if (want_input_grad && bf16 && in_dtype_ != DType::BF16) {  // back to the input's type
    MemoryRole role(ctx, "the gradient w.r.t. the model's input");
    dx_in_.resize(dx16_.shape(), in_dtype_, dx16_.device(), ctx);
    ops::cast(ctx, dx16_, dx_in_);
  }
  if (planned_step_) grads_[0] = grads_[1] = Tensor();  // views of the arena
  if (planned_step_ && lane_)  // every copy out done before the step ends (and a capture joins)
    for (size_t k = 0; k < layout_.reuse_at.size(); ++k)
      if (layout_.back_offset[k] >= 0) cuda_stream_wait_event(ctx.cuda().stream(), lane_->d2h[k]);
}

int Sequential::executed_before(size_t i) const {
  for (size_t k = i; k-- > 0;)
    if (!absorbed_[k]) return static_cast<int>(k);
  return -1;
}

void Sequential::set_placements(std::vector<Placement> where, std::vector<int> dropped_after,
                                std::vector<int> back_at) {
  PDNN_CHECK(where.empty() || where.size() == layers_.size(),
             "sequential: %zu placements for %zu layers", where.size(), layers_.size());
  PDNN_CHECK((dropped_after.empty() || dropped_after.size() == where.size()) &&
                 (back_at.empty() || back_at.size() == where.size()),
             "sequential: the plan's positions (%zu, %zu) are not one per layer (%zu)",
             dropped_after.size(), back_at.size(), where.size());
  plan_dropped_ = std::move(dropped_after);
  plan_back_ = std::move(back_at);
  lane_.reset();
  prepare_fusion();
  if (!where.empty()) {
    size_t last = layers_.size() - 1;
    while (last > 0 && absorbed_[last]) --last;
    for (size_t i = last; i < where.size(); ++i)
      PDNN_CHECK(where[i] == Placement::Keep,
                 "sequential: the last layer's output (the logits) stays on the device, not '%s'",
                 placement_name(where[i]));
  }
  where_ = std::move(where);
  host_.assign(where_.size(), Tensor());
  shapes_.assign(where_.size(), Shape());
  layout_key_ = Shape();
  order_.assign(where_.size(), -1);
  int k = 0;
  for (size_t i = 0; i < where_.size(); ++i)
    if (!absorbed_[i]) order_[i] = k++;
  rng_at_.assign(where_.size(), 0);
  present_.assign(where_.size(), 1);
}

void Sequential::drop_output(Context& ctx, size_t i, bool to_host) {
  Tensor& a = acts_[i];
  if (to_host && !a.empty()) {
    // Grows only (pinned memory is costly to get), so a step of a known shape allocates nothing.
    if (host_[i].numel() < a.numel()) {
      MemoryRole role(ctx, [this, i] { return "the host copy of the offloaded output of " + who(i); });
      try {
        host_[i] = Tensor(Shape{a.numel()}, DType::F32,
                          a.device() == Device::CPU ? host_allocator() : ctx.staging_allocator());
      } catch (const Error& e) {
        PDNN_FAIL("%s: %s", ctx.memory_role().c_str(), e.what());
      }
    }
    Tensor h = host_[i].slice(0, a.shape());
    if (a.device() == Device::CPU) {
      copy_into(h, a, ctx);
    } else {
      // On the copy stream once the output is written and read; whoever reuses its slot waits
      // for the copy (copies_at), nobody on the host does.
      const size_t k = static_cast<size_t>(order_[i]);
      PDNN_CHECK(lane_ != nullptr, "sequential: no copy stream for an offloaded output");
      cuda_event_record_on(lane_->ready[k], ctx.cuda().stream());
      cuda_stream_wait_event(lane_->stream, lane_->ready[k]);
      cuda_copy(h.raw_data(), Device::CPU, a.raw_data(), a.device(), a.nbytes(), lane_->stream,
                false);
      ctx.count_transfer(Device::CPU, a.device(), a.nbytes());
      cuda_event_record_on(lane_->d2h[k], lane_->stream);
    }
  }
  a = Tensor();
  for (size_t f = i + 1; f < layers_.size() && absorbed_[f]; ++f) acts_[f] = Tensor();
  present_[i] = 0;
}

void Sequential::prepare_arena(Context& ctx, const Shape& in) {
  if (in == layout_key_ && !arena_.empty()) return;
  std::vector<int64_t> floats;
  std::vector<Placement> where;
  std::vector<int> dropped, back;
  Shape s = in;
  for (size_t i = 0; i < layers_.size(); ++i) {
    s = layers_[i]->output_shape(s);
    shapes_[i] = s;
    if (absorbed_[i]) continue;
    floats.push_back(s.numel());
    where.push_back(where_[i]);
    dropped.push_back(plan_dropped_.empty() ? -1 : plan_dropped_[i]);
    back.push_back(plan_back_.empty() ? -1 : plan_back_[i]);
  }
  layout_ = layout_arena(floats, where, dropped, back);
  slot_floats_ = floats;
  prefetched_.assign(floats.size(), 0);
  layout_key_ = in;
  const Device dev = x_in_.device();
  // Grows only: a smaller batch (the last of an epoch) lays out inside the same buffer.
  if (arena_.empty() || arena_.numel() < layout_.floats || arena_.device() != dev) {
    MemoryRole role(ctx, "the step's activations and their gradients (the memory plan's one "
                         "buffer, laid out by lifetime)");
    arena_ = Tensor();
    arena_ = Tensor::empty(Shape{layout_.floats}, DType::F32, dev, ctx);
  }
  if (dev == Device::CUDA && (rng_slots_.empty() || rng_slots_.numel() < static_cast<int64_t>(floats.size()) + 1)) {
    MemoryRole role(ctx, "the recomputations' RNG positions");
    rng_slots_ = Tensor::empty(Shape{static_cast<int64_t>(floats.size()) + 1}, DType::I64, dev, ctx);
  }
  const bool offloads = std::find(where.begin(), where.end(), Placement::Offload) != where.end();
  if (dev == Device::CUDA && offloads && (!lane_ || lane_->d2h.size() != floats.size()))
    lane_ = std::make_shared<CopyLane>(floats.size());
}

void Sequential::copies_at(Context& ctx, int p) {
  if (!lane_) return;
  CUstream_st* compute = ctx.cuda().stream();
  for (size_t k = 0; k < layout_.reuse_at.size(); ++k) {
    if (layout_.reuse_at[k] == p) cuda_stream_wait_event(compute, lane_->d2h[k]);
    if (layout_.back_offset[k] < 0 || layout_.back_at[k] != p || prefetched_[k]) continue;
    size_t i = 0;  // the layer of executed index k
    while (order_[i] != static_cast<int>(k)) ++i;
    if (where_[i] != Placement::Offload) continue;
    // The slot's earlier tenants are done with it once the compute stream gets here.
    cuda_event_record_on(lane_->issue[k], compute);
    cuda_stream_wait_event(lane_->stream, lane_->issue[k]);
    const Tensor h = host_[i].slice(0, shapes_[i]);
    Tensor dst = arena_.slice(layout_.back_offset[k], shapes_[i]);
    cuda_copy(dst.raw_data(), Device::CUDA, h.raw_data(), Device::CPU, h.nbytes(), lane_->stream,
              false);
    ctx.count_transfer(Device::CUDA, Device::CPU, h.nbytes());
    cuda_event_record_on(lane_->h2d[k], lane_->stream);
    prefetched_[k] = 1;
  }
}

// On the GPU the dropout kernels read the RNG position from device memory, which a CUDA graph
// replay moves on: the position layer k started at is kept there too (slot k), and put back
// from there, so that a replayed recomputation draws what its forward drew.
void Sequential::save_rng(Context& ctx, size_t k) {
  if (arena_.device() != Device::CUDA) return;
  Tensor slot = rng_slots_.slice(static_cast<int64_t>(k), Shape{1});
  copy_into(slot, ctx.device_rng_counter(), ctx);
}

void Sequential::restore_output(Context& ctx, size_t i) {
  if (present_[i]) return;
  const size_t k = static_cast<size_t>(order_[i]);
  PDNN_CHECK(where_[i] != Placement::Keep && layout_.back_offset[k] >= 0,
             "sequential: layer %zu's output was freed before its backward (memory plan)", i);
  if (where_[i] == Placement::Recompute) {
    // Its input first (itself offloaded or recomputed, perhaps), then its forward again at the
    // RNG position of the first time; the position is put back after.
    if (const int j = executed_before(i); j >= 0) restore_output(ctx, static_cast<size_t>(j));
    const Tensor& in = i == 0 ? x_in_ : acts_[i - 1];
    acts_[i] = arena_.slice(layout_.back_offset[k], shapes_[i]);
    const uint64_t now = ctx.rng().counter();
    const bool gpu = arena_.device() == Device::CUDA;
    Tensor here, then;
    if (gpu) {
      here = rng_slots_.slice(rng_slots_.numel() - 1, Shape{1});
      then = rng_slots_.slice(static_cast<int64_t>(k), Shape{1});
      copy_into(here, ctx.device_rng_counter(), ctx);
      copy_into(ctx.device_rng_counter(), then, ctx);
    }
    ctx.rewind_rng(rng_at_[i]);
    layers_[i]->forward(ctx, in, acts_[i]);
    if (gpu) copy_into(ctx.device_rng_counter(), here, ctx);
    ctx.rewind_rng(now);
  } else {
    const Tensor h = host_[i].slice(0, shapes_[i]);
    acts_[i] = arena_.slice(layout_.back_offset[k], shapes_[i]);
    if (acts_[i].device() == Device::CPU) {
      copy_into(acts_[i], h, ctx);
    } else if (prefetched_[k]) {  // queued at its back_at: the compute stream waits for it
      cuda_stream_wait_event(ctx.cuda().stream(), lane_->h2d[k]);
      prefetched_[k] = 0;
    } else {
      if (lane_) cuda_stream_wait_event(ctx.cuda().stream(), lane_->d2h[k]);  // it went out there
      cuda_copy(acts_[i].raw_data(), Device::CUDA, h.raw_data(), Device::CPU, h.nbytes(),
                ctx.cuda().stream(), false);
      ctx.count_transfer(Device::CUDA, Device::CPU, h.nbytes());
    }
  }
  for (size_t f = i + 1; f < layers_.size() && absorbed_[f]; ++f) acts_[f] = acts_[i];
  present_[i] = 1;
}

std::vector<Param> Sequential::params() { return parameters().params(); }

std::vector<Param> Sequential::buffers() {
  std::vector<Param> out;
  for (size_t i = 0; i < layers_.size(); ++i)
    for (Param p : layers_[i]->buffers()) {
      p.name = std::to_string(i) + "." + p.name;
      out.push_back(p);
    }
  return out;
}

std::vector<size_t> Sequential::param_layers() {
  std::vector<size_t> out;
  for (size_t i = 0; i < layers_.size(); ++i) out.insert(out.end(), layers_[i]->params().size(), i);
  return out;
}

void Sequential::zero_grad(Context& ctx) { ops::zero(ctx, parameters().grads()); }

void Sequential::train(bool on) {
  training_ = on;
  for (auto& l : layers_) l->train(on);
}

void Sequential::reset_parameters(Rng& rng) {
  PDNN_CHECK(device() == Device::CPU,
             "sequential: reset_parameters draws on the host; call it before to(%s)",
             device_name(device()));
  for (auto& l : layers_) l->reset_parameters(rng);
}

Shape Sequential::output_shape(const Shape& in) const {
  Shape s = in;
  for (const auto& l : layers_) s = l->output_shape(s);
  return s;
}

double Sequential::flops(const Shape& in) const {
  Shape s = in;
  double f = 0;
  for (const auto& l : layers_) {
    f += l->flops(s);
    s = l->output_shape(s);
  }
  return f;
}

int64_t Sequential::num_params() {
  int64_t n = 0;
  for (const Param& p : params()) n += p.value->numel();
  return n;
}

namespace {

// 1234567 -> "1,234,567" (as Keras prints parameter counts).
std::string group_digits(int64_t v) {
  std::string d = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i > 0 && (d.size() - i) % 3 == 0) out += ',';
    out += d[i];
  }
  return v < 0 ? "-" + out : out;
}

}  // namespace

std::string Sequential::summary(const Shape& in) {
  struct Line {
    std::string idx, layer, shape, params, mflops;
  };
  std::vector<Line> lines;
  Shape s = in;
  int64_t total_params = 0;
  double total_flops = 0;
  for (size_t i = 0; i < layers_.size(); ++i) {
    Layer& l = *layers_[i];
    int64_t np = 0;
    for (const Param& p : l.params()) np += p.value->numel();
    const double f = l.flops(s);
    s = l.output_shape(s);
    total_params += np;
    total_flops += f;
    lines.push_back({std::to_string(i), l.describe(), s.str(), group_digits(np),
                     strprintf("%.2f", f / 1e6)});
  }
  Line head{"#", "layer", "output shape", "params", "MFLOPs"};
  size_t w[5] = {head.idx.size(), head.layer.size(), head.shape.size(), head.params.size(),
                 head.mflops.size()};
  for (const Line& ln : lines) {
    w[0] = std::max(w[0], ln.idx.size());
    w[1] = std::max(w[1], ln.layer.size());
    w[2] = std::max(w[2], ln.shape.size());
    w[3] = std::max(w[3], ln.params.size());
    w[4] = std::max(w[4], ln.mflops.size());
  }
  auto row = [&](const Line& ln) {
    return strprintf("%-*s  %-*s  %-*s  %*s  %*s\n", static_cast<int>(w[0]), ln.idx.c_str(),
                     static_cast<int>(w[1]), ln.layer.c_str(), static_cast<int>(w[2]),
                     ln.shape.c_str(), static_cast<int>(w[3]), ln.params.c_str(),
                     static_cast<int>(w[4]), ln.mflops.c_str());
  };
  const std::string rule(w[0] + w[1] + w[2] + w[3] + w[4] + 8, '-');
  std::string out = strprintf("Model%s%s, input %s\n", name_.empty() ? "" : " ", name_.c_str(),
                              in.str().c_str());
  out += rule + "\n" + row(head) + rule + "\n";
  for (const Line& ln : lines) out += row(ln);
  out += rule + "\n";
  out += strprintf("Total params: %s (%.2f MiB as float32)\n", group_digits(total_params).c_str(),
                   static_cast<double>(total_params) * 4.0 / (1024.0 * 1024.0));
  const double per_sample = in.rank() > 0 && in.n() > 0 ? total_flops / in.n() : total_flops;
  out += strprintf("Forward: %.2f MFLOPs per batch of %lld (%.3f per sample); "
                   "a training step costs about 3x\n",
                   total_flops / 1e6, static_cast<long long>(in.rank() > 0 ? in.n() : 0),
                   per_sample / 1e6);
  return out;
}

}  // namespace pdnn
