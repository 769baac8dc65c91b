// Sample grids and sample files of generated images (the DCGAN's per-epoch picture and the
// sets its quality score reads). Built with OpenCV only (CMakeLists drops lib/data/image_*
// without it).
//   image_grid_png: N images (N,C,H,W) with values in [lo,hi] (the generator's [-1,1]) tiled
//     in rows of `cols` with `pad` black pixels around each tile, as torchvision's
//     make_grid(nrow=cols, padding=pad, normalize with value_range=(lo,hi)) lays them out:
//     (ceil(N/cols) (H+pad) + pad) x (cols (W+pad) + pad) pixels, RGB for C = 3, grey for C = 1,
//     each value mapped to round(255 (v - lo) / (hi - lo)) clamped to 0..255. Written as PNG,
//     atomically (a temporary file renamed into place).
//   to_grey_bytes: the same images as one grey byte plane each (the mean of the channels, mapped
//     and rounded the same way): what is stored in a grey IDX sample file.
//   to_bytes: the same images, every channel's plane mapped and rounded the same way (N x C x
//     H x W bytes): a colour IDX sample file.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace pdnn {

void write_image_grid_png(const std::string& path, const Tensor& images, int cols = 8,
                          int pad = 2, float lo = -1.f, float hi = 1.f);
// images: host (N,C,H,W) float32; returns N*H*W bytes.
std::vector<uint8_t> to_grey_bytes(const Tensor& images, float lo = -1.f, float hi = 1.f);
// images: host (N,C,H,W) float32; returns N*C*H*W bytes.
std::vector<uint8_t> to_bytes(const Tensor& images, float lo = -1.f, float hi = 1.f);
// Width and height of a PNG file, read from its header (for tests and checks).
bool png_size(const std::string& path, int* width, int* height);

}  // namespace pdnn
