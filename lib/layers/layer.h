// The layer contract (after Caffe): forward(x) -> y into a buffer the caller sized with
// output_shape(); backward(x, y, dy) -> dx, accumulating parameter gradients.
// Gradients are true dL/dx: parameter gradients accumulate (+=), activation gradients are
// written (=), zero_grad() is explicit (after it a layer may write its parameter gradients in
// its next backward, the same values: mark_grads_zero).
#pragma once
#include <string>
#include <vector>

#include "core/context.h"
#include "core/cuda_state.h"
#include "core/error.h"
#include "core/param.h"
#include "core/tensor.h"
#include "ops/activation.h"
#include "ops/conv/conv2d.h"

namespace pdnn {

// What a layer's backward reads of its last forward, for the memory planner
// (model/memory_plan.h).
struct BackwardNeeds {
  bool input = true;          // x
  bool output = true;         // y
  int64_t scratch_bytes = 0;  // the layer's own tensors kept for backward (argmax, masks)
  // Output and scratch are cheap to make again from x by running forward again (with the same
  // dropout counters): pooling, dropout, elementwise activations, BatchNorm, Flatten.
  bool recomputable = false;
  // The shared GPU workspace its passes can be held to: what its algorithms asking the least
  // ask (a convolution's implicit GEMM or direct kernels, which keep no columns: ops/conv/
  // conv2d_algo.h, gpu_conv_workspace_bounds).
  int64_t workspace_bytes = 0;
  // Of scratch_bytes (when kept), a record backward can find again in x instead (MaxPool2d's
  // argmax, MaxPool2d::set_keep_argmax): the plan may trade it for reading x in backward.
  int64_t argmax_bytes = 0;
  // The most a faster algorithm may ask of the workspace (0: workspace_bytes is all): im2col's
  // columns, cuDNN's capped request.
  int64_t fast_workspace_bytes = 0;
  // Its output depends on the batch's other rows (BatchNorm's statistics): the batch cannot be
  // run in micro-batches.
  bool batch_coupled = false;
  // Of fast_workspace_bytes, what the column-based algorithm (im2col) asks (0: none): a
  // workspace below it leaves that algorithm out (the plan's printout says so).
  int64_t columns_bytes = 0;
  // Device memory its GPU passes ask beside the workspace once, while the chooser times their
  // algorithms at the first step of a shape: a convolution's weight gradient accumulates, so
  // the trials write a scratch one (ops/conv/conv2d_algo.h, gpu_conv_timing_bytes).
  int64_t timing_bytes = 0;
  // Its GPU passes index an image past 32 bits at this size (gpu_conv_image_past_32bit): only
  // the implicit GEMM's 64-bit kernels run them, whatever a profile at a smaller size timed.
  bool past_32bit = false;
};

// What a layer's backward_needs is asked for: the activations' type (bfloat16 under
// --precision bf16, float32 otherwise), the GPU the step is planned for, by its
// multiprocessors (a convolution's split weight gradients size their workspace by them; a plan
// made without a device assumes kPlanGpuSms, core/cuda_state.h), and
// the run's --conv-algo policy (the algorithms a convolution may run: a forced one's workspace
// is what it needs at least).
struct PlanFor {
  DType act = DType::F32;
  int gpu_sms = kPlanGpuSms;
  std::string conv_policy = "auto";
  // The layer as it ran (after its algorithms were chosen): the buffers it keeps for backward
  // as they are, not as its default choice would keep them (an uncapped plan's peak as run).
  bool as_run = false;
  // A convolution forced to cuDNN counts what cuDNN's own algorithm asks at the least in its
  // least workspace: only cuDNN knows it (empty: a plan made without a device with cuDNN,
  // where cuDNN cannot run, counts none).
  CudnnLeastFn cudnn_least = {};
};

// The weight a layer's product runs on: w for a float32 input x, its bf16 copy w16 for a
// bfloat16 one (Layer::set_bf16_params; refused in one line, naming the layer, without it).
inline const Tensor& weight_for(const Tensor& x, const Tensor& w, const Tensor& w16,
                                const char* layer) {
  if (x.dtype() != DType::BF16) return w;
  PDNN_CHECK(!w16.empty() && w16.numel() == w.numel(),
             "%s: a bfloat16 input needs the weight's bf16 copy (run the layer in a Sequential "
             "under --precision bf16)", layer);
  return w16;
}

class Layer {
 public:
  virtual ~Layer() = default;
  // Kind, e.g. "Conv2d"; describe() adds the hyper-parameters, e.g. "Conv2d(1->10, k3 s1 p1)".
  virtual std::string kind() const = 0;
  virtual std::string describe() const { return kind(); }
  // Output shape for an input shape; throws pdnn::Error on an input the layer cannot take.
  virtual Shape output_shape(const Shape& in) const = 0;
  // x: input; y: already sized to output_shape(x.shape()), on x's device. A layer keeps its
  // scratch (argmax, masks, statistics) in Tensors on x's device, and its parameters must be
  // there too (Model::to moves them).
  virtual void forward(Context& ctx, const Tensor& x, Tensor& y) = 0;
  // x, y: the tensors of the last forward; dy: dL/dy. dx: dL/dx to write (=), or nullptr when
  // nobody needs it (first layer). Parameter gradients accumulate (+=). y and dx arrive sized;
  // a layer writes into them and never rebinds them (they are the model's reused buffers).
  virtual void backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                        Tensor* dx) = 0;
  // Trainable parameters (empty for parameter-free layers).
  virtual std::vector<Param> params() { return {}; }
  // Non-trainable state saved in checkpoints (BatchNorm running statistics).
  virtual std::vector<Param> buffers() { return {}; }
  // Forward floating-point operations for one batch of input shape `in` (multiply-add = 2).
  virtual double flops(const Shape& in) const { (void)in; return 0.0; }
  // What backward needs kept from a training forward on input shape `in` for `p` (p.act: the
  // activations' type): what the layer keeps or asks in the activations' type scales with it;
  // masks, argmax records and BatchNorm's statistics keep their own types. Default: x and y,
  // nothing of its own, not recomputable (right, if wasteful, for any layer).
  virtual BackwardNeeds backward_needs(const Shape& in, const PlanFor& p) const {
    (void)in;
    (void)p;
    return {};
  }
  // Re-draw the parameters with the layer's default initialisation (PyTorch's per-layer one).
  virtual void reset_parameters(Rng& rng) { (void)rng; }
  // Mixed precision (core/precision.h, bf16): bfloat16 copies of this layer's parameters, in
  // params() order, views of the model's one copy of its flat buffer (Sequential refreshes it
  // before each forward). A layer whose products take bf16 operands (convolutions, dense) runs
  // on its weight's copy when its input is bf16; the others ignore them (biases, BatchNorm's
  // parameters and every gradient stay float32).
  virtual void set_bf16_params(const std::vector<Tensor>& copies) { (void)copies; }
  // Whether, as the model's last layer under bf16, this layer runs on the float32 side of the
  // output cast (autocast's rule for what feeds a loss: PyTorch refuses BCELoss under autocast
  // and computes BCEWithLogitsLoss's sigmoid in float32). Such a layer is elementwise and
  // differentiates from its output only: the model runs it in place on its float32 output.
  virtual bool fp32_under_bf16() const { return false; }

  // Fusion (the model does it, model/model.h): an elementwise activation layer says which activation it is
  // (kind None: not fusable), and a layer that can apply one in its own output write takes it
  // over (true), after which its output is act(its own result) and its backward receives dy
  // with respect to that output. The activation layer then stays in the model (summaries,
  // checkpoint names) but is skipped.
  virtual Act fusable_activation() const { return {}; }
  virtual bool fuse_activation(const Act& a) {
    (void)a;
    return false;
  }
  // The same for inverted dropout: a Dropout layer says its p (negative: not a dropout), and a
  // layer that can apply the mask in its own output write (MaxPool2d) takes it over, drawing
  // the same mask from the context's RNG in training and nothing in evaluation.
  virtual float fusable_dropout() const { return -1.f; }
  virtual bool fuse_dropout(float p) {
    (void)p;
    return false;
  }

  // Fusion across a layer boundary (the model does it after the above): when the layer before
  // this one applies activation `a` in its output write (so this layer's input x is act(z)),
  // this layer may return act'(x) . dL/dx instead of dL/dx, in a pass it makes anyway (a
  // pooling's scatter, a convolution's output write), so that the layer before receives
  // dL/dz and makes no pass of its own over dy. Returns whether it will; the layer before is
  // then told by take_activation_grad(true), which it must accept (ask can_take_...() first).
  virtual bool fold_input_activation(const Act& a) {
    (void)a;
    return false;
  }
  virtual bool can_take_activation_grad() const { return false; }
  virtual void take_activation_grad(bool on) { (void)on; }

  void train(bool on) { training_ = on; }
  bool training() const { return training_; }
  // Whether backward() must accumulate parameter gradients (on by default). Off, the caller
  // needs only dx (a GAN's discriminator passing the generator its gradient): layers that can
  // skip the work do (convolutions, BatchNorm), others still accumulate; either way the
  // parameter gradients are not to be used before the next zero_grad.
  void set_param_grads(bool on) { param_grads_ = on; }
  bool param_grads() const { return param_grads_; }
  // Whether backward may overwrite dy (the model says so for its own gradient buffers, which
  // nobody reads after this layer's backward; off by default: the caller's dy is the caller's).
  void set_dy_writable(bool on) { dy_writable_ = on; }
  bool dy_writable() const { return dy_writable_; }
  // Whether forward keeps a record that backward could find again in x (MaxPool2d's argmax;
  // BackwardNeeds::argmax_bytes); a memory plan's choice. Other layers ignore it.
  virtual void set_keep_argmax(bool keep) { (void)keep; }
  // Host-side convenience for layers used on their own (a model zeroes its flat buffer).
  void zero_grad() {
    for (auto& p : params()) p.grad->zero();
    mark_grads_zero();
  }
  // The parameter gradients were just zeroed (Model::zero_grad, zero_grad): the next backward
  // may write them (=) rather than add to them, the same values without reading them (Dense:
  // W4's 1024 x 100352 weight gradient, 411 MB). A layer that writes takes it in that backward
  // (take_grads_zero), which clears it; the others never read it.
  void mark_grads_zero() { grads_zero_ = true; }

 protected:
  // Whether the gradients are still the zeros mark_grads_zero promised; false from here on.
  bool take_grads_zero() {
    const bool z = grads_zero_;
    grads_zero_ = false;
    return z;
  }
  bool training_ = true;
  bool param_grads_ = true;
  bool grads_zero_ = false;
  bool dy_writable_ = false;
};

}  // namespace pdnn
