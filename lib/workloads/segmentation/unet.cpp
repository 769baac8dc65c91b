// The U-Net graph (unet.h).
#include "workloads/segmentation/unet.h"

#include <string>

#include "core/error.h"
#include "layers/activation.h"
#include "layers/batchnorm2d.h"
#include "layers/conv2d.h"
#include "layers/conv_transpose2d.h"
#include "layers/maxpool2d.h"
#include "layers/merge.h"

namespace pdnn {

namespace {

// Two 3x3 convolutions (+ BatchNorm) + ReLU from node `from`; returns the last node's name.
std::string double_conv(Model& m, const UNetOptions& o, const std::string& block,
                        const std::string& from, int64_t in, int64_t out) {
  std::string last = from;
  for (int i = 1; i <= 2; ++i) {
    const std::string n = block + ".conv" + std::to_string(i);
    m.node<Conv2d>(n, {last}, i == 1 ? in : out, out, 3, 1, 1, !o.batchnorm);
    last = n;
    if (o.batchnorm) {
      const std::string b = block + ".bn" + std::to_string(i);
      m.node<BatchNorm2d>(b, {last}, out);
      last = b;
    }
    const std::string r = block + ".relu" + std::to_string(i);
    m.node<ReLU>(r, {last});
    last = r;
  }
  return last;
}

}  // namespace

Model make_unet(const UNetOptions& o) {
  PDNN_CHECK(o.in_channels >= 1 && o.classes >= 2 && o.base >= 1 && o.depth >= 1 && o.depth <= 8,
             "unet: %lld input channels, %lld classes, base width %lld, depth %d (need >= 1, "
             ">= 2, >= 1 and 1..8)",
             static_cast<long long>(o.in_channels), static_cast<long long>(o.classes),
             static_cast<long long>(o.base), o.depth);
  Model m;
  std::vector<std::string> skip;
  std::string last = Model::kInput;
  int64_t c = o.in_channels;
  for (int l = 1; l <= o.depth; ++l) {
    const int64_t w = o.base << (l - 1);
    skip.push_back(double_conv(m, o, "enc" + std::to_string(l), last, c, w));
    last = "pool" + std::to_string(l);
    m.node<MaxPool2d>(last, {skip.back()}, 2);
    c = w;
  }
  last = double_conv(m, o, "mid", last, c, o.base << o.depth);
  c = o.base << o.depth;
  for (int l = o.depth; l >= 1; --l) {
    const int64_t w = o.base << (l - 1);
    const std::string up = "up" + std::to_string(l), cat = "cat" + std::to_string(l);
    m.node<ConvTranspose2d>(up, {last}, c, w, 2, 2, 0);
    m.node<Concat>(cat, {up, skip[static_cast<size_t>(l - 1)]});
    last = double_conv(m, o, "dec" + std::to_string(l), cat, 2 * w, w);
    c = w;
  }
  m.node<Conv2d>("head", {last}, c, o.classes, 1);
  return m;
}

void check_unet_input(const UNetOptions& o, const Shape& in) {
  const int64_t unit = int64_t{1} << o.depth;
  PDNN_CHECK(in.rank() == 4 && in.c() == o.in_channels,
             "unet: input %s must be (N,%lld,H,W)", in.str().c_str(),
             static_cast<long long>(o.in_channels));
  PDNN_CHECK(in.h() >= unit && in.w() >= unit && in.h() % unit == 0 && in.w() % unit == 0,
             "unet: input %s: height and width must be multiples of %lld (2^depth, depth %d)",
             in.str().c_str(), static_cast<long long>(unit), o.depth);
}

}  // namespace pdnn
