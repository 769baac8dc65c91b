// BatchLoader: fixed-size batches over an in-memory image set, in a fresh random order each
// epoch (Rng::permutation, which scripts/torch_reference.py reproduces), copied into a
// reusable tensor and label buffer. The last batch of an epoch keeps the remainder: with N
// images and batch B it holds N % B images (when that is not 0), so every image is seen once.
#pragma once
#include <cstdint>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"
#include "data/idx.h"

namespace pdnn {

class BatchLoader {
 public:
  // data must outlive the loader. batch >= 1.
  BatchLoader(const LabeledImages& data, int64_t batch);

  // Order for one epoch: a permutation of 0..N-1 from rng (advancing it by N-1 draws), or the
  // stored order when rng is nullptr (evaluation).
  void start_epoch(Rng* rng);
  // The order of epoch `epoch` (0-based) of a run whose data seed is `seed`: a permutation
  // drawn from Rng(Rng::at(seed, epoch + 1)), so any epoch's order can be rebuilt on its own
  // (resuming mid-run, the PyTorch reference) without replaying the epochs before it.
  static Rng epoch_rng(uint64_t seed, int64_t epoch) { return Rng(Rng::at(seed, epoch + 1)); }

  int64_t size() const { return data_.size(); }
  int64_t batch_size() const { return batch_; }
  int64_t num_batches() const { return (size() + batch_ - 1) / batch_; }
  const std::vector<int64_t>& order() const { return order_; }

  // Copies batch b (0 <= b < num_batches()) of the current epoch: x is resized to
  // (nb,C,H,W) float32 and y to (nb) int32 labels, both host tensors (made from the allocator
  // they already have, e.g. pinned memory for a GPU run). Returns nb (batch_size(), or less for
  // the last batch).
  int64_t load(int64_t b, Tensor& x, Tensor& y) const { return load_rows(b, 0, -1, x, y); }
  // Rows [row0, row0 + rows) of batch b only (rows < 0: to its end), in the epoch's order: a
  // data-parallel rank's shard of the global batch. Returns the rows copied.
  int64_t load_rows(int64_t b, int64_t row0, int64_t rows, Tensor& x, Tensor& y) const;
  // The number of images in batch b.
  int64_t rows_in(int64_t b) const;

 private:
  const LabeledImages& data_;
  int64_t batch_;
  std::vector<int64_t> order_;
};

}  // namespace pdnn
