// Optimizer base: updates all of a model's parameters with one fused kernel over its flat
// buffers (ParamSet), with PyTorch's formulas (each subclass cites the one it follows). Its
// state (moments, sums) lives in flat buffers of the same size on the same device. The step
// count lives there too, so a CUDA graph that captured step() sees it move every replay.
//
// A memory plan may move the state of some parameters off the GPU (ZeRO-Offload, Ren et al.
// 2021; place_state): it then lives in pinned host memory, and those parameters are updated
// either by streaming their state through the GPU in chunks (in, the device's own kernel, out)
// or by the host's cores (gradients and weights out in chunks, the same update formula, the
// weights back in), each on streams of its own as soon as backward has made their gradients
// (begin_backward, grads_ready: the model's hook), overlapping the rest of backward; step()
// updates the rest and waits for them. Either way the weights are bit for bit those of the
// update on the device (ops/optim_formula.h).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/param.h"

namespace pdnn {

// ("<param index>.<slot>", tensor): per-parameter views of the state, for checkpoints.
using StateList = std::vector<std::pair<std::string, Tensor*>>;

// How the parameters whose state a memory plan moves to the host are updated.
enum class OffloadMode {
  Stream,  // state streamed through the GPU in chunks, updated by the device's kernel
  Host,    // updated by the host's cores, gradients and weights copied out and back in chunks
};
const char* offload_mode_name(OffloadMode m);  // "stream", "host"

struct StateOffload {
  OffloadMode mode = OffloadMode::Stream;
  std::vector<int> params;           // ParamSet indices whose state lives on the host
  std::vector<size_t> param_layers;  // per ParamSet parameter: its layer (the model's hook's
                                     // index; Model::param_layers)
  int64_t chunk_floats = int64_t{16} << 20;  // per copy and update (rounded to 16)
};

class Optimizer {
 public:
  // `params` must outlive the optimizer; it may move between devices before a step (the state
  // follows at the next step, one counted copy), unless place_state fixed it.
  explicit Optimizer(ParamSet& params) : ps_(params) {}
  virtual ~Optimizer();
  virtual std::string kind() const = 0;

  // One update of every parameter from its gradient (does not zero the gradients); timed as
  // the profiler's row label() when the context has a profile hook.
  void step(Context& ctx);
  // The profiler's name for this optimizer's update ("update"; "D.update" for the optimizer of
  // a model named "D").
  const std::string& label() const { return label_; }
  void set_label(std::string label) { label_ = std::move(label); }

  size_t num_params() const { return ps_.params().size(); }
  // Whether this optimizer was built over `ps` (a trainer checks it pairs a model with its own).
  bool updates(const ParamSet& ps) const { return &ps_ == &ps; }
  int64_t steps() const { return steps_; }
  void set_steps(int64_t s) {
    steps_ = s;
    step_synced_ = false;
  }
  // The host's count alone, for the host side of a CUDA graph (a capture that did not run, a
  // replay that did): the graph's own kernel moves the device's count.
  void set_host_steps(int64_t s) { steps_ = s; }
  float lr() const { return lr_; }
  void set_lr(float lr) { lr_ = lr; }
  // State as per-parameter views, named "<i>.<slot>" (e.g. "3.exp_avg"); valid until the next
  // call or step. On the state's device (copy through to(CPU) to read it); the views of
  // offloaded parameters are host tensors.
  StateList state();

  // Puts the state where a memory plan says, now (before the first step, so that it is
  // allocated before the step's buffers rather than at the first update): on the parameters'
  // device, except the state of `offload.params` (when given), which goes to pinned host
  // memory (host memory on the CPU), with what its updates need (chunk buffers, streams). The
  // parameters must already be on their device and stay there. Throws pdnn::Error when this
  // optimizer cannot update a part of its buffers (update_views).
  void place_state(Context& ctx, const StateOffload* offload = nullptr);
  bool placed() const { return placed_; }
  bool offloads() const { return !host_segs_.empty(); }
  // Bytes of state in host memory, and of the streamed update's chunks on the device.
  int64_t host_state_bytes() const;
  int64_t staging_bytes() const;
  // The backward that makes the gradients of the next step() starts (a trainer calls it before
  // the last backward of a step): with offloaded state, the step count moves now and each
  // offloaded parameter's update starts at grads_ready(layer) of its layer, once backward has
  // made its gradient. Without offloaded state it does nothing.
  void begin_backward(Context& ctx);
  void grads_ready(Context& ctx, size_t layer);

 protected:
  // The flat state buffers with their slot names (e.g. {"exp_avg", &m_}).
  virtual std::vector<std::pair<const char*, Tensor*>> slots() = 0;
  // The update itself; `step` (1) int64 on the parameters' device holds the new count. By
  // default update_views over the whole flat buffers.
  virtual void update(Context& ctx, const Tensor& step);
  // The update of one stretch: g, w and the state views (slots() order), all of one length and
  // on one device (step there too). An optimizer that can update its buffers in parts (and so
  // have part of its state offloaded) overrides it; the default throws.
  virtual void update_views(Context& ctx, const Tensor& step, const Tensor& g, Tensor& w,
                            std::vector<Tensor>& state);
  // Whether update_views is implemented.
  virtual bool updates_in_parts() const { return false; }
  // A flat state buffer for the parameters, filled with v (on the host until the first step).
  Tensor state_like(float v) const;

  ParamSet& ps_;
  float lr_ = 0.f;

 private:
  // A stretch [lo, hi) of the flat buffers whose state lives at `at` of the compact device
  // buffers (the slots) or of the host ones.
  struct Segment {
    int64_t lo, hi, at;
  };
  void advance(Context& ctx);
  void update_offloaded(Context& ctx, size_t seg);
  void update_host_chunk(size_t job);
  static void host_job(void* arg);

  int64_t steps_ = 0;
  std::string label_ = "update";
  Tensor step_;  // (1) int64 beside the parameters
  bool step_synced_ = false;
  std::vector<Tensor> views_;  // backing store of state()
  bool placed_ = false;
  bool advanced_ = false;      // this step's count already moved (begin_backward)
  std::vector<Segment> dev_segs_, host_segs_;
  std::vector<Tensor> host_state_;  // per slot: the offloaded stretches' state, back to back
  StateOffload offload_;
  std::vector<char> issued_;        // per host segment: its update queued this step
  std::vector<int> seg_layer_;      // per host segment: the layer whose backward makes it
  struct Lane;
  std::shared_ptr<Lane> lane_;      // chunk buffers, streams, events, host jobs
};

}  // namespace pdnn
