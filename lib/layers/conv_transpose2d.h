// 2-D transposed convolution, exactly PyTorch's ConvTranspose2d (no output_padding, groups or
// dilation): the adjoint of Conv2d over the output image, so forward is convolution's
// backward-data and backward is convolution's forward (Caffe's Deconvolution).
//   x (N,Cin,H,W) -> y (N,Cout,OH,OW), OH = (H-1)*s - 2p + k, likewise OW.
//   weight (Cin,Cout,k,k), bias (Cout).  backward: dweight, dbias +=, dx = (skipped when null).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "layers/layer.h"
#include "ops/conv/conv2d.h"

namespace pdnn {

class ConvTranspose2d : public Layer {
 public:
  ConvTranspose2d(int64_t in_ch, int64_t out_ch, int64_t kernel, int64_t stride = 1,
                  int64_t padding = 0, bool bias = true);

  std::string kind() const override { return "ConvTranspose2d"; }
  std::string describe() const override;  // "ConvTranspose2d(100->512, k4 s1 p0)"
  Shape output_shape(const Shape& in) const override;
  void forward(Context& ctx, const Tensor& x, Tensor& y) override;
  void backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                Tensor* dx) override;
  std::vector<Param> params() override;
  double flops(const Shape& in) const override;  // 2*N*Cin*Cout*k*k*H*W (+ N*Cout*OH*OW bias)
  // x (for the weight gradient) and y (unread, conv_transpose2d.cpp says why); the workspace
  // of the GPU's algorithms for its passes.
  BackwardNeeds backward_needs(const Shape& in, const PlanFor& p) const override;
  // PyTorch's default: U(+-1/sqrt(fan_in)), fan_in = weight dim 1 * k*k = Cout*k*k.
  void reset_parameters(Rng& rng) override;
  void set_bf16_params(const std::vector<Tensor>& copies) override;

  void set_algo(ConvAlgo a) { algo_ = a; }

  Tensor& weight() { return weight_; }
  Tensor& bias() { return bias_; }
  Tensor& weight_grad() { return dweight_; }
  Tensor& bias_grad() { return dbias_; }
  bool has_bias() const { return has_bias_; }

 private:
  // Geometry of the convolution whose adjoint this is: over the output image (Cout, OH, OW),
  // whose output size (g.oh, g.ow) is the input's (H, W). Checks the input shape.
  ConvGeom geom(const Shape& in) const;

  int64_t in_ch_, out_ch_, kernel_, stride_, padding_;
  bool has_bias_;
  ConvAlgo algo_ = ConvAlgo::Auto;
  Tensor weight_, bias_, dweight_, dbias_;
  Tensor weight16_;  // the weight's bf16 copy (set_bf16_params), read by bf16 passes
};

}  // namespace pdnn
