// BatchLoader (see loader.h).
#include "data/loader.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/error.h"

namespace pdnn {

BatchLoader::BatchLoader(const LabeledImages& data, int64_t batch) : data_(data), batch_(batch) {
  PDNN_CHECK(batch >= 1, "loader: batch size %lld must be >= 1", static_cast<long long>(batch));
  PDNN_CHECK(data.images.shape(0) == data.size(), "loader: %lld images but %lld labels",
             static_cast<long long>(data.images.shape(0)), static_cast<long long>(data.size()));
  order_.resize(static_cast<size_t>(size()));
  std::iota(order_.begin(), order_.end(), 0);
}

void BatchLoader::start_epoch(Rng* rng) {
  if (rng) {
    order_ = rng->permutation(size());
  } else {
    std::iota(order_.begin(), order_.end(), 0);
  }
}

int64_t BatchLoader::rows_in(int64_t b) const {
  PDNN_CHECK(b >= 0 && b < num_batches(), "loader: batch %lld of %lld", static_cast<long long>(b),
             static_cast<long long>(num_batches()));
  return std::min(batch_, size() - b * batch_);
}

int64_t BatchLoader::load_rows(int64_t b, int64_t row0, int64_t rows, Tensor& x, Tensor& y) const {
  const int64_t all = rows_in(b);
  if (rows < 0) rows = all - row0;
  PDNN_CHECK(row0 >= 0 && rows >= 1 && row0 + rows <= all,
             "loader: rows %lld..%lld of batch %lld, which has %lld", static_cast<long long>(row0),
             static_cast<long long>(row0 + rows), static_cast<long long>(b),
             static_cast<long long>(all));
  const int64_t begin = b * batch_ + row0;
  const int64_t nb = rows;
  const Shape& s = data_.images.shape();
  const int64_t per = s.per_sample();
  PDNN_CHECK(x.device() == Device::CPU && y.device() == Device::CPU,
             "loader: batches are assembled in host memory");
  if (y.empty()) y = Tensor(Shape{nb}, DType::I32);
  x.resize(s.with_n(nb));
  y.resize(Shape{nb});
  int32_t* labels = y.data<int32_t>();
  const float* src = data_.images.data();
  float* dst = x.data();
  for (int64_t i = 0; i < nb; ++i) {
    const int64_t k = order_[static_cast<size_t>(begin + i)];
    std::memcpy(dst + i * per, src + k * per, static_cast<size_t>(per) * sizeof(float));
    labels[i] = data_.labels[static_cast<size_t>(k)];
  }
  return nb;
}

}  // namespace pdnn
