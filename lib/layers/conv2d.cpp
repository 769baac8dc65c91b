// Conv2d: shape checks and dispatch to the im2col + GEMM kernels of ops/conv/conv2d.
#include "layers/conv2d.h"

#include "core/error.h"
#include "core/init.h"
#include "ops/activation.h"
#include "ops/conv/conv2d_algo.h"

namespace pdnn {

Conv2d::Conv2d(int64_t in_ch, int64_t out_ch, int64_t kernel, int64_t stride, int64_t padding,
               bool bias)
    : in_ch_(in_ch), out_ch_(out_ch), kernel_(kernel), stride_(stride), padding_(padding),
      has_bias_(bias) {
  PDNN_CHECK(in_ch > 0 && out_ch > 0 && kernel > 0 && stride > 0 && padding >= 0,
             "conv2d: channels %lld->%lld, kernel %lld, stride %lld, padding %lld: channels, "
             "kernel and stride must be positive, padding >= 0",
             (long long)in_ch, (long long)out_ch, (long long)kernel, (long long)stride,
             (long long)padding);
  weight_ = Tensor::zeros(Shape{out_ch, in_ch, kernel, kernel});
  dweight_ = Tensor::zeros(weight_.shape());
  if (has_bias_) {
    bias_ = Tensor::zeros(Shape{out_ch});
    dbias_ = Tensor::zeros(Shape{out_ch});
  }
}

std::string Conv2d::describe() const {
  return strprintf("Conv2d(%lld->%lld, k%lld s%lld p%lld%s)%s", (long long)in_ch_,
                   (long long)out_ch_, (long long)kernel_, (long long)stride_,
                   (long long)padding_, has_bias_ ? "" : ", no bias",
                   act_.kind == FusedAct::None ? "" : (std::string(" + ") + fused_act_name(act_.kind)).c_str());
}

bool Conv2d::fuse_activation(const Act& a) {
  if (act_.kind != FusedAct::None || a.kind == FusedAct::None) return false;
  act_ = a;
  return true;
}

bool Conv2d::fold_input_activation(const Act& a) {
  if (in_act_.kind != FusedAct::None || a.kind == FusedAct::None) return false;
  in_act_ = a;
  return true;
}

ConvGeom Conv2d::geom(const Shape& in) const {
  PDNN_CHECK(in.rank() == 4, "conv2d: input %s must be (N,C,H,W)", in.str().c_str());
  PDNN_CHECK(in.c() == in_ch_, "conv2d: input %s has %lld channels, layer expects %lld",
             in.str().c_str(), (long long)in.c(), (long long)in_ch_);
  return conv_geom("conv2d", in.c(), in.h(), in.w(), kernel_, kernel_, stride_, stride_,
                   padding_, padding_);
}

Shape Conv2d::output_shape(const Shape& in) const {
  const ConvGeom g = geom(in);
  return Shape{in.n(), out_ch_, g.oh, g.ow};
}

void Conv2d::forward(Context& ctx, const Tensor& x, Tensor& y) {
  const ConvGeom g = geom(x.shape());
  const int64_t n = x.shape().n();
  check_same_shape("conv2d forward: y", y.shape(), Shape{n, out_ch_, g.oh, g.ow});
  ConvFwdTensors a;
  a.g = g;
  a.n = n;
  a.k = out_ch_;
  a.x = &x;
  a.w = &weight_for(x, weight_, weight16_, "conv2d");
  a.b = has_bias_ ? &bias_ : nullptr;
  a.y = &y;
  a.act = act_;
  a.algo = algo_;
  a.saved_cols = keep_columns_ ? &cols_ : nullptr;
  ops::conv2d_forward(ctx, a);
}

void Conv2d::backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                      Tensor* dx) {
  const ConvGeom g = geom(x.shape());
  const int64_t n = x.shape().n();
  check_same_shape("conv2d backward: dy", dy.shape(), Shape{n, out_ch_, g.oh, g.ow});
  if (dx) check_same_shape("conv2d backward: dx", dx->shape(), x.shape());
  // dy through act_'s derivative already (the next layer folded it), or not.
  Act act = grad_through_act_ ? Act{} : act_;
  if (mask_dy_in_place_ && dy_writable() && act.kind != FusedAct::None &&
      dy.device() == Device::CUDA) {
    // dy is the model's buffer, read by nobody after this layer: act'(y) . dy written over it
    // (the same select as the convolution's own masking), then a plain backward.
    Tensor& d = const_cast<Tensor&>(dy);
    if (act_.kind == FusedAct::ReLU)
      ops::relu_backward(ctx, y, d, d);
    else
      ops::leaky_relu_backward(ctx, act_.slope, y, d, d);
    act = Act{};
  }
  ConvBwdTensors a;
  a.g = g;
  a.n = n;
  a.k = out_ch_;
  a.x = &x;
  a.w = &weight_for(x, weight_, weight16_, "conv2d");
  a.dy = &dy;
  a.y = act.kind == FusedAct::None ? nullptr : &y;
  a.dw = param_grads_ ? &dweight_ : nullptr;
  a.db = has_bias_ && param_grads_ ? &dbias_ : nullptr;
  a.dx = dx;
  a.act = act;
  a.algo = algo_;
  a.saved_cols = keep_columns_ ? &cols_ : nullptr;
  a.dx_act = in_act_;
  ops::conv2d_backward(ctx, a);
}

std::vector<Param> Conv2d::params() {
  std::vector<Param> ps{{"weight", &weight_, &dweight_}};
  if (has_bias_) ps.push_back({"bias", &bias_, &dbias_});
  return ps;
}

double Conv2d::flops(const Shape& in) const {
  const ConvGeom g = geom(in);
  const double out = static_cast<double>(in.n()) * out_ch_ * g.oh * g.ow;
  return 2.0 * out * g.col_rows() + (has_bias_ ? out : 0.0);
}

BackwardNeeds Conv2d::backward_needs(const Shape& in, const PlanFor& p) const {
  const ConvGeom g = geom(in);
  const int64_t n = in.n();
  BackwardNeeds b;
  b.input = true;
  const bool through_act = act_.kind != FusedAct::None && !grad_through_act_;
  b.output = through_act;
  if (p.as_run)  // the columns its chosen forward keeps (none unless im2col was chosen)
    b.scratch_bytes = static_cast<int64_t>(cols_.nbytes());
  else if (keep_columns_ && cuda_conv_kept_columns(g, n, out_ch_))
    b.scratch_bytes = g.col_rows() * n * g.col_cols() * static_cast<int64_t>(dtype_size(p.act));
  // The GPU's algorithms for its three passes (ops/conv/conv2d_algo.h): under auto and own the
  // least is what the implicit GEMM or the direct kernels ask (no columns) wherever one of them
  // can run the pass, the most im2col's columns; a policy or the layer may force one. The
  // backward passes of all but im2col put dy through the activation into the workspace first,
  // unless it is done in place (or the next layer folded it).
  const Act in_ws = through_act && !mask_dy_in_place_ ? act_ : Act{};
  set_gpu_conv_needs(b, g, n, out_ch_, in_ws, p, algo_, weight_.numel(),
                     has_bias_ ? bias_.numel() : 0);
  return b;
}

void set_gpu_conv_needs(BackwardNeeds& b, const ConvGeom& g, int64_t n, int64_t k, Act act,
                        const PlanFor& p, ConvAlgo forced, int64_t weight_elems,
                        int64_t bias_elems) {
  const ConvWorkspaceBounds w =
      gpu_conv_workspace_bounds(g, n, k, act, p.act, p.gpu_sms, p.conv_policy, forced,
                                p.cudnn_least);
  b.workspace_bytes = w.least;
  b.fast_workspace_bytes = w.most;
  b.columns_bytes = w.columns;
  b.timing_bytes = gpu_conv_timing_bytes(p.conv_policy, forced, weight_elems, bias_elems);
  b.past_32bit = gpu_conv_image_past_32bit(g, k);
}

void Conv2d::reset_parameters(Rng& rng) {
  init::torch_default(weight_, has_bias_ ? &bias_ : nullptr, rng);
}

void Conv2d::set_bf16_params(const std::vector<Tensor>& copies) {
  weight16_ = copies.empty() ? Tensor() : copies.front();  // params()[0] is the weight
}

}  // namespace pdnn
