// EpochPlan, load_batch and DatasetLoader (see dataset_loader.h).
#include "data/dataset_loader.h"

#include <algorithm>
#include <exception>
#include <numeric>

#include "core/error.h"
#include "core/parallel.h"
#include "data/augment.h"

namespace pdnn {

EpochPlan::EpochPlan(const Dataset& data, const LoaderOptions& opt, int64_t epoch)
    : epoch_(epoch), batch_(opt.batch) {
  const int64_t n = data.size();
  PDNN_CHECK(opt.batch >= 1, "loader: batch size %lld must be >= 1",
             static_cast<long long>(opt.batch));
  PDNN_CHECK(epoch >= 0, "loader: epoch %lld", static_cast<long long>(epoch));
  PDNN_CHECK(opt.shards >= 1 && opt.shard >= 0 && opt.shard < opt.shards,
             "loader: shard %d of %d (need 0 <= shard < shards)", opt.shard, opt.shards);
  PDNN_CHECK(opt.images_per_epoch >= 0 && opt.images_per_epoch <= n,
             "loader: %lld images per epoch asked, the data set has %lld",
             static_cast<long long>(opt.images_per_epoch), static_cast<long long>(n));
  if (opt.shuffle) {
    Rng rng = epoch_order_rng(opt.seed, epoch);
    order_ = rng.permutation(n);
  } else {
    order_.resize(static_cast<size_t>(n));
    std::iota(order_.begin(), order_.end(), 0);
  }
  images_ = opt.images_per_epoch > 0 ? opt.images_per_epoch : n;
  if (opt.drop_last) images_ -= images_ % opt.batch;
  PDNN_CHECK(images_ > 0 || n == 0,
             "loader: drop_last leaves no batch (%lld images, batch %lld)",
             static_cast<long long>(n), static_cast<long long>(opt.batch));
  order_.resize(static_cast<size_t>(images_));
  num_batches_ = (images_ + batch_ - 1) / batch_;
}

const int64_t* EpochPlan::batch_indices(int64_t b, int64_t* count) const {
  PDNN_CHECK(b >= 0 && b < num_batches_, "loader: batch %lld of %lld (epoch %lld)",
             static_cast<long long>(b), static_cast<long long>(num_batches_),
             static_cast<long long>(epoch_));
  const int64_t begin = b * batch_;
  *count = std::min(batch_, images_ - begin);
  return order_.data() + begin;
}

int64_t EpochPlan::batch_rows(int64_t b) const {
  int64_t n = 0;
  batch_indices(b, &n);
  return n;
}

int64_t load_batch(const Dataset& data, const LoaderOptions& opt, const EpochPlan& plan,
                   int64_t b, Tensor& x, std::vector<int32_t>& y, Tensor* target) {
  int64_t all = 0;
  const int64_t* idx = plan.batch_indices(b, &all);
  const auto [lo, hi] = shard_rows(all, opt.shard, opt.shards);
  PDNN_CHECK(hi > lo,
             "loader: batch %lld of epoch %lld has %lld images, none of them for rank %d of %d "
             "(every rank needs at least one image of each batch)",
             static_cast<long long>(b), static_cast<long long>(plan.epoch()),
             static_cast<long long>(all), opt.shard, opt.shards);
  idx += lo;
  const int64_t nb = hi - lo;
  const Shape s = data.sample_shape();
  const int64_t per = s.numel();
  x.resize(Shape{nb, s[0], s[1], s[2]});
  y.resize(static_cast<size_t>(nb));
  float* dst = x.data();
  const Shape ts = data.target_shape();
  const bool targets = ts.rank() > 0;
  int32_t* tdst = nullptr;
  const int64_t tper = targets ? ts.numel() : 0;
  if (targets) {
    PDNN_CHECK(ts.rank() == 2, "loader: target shape %s, expected (H,W)", ts.str().c_str());
    PDNN_CHECK(target != nullptr,
               "loader: the data set has per-pixel targets %s; pass a tensor for them",
               ts.str().c_str());
    const Shape want{nb, ts[0], ts[1]};
    // resize() keeps the type (float32 for a default tensor): an int32 one is made here.
    if (target->dtype() != DType::I32)
      *target = Tensor(want, DType::I32);
    else
      target->resize(want);
    tdst = target->data<int32_t>();
  }
  for (int64_t i = 0; i < nb; ++i) y[static_cast<size_t>(i)] = data.label(idx[i]);
  // Each image is independent, so the thread count changes nothing but the time. Errors are
  // carried out of the parallel region (an exception must not cross it).
  std::exception_ptr error;
#pragma omp parallel num_threads(opt.threads) if (opt.threads > 1 && nb > 1)
  {
    observe_team();
#pragma omp for schedule(dynamic, 1) nowait
    for (int64_t i = 0; i < nb; ++i) {
      try {
        std::optional<uint64_t> key;
        if (opt.augment) key = augment_key(opt.seed, plan.epoch(), idx[i]);
        if (targets)
          data.read_with_target(idx[i], dst + i * per, tdst + i * tper, key);
        else
          data.read(idx[i], dst + i * per, key);
      } catch (...) {
#pragma omp critical(pdnn_load_batch_error)
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
  return nb;
}

DatasetLoader::DatasetLoader(const Dataset& data, const LoaderOptions& opt)
    : data_(data), opt_(opt), plan_(data, opt, 0) {
  PDNN_CHECK(opt.threads >= 1, "loader: %d threads (need at least 1)", opt.threads);
}

}  // namespace pdnn
