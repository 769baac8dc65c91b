// TensorDataset and DatasetRange (see dataset.h).
#include "data/dataset.h"

#include <cstring>

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

}  // namespace pdnn
