// Model: layers as the nodes of a graph, each reading the outputs of named earlier nodes (or
// the model's input), with the activation buffers they pass along. One input, one output (the
// last node). A node's output may feed several nodes (a U-Net's skip connections, a residual
// branch): backward sums the gradients it gets from them. Layers of several inputs (Concat,
// Add: layers/merge.h) join branches. Sequential (model/sequential.h) is the chain: each node
// reads the one before. Buffers are owned here and reused across steps (grow-only), so a
// training loop allocates once. The parameters of all layers live in one flat buffer and their
// gradients in another (parameters()), on the device the model was moved to (to());
// activations follow the input's device.
//
// Nodes run in the order they were added (an input must exist when its reader is added, so
// that order is a topological one), backward in the reverse order; a node's output gradient is
// complete once every reader's backward has run. The first reader in backward order writes it,
// every other one writes a temporary that is then added to it (in that fixed order: the sums
// are the same at any thread count and on every run).
#pragma once
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "layers/layer.h"
#include "model/memory_plan.h"

namespace pdnn {

class MergeLayer;

class Model {
 public:
  // The name that stands for the model's input in a node's inputs.
  static constexpr const char* kInput = "input";

  Model() = default;
  Model(Model&&) = default;
  Model& operator=(Model&&) = default;

  // Adds node `name` (letters, digits, '_', '-' and '.'; not "input" or "other") running `layer`
  // over the outputs of `inputs`, node names or kInput, each added before. A layer of one
  // input takes one; a MergeLayer (Concat, Add) one or more. Parameter names are
  // "<name>.<parameter>" ("enc1.conv1.weight"), the profiler's rows are named after the node.
  Layer& add(const std::string& name, std::unique_ptr<Layer> layer,
             const std::vector<std::string>& inputs);
  template <class L, class... A>
  L& node(const std::string& name, const std::vector<std::string>& inputs, A&&... args) {
    auto p = std::make_unique<L>(std::forward<A>(args)...);
    L& ref = *p;
    add(name, std::move(p), inputs);
    return ref;
  }
  // Puts `layer` in node i's place (its name and inputs kept), before the first forward and
  // before the model moves to a device: a test pinning an activation's mask, a new head.
  // Returns the layer it replaces.
  std::unique_ptr<Layer> replace(size_t i, std::unique_ptr<Layer> layer);
  size_t size() const { return nodes_.size(); }
  Layer& layer(size_t i) { return *nodes_.at(i).layer; }
  const Layer& layer(size_t i) const { return *nodes_.at(i).layer; }
  const std::string& node_name(size_t i) const { return nodes_.at(i).name; }
  // Node i's inputs as node indices, -1 for the model's input.
  const std::vector<int>& node_inputs(size_t i) const { return nodes_.at(i).inputs; }
  // The index of node `name`; pdnn::Error naming the known ones when there is none.
  size_t index_of(const std::string& name) const;
  // Optional name ("G", "D"): prefixes layer labels in the profiler when several models share
  // one context. Parameter names stay "<node>.<name>".
  void set_name(std::string name) { name_ = std::move(name); }
  const std::string& name() const { return name_; }
  // Node i's label in the profiler and the memory plan: its name, "<model name>.<its name>"
  // for a named model.
  std::string label(size_t i) const;

  // Moves the parameters (and buffers, e.g. BatchNorm's statistics) to `dev`: one counted copy
  // of the flat buffer. Gradients there start at zero. Initialise (reset_parameters) before.
  void to(Device dev, Context& ctx);
  // The device of the parameters (CPU until to() moves them).
  Device device();
  // All parameters as one flat buffer (gathered on first use, on the host).
  ParamSet& parameters();

  // Fusion (on by default): at the first forward, an activation layer (ReLU, LeakyReLU) whose
  // input is a layer able to apply it in its own output write (Conv2d, Dense, BatchNorm2d), and
  // a Dropout whose input is a MaxPool2d, is taken over by that layer and skipped, when nothing
  // else reads that layer's output: one pass over memory less each way, the same numbers. The
  // skipped layer stays in the model (summary, parameter names). Turn it off before the first
  // forward to run every layer on its own.
  void set_fusion(bool on);
  // Fuses now rather than at the first forward (a memory plan describes the fused model); also
  // checks the graph (every node but the last read by some node).
  void prepare_fusion() {
    if (!fusion_checked_) fuse_activations();
  }
  // Whether node i was taken over by its input node.
  bool absorbed(size_t i) const { return absorbed_.at(i); }

  // Runs every node; the returned output is owned by the model and valid until the next call.
  // The model keeps a reference to x's storage for backward: do not modify x in between.
  // x must be on the model's device.
  //
  // Mixed precision (the context's Precision::Bf16, GPU only; core/precision.h): the model is
  // the autocast boundary. Its float32 input is cast to bf16 once, every node runs on bf16
  // activations and gradients (the convolutions and dense layers on a bf16 copy of the
  // weights, made from the float32 flat buffer by one kernel at the start of each forward, so
  // after every optimizer update; Concat copies bf16 channels, Add and the gradient sums of an
  // output read twice add in fp32 and round once), and the output is cast back to float32: the
  // losses, the metrics and the caller see float32, and backward's dy (float32) is cast to bf16
  // once. A last layer that asks for it (Layer::fp32_under_bf16: a Sigmoid, as autocast runs
  // BCEWithLogitsLoss's) runs after the cast, in float32, and its input's gradient is cast to
  // bf16 instead of dy. Parameters, their gradients and the optimizer's state stay float32. Under a memory
  // plan (set_placements) the same: the plan's buffer, its host copies and its recomputations
  // hold and make bf16 outputs and gradients.
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
  // Called in backward() after node i is done (its parameter gradients final), for every
  // node, last to first: data-parallel training starts all-reducing a bucket of gradients
  // there (lib/dist/grad_sync.h). nullptr removes it.
  void set_backward_hook(std::function<void(Context&, size_t)> hook) { hook_ = std::move(hook); }
  // A second such hook, the optimizer's: an update of parameters whose state a memory plan
  // moved off the device starts there (Optimizer::grads_ready). nullptr removes it.
  void set_grads_ready_hook(std::function<void(Context&, size_t)> hook) { grads_hook_ = std::move(hook); }
  // A memory plan's placements (model/memory_plan.h), one per node (absorbed nodes' ignored;
  // empty: none, every buffer kept for the whole step, as without a plan). With a plan a
  // training step frees each output after its last use in backward and the gradient buffers
  // after backward; an Offload node's output is copied to host memory once written, dropped
  // after its last reader's forward and comes back before the first backward that needs it; a
  // Recompute node's output is dropped then and made again by running its forward once more,
  // at the RNG position of the first time (the same dropout mask), so the step computes the
  // same numbers. Outputs and gradients live in one buffer of their type (bf16 in bf16) laid
  // out for the step (model/memory_plan.h's layout_arena), so nothing is allocated inside it and it can still
  // be one CUDA graph. On the GPU the copies run on a stream of their own, ordered by events
  // (no host waits): an output goes out once written, and its slot is reused only once the
  // copy is done; it comes back from back_at[i] on (the plan's SavedPlan::back_at, a position;
  // empty: when needed), its slot kept through dropped_after[i] (the plan's estimate of when
  // its copy out is done). An evaluation forward frees each output once its last reader has
  // read it, and puts it in the training step's slot when it fits there.
  void set_placements(std::vector<Placement> where, std::vector<int> dropped_after = {},
                      std::vector<int> back_at = {});
  bool has_placements() const { return !where_.empty(); }
  // Whether under bf16 the last layer runs in float32, after the output cast (forward's header).
  bool fp32_tail() const;
  // A memory plan's micro-batch: training steps run the batch in slices of this many rows
  // (ClassifierTrainer), evaluation too (0: the whole batch at once).
  void set_micro_batch(int64_t rows) { micro_rows_ = rows; }
  int64_t micro_batch() const { return micro_rows_; }
  // Output of node i in the last forward (for tests and debugging; empty once a plan freed it).
  const Tensor& activation(size_t i) const { return acts_.at(i); }

  // Parameters in node order, named "<node name>.<name>", e.g. "0.weight".
  std::vector<Param> params();
  std::vector<Param> buffers();
  // Index of the node that owns params()[i] (for per-layer update timing).
  std::vector<size_t> param_layers();
  // One fill of the flat gradient buffer, on its device.
  void zero_grad(Context& ctx);
  void train(bool on);
  // Draws every layer's initial parameters (on the host: before to(CUDA)), in node order.
  void reset_parameters(Rng& rng);

  // Every node's output shape for input shape `in`.
  std::vector<Shape> node_shapes(const Shape& in) const;
  Shape output_shape(const Shape& in) const;
  double flops(const Shape& in) const;  // forward, one batch
  int64_t num_params();
  // Table: node, layer (with its inputs where they are not the node before), output shape,
  // parameters, forward MFLOPs; totals at the end.
  std::string summary(const Shape& in);

 protected:
  // The node before the next one added, for Sequential (-1: none yet).
  int last_node() const { return static_cast<int>(nodes_.size()) - 1; }
  Layer& add_node(std::string name, std::unique_ptr<Layer> layer, std::vector<int> inputs);

 private:
  struct Node {
    std::unique_ptr<Layer> layer;
    std::string name;
    std::vector<int> inputs;      // node indices, -1: the model's input
    MergeLayer* merge = nullptr;  // the layer, when it takes several inputs
  };

  std::string who(size_t i) const;  // "layer 3 (Conv2d(32->32, k3 s1 p1) + ReLU)"
  void fuse_activations();
  // bf16 forward: refreshes w16_ from the flat buffer (and hands the layers their views when
  // its storage is new); refuses what has no bf16 path (the CPU).
  void refresh_bf16(Context& ctx);
  // The executed node that holds node i's output (i itself unless absorbed; -1: the input).
  int res(int i) const { return i < 0 ? -1 : host_[static_cast<size_t>(i)]; }
  const Tensor& input_of(size_t i, size_t j) const;
  // Runs node i's forward into acts_[i] (profiled when a hook is attached).
  void run_forward(Context& ctx, size_t i, const Shape& out);
  // A gradient buffer of `shape` from the pool (grow-only, lowest free one first: a chain
  // alternates between two), and giving it back.
  int take_grad(Context& ctx, const Shape& shape, DType dtype, size_t i);
  void give_grad(int k) {
    if (k >= 0) grad_busy_[static_cast<size_t>(k)] = 0;
  }
  // The memory plan's steps (set_placements): copy node i's output to the host, drop it,
  // have it on the device again.
  void offload_output(Context& ctx, size_t i);
  void drop_output(size_t i);
  void restore_output(Context& ctx, size_t i);
  // The arena for a training step on input shape `in` with activations of type `dtype` (laid
  // out again when the shape changes, made again for another type).
  void prepare_arena(Context& ctx, const Shape& in, DType dtype);
  void save_rng(Context& ctx, size_t k);
  // GPU: at the start of position p of a planned step, the compute stream waits for copies out
  // whose slot is reused from p on, and prefetches due at p are queued on the copy stream.
  void copies_at(Context& ctx, int p);

  std::vector<Node> nodes_;
  std::map<std::string, int> index_;
  std::unique_ptr<ParamSet> params_ = std::make_unique<ParamSet>();  // stable across moves
  std::string name_;
  // From fuse_activations: per node, the executed node holding its output, the absorbed node
  // it holds the output of (-1: none), the executed nodes reading its output (increasing),
  // and, per executed node, its index among them (-1: absorbed).
  std::vector<int> host_, absorber_;
  std::vector<std::vector<int>> readers_;
  std::vector<int> order_;
  int out_ = -1;               // the executed node holding the model's output
  std::vector<Tensor> acts_;   // acts_[i] = output of node i
  // Gradients w.r.t. node outputs: without a plan from a pool of buffers (grad_pool_), the
  // buffer of node i's in grad_at_[i] (-1: none yet); under a plan views of the arena (grad_).
  std::deque<Tensor> grad_pool_;  // (a deque: a buffer's address stays while more are added)
  std::vector<char> grad_busy_;
  std::vector<int> grad_at_;
  std::vector<Tensor> grad_;
  std::vector<char> absorbed_;
  bool fusion_ = true, fusion_checked_ = false;
  Tensor x_in_;               // the last forward's input (shares the caller's storage; bf16:
                              // x16_'s)
  Tensor dx_in_;
  // bf16 (see forward): the parameters' copy, the input and the input gradient in bf16, the
  // output and dy's float32/bf16 twins; the input's type (dx_in_ takes it).
  Tensor w16_, x16_, dx16_, out32_, dy16_;
  Tensor d32_;      // a float32 last layer's input gradient, before its cast to bf16
  int tail_ = -1;   // the last forward's float32 last node (fp32_under_bf16), or -1
  bool bf16_ = false;  // the last forward ran in bf16
  const void* w16_given_ = nullptr;  // w16_'s storage the layers hold views of
  DType in_dtype_ = DType::F32;
  bool have_forward_ = false;
  bool training_ = true;            // the mode train() set last
  bool awaiting_backward_ = false;  // the last forward ran in training mode, no backward yet
  bool planned_step_ = false;       // the last forward ran under set_placements' plan
  int overwritten_ = 0;             // training-mode forwards whose activations the last
                                    // forward replaced before their backward
  std::function<void(Context&, size_t)> hook_, grads_hook_;
  std::vector<Placement> where_;   // per node, from set_placements (empty: no plan)
  std::vector<Tensor> host_copy_;  // offloaded outputs (pinned on a GPU, of their type), kept
                                   // across steps
  std::vector<Shape> shapes_;      // each output's shape in the last training forward
  std::vector<uint64_t> rng_at_;   // the RNG position each node's forward started at
  std::vector<char> present_;      // whether the output is on the device now
  ArenaLayout layout_;             // where outputs and gradients live in arena_
  std::vector<int64_t> slot_elems_;  // per executed node: its output's elements in layout_
  Shape layout_key_;               // the input shape layout_ is for
  Tensor arena_;                   // every planned output and gradient, one device buffer
  Tensor rng_slots_;               // GPU: RNG positions of recomputed nodes' forwards, (L+1)
  std::vector<int> plan_dropped_, plan_back_;  // per node, from set_placements (-1: none)
  std::shared_ptr<struct CopyLane> lane_;     // GPU: the copy stream and its events
  std::vector<char> prefetched_;              // per executed node: its copy back is queued
  std::vector<char> restores_;  // per node: its backward brings its inputs back under a plan
                                // (a layer of one input gets x; a merge when it reads them)
  int64_t micro_rows_ = 0;                    // set_micro_batch
};

}  // namespace pdnn
