// Sequential: layers in order, with the activation buffers they pass along. Buffers are owned
// here and reused across steps (grow-only), so a training loop allocates once. The parameters
// of all layers live in one flat buffer and their gradients in another (parameters()), on the
// device the model was moved to (to()); activations follow the input's device.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "layers/layer.h"
#include "model/memory_plan.h"

namespace pdnn {

class Sequential {
 public:
  Sequential() = default;
  Sequential(Sequential&&) = default;
  Sequential& operator=(Sequential&&) = default;

  Layer& add(std::unique_ptr<Layer> layer);
  template <class L, class... A>
  L& emplace(A&&... args) {
    auto p = std::make_unique<L>(std::forward<A>(args)...);
    L& ref = *p;
    add(std::move(p));
    return ref;
  }
  // Puts `layer` in place of layer i and returns the one it replaces (on the host, before the
  // model moves; tests pin a layer's choices this way). Fusion is decided again.
  std::unique_ptr<Layer> replace(size_t i, std::unique_ptr<Layer> layer);
  size_t size() const { return layers_.size(); }
  Layer& layer(size_t i) { return *layers_.at(i); }
  const Layer& layer(size_t i) const { return *layers_.at(i); }
  // Optional name ("G", "D"): prefixes layer labels in the profiler when several models share
  // one context. Parameter names stay "<index>.<name>".
  void set_name(std::string name) { name_ = std::move(name); }
  const std::string& name() const { return name_; }

  // Moves the parameters (and buffers, e.g. BatchNorm's statistics) to `dev`: one counted copy
  // of the flat buffer. Gradients there start at zero. Initialise (reset_parameters) before.
  void to(Device dev, Context& ctx);
  // The device of the parameters (CPU until to() moves them).
  Device device();
  // All parameters as one flat buffer (gathered on first use, on the host).
  ParamSet& parameters();

  // Fusion (on by default): at the first forward, an activation layer (ReLU, LeakyReLU) that
  // follows a layer able to apply it in its own output write (Conv2d, Dense, BatchNorm2d), and a
  // Dropout that follows a MaxPool2d, is taken over by that layer and skipped: one pass over
  // memory less each way, the same numbers. The skipped layer stays in the model (summary, parameter names). Turn it off
  // before the first forward to run every layer on its own.
  void set_fusion(bool on);
  // Fuses now rather than at the first forward (a memory plan describes the fused model).
  void prepare_fusion() {
    if (!fusion_checked_) fuse_activations();
  }
  // Whether layer i was taken over by the layer before it.
  bool absorbed(size_t i) const { return absorbed_.at(i); }

  // Runs every layer; the returned output is owned by the model and valid until the next call.
  // The model keeps a reference to x's storage for backward: do not modify x in between.
  // x must be on the model's device.
  //
  // Mixed precision (the context's Precision::Bf16, GPU only; core/precision.h): the model is
  // the autocast boundary. Its float32 input is cast to bf16 once, every layer runs on bf16
  // activations and gradients (the convolutions and dense layers on a bf16 copy of the
  // weights, made from the float32 flat buffer by one kernel at the start of each forward, so
  // after every optimizer update), and the output is cast back to float32: the losses, the
  // metrics and the caller see float32, and backward's dy (float32) is cast to bf16 once.
  // Parameters, their gradients and the optimizer's state stay float32.
  const Tensor& forward(Context& ctx, const Tensor& x);
  // dy = dL/d(output of the last forward). Accumulates parameter gradients (+=).
  // dL/d(input) is computed only when want_input_grad (e.g. a GAN's discriminator feeding G).
  //
  // The model holds the activations (and BatchNorm its batch statistics) of its last forward
  // only. A backward meant for an earlier forward would silently use the wrong ones (a GAN
  // discriminator run on the real batch, then on the fake one, then differentiated for the
  // real one), so backward() refuses to run, naming the mistake, when a forward in training
  // mode was followed by another forward before any backward: run forward + backward per
  // batch (real, then fake). A training-mode forward that is meant to get no backward (BatchNorm
  // statistics only) says so with forget_forward() before the next forward. Evaluation-mode
  // forwards never count as awaiting a backward.
  //
  // want_param_grads = false: the caller needs only dL/d(input) (a GAN's discriminator in the
  // generator's step); layers that can skip their parameter gradients do (Layer::
  // set_param_grads), and the model's gradients are not to be used before the next zero_grad.
  void backward(Context& ctx, const Tensor& dy, bool want_input_grad = false,
                bool want_param_grads = true);
  // Declares that the last forward will get no backward (see backward()).
  void forget_forward() { awaiting_backward_ = false; }
  const Tensor& input_grad() const { return dx_in_; }
  // Called in backward() after layer i is done (its parameter gradients final), for every
  // layer, last to first: data-parallel training starts all-reducing a bucket of gradients
  // there (lib/dist/grad_sync.h). nullptr removes it.
  void set_backward_hook(std::function<void(Context&, size_t)> hook) { hook_ = std::move(hook); }
  // A second such hook, the optimizer's: an update of parameters whose state a memory plan
  // moved off the device starts there (Optimizer::grads_ready). nullptr removes it.
  void set_grads_ready_hook(std::function<void(Context&, size_t)> hook) { grads_hook_ = std::move(hook); }
  // A memory plan's placements (model/memory_plan.h), one per layer (absorbed layers' ignored;
  // empty: none, every buffer kept for the whole step, as without a plan). With a plan a
  // training step frees each output after its last use in backward and the gradient buffers
  // after backward; an Offload layer's output goes to host memory after the next layer's
  // forward and comes back before the backward that needs it; a Recompute layer's output is
  // dropped then and made again by running its forward once more, at the RNG position of the
  // first time (the same dropout mask), so the step computes the same numbers. Outputs and
  // gradients live in one buffer laid out for the step (model/memory_plan.h's layout_arena), so
  // nothing is allocated inside it and it can still be one CUDA graph. On the GPU the copies
  // run on a stream of their own, ordered by events (no host waits): an output goes out once
  // the next layer has read it, and its slot is reused only once the copy is done; it comes
  // back from back_at[i] on (the plan's SavedPlan::back_at, a position; empty: when needed),
  // its slot kept through dropped_after[i] (the plan's estimate of when its copy out is done).
  // An evaluation forward frees each output once the next layer has read it, and puts it in
  // the training step's slot when it fits there.
  void set_placements(std::vector<Placement> where, std::vector<int> dropped_after = {},
                      std::vector<int> back_at = {});
  bool has_placements() const { return !where_.empty(); }
  // A memory plan's micro-batch: training steps run the batch in slices of this many rows
  // (ClassifierTrainer), evaluation too (0: the whole batch at once).
  void set_micro_batch(int64_t rows) { micro_rows_ = rows; }
  int64_t micro_batch() const { return micro_rows_; }
  // Output of layer i in the last forward (for tests and debugging; empty once a plan freed it).
  const Tensor& activation(size_t i) const { return acts_.at(i); }

  // Parameters in layer order, named "<layer index>.<name>", e.g. "0.weight".
  std::vector<Param> params();
  std::vector<Param> buffers();
  // Index of the layer that owns params()[i] (for per-layer update timing).
  std::vector<size_t> param_layers();
  // One fill of the flat gradient buffer, on its device.
  void zero_grad(Context& ctx);
  void train(bool on);
  // Draws every layer's initial parameters (on the host: before to(CUDA)).
  void reset_parameters(Rng& rng);

  Shape output_shape(const Shape& in) const;
  double flops(const Shape& in) const;  // forward, one batch
  int64_t num_params();
  // Table: index, layer, output shape, parameters, forward MFLOPs; totals at the end.
  std::string summary(const Shape& in);

 private:
  std::string label(size_t i) const;
  std::string who(size_t i) const;  // "layer 3 (Conv2d(32->32, k3 s1 p1) + ReLU)"
  void fuse_activations();
  // bf16 forward: refreshes w16_ from the flat buffer (and hands the layers their views when
  // its storage is new); refuses what has no bf16 path (the CPU, a memory plan).
  void refresh_bf16(Context& ctx);
  // The memory plan's steps (set_placements): drop layer i's output (to host first when
  // offloaded), have it on the device again, the executed layer before i (-1: none).
  void drop_output(Context& ctx, size_t i, bool to_host);
  void restore_output(Context& ctx, size_t i);
  int executed_before(size_t i) const;
  // The arena for a training step on input shape `in` (laid out again when it changes).
  void prepare_arena(Context& ctx, const Shape& in);
  void save_rng(Context& ctx, size_t k);
  // GPU: at the start of position p of a planned step, the compute stream waits for copies out
  // whose slot is reused from p on, and prefetches due at p are queued on the copy stream.
  void copies_at(Context& ctx, int p);

  std::vector<std::unique_ptr<Layer>> layers_;
  std::unique_ptr<ParamSet> params_ = std::make_unique<ParamSet>();  // stable across moves
  std::string name_;
  std::vector<Tensor> acts_;  // acts_[i] = output of layer i
  Tensor grads_[2];           // ping-pong: each layer writes dL/d(its input) into the one that
                              // does not hold its dy
  std::vector<bool> absorbed_;
  bool fusion_ = true, fusion_checked_ = false;
  Tensor x_in_;               // the last forward's input (shares the caller's storage; bf16:
                              // x16_'s)
  Tensor dx_in_;
  // bf16 (see forward): the parameters' copy, the input and the input gradient in bf16, the
  // output and dy's float32/bf16 twins; the input's type (dx_in_ takes it).
  Tensor w16_, x16_, dx16_, out32_, dy16_;
  const void* w16_given_ = nullptr;  // w16_'s storage the layers hold views of
  DType in_dtype_ = DType::F32;
  bool have_forward_ = false;
  bool training_ = true;            // the mode train() set last
  bool awaiting_backward_ = false;  // the last forward ran in training mode, no backward yet
  bool planned_step_ = false;       // the last forward ran under set_placements' plan
  int overwritten_ = 0;             // training-mode forwards whose activations the last
                                    // forward replaced before their backward
  std::function<void(Context&, size_t)> hook_, grads_hook_;
  std::vector<Placement> where_;   // per layer, from set_placements (empty: no plan)
  std::vector<Tensor> host_;       // offloaded outputs (pinned on a GPU), kept across steps
  std::vector<Shape> shapes_;      // each output's shape in the last training forward
  std::vector<uint64_t> rng_at_;   // the RNG position each layer's forward started at
  std::vector<char> present_;      // whether the output is on the device now
  std::vector<int> order_;         // each layer's index among the executed ones (-1: absorbed)
  ArenaLayout layout_;             // where outputs and gradients live in arena_
  std::vector<int64_t> slot_floats_;  // per executed layer: its output's floats in layout_
  Shape layout_key_;               // the input shape layout_ is for
  Tensor arena_;                   // every planned output and gradient, one device buffer
  Tensor rng_slots_;               // GPU: RNG positions of recomputed layers' forwards, (L+1)
  std::vector<int> plan_dropped_, plan_back_;  // per layer, from set_placements (-1: none)
  std::shared_ptr<struct CopyLane> lane_;     // GPU: the copy stream and its events
  std::vector<char> prefetched_;              // per executed layer: its copy back is queued
  int64_t micro_rows_ = 0;                    // set_micro_batch
};

}  // namespace pdnn
