// BatchNorm2d(C, eps, momentum, affine), as PyTorch's:
// x (N,C,H,W) -> y (N,C,H,W), y = (x - mean_c) / sqrt(var_c + eps) * gamma_c + beta_c.
// Training: mean/var over N,H,W of the batch (biased variance for normalising); running
// statistics updated as new = (1-momentum)*old + momentum*batch, running_var taking the
// unbiased batch variance. Evaluation: the running statistics.
// Backward: dgamma, dbeta +=; dx = through the batch statistics in training, the plain affine
// map (dy * gamma / sqrt(running_var + eps)) in evaluation.
// Params "weight" (gamma, 1) and "bias" (beta, 0) when affine; buffers "running_mean" (0),
// "running_var" (1).
// With act = ReLU or LeakyReLU(slope >= 0) the activation that follows in the model is fused in
// (y = act(bn(x)), one pass each way; the kernels and formulas are in ops/batchnorm2d.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "layers/layer.h"
#include "ops/batchnorm2d.h"

namespace pdnn {


class BatchNorm2d : public Layer {
 public:
  explicit BatchNorm2d(int64_t channels, float eps = 1e-5f, float momentum = 0.1f,
                       bool affine = true, FusedAct act = FusedAct::None, float slope = 0.01f);
  std::string kind() const override { return "BatchNorm2d"; }
  std::string describe() const override;
  Shape output_shape(const Shape& in) const override;
  void forward(Context& ctx, const Tensor& x, Tensor& y) override;
  void backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;
  std::vector<Param> params() override;
  std::vector<Param> buffers() override;
  // Statistics (train) plus the fused normalise-scale-shift, ~2 flops per element each (+1 for
  // a fused activation).
  double flops(const Shape& in) const override;
  // x and y (the fused activation's derivative), the batch mean and 1/std. Not recomputable
  // yet: forward again would update the running statistics a second time (a replay from the
  // saved statistics would be one cheap pass).
  // Its statistics are the batch's: no micro-batches.
  // The statistics are float32 in bf16 too.
  BackwardNeeds backward_needs(const Shape& in, const PlanFor& p) const override {
    (void)in;
    (void)p;
    BackwardNeeds b{true, true, 2 * c_ * static_cast<int64_t>(sizeof(float)), false, 0};
    b.batch_coupled = training_;
    return b;
  }
  // gamma = 1, beta = 0 (PyTorch's default; nothing is drawn).
  void reset_parameters(Rng& rng) override;

  Tensor& running_mean() { return running_mean_; }
  Tensor& running_var() { return running_var_; }
  Tensor& weight() { return gamma_; }
  Tensor& bias() { return beta_; }
  FusedAct fused_activation() const { return act_; }
  bool fuse_activation(const Act& a) override;
  // Training statistics per shard of the batch's rows, as `shards` data-parallel ranks compute
  // them (rows [k N/shards, (k+1) N/shards) each, the ranks' split), with the running
  // statistics the mean of the shards' updates (what averaging the ranks' gives). Lets one
  // process reproduce a data-parallel run (dcgan --bn-shards). CPU only; 1: the whole batch.
  void set_stat_shards(int shards);

 private:
  void set_defaults();  // gamma 1, beta 0, running mean 0, running var 1
  int64_t c_;
  float eps_, momentum_;
  bool affine_;
  Tensor gamma_, dgamma_, beta_, dbeta_;
  Tensor running_mean_, running_var_;
  FusedAct act_;
  float slope_;
  // Saved by forward for backward: the mean and 1/sqrt(var+eps) it normalised with.
  Tensor mean_, invstd_;
  bool batch_stats_ = true;  // whether the last forward used batch statistics
  Shape last_;
  int shards_ = 1;
  Tensor rm_sum_, rv_sum_, rm_k_, rv_k_;  // the shards' running statistics (shards_ > 1)

  void forward_shards(Context& ctx, const BnGeom& g, const Tensor& x, Tensor& y);
  void backward_shards(Context& ctx, const BnGeom& g, const Tensor& x, const Tensor& y,
                       const Tensor& dy, Tensor* dx);
};

}  // namespace pdnn
