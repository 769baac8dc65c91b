// Sequential: layers in order, with the activation buffers they pass along. Buffers are owned
// here and reused across steps (grow-only), so a training loop allocates once.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "layers/layer.h"

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
  size_t size() const { return layers_.size(); }
  Layer& layer(size_t i) { return *layers_.at(i); }
  const Layer& layer(size_t i) const { return *layers_.at(i); }

  // Runs every layer; the returned output is owned by the model and valid until the next call.
  const Tensor& forward(Context& ctx, const Tensor& x);
  // dy = dL/d(output of the last forward). Accumulates parameter gradients (+=).
  // dL/d(input) is computed only when want_input_grad (e.g. a GAN's discriminator feeding G).
  void backward(Context& ctx, const Tensor& dy, bool want_input_grad = false);
  const Tensor& input_grad() const { return dx_in_; }

  // Parameters in layer order, named "<layer index>.<name>", e.g. "0.weight".
  std::vector<Param> params();
  std::vector<Param> buffers();
  // Index of the layer that owns params()[i] (for per-layer update timing).
  std::vector<size_t> param_layers();
  void zero_grad();
  void train(bool on);
  void reset_parameters(Rng& rng);

  Shape output_shape(const Shape& in) const;
  double flops(const Shape& in) const;  // forward, one batch
  int64_t num_params();
  // Table: index, layer, output shape, parameters, forward MFLOPs; totals at the end.
  std::string summary(const Shape& in);

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Tensor> acts_;  // acts_[i] = output of layer i
  std::vector<Tensor> grads_; // two ping-pong gradient buffers
  Tensor x_in_;               // view of the last forward's input
  Tensor dx_in_;
};

}  // namespace pdnn
