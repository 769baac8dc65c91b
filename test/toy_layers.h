// Small self-contained layers and optimizer for testing the model container, checkpoints and
// the profiler independently of the real layers: naive loops, obviously correct.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "layers/layer.h"
#include "optim/optimizer.h"

namespace pdnn {
namespace toy {

// x (N,in) -> y (N,out) = x W^T + b; W (out,in), b (out). Buffer "seen": samples seen in
// training forwards (stands in for BatchNorm's running statistics). Records whether the last
// backward was given a dx.
class Linear : public Layer {
 public:
  Linear(int64_t in, int64_t out)
      : in_(in), out_(out), w_(Shape{out, in}), b_(Shape{out}), dw_(Tensor::zeros(Shape{out, in})),
        db_(Tensor::zeros(Shape{out})), seen_(Tensor::zeros(Shape{1})) {
    w_.zero();
    b_.zero();
  }
  std::string kind() const override { return "ToyLinear"; }
  std::string describe() const override {
    return "ToyLinear(" + std::to_string(in_) + "->" + std::to_string(out_) + ")";
  }
  Shape output_shape(const Shape& in) const override {
    PDNN_CHECK(in.rank() == 2 && in[1] == in_, "toy linear: input %s, expects (N,%lld)",
               in.str().c_str(), static_cast<long long>(in_));
    return Shape{in[0], out_};
  }
  void forward(Context&, const Tensor& x, Tensor& y) override {
    const int64_t n = x.shape(0);
    for (int64_t s = 0; s < n; ++s)
      for (int64_t o = 0; o < out_; ++o) {
        float acc = b_[o];
        for (int64_t i = 0; i < in_; ++i) acc += x[s * in_ + i] * w_[o * in_ + i];
        y[s * out_ + o] = acc;
      }
    if (training()) seen_[0] += static_cast<float>(n);
  }
  void backward(Context&, const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx) override {
    const int64_t n = x.shape(0);
    got_dx_ = dx != nullptr;
    for (int64_t s = 0; s < n; ++s)
      for (int64_t o = 0; o < out_; ++o) {
        const float g = dy[s * out_ + o];
        db_[o] += g;
        for (int64_t i = 0; i < in_; ++i) dw_[o * in_ + i] += g * x[s * in_ + i];
      }
    if (dx)
      for (int64_t s = 0; s < n; ++s)
        for (int64_t i = 0; i < in_; ++i) {
          float acc = 0.f;
          for (int64_t o = 0; o < out_; ++o) acc += dy[s * out_ + o] * w_[o * in_ + i];
          (*dx)[s * in_ + i] = acc;
        }
  }
  std::vector<Param> params() override { return {{"weight", &w_, &dw_}, {"bias", &b_, &db_}}; }
  std::vector<Param> buffers() override { return {{"seen", &seen_, nullptr}}; }
  double flops(const Shape& in) const override { return 2.0 * in[0] * in_ * out_; }
  void reset_parameters(Rng& rng) override {
    const float a = 1.f / std::sqrt(static_cast<float>(in_));
    for (int64_t i = 0; i < w_.numel(); ++i) w_[i] = rng.uniform(-a, a);
    for (int64_t i = 0; i < b_.numel(); ++i) b_[i] = rng.uniform(-a, a);
  }
  bool got_dx() const { return got_dx_; }

 private:
  int64_t in_, out_;
  Tensor w_, b_, dw_, db_, seen_;
  bool got_dx_ = false;
};

// y = tanh(x), any shape.
class Tanh : public Layer {
 public:
  std::string kind() const override { return "ToyTanh"; }
  Shape output_shape(const Shape& in) const override { return in; }
  void forward(Context&, const Tensor& x, Tensor& y) override {
    for (int64_t i = 0; i < x.numel(); ++i) y[i] = std::tanh(x[i]);
  }
  void backward(Context&, const Tensor&, const Tensor& y, const Tensor& dy, Tensor* dx) override {
    if (dx)
      for (int64_t i = 0; i < y.numel(); ++i) (*dx)[i] = dy[i] * (1.f - y[i] * y[i]);
  }
  double flops(const Shape& in) const override { return static_cast<double>(in.numel()); }
};

// A layer whose output is too large for any machine (2^58 floats per row): its allocation
// fails, for the tests of what an out-of-memory error says.
class Huge : public Layer {
 public:
  std::string kind() const override { return "Huge"; }
  Shape output_shape(const Shape& in) const override { return Shape{in.n(), int64_t{1} << 58}; }
  void forward(Context&, const Tensor&, Tensor&) override {}
  void backward(Context&, const Tensor&, const Tensor&, const Tensor&, Tensor*) override {}
};

// SGD with momentum (buf = m*buf + g; w -= lr*buf) and a step-dependent factor, so a restored
// step count matters: lr_t = lr / (1 + 0.1*steps).
class Momentum : public Optimizer {
 public:
  Momentum(ParamSet& params, float lr, float m) : Optimizer(params), m_(m) {
    lr_ = lr;
    buf_ = state_like(0.f);
  }
  std::string kind() const override { return "toy_momentum"; }

 protected:
  std::vector<std::pair<const char*, Tensor*>> slots() override { return {{"buf", &buf_}}; }
  void update(Context&, const Tensor&) override {
    Tensor& w = ps_.values();
    const Tensor& g = ps_.grads();
    const float lr = lr_ / (1.f + 0.1f * static_cast<float>(steps()));
    for (int64_t k = 0; k < w.numel(); ++k) {
      buf_[k] = m_ * buf_[k] + g[k];
      w[k] -= lr * buf_[k];
    }
  }

 private:
  float m_;
  Tensor buf_;
};

}  // namespace toy
}  // namespace pdnn
