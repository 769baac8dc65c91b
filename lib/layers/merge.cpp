// Concat and Add: shapes, and the copies and sums of ops/merge.
#include "layers/merge.h"

#include "core/error.h"
#include "ops/merge.h"

namespace pdnn {

namespace {

std::string shapes_text(const std::vector<Shape>& in) {
  std::string s;
  for (const Shape& x : in) s += (s.empty() ? "" : ", ") + x.str();
  return s;
}

}  // namespace

void MergeLayer::backward(Context& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                          Tensor* dx) {
  (void)x;
  (void)y;
  backward_all(ctx, dy, {dx});
}

BackwardNeeds MergeLayer::backward_needs(const Shape& in, const PlanFor& p) const {
  (void)in;
  (void)p;
  BackwardNeeds b;
  b.input = false;
  b.output = false;
  return b;
}

Shape Concat::merged_shape(const std::vector<Shape>& in) const {
  PDNN_CHECK(!in.empty(), "concat: no inputs");
  const Shape& a = in[0];
  PDNN_CHECK(a.rank() >= 2, "concat: input %s has no channel axis (N,C,...)", a.str().c_str());
  int64_t c = 0;
  for (const Shape& s : in) {
    bool same = s.rank() == a.rank();
    for (int d = 0; same && d < a.rank(); ++d) same = d == 1 || s[d] == a[d];
    PDNN_CHECK(same, "concat: inputs %s differ in more than their channels", shapes_text(in).c_str());
    c += s[1];
  }
  switch (a.rank()) {
    case 2: return Shape{a[0], c};
    case 3: return Shape{a[0], c, a[2]};
    default: return Shape{a[0], c, a[2], a[3]};
  }
}

void Concat::forward_all(Context& ctx, const std::vector<const Tensor*>& xs, Tensor& y) {
  std::vector<Shape> in;
  for (const Tensor* x : xs) in.push_back(x->shape());
  check_same_shape("concat forward: y", y.shape(), merged_shape(in));
  channels_.clear();
  int64_t at = 0;
  for (const Tensor* x : xs) {
    ops::channel_copy(ctx, *x, 0, y, at, x->shape(1));
    channels_.push_back(x->shape(1));
    at += x->shape(1);
  }
}

void Concat::backward_all(Context& ctx, const Tensor& dy, const std::vector<Tensor*>& dxs) {
  PDNN_CHECK(dxs.size() == channels_.size(), "concat backward: %zu gradients for %zu inputs",
             dxs.size(), channels_.size());
  int64_t at = 0;
  for (size_t j = 0; j < dxs.size(); ++j) {
    if (dxs[j]) ops::channel_copy(ctx, dy, at, *dxs[j], 0, channels_[j]);
    at += channels_[j];
  }
}

Shape Add::merged_shape(const std::vector<Shape>& in) const {
  PDNN_CHECK(!in.empty(), "add: no inputs");
  for (const Shape& s : in)
    PDNN_CHECK(s == in[0], "add: inputs %s differ in shape", shapes_text(in).c_str());
  return in[0];
}

void Add::forward_all(Context& ctx, const std::vector<const Tensor*>& xs, Tensor& y) {
  std::vector<Shape> in;
  for (const Tensor* x : xs) in.push_back(x->shape());
  check_same_shape("add forward: y", y.shape(), merged_shape(in));
  if (xs.size() == 1) copy_into(y, *xs[0], ctx);
  for (size_t j = 1; j < xs.size(); ++j) ops::add(ctx, j == 1 ? *xs[0] : y, *xs[j], y);
  inputs_ = xs.size();
}

void Add::backward_all(Context& ctx, const Tensor& dy, const std::vector<Tensor*>& dxs) {
  PDNN_CHECK(dxs.size() == inputs_, "add backward: %zu gradients for %zu inputs", dxs.size(),
             inputs_);
  for (Tensor* dx : dxs)
    if (dx) {
      check_same_shape("add backward: dx", dx->shape(), dy.shape());
      copy_into(*dx, dy, ctx);
    }
}

double Add::flops(const Shape& in) const {
  return static_cast<double>(in.numel()) * static_cast<double>(inputs_ > 1 ? inputs_ - 1 : 1);
}

}  // namespace pdnn
