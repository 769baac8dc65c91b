// TensorDataset, DatasetRange and DatasetTiles (see dataset.h).
#include "data/dataset.h"

#include <cstring>
#include <vector>

#include "core/error.h"

namespace pdnn {

void Dataset::read_with_target(int64_t /*i*/, float* /*dst*/, int32_t* /*target*/,
                               std::optional<uint64_t> /*augment_key*/) const {
  PDNN_FAIL("data set: no per-pixel targets (one label per sample; read() reads it)");
}

TensorDataset::TensorDataset(const LabeledImages& data, int num_classes)
    : data_(data), num_classes_(num_classes) {
  PDNN_CHECK(num_classes >= 1, "TensorDataset: %d classes (need at least 1)", num_classes);
  PDNN_CHECK(data.images.rank() == 4, "TensorDataset: images %s, expected (N,C,H,W)",
             data.images.shape().str().c_str());
  PDNN_CHECK(data.images.shape(0) == data.size(), "TensorDataset: %lld images but %lld labels",
             static_cast<long long>(data.images.shape(0)), static_cast<long long>(data.size()));
  for (size_t i = 0; i < data.labels.size(); ++i)
    PDNN_CHECK(data.labels[i] >= 0 && data.labels[i] < num_classes,
               "TensorDataset: label %d of sample %zu is outside [0, %d)", data.labels[i], i,
               num_classes);
}

Shape TensorDataset::sample_shape() const {
  const Shape& s = data_.images.shape();
  return Shape{s.c(), s.h(), s.w()};
}

void TensorDataset::read(int64_t i, float* dst, std::optional<uint64_t> /*augment_key*/) const {
  PDNN_CHECK(i >= 0 && i < size(), "TensorDataset: sample %lld of %lld",
             static_cast<long long>(i), static_cast<long long>(size()));
  const int64_t per = data_.images.shape().per_sample();
  std::memcpy(dst, data_.images.data() + i * per, static_cast<size_t>(per) * sizeof(float));
}

DatasetRange::DatasetRange(const Dataset& data, int64_t begin, int64_t end)
    : data_(data), begin_(begin), end_(end) {
  PDNN_CHECK(begin >= 0 && begin <= end && end <= data.size(),
             "DatasetRange: samples %lld..%lld of a set of %lld", static_cast<long long>(begin),
             static_cast<long long>(end), static_cast<long long>(data.size()));
}

int32_t DatasetRange::label(int64_t i) const {
  PDNN_CHECK(i >= 0 && i < size(), "DatasetRange: sample %lld of %lld", static_cast<long long>(i),
             static_cast<long long>(size()));
  return data_.label(begin_ + i);
}

void DatasetRange::read(int64_t i, float* dst, std::optional<uint64_t> augment_key) const {
  PDNN_CHECK(i >= 0 && i < size(), "DatasetRange: sample %lld of %lld", static_cast<long long>(i),
             static_cast<long long>(size()));
  data_.read(begin_ + i, dst, augment_key);
}

void DatasetRange::read_with_target(int64_t i, float* dst, int32_t* target,
                                    std::optional<uint64_t> augment_key) const {
  PDNN_CHECK(i >= 0 && i < size(), "DatasetRange: sample %lld of %lld", static_cast<long long>(i),
             static_cast<long long>(size()));
  data_.read_with_target(begin_ + i, dst, target, augment_key);
}

DatasetTiles::DatasetTiles(const Dataset& data, int64_t side) : data_(data), side_(side) {
  const Shape s = data.sample_shape();
  PDNN_CHECK(s.rank() == 3, "tiles: samples %s, expected (C,H,W)", s.str().c_str());
  channels_ = s[0];
  h_ = s[1];
  w_ = s[2];
  PDNN_CHECK(side >= 1 && h_ % side == 0 && w_ % side == 0,
             "tiles of side %lld: the samples are %lld x %lld (a multiple of the side is needed)",
             static_cast<long long>(side), static_cast<long long>(h_), static_cast<long long>(w_));
  const Shape t = data.target_shape();
  PDNN_CHECK(t.rank() == 0 || (t.rank() == 2 && t[0] == h_ && t[1] == w_),
             "tiles: targets %s for samples %s", t.str().c_str(), s.str().c_str());
  per_sample_ = (h_ / side) * (w_ / side);
}

int32_t DatasetTiles::label(int64_t i) const {
  PDNN_CHECK(i >= 0 && i < size(), "tiles: tile %lld of %lld", static_cast<long long>(i),
             static_cast<long long>(size()));
  return data_.label(i / per_sample_);
}

Shape DatasetTiles::target_shape() const {
  return data_.target_shape().rank() == 0 ? Shape{} : Shape{side_, side_};
}

void DatasetTiles::read(int64_t i, float* dst, std::optional<uint64_t> augment_key) const {
  read_with_target(i, dst, nullptr, augment_key);
}

void DatasetTiles::read_with_target(int64_t i, float* dst, int32_t* target,
                                    std::optional<uint64_t> augment_key) const {
  PDNN_CHECK(i >= 0 && i < size(), "tiles: tile %lld of %lld", static_cast<long long>(i),
             static_cast<long long>(size()));
  PDNN_CHECK(!target || data_.target_shape().rank() == 2,
             "tiles: the set has no per-pixel targets");
  const int64_t k = i % per_sample_, y0 = k / (w_ / side_) * side_, x0 = k % (w_ / side_) * side_;
  std::vector<float> img(static_cast<size_t>(channels_ * h_ * w_));
  std::vector<int32_t> map(target ? static_cast<size_t>(h_ * w_) : 0);
  if (target)
    data_.read_with_target(i / per_sample_, img.data(), map.data(), augment_key);
  else
    data_.read(i / per_sample_, img.data(), augment_key);
  const size_t row = static_cast<size_t>(side_);
  for (int64_t c = 0; c < channels_; ++c)
    for (int64_t y = 0; y < side_; ++y)
      std::memcpy(dst + (c * side_ + y) * side_, img.data() + (c * h_ + y0 + y) * w_ + x0,
                  row * sizeof(float));
  if (target)
    for (int64_t y = 0; y < side_; ++y)
      std::memcpy(target + y * side_, map.data() + (y0 + y) * w_ + x0, row * sizeof(int32_t));
}

}  // namespace pdnn
