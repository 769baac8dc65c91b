// ResizedImages: a labelled image set (LabeledImages, values in [0,1]) seen as another size,
// channel count and value range, sample by sample as the loader asks (nothing is stored twice):
// the DCGAN's view of MNIST and Fashion-MNIST, 28x28 grey upscaled to 64x64 (bilinear, as
// PyTorch's interpolate; resize.h), the grey channel repeated as R, G and B, values v mapped to
// lo + (hi - lo) v, i.e. to [-1, 1], the range of the generator's tanh.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "data/dataset.h"

namespace pdnn {

class ResizedImages : public Dataset {
 public:
  // data (N,C,H,W) must outlive this view; channels: C, or 3 when C is 1 (grey repeated).
  ResizedImages(const LabeledImages& data, int num_classes, int side, int channels,
                float lo = -1.f, float hi = 1.f);

  int64_t size() const override { return data_.size(); }
  Shape sample_shape() const override { return Shape{channels_, side_, side_}; }
  int num_classes() const override { return num_classes_; }
  std::string class_name(int k) const override { return std::to_string(k); }
  int32_t label(int64_t i) const override { return data_.labels[static_cast<size_t>(i)]; }
  // The key is ignored: no augmentation.
  void read(int64_t i, float* dst, std::optional<uint64_t> augment_key) const override;

 private:
  const LabeledImages& data_;
  int num_classes_, side_, channels_;
  float lo_, hi_;
};

}  // namespace pdnn
