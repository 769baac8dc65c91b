// ConvTranspose2d: the convolution kernels of ops/conv/conv2d with forward and backward swapped.
// With g the geometry of the matching convolution (Cout-channel image of OH x OW -> Cin
// channels of H x W) and the weight (Cin, Cout*k*k) read as that convolution's (K, C*k*k):
//   forward:  y  = conv backward-data(dy := x)          (GEMM W^T x, col2im)
//   backward: dx = conv forward(x := dy)                (im2col dy, GEMM W cols)
//             dW += conv backward-weights(x := dy, dy := x)
#include "layers/conv_transpose2d.h"

#include "core/error.h"
#include "core/init.h"
#include "layers/conv2d.h"
#include "ops/conv/conv2d_algo.h"

namespace pdnn {

ConvTranspose2d::ConvTranspose2d(int64_t in_ch, int64_t out_ch, int64_t kernel, int64_t stride,
                                 int64_t padding, bool bias)
    : in_ch_(in_ch), out_ch_(out_ch), kernel_(kernel), stride_(stride), padding_(padding),
      has_bias_(bias) {
  PDNN_CHECK(in_ch > 0 && out_ch > 0 && kernel > 0 && stride > 0 && padding >= 0,
             "conv_transpose2d: channels %lld->%lld, kernel %lld, stride %lld, padding %lld: "
             "channels, kernel and stride must be positive, padding >= 0",
             (long long)in_ch, (long long)out_ch, (long long)kernel, (long long)stride,
             (long long)padding);
  weight_ = Tensor::zeros(Shape{in_ch, out_ch, kernel, kernel});
  dweight_ = Tensor::zeros(weight_.shape());
  if (has_bias_) {
    bias_ = Tensor::zeros(Shape{out_ch});
    dbias_ = Tensor::zeros(Shape{out_ch});
  }
}

std::string ConvTranspose2d::describe() const {
  return strprintf("ConvTranspose2d(%lld->%lld, k%lld s%lld p%lld%s)", (long long)in_ch_,
                   (long long)out_ch_, (long long)kernel_, (long long)stride_,
                   (long long)padding_, has_bias_ ? "" : ", no bias");
}

ConvGeom ConvTranspose2d::geom(const Shape& in) const {
  PDNN_CHECK(in.rank() == 4, "conv_transpose2d: input %s must be (N,C,H,W)", in.str().c_str());
  PDNN_CHECK(in.c() == in_ch_, "conv_transpose2d: input %s has %lld channels, layer expects %lld",
             in.str().c_str(), (long long)in.c(), (long long)in_ch_);
  const int64_t oh = (in.h() - 1) * stride_ - 2 * padding_ + kernel_;
  const int64_t ow = (in.w() - 1) * stride_ - 2 * padding_ + kernel_;
  PDNN_CHECK(in.h() > 0 && in.w() > 0 && oh > 0 && ow > 0,
             "conv_transpose2d: input %s with kernel %lld, stride %lld, padding %lld gives an "
             "empty output %lldx%lld", in.str().c_str(), (long long)kernel_, (long long)stride_,
             (long long)padding_, (long long)oh, (long long)ow);
  const ConvGeom g = conv_geom("conv_transpose2d", out_ch_, oh, ow, kernel_, kernel_, stride_,
                               stride_, padding_, padding_);
  PDNN_CHECK(g.oh == in.h() && g.ow == in.w(),
             "conv_transpose2d: internal geometry mismatch %lldx%lld vs input %s",
             (long long)g.oh, (long long)g.ow, in.str().c_str());
  return g;
}

Shape ConvTranspose2d::output_shape(const Shape& in) const {
  const ConvGeom g = geom(in);
  return Shape{in.n(), out_ch_, g.h, g.w};
}

void ConvTranspose2d::forward(Context& ctx, const Tensor& x, Tensor& y) {
  const ConvGeom g = geom(x.shape());
  const int64_t n = x.shape().n();
  check_same_shape("conv_transpose2d forward: y", y.shape(), Shape{n, out_ch_, g.h, g.w});
  ConvBwdTensors a;  // y is the convolution's dx of dy := x
  a.g = g;
  a.n = n;
  a.k = in_ch_;
  a.w = &weight_for(x, weight_, weight16_, "conv_transpose2d");
  a.dy = &x;
  a.dx = &y;
  a.algo = algo_;
  ops::conv2d_backward(ctx, a);
  if (has_bias_) ops::bias_add(ctx, n, out_ch_, g.h * g.w, bias_, y);
}

void ConvTranspose2d::backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                               Tensor* dx) {
  (void)y;
  const ConvGeom g = geom(x.shape());
  const int64_t n = x.shape().n();
  check_same_shape("conv_transpose2d backward: dy", dy.shape(), Shape{n, out_ch_, g.h, g.w});
  if (dx) check_same_shape("conv_transpose2d backward: dx", dx->shape(), x.shape());
  if (param_grads_) {
    if (has_bias_) ops::bias_backward(ctx, n, out_ch_, g.h * g.w, dy, dbias_);
    ConvBwdTensors a;  // the convolution's weight gradient, with x := dy and dy := x
    a.g = g;
    a.n = n;
    a.k = in_ch_;
    a.x = &dy;
    a.w = &weight_for(x, weight_, weight16_, "conv_transpose2d");
    a.dy = &x;
    a.dw = &dweight_;
    a.algo = algo_;
    ops::conv2d_backward(ctx, a);
  }
  if (dx) {
    ConvFwdTensors a;  // dx is the convolution's forward of dy
    a.g = g;
    a.n = n;
    a.k = in_ch_;
    a.x = &dy;
    a.w = &weight_for(x, weight_, weight16_, "conv_transpose2d");
    a.y = dx;
    a.algo = algo_;
    ops::conv2d_forward(ctx, a);
  }
}

std::vector<Param> ConvTranspose2d::params() {
  std::vector<Param> ps{{"weight", &weight_, &dweight_}};
  if (has_bias_) ps.push_back({"bias", &bias_, &dbias_});
  return ps;
}

double ConvTranspose2d::flops(const Shape& in) const {
  const ConvGeom g = geom(in);
  const double macs = static_cast<double>(in.n()) * in_ch_ * g.col_rows() * g.oh * g.ow;
  return 2.0 * macs + (has_bias_ ? static_cast<double>(in.n()) * out_ch_ * g.h * g.w : 0.0);
}

BackwardNeeds ConvTranspose2d::backward_needs(const Shape& in, const PlanFor& p) const {
  const ConvGeom g = geom(in);
  BackwardNeeds b;
  b.input = true;  // x, for the weight gradient
  // y is never read, but said to be: the step's buffer keeps an output placed on the device
  // until its own backward (model/memory_plan.h, layout_arena), so only a placement (offload)
  // frees a U-Net's up-convolution output over the decoder; said unread, the plan could not
  // move it, and the U-Net's smallest limit at 1024 x 1024, batch 1, rose from 2.36 to 2.58 GiB.
  b.output = true;
  // The three passes of the convolution it swaps (forward as backward-data, dx as forward, the
  // weight gradient as backward-weights), without an activation. The U-Net's 2x2 stride-2
  // up-convolutions: the implicit GEMM runs all three with no columns (backward-data on its
  // strided kernel, no flipped weights), so the least is its weight gradient's split sums;
  // im2col's columns are the size of the output.
  set_gpu_conv_needs(b, g, in.n(), in_ch_, Act{}, p, algo_, weight_.numel(),
                     has_bias_ ? bias_.numel() : 0);
  return b;
}

void ConvTranspose2d::reset_parameters(Rng& rng) {
  init::torch_default(weight_, has_bias_ ? &bias_ : nullptr, rng);
}

void ConvTranspose2d::set_bf16_params(const std::vector<Tensor>& copies) {
  weight16_ = copies.empty() ? Tensor() : copies.front();  // params()[0] is the weight
}

}  // namespace pdnn
