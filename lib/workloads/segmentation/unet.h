// U-Net (Ronneberger, Fischer & Brox 2015), as a graph model (model/model.h):
//   encoder, `depth` levels (the paper's 4): two 3x3 convolutions (padding 1) + ReLU each, then
//     a 2x2 max pool; channels base, 2 base, ..., 2^(depth-1) base (the paper's base 64);
//   bottleneck: two 3x3 convolutions to 2^depth base channels;
//   decoder, the levels back up: a 2x2 stride-2 transposed convolution halving the channels,
//     concatenated (channel axis) with the encoder's output at that level (the skip
//     connection), then two 3x3 convolutions + ReLU;
//   head: a 1x1 convolution to `classes` logits per pixel: (N,classes,H,W).
// With batchnorm, each 3x3 convolution is followed by BatchNorm2d (then ReLU) and has no bias
// (BatchNorm's beta does its job). One departure from the paper: padded ("same") convolutions,
// so the output has the input's size and the skips need no cropping (as most reimplementations,
// torchvision-style and segmentation_models_pytorch); the input's sides must then be multiples
// of 2^depth. Weights: PyTorch's default initialisation of each layer (reset_parameters).
// Node names: "enc<l>.conv<i>" (+ ".bn<i>", ".relu<i>"), "pool<l>", "mid.conv<i>", ...,
// "up<l>", "cat<l>", "dec<l>.conv<i>", ..., "head", levels l = 1 (full size) .. depth.
#pragma once
#include <cstdint>

#include "core/shape.h"
#include "model/model.h"

namespace pdnn {

struct UNetOptions {
  int64_t in_channels = 3;
  int64_t classes = 2;
  int64_t base = 64;  // channels of the first level
  int depth = 4;      // poolings (and up-samplings)
  bool batchnorm = false;
};

// The untrained network (reset_parameters next). pdnn::Error on options out of range.
Model make_unet(const UNetOptions& o);
// pdnn::Error naming the problem unless `in` (N,C,H,W) is an input the network takes (C its
// channels, H and W positive multiples of 2^depth).
void check_unet_input(const UNetOptions& o, const Shape& in);

}  // namespace pdnn
