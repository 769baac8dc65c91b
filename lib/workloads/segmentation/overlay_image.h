// Prediction against truth for a few images of a segmentation, as one PNG: a row per image
// holding the photo, the true map over it and the predicted map over it. Class 0 (the
// background) leaves the photo as it is; class k >= 1 is painted half over it in a colour of its
// own (hues spread by the golden ratio, so neighbouring ids differ). Tiles are enlarged by a
// whole factor (nearest neighbour) to at least 128 pixels a side, so small training sizes stay
// readable; a title line and the columns' names on top. Drawn with OpenCV (built only with it,
// like lib/data/image_*), written atomically (AtomicFile: a temporary name, then renamed).
#pragma once
#include <string>

#include "core/tensor.h"
#include "data/augment.h"

namespace pdnn {

// images: host (n,3,H,W) float32 normalised with `norm` (the loader's: (v - mean) / std of RGB
// values in [0,1]); truth and pred: host int32 (n,H,W) class ids. pdnn::Error naming the file
// when the shapes disagree or it cannot be written.
void write_overlay_png(const std::string& path, const Tensor& images, const Normalization& norm,
                       const Tensor& truth, const Tensor& pred, const std::string& title);

// Class k's colour, RGB (k >= 1).
void class_colour(int k, unsigned char rgb[3]);

}  // namespace pdnn
