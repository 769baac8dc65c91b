// 2-D convolution (cross-correlation, as PyTorch's Conv2d) with square kernel, stride and zero
// padding, through im2col + GEMM.
//   x (N,C,H,W) -> y (N,K,OH,OW), OH = (H + 2p - k)/s + 1 (floor), likewise OW.
//   weight (K,C,k,k), bias (K).  backward: dweight, dbias +=, dx = (skipped when dx is null).
//   With a fused activation, y = act(conv(x) + b).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "layers/layer.h"
#include "ops/conv/conv2d.h"

namespace pdnn {

// What a convolution's GPU passes ask of the shared workspace, and of the device while the
// chooser times them, under plan p (ops/conv/conv2d_algo.h: gpu_conv_workspace_bounds,
// gpu_conv_timing_bytes): the fields of b Conv2d and ConvTranspose2d fill alike. g, n, k: the
// convolution their passes run; act: dy's activation in the workspace (None: none).
void set_gpu_conv_needs(BackwardNeeds& b, const ConvGeom& g, int64_t n, int64_t k, Act act,
                        const PlanFor& p, ConvAlgo forced, int64_t weight_elems,
                        int64_t bias_elems);

class Conv2d : public Layer {
 public:
  Conv2d(int64_t in_ch, int64_t out_ch, int64_t kernel, int64_t stride = 1, int64_t padding = 0,
         bool bias = true);

  std::string kind() const override { return "Conv2d"; }
  std::string describe() const override;  // "Conv2d(1->10, k3 s1 p1)"
  Shape output_shape(const Shape& in) const override;
  void forward(Context& ctx, const Tensor& x, Tensor& y) override;
  void backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;
  std::vector<Param> params() override;
  double flops(const Shape& in) const override;  // 2*N*K*C*k*k*OH*OW (+ N*K*OH*OW bias)
  // x for the weight gradient, y with a fused activation; scratch: the columns the GPU's
  // im2col forward keeps for backward when the batch is one chunk (in the activations' type);
  // workspace: at least what the GPU's algorithms asking the least ask for the three passes at
  // p's precision and multiprocessors (the implicit GEMM and direct kernels keep no columns),
  // at most im2col's columns or cuDNN's cap, each with dy through the activation where it is
  // not done in place (ops/conv/conv2d_algo.h: gpu_conv_workspace_bounds). Counted in floats,
  // as the passes ask for it (ops/conv/conv2d.cpp), in bf16 too.
  BackwardNeeds backward_needs(const Shape& in, const PlanFor& p) const override;
  // On the GPU, put dy through the fused activation's derivative in place (dy is the model's
  // own gradient buffer, Layer::dy_writable) before the convolution's backward, so that no
  // algorithm needs a copy of it in the workspace (a memory plan turns it on: the copy is as
  // large as the layer's output, 3.4 GiB for W4's first layers at 672x672). The same numbers.
  void set_mask_dy_in_place(bool on) { mask_dy_in_place_ = on; }
  // Whether the GPU's im2col forward may keep the batch's columns for backward (when the batch
  // is one chunk; on by default). A memory plan turns it off: backward forms them again.
  void set_keep_columns(bool on) {
    keep_columns_ = on;
    if (!on) cols_ = Tensor();
  }
  void reset_parameters(Rng& rng) override;      // PyTorch's default (init::torch_default)
  void set_bf16_params(const std::vector<Tensor>& copies) override;

  // Images in parallel or one batched GEMM; Auto (default) picks the measured-faster per shape.
  void set_algo(ConvAlgo a) { algo_ = a; }
  // A following ReLU/LeakyReLU applied in the output write (see Layer::fuse_activation).
  bool fuse_activation(const Act& a) override;
  Act activation() const { return act_; }
  // Across layers (Layer::fold_input_activation): as the next layer, dx written through the
  // activation of the layer before (act'(x) . dL/dx); as the layer before, dy arriving already
  // through this layer's activation, so backward reads no y.
  bool fold_input_activation(const Act& a) override;
  bool can_take_activation_grad() const override { return act_.kind != FusedAct::None; }
  void take_activation_grad(bool on) override { grad_through_act_ = on; }
  bool activation_grad_taken() const { return grad_through_act_; }
  Act folded_input_activation() const { return in_act_; }

  Tensor& weight() { return weight_; }
  Tensor& bias() { return bias_; }
  Tensor& weight_grad() { return dweight_; }
  Tensor& bias_grad() { return dbias_; }
  bool has_bias() const { return has_bias_; }

 private:
  ConvGeom geom(const Shape& in) const;  // checks the input shape

  int64_t in_ch_, out_ch_, kernel_, stride_, padding_;
  bool has_bias_;
  ConvAlgo algo_ = ConvAlgo::Auto;
  Act act_;
  Act in_act_;                     // folded into dx (the layer before's activation)
  bool grad_through_act_ = false;  // dy arrives through act_'s derivative
  bool mask_dy_in_place_ = false;
  bool keep_columns_ = true;
  Tensor weight_, bias_, dweight_, dbias_;
  Tensor weight16_;  // the weight's bf16 copy (set_bf16_params), read by bf16 passes
  Tensor cols_;  // the forward's columns, kept for backward on the GPU
};

}  // namespace pdnn
