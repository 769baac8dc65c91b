// Model: forward/backward through the graph's nodes with model-owned, reused buffers; fusion;
// a memory plan's placements; summary.
#include "model/model.h"

#include <algorithm>
#include <cctype>

#include "core/cuda_state.h"
#include "core/error.h"
#include "core/profile_hook.h"
#include "layers/merge.h"
#include "ops/basic.h"
#include "ops/cast.h"
#include "ops/merge.h"

namespace pdnn {

// The copy stream of a planned step on the GPU and its events, per executed node: its output
// written (ready), copied out (d2h), its slot free for the copy back (issue), copied back (h2d).
// (One stream for both directions: a second one for the copies back, tried on an H200 with the
// U-Net at 1024 x 1024, batch 1, under 4G, gave 142.2 ms either way: results/scale/
// unet-batch1-h200/.)
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

Layer& Model::add(const std::string& name, std::unique_ptr<Layer> layer,
                  const std::vector<std::string>& inputs) {
  std::vector<int> in;
  for (const std::string& s : inputs) {
    if (s == kInput) {
      in.push_back(-1);
      continue;
    }
    const auto it = index_.find(s);
    PDNN_CHECK(it != index_.end(), "model: node '%s' reads '%s', which is not a node added before "
               "it (nor '%s', the model's input)", name.c_str(), s.c_str(), kInput);
    in.push_back(it->second);
  }
  return add_node(name, std::move(layer), std::move(in));
}

Layer& Model::add_node(std::string name, std::unique_ptr<Layer> layer, std::vector<int> inputs) {
  PDNN_CHECK(layer != nullptr, "model: node '%s' has no layer", name.c_str());
  PDNN_CHECK(device() == Device::CPU, "model: add a node before moving the model to %s",
             device_name(device()));
  const bool good = !name.empty() && name.size() <= 64 && name != kInput && name != "other" &&
                    std::all_of(name.begin(), name.end(), [](char c) {
                      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' ||
                             c == '.';
                    });
  PDNN_CHECK(good, "model: node name '%s' must be letters, digits, '_', '-' or '.' (at most 64), "
             "and not '%s' or 'other'", name.c_str(), kInput);
  PDNN_CHECK(index_.count(name) == 0, "model: two nodes named '%s'", name.c_str());
  auto* merge = dynamic_cast<MergeLayer*>(layer.get());
  PDNN_CHECK(!inputs.empty() && (merge || inputs.size() == 1),
             "model: node '%s' (%s) has %zu inputs; %s", name.c_str(), layer->describe().c_str(),
             inputs.size(), merge ? "it needs at least one" : "a layer of one input takes one");
  index_[name] = static_cast<int>(nodes_.size());
  nodes_.push_back(Node{std::move(layer), std::move(name), std::move(inputs), merge});
  acts_.resize(nodes_.size());
  absorbed_.resize(nodes_.size(), 0);
  fusion_checked_ = false;
  *params_ = ParamSet();  // gathered again, with the new node's, on next use
  have_forward_ = false;
  return *nodes_.back().layer;
}

std::unique_ptr<Layer> Model::replace(size_t i, std::unique_ptr<Layer> layer) {
  PDNN_CHECK(i < nodes_.size(), "model: no node %zu to replace (%zu nodes)", i, nodes_.size());
  Node& nd = nodes_[i];
  auto* merge = dynamic_cast<MergeLayer*>(layer.get());
  PDNN_CHECK(layer != nullptr && (merge || nd.inputs.size() == 1),
             "model: node '%s' reads %zu inputs; its new layer must take them", nd.name.c_str(),
             nd.inputs.size());
  PDNN_CHECK(device() == Device::CPU && !fusion_checked_,
             "model: replace a layer before the first forward and before moving the model to "
             "a device (it is on %s)", device_name(device()));
  std::swap(nd.layer, layer);
  nd.merge = merge;
  fusion_checked_ = false;
  *params_ = ParamSet();
  have_forward_ = false;
  return layer;
}

size_t Model::index_of(const std::string& name) const {
  const auto it = index_.find(name);
  if (it != index_.end()) return static_cast<size_t>(it->second);
  std::string known;
  for (const Node& n : nodes_) known += (known.empty() ? "" : ", ") + n.name;
  PDNN_FAIL("model: no node '%s' (the nodes: %s)", name.c_str(), known.c_str());
}

std::string Model::label(size_t i) const {
  return name_.empty() ? nodes_.at(i).name : name_ + "." + nodes_.at(i).name;
}

std::string Model::who(size_t i) const {
  return "layer " + label(i) + " (" + nodes_[i].layer->describe() + ")";
}

ParamSet& Model::parameters() {
  if (!params_->built()) {
    std::vector<Param> ps;
    for (const Node& n : nodes_)
      for (Param p : n.layer->params()) {
        p.name = n.name + "." + p.name;
        ps.push_back(p);
      }
    params_->build(std::move(ps));
  }
  return *params_;
}

Device Model::device() { return params_->built() ? params_->device() : Device::CPU; }

void Model::to(Device dev, Context& ctx) {
  parameters().to(dev, ctx);
  for (Param& b : buffers())
    if (b.value->device() != dev) *b.value = b.value->to(dev, ctx);
  // Activation buffers are made again on the new device by the next forward.
  for (Tensor& a : acts_) a = Tensor();
  grad_pool_.clear();
  grad_busy_.clear();
  grad_.assign(grad_.size(), Tensor());
  x_in_ = dx_in_ = Tensor();
  w16_ = x16_ = dx16_ = out32_ = dy16_ = d32_ = Tensor();
  w16_given_ = nullptr;
  arena_ = rng_slots_ = Tensor();  // a memory plan's buffers, likewise
  layout_key_ = Shape();
  for (Tensor& h : host_copy_) h = Tensor();
  have_forward_ = false;
  awaiting_backward_ = false;
  overwritten_ = 0;
}

void Model::fuse_activations() {
  const size_t n = nodes_.size();
  // Every node's output must be read, but the last's (the model's output).
  std::vector<std::vector<int>> users(n);
  for (size_t c = 0; c < n; ++c)
    for (int p : nodes_[c].inputs)
      if (p >= 0 && (users[static_cast<size_t>(p)].empty() || users[static_cast<size_t>(p)].back() != static_cast<int>(c)))
        users[static_cast<size_t>(p)].push_back(static_cast<int>(c));
  for (size_t i = 0; i + 1 < n; ++i)
    PDNN_CHECK(!users[i].empty(), "model: nothing reads the output of node '%s' (%s); only the "
               "last node, the model's output, may be unread", nodes_[i].name.c_str(),
               nodes_[i].layer->describe().c_str());
  fusion_checked_ = true;
  absorbed_.assign(n, 0);
  host_.resize(n);
  absorber_.assign(n, -1);
  for (size_t i = 0; i < n; ++i) host_[i] = static_cast<int>(i);
  // A layer taken over by its one input node, which nothing else reads: an activation into the
  // layer that can apply it, a dropout into a pool.
  for (size_t i = 0; fusion_ && i < n; ++i) {
    const int h = nodes_[i].inputs[0];
    if (nodes_[i].merge || h < 0 || absorbed_[static_cast<size_t>(h)] ||
        absorber_[static_cast<size_t>(h)] >= 0 || users[static_cast<size_t>(h)].size() != 1)
      continue;
    Layer& l = *nodes_[i].layer;
    Layer& host = *nodes_[static_cast<size_t>(h)].layer;
    const Act a = l.fusable_activation();
    bool taken = a.kind != FusedAct::None && host.fuse_activation(a);
    const float p = l.fusable_dropout();
    taken = taken || (p >= 0.f && host.fuse_dropout(p));
    if (!taken) continue;
    absorbed_[i] = 1;
    host_[i] = h;
    absorber_[static_cast<size_t>(h)] = static_cast<int>(i);
  }
  // The readers of each executed node's output, and the executed nodes' order.
  readers_.assign(n, {});
  order_.assign(n, -1);
  int k = 0;
  for (size_t c = 0; c < n; ++c) {
    if (absorbed_[c]) continue;
    order_[c] = k++;
    for (int q : nodes_[c].inputs) {
      const int p = res(q);
      if (p >= 0 && (readers_[static_cast<size_t>(p)].empty() ||
                     readers_[static_cast<size_t>(p)].back() != static_cast<int>(c)))
        readers_[static_cast<size_t>(p)].push_back(static_cast<int>(c));
    }
  }
  out_ = res(static_cast<int>(n) - 1);
  // A fused activation's derivative, folded into the backward of the one node that reads it.
  for (size_t j = 0; fusion_ && j < n; ++j) {
    if (!absorbed_[j]) continue;
    const size_t h = static_cast<size_t>(host_[j]);
    const Act a = nodes_[j].layer->fusable_activation();
    if (a.kind == FusedAct::None || !nodes_[h].layer->can_take_activation_grad() ||
        readers_[h].size() != 1)
      continue;
    Node& c = nodes_[static_cast<size_t>(readers_[h][0])];
    if (!c.merge && c.layer->fold_input_activation(a)) nodes_[h].layer->take_activation_grad(true);
  }
}

void Model::set_fusion(bool on) {
  PDNN_CHECK(on || !fusion_checked_ || std::none_of(absorbed_.begin(), absorbed_.end(),
                                                    [](char b) { return b != 0; }),
             "model: set_fusion(false) after layers were fused (call it before the first "
             "forward)");
  fusion_ = on;
}

void Model::refresh_bf16(Context& ctx) {
  PDNN_CHECK(device() == Device::CUDA,
             "model: --precision bf16 on the %s: the CPU has no bf16 path (pdnn's bf16 "
             "kernels run on the GPU); use fp32", device_name(device()));
  ParamSet& ps = parameters();
  ops::refresh_bf16_copy(ctx, ps.values(), w16_);
  if (w16_.raw_data() == w16_given_) return;
  size_t k = 0;  // the flat buffer holds the nodes' parameters in node order (parameters())
  for (Node& nd : nodes_) {
    std::vector<Tensor> views;
    for (const Param& p : nd.layer->params())
      views.push_back(w16_.slice(ps.offset(k++), p.value->shape()));
    nd.layer->set_bf16_params(views);
  }
  w16_given_ = w16_.raw_data();
}

const Tensor& Model::input_of(size_t i, size_t j) const {
  const int p = nodes_[i].inputs[j];
  return p < 0 ? x_in_ : acts_[static_cast<size_t>(p)];
}

void Model::run_forward(Context& ctx, size_t i, const Shape& out) {
  Node& nd = nodes_[i];
  Layer& l = *nd.layer;
  ProfileHook* prof = ctx.profile_hook();
  if (prof) prof->begin_pass(ctx);
  if (nd.merge) {
    std::vector<const Tensor*> ins;
    for (size_t j = 0; j < nd.inputs.size(); ++j) ins.push_back(&input_of(i, j));
    nd.merge->forward_all(ctx, ins, acts_[i]);
  } else if (static_cast<int>(i) == tail_) {  // in place on its input cast to float32
    l.forward(ctx, acts_[i], acts_[i]);
  } else {
    l.forward(ctx, input_of(i, 0), acts_[i]);
  }
  if (prof)
    prof->end_forward(ctx, {&l, label(i), l.kind(), l.describe(), out,
                            l.flops(input_of(i, 0).shape())});
}

bool Model::fp32_tail() const {
  if (nodes_.empty()) return false;
  const Node& nd = nodes_.back();  // (an fp32_under_bf16 layer takes no fusion: it is out_)
  return !nd.merge && nd.inputs.size() == 1 && nd.inputs[0] >= 0 && nd.layer->fp32_under_bf16();
}

const Tensor& Model::forward(Context& ctx, const Tensor& x) {
  PDNN_CHECK(!nodes_.empty(), "model: forward through an empty model");
  if (!fusion_checked_) fuse_activations();
  PDNN_CHECK(x.device() == device(),
             "model: input %s is on %s, the model on %s (move one: model.to() or x.to())",
             x.shape().str().c_str(), device_name(x.device()), device_name(device()));
  overwritten_ = awaiting_backward_ ? overwritten_ + 1 : 0;
  awaiting_backward_ = training_;
  planned_step_ = has_placements() && training_;
  const bool bf16 = ctx.precision() == Precision::Bf16;
  const DType act_dtype = bf16 ? DType::BF16 : DType::F32;
  in_dtype_ = x.dtype();
  x_in_ = x;
  bf16_ = bf16;
  tail_ = bf16 && fp32_tail() ? out_ : -1;
  if (bf16) {
    refresh_bf16(ctx);
    if (x.dtype() != DType::BF16) {
      MemoryRole role(ctx, "the model's input in bf16");
      x16_.resize(x.shape(), DType::BF16, x.device(), ctx);
      ops::cast(ctx, x, x16_);
      x_in_ = x16_;
    }
  }
  if (planned_step_) prepare_arena(ctx, x.shape(), act_dtype);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Node& nd = nodes_[i];
    if (absorbed_[i]) {  // its input node applied it: that node's output is this node's output
      acts_[i] = acts_[static_cast<size_t>(host_[i])];
      continue;
    }
    Shape out;
    if (nd.merge) {
      std::vector<Shape> in;
      for (size_t j = 0; j < nd.inputs.size(); ++j) in.push_back(input_of(i, j).shape());
      out = nd.merge->merged_shape(in);
    } else {
      out = nd.layer->output_shape(input_of(i, 0).shape());
    }
    const size_t k = static_cast<size_t>(order_[i]);
    if (static_cast<int>(i) == tail_) {  // float32, after the output cast (forward's header)
      if (planned_step_) copies_at(ctx, order_[i]);  // the plan's waits and prefetches here
      MemoryRole role(ctx, "the model's output in float32");
      out32_.resize(out, DType::F32, x.device(), ctx);
      ops::cast(ctx, input_of(i, 0), out32_);
      acts_[i] = out32_;
    } else if (planned_step_) {  // its place in the arena; the RNG position, for recomputation
      copies_at(ctx, order_[i]);
      acts_[i] = arena_.slice(layout_.out_offset[k], out);
      rng_at_[i] = ctx.rng().counter();
      if (where_[i] == Placement::Recompute) save_rng(ctx, k);
      present_[i] = 1;
    } else if (has_placements() && !arena_.empty() && arena_.device() == x.device() &&
               arena_.dtype() == act_dtype && out.numel() <= slot_elems_[k]) {
      // Evaluation under a plan: the training forward's slot (two outputs alive at once here
      // are alive at once in training too, so their slots never overlap), so evaluation
      // allocates nothing either.
      acts_[i] = arena_.slice(layout_.out_offset[k], out);
    } else {
      if (has_placements()) acts_[i] = Tensor();  // not a view of the arena: its own buffer
      MemoryRole role(ctx, [this, i] { return "the activation (output) of " + who(i); });
      acts_[i].resize(out, act_dtype, x.device(), ctx);
    }
    {
      MemoryRole role(ctx, [this, i] { return who(i) + " forward"; });
      run_forward(ctx, i, out);
    }
    if (planned_step_ && where_[i] == Placement::Offload) offload_output(ctx, i);
    if (has_placements())  // inputs whose last reader this was: evaluation reads nothing
      for (int q : nd.inputs) {  // again; training as planned
        const int p = res(q);
        if (p < 0 || readers_[static_cast<size_t>(p)].back() != static_cast<int>(i)) continue;
        if (!training_ || where_[static_cast<size_t>(p)] != Placement::Keep)
          drop_output(static_cast<size_t>(p));
      }
  }
  have_forward_ = true;
  if (!bf16 || tail_ >= 0) return acts_[static_cast<size_t>(out_)];
  MemoryRole role(ctx, "the model's output in float32");
  out32_.resize(acts_.back().shape(), DType::F32, x.device(), ctx);
  ops::cast(ctx, acts_.back(), out32_);
  return out32_;
}

int Model::take_grad(Context& ctx, const Shape& shape, DType dtype, size_t i) {
  size_t k = 0;
  while (k < grad_busy_.size() && grad_busy_[k]) ++k;
  if (k == grad_pool_.size()) {
    grad_pool_.emplace_back();
    grad_busy_.push_back(0);
  }
  MemoryRole role(ctx, [this, i] { return "the gradient w.r.t. the input of " + who(i); });
  grad_pool_[k].resize(shape, dtype, x_in_.device(), ctx);
  grad_busy_[k] = 1;
  return static_cast<int>(k);
}

void Model::backward(Context& ctx, const Tensor& dy, bool want_input_grad,
                     bool want_param_grads) {
  PDNN_CHECK(have_forward_, "model: backward() before forward()");
  PDNN_CHECK(overwritten_ == 0,
             "model%s%s: backward() after %d forwards with no backward in between, the "
             "earlier ones in training mode: the model holds the activations of its last forward only, so a gradient "
             "meant for an earlier one would be computed against the wrong activations. Run "
             "forward + backward for each batch in turn (a GAN's discriminator: real batch, "
             "then fake batch), or call forget_forward() after a forward that needs no backward",
             name_.empty() ? "" : " ", name_.c_str(), overwritten_ + 1);
  awaiting_backward_ = false;
  check_same_shape("model backward: dy vs the last output", dy.shape(), acts_.back().shape());
  ProfileHook* prof = ctx.profile_hook();
  const size_t n = nodes_.size();
  // bf16 (see forward): dy comes in float32 and is cast once; the input's gradient is written
  // in bf16 (dx16_) and cast back to the input's type at the end.
  const bool bf16 = bf16_;
  const DType act_dtype = bf16 ? DType::BF16 : DType::F32;
  const Tensor* dy_in = &dy;
  if (bf16 && tail_ < 0 && dy.dtype() != DType::BF16) {
    MemoryRole role(ctx, "the gradient of the model's output in bf16");
    dy16_.resize(dy.shape(), DType::BF16, dy.device(), ctx);
    ops::cast(ctx, dy, dy16_);
    dy_in = &dy16_;
  }
  const bool cast_dx = bf16 && in_dtype_ != DType::BF16;
  Tensor& dx_model = cast_dx ? dx16_ : dx_in_;
  const int L = static_cast<int>(layout_.out_offset.size());
  grad_at_.assign(n, -1);
  grad_.resize(n);
  std::vector<char> have(n, 0);  // node p's output gradient written by a reader already
  bool have_dx_in = false;
  for (size_t i = n; i-- > 0;) {
    if (absorbed_[i]) {  // dy passes through: its host node takes it w.r.t. its own output
      if (hook_) hook_(ctx, i);
      if (grads_hook_) grads_hook_(ctx, i);
      continue;
    }
    Node& nd = nodes_[i];
    Layer& l = *nd.layer;
    const size_t k = static_cast<size_t>(order_[i]);
    if (planned_step_) {  // what this backward reads: its output and its inputs
      copies_at(ctx, 2 * L - 1 - order_[i]);
      restore_output(ctx, i);
      if (restores_[i])
        for (int q : nd.inputs)
          if (res(q) >= 0) restore_output(ctx, static_cast<size_t>(res(q)));
    }
    const bool own = static_cast<int>(i) != out_;  // dy is the model's own buffer
    const Tensor& g = !own ? *dy_in : planned_step_ ? grad_[i] : grad_pool_[static_cast<size_t>(grad_at_[i])];
    // Where each input's gradient goes: the first reader (in this order) writes the node's
    // gradient buffer, every later one a temporary added to it after its backward.
    std::vector<Tensor*> dx(nd.inputs.size(), nullptr);
    std::vector<Tensor> temp(nd.inputs.size());
    std::vector<int> temp_pool(nd.inputs.size(), -1);
    for (size_t j = 0; j < nd.inputs.size(); ++j) {
      const int p = res(nd.inputs[j]);
      if (p < 0 && !want_input_grad) continue;
      // (Under a plan an input a merge does not read may be off the device: its shape is kept.)
      const Shape s = p < 0 ? x_in_.shape() : planned_step_ ? shapes_[static_cast<size_t>(p)]
                                                            : acts_[static_cast<size_t>(p)].shape();
      const bool first = p < 0 ? !have_dx_in : !have[static_cast<size_t>(p)];
      if (first && p < 0) {
        MemoryRole role(ctx, [this, i] { return "the gradient w.r.t. the input of " + who(i); });
        dx_model.resize(s, x_in_.dtype(), x_in_.device(), ctx);
        dx[j] = &dx_model;
        have_dx_in = true;
      } else if (first) {
        const size_t u = static_cast<size_t>(p);
        if (planned_step_) {
          grad_[u] = arena_.slice(layout_.grad_offset[static_cast<size_t>(order_[u])], s);
          dx[j] = &grad_[u];
        } else {
          grad_at_[u] = take_grad(ctx, s, act_dtype, i);
          dx[j] = &grad_pool_[static_cast<size_t>(grad_at_[u])];
        }
        have[u] = 1;
      } else {
        if (planned_step_ && p >= 0) {
          temp[j] = arena_.slice(layout_.temp_offset[k][j], s);
        } else {
          temp_pool[j] = take_grad(ctx, s, p < 0 ? x_in_.dtype() : act_dtype, i);
          temp[j] = grad_pool_[static_cast<size_t>(temp_pool[j])];
        }
        dx[j] = &temp[j];
      }
    }
    l.set_param_grads(want_param_grads);
    l.set_dy_writable(own);  // the model's own gradient buffer, dead after this backward
    {
      MemoryRole role(ctx, [this, i] { return who(i) + " backward"; });
      if (prof) prof->begin_pass(ctx);
      if (nd.merge) {
        nd.merge->backward_all(ctx, g, dx);
      } else if (static_cast<int>(i) == tail_) {  // in float32, then its input's gradient to bf16
        if (dx[0]) {
          MemoryRole role32(ctx, "the gradient w.r.t. the model's float32 last layer's input");
          d32_.resize(acts_[i].shape(), DType::F32, acts_[i].device(), ctx);
          l.backward(ctx, acts_[i], acts_[i], g, &d32_);
          ops::cast(ctx, d32_, *dx[0]);
        }
      } else {
        l.backward(ctx, input_of(i, 0), acts_[i], g, dx[0]);
      }
      if (prof) prof->end_backward(ctx, &l);
    }
    l.set_param_grads(true);
    l.set_dy_writable(false);
    for (size_t j = 0; j < nd.inputs.size(); ++j) {
      if (!temp[j].empty()) {
        const int p = res(nd.inputs[j]);
        Tensor& sum = p < 0 ? dx_model : planned_step_ ? grad_[static_cast<size_t>(p)]
                                     : grad_pool_[static_cast<size_t>(grad_at_[static_cast<size_t>(p)])];
        ops::add(ctx, sum, temp[j], sum);
      }
      give_grad(temp_pool[j]);
    }
    if (own && !planned_step_) give_grad(grad_at_[i]);
    if (hook_) hook_(ctx, i);
    if (grads_hook_) grads_hook_(ctx, i);
    // Its last use; the logits stay (the trainer reads them after backward).
    if (planned_step_ && own) drop_output(i);
  }
  if (want_input_grad && cast_dx) {  // back to the input's type
    MemoryRole role(ctx, "the gradient w.r.t. the model's input");
    dx_in_.resize(dx16_.shape(), in_dtype_, dx16_.device(), ctx);
    ops::cast(ctx, dx16_, dx_in_);
  }
  if (planned_step_) grad_.assign(n, Tensor());  // views of the arena
  if (planned_step_ && lane_)  // every copy out done before the step ends (and a capture joins)
    for (size_t k = 0; k < layout_.reuse_at.size(); ++k)
      if (layout_.back_offset[k] >= 0) cuda_stream_wait_event(ctx.cuda().stream(), lane_->d2h[k]);
}

void Model::set_placements(std::vector<Placement> where, std::vector<int> dropped_after,
                           std::vector<int> back_at) {
  PDNN_CHECK(where.empty() || where.size() == nodes_.size(),
             "model: %zu placements for %zu nodes", where.size(), nodes_.size());
  PDNN_CHECK((dropped_after.empty() || dropped_after.size() == where.size()) &&
                 (back_at.empty() || back_at.size() == where.size()),
             "model: the plan's positions (%zu, %zu) are not one per node (%zu)",
             dropped_after.size(), back_at.size(), where.size());
  plan_dropped_ = std::move(dropped_after);
  plan_back_ = std::move(back_at);
  lane_.reset();
  prepare_fusion();
  for (size_t i = 0; i < where.size(); ++i) {
    if (absorbed_[i] || where[i] == Placement::Keep) continue;
    PDNN_CHECK(static_cast<int>(i) != out_,
               "model: the last layer's output (the logits) stays on the device, not '%s'",
               placement_name(where[i]));
    PDNN_CHECK(where[i] != Placement::Recompute || !nodes_[i].merge,
               "model: node '%s' (%s) joins several inputs and cannot be recomputed",
               nodes_[i].name.c_str(), nodes_[i].layer->describe().c_str());
  }
  where_ = std::move(where);
  host_copy_.assign(where_.size(), Tensor());
  shapes_.assign(where_.size(), Shape());
  layout_key_ = Shape();
  rng_at_.assign(where_.size(), 0);
  present_.assign(where_.size(), 1);
  restores_.assign(where_.size(), 1);
}

void Model::offload_output(Context& ctx, size_t i) {
  const Tensor& a = acts_[i];
  // Grows only (pinned memory is costly to get), so a step of a known shape allocates nothing;
  // of the output's type (bf16 under --precision bf16).
  if (host_copy_[i].numel() < a.numel() || host_copy_[i].dtype() != a.dtype()) {
    MemoryRole role(ctx, [this, i] { return "the host copy of the offloaded output of " + who(i); });
    try {
      host_copy_[i] = Tensor();
      host_copy_[i] = Tensor(Shape{a.numel()}, a.dtype(),
                             a.device() == Device::CPU ? host_allocator() : ctx.staging_allocator());
    } catch (const Error& e) {
      PDNN_FAIL("%s: %s", ctx.memory_role().c_str(), e.what());
    }
  }
  Tensor h = host_copy_[i].slice(0, a.shape());
  if (a.device() == Device::CPU) {
    copy_into(h, a, ctx);
    return;
  }
  // On the copy stream once the output is written; whoever reuses its slot waits for the copy
  // (copies_at), nobody on the host does.
  const size_t k = static_cast<size_t>(order_[i]);
  PDNN_CHECK(lane_ != nullptr, "model: no copy stream for an offloaded output");
  cuda_event_record_on(lane_->ready[k], ctx.cuda().stream());
  cuda_stream_wait_event(lane_->stream, lane_->ready[k]);
  cuda_copy(h.raw_data(), Device::CPU, a.raw_data(), a.device(), a.nbytes(), lane_->stream, false);
  ctx.count_transfer(Device::CPU, a.device(), a.nbytes());
  cuda_event_record_on(lane_->d2h[k], lane_->stream);
}

void Model::drop_output(size_t i) {
  acts_[i] = Tensor();
  if (absorber_[i] >= 0) acts_[static_cast<size_t>(absorber_[i])] = Tensor();
  if (!present_.empty()) present_[i] = 0;
}

void Model::prepare_arena(Context& ctx, const Shape& in, DType dtype) {
  if (in == layout_key_ && !arena_.empty() && arena_.dtype() == dtype) return;
  const std::vector<Shape> shapes = node_shapes(in);
  std::vector<int64_t> elems;
  std::vector<Placement> where;
  std::vector<int> dropped, back;
  ExecGraph graph;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    shapes_[i] = shapes[i];
    if (absorbed_[i]) continue;
    elems.push_back(shapes[i].numel());
    where.push_back(where_[i]);
    dropped.push_back(plan_dropped_.empty() ? -1 : plan_dropped_[i]);
    back.push_back(plan_back_.empty() ? -1 : plan_back_[i]);
    std::vector<int> ins;
    for (int q : nodes_[i].inputs) ins.push_back(res(q) < 0 ? -1 : order_[static_cast<size_t>(res(q))]);
    graph.inputs.push_back(std::move(ins));
    // A layer of one input gets x in backward, so it is brought back; a merge only when read.
    // What its backward reads ends its inputs' and its output's lifetimes in the arena (the
    // plan's layout, arena_bytes, reads the same from describe_step's BackwardNeeds).
    const int q = nodes_[i].inputs[0];
    const Shape& qs = q < 0 ? in : shapes[static_cast<size_t>(q)];
    const BackwardNeeds b = nodes_[i].layer->backward_needs(qs, PlanFor{dtype});
    restores_[i] = !nodes_[i].merge || b.input;
    graph.restores_inputs.push_back(restores_[i]);
    graph.reads_input.push_back(b.input);
    graph.reads_output.push_back(b.output);
  }
  layout_ = layout_arena(elems, where, dropped, back, graph);
  slot_elems_ = elems;
  prefetched_.assign(elems.size(), 0);
  layout_key_ = in;
  const Device dev = x_in_.device();
  // Grows only: a smaller batch (the last of an epoch) lays out inside the same buffer. Of the
  // activations' type: bf16 outputs and gradients are views of a bf16 buffer.
  if (arena_.empty() || arena_.numel() < layout_.elements || arena_.device() != dev ||
      arena_.dtype() != dtype) {
    MemoryRole role(ctx, "the step's activations and their gradients (the memory plan's one "
                         "buffer, laid out by lifetime)");
    arena_ = Tensor();
    arena_ = Tensor::empty(Shape{layout_.elements}, dtype, dev, ctx);
  }
  if (dev == Device::CUDA && (rng_slots_.empty() || rng_slots_.numel() < static_cast<int64_t>(elems.size()) + 1)) {
    MemoryRole role(ctx, "the recomputations' RNG positions");
    rng_slots_ = Tensor::empty(Shape{static_cast<int64_t>(elems.size()) + 1}, DType::I64, dev, ctx);
  }
  const bool offloads = std::find(where.begin(), where.end(), Placement::Offload) != where.end();
  if (dev == Device::CUDA && offloads && (!lane_ || lane_->d2h.size() != elems.size()))
    lane_ = std::make_shared<CopyLane>(elems.size());
}

void Model::copies_at(Context& ctx, int p) {
  if (!lane_) return;
  CUstream_st* compute = ctx.cuda().stream();
  for (size_t k = 0; k < layout_.reuse_at.size(); ++k) {
    if (layout_.reuse_at[k] == p) cuda_stream_wait_event(compute, lane_->d2h[k]);
    if (layout_.back_offset[k] < 0 || layout_.back_at[k] != p || prefetched_[k]) continue;
    size_t i = 0;  // the node of executed index k
    while (order_[i] != static_cast<int>(k)) ++i;
    if (where_[i] != Placement::Offload) continue;
    // The slot's earlier tenants are done with it once the compute stream gets here.
    cuda_event_record_on(lane_->issue[k], compute);
    cuda_stream_wait_event(lane_->stream, lane_->issue[k]);
    const Tensor h = host_copy_[i].slice(0, shapes_[i]);
    Tensor dst = arena_.slice(layout_.back_offset[k], shapes_[i]);
    cuda_copy(dst.raw_data(), Device::CUDA, h.raw_data(), Device::CPU, h.nbytes(), lane_->stream,
              false);
    ctx.count_transfer(Device::CUDA, Device::CPU, h.nbytes());
    cuda_event_record_on(lane_->h2d[k], lane_->stream);
    prefetched_[k] = 1;
  }
}

// On the GPU the dropout kernels read the RNG position from device memory, which a CUDA graph
// replay moves on: the position node k started at is kept there too (slot k), and put back
// from there, so that a replayed recomputation draws what its forward drew.
void Model::save_rng(Context& ctx, size_t k) {
  if (arena_.device() != Device::CUDA) return;
  Tensor slot = rng_slots_.slice(static_cast<int64_t>(k), Shape{1});
  copy_into(slot, ctx.device_rng_counter(), ctx);
}

void Model::restore_output(Context& ctx, size_t i) {
  if (present_[i]) return;
  const size_t k = static_cast<size_t>(order_[i]);
  PDNN_CHECK(where_[i] != Placement::Keep && layout_.back_offset[k] >= 0,
             "model: node '%s''s output was freed before its backward (memory plan)",
             nodes_[i].name.c_str());
  if (where_[i] == Placement::Recompute) {
    // Its input first (itself offloaded, perhaps), then its forward again at the RNG position
    // of the first time; the position is put back after.
    if (const int p = res(nodes_[i].inputs[0]); p >= 0) restore_output(ctx, static_cast<size_t>(p));
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
    nodes_[i].layer->forward(ctx, input_of(i, 0), acts_[i]);
    if (gpu) copy_into(ctx.device_rng_counter(), here, ctx);
    ctx.rewind_rng(now);
  } else {
    const Tensor h = host_copy_[i].slice(0, shapes_[i]);
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
  if (absorber_[i] >= 0) acts_[static_cast<size_t>(absorber_[i])] = acts_[i];
  present_[i] = 1;
}

std::vector<Param> Model::params() { return parameters().params(); }

std::vector<Param> Model::buffers() {
  std::vector<Param> out;
  for (const Node& n : nodes_)
    for (Param p : n.layer->buffers()) {
      p.name = n.name + "." + p.name;
      out.push_back(p);
    }
  return out;
}

std::vector<size_t> Model::param_layers() {
  std::vector<size_t> out;
  for (size_t i = 0; i < nodes_.size(); ++i)
    out.insert(out.end(), nodes_[i].layer->params().size(), i);
  return out;
}

void Model::zero_grad(Context& ctx) {
  ops::zero(ctx, parameters().grads());
  for (Node& nd : nodes_) nd.layer->mark_grads_zero();
}

void Model::train(bool on) {
  training_ = on;
  for (Node& n : nodes_) n.layer->train(on);
}

void Model::reset_parameters(Rng& rng) {
  PDNN_CHECK(device() == Device::CPU,
             "model: reset_parameters draws on the host; call it before to(%s)",
             device_name(device()));
  for (Node& n : nodes_) n.layer->reset_parameters(rng);
}

std::vector<Shape> Model::node_shapes(const Shape& in) const {
  std::vector<Shape> s;
  s.reserve(nodes_.size());
  for (const Node& n : nodes_) {
    auto shape_of = [&](int p) { return p < 0 ? in : s[static_cast<size_t>(p)]; };
    if (n.merge) {
      std::vector<Shape> ins;
      for (int p : n.inputs) ins.push_back(shape_of(p));
      s.push_back(n.merge->merged_shape(ins));
    } else {
      s.push_back(n.layer->output_shape(shape_of(n.inputs[0])));
    }
  }
  return s;
}

Shape Model::output_shape(const Shape& in) const {
  PDNN_CHECK(!nodes_.empty(), "model: output_shape of an empty model");
  return node_shapes(in).back();
}

double Model::flops(const Shape& in) const {
  const std::vector<Shape> s = node_shapes(in);
  double f = 0;
  for (const Node& n : nodes_) f += n.layer->flops(n.inputs[0] < 0 ? in : s[static_cast<size_t>(n.inputs[0])]);
  return f;
}

int64_t Model::num_params() {
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

std::string Model::summary(const Shape& in) {
  struct Line {
    std::string idx, layer, shape, params, mflops;
  };
  std::vector<Line> lines;
  const std::vector<Shape> shapes = node_shapes(in);
  int64_t total_params = 0;
  double total_flops = 0;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& nd = nodes_[i];
    Layer& l = *nd.layer;
    int64_t np = 0;
    for (const Param& p : l.params()) np += p.value->numel();
    const double f = l.flops(nd.inputs[0] < 0 ? in : shapes[static_cast<size_t>(nd.inputs[0])]);
    total_params += np;
    total_flops += f;
    std::string what = l.describe();
    // A graph's edges, where they are not the chain's (the node before, the input first).
    if (nd.inputs != std::vector<int>{static_cast<int>(i) - 1}) {
      std::string from;
      for (int p : nd.inputs)
        from += (from.empty() ? "" : ", ") + (p < 0 ? std::string(kInput) : nodes_[static_cast<size_t>(p)].name);
      what += " <- " + from;
    }
    lines.push_back({nd.name, what, shapes[i].str(), group_digits(np), strprintf("%.2f", f / 1e6)});
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
