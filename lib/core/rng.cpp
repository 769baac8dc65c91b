// Rng: normal draws and permutations (see rng.h for the stream definition).
#include "core/rng.h"

#include <cmath>
#include <numeric>
#include <utility>

#include "core/error.h"
#include "core/parallel.h"

namespace pdnn {

double Rng::normal() {
  const double z = normal_at(seed_, counter_);
  counter_ += 2;
  return z;
}

void Rng::fill_uniform(float* p, int64_t n, float lo, float hi) {
  const uint64_t base = reserve(static_cast<uint64_t>(n)), s = seed_;
  const float span = hi - lo;
  parallel_for(CpuExec{threads_}, n, PDNN_PAR(n), [=](int64_t i) {
    p[i] = std::fmaf(span, static_cast<float>(to_unit(at(s, base + i + 1))), lo);
  });
}

void Rng::fill_normal(float* p, int64_t n, float mean, float stddev) {
  const uint64_t base = reserve(2 * static_cast<uint64_t>(n)), s = seed_;
  // An explicit fused multiply-add, the same in every build (see uniform(lo, hi)).
  parallel_for(CpuExec{threads_}, n, PDNN_PAR(n), [=](int64_t i) {
    const double z = normal_at(s, base + 2 * static_cast<uint64_t>(i));
    p[i] = std::fmaf(stddev, static_cast<float>(z), mean);
  });
}

std::vector<int64_t> Rng::permutation(int64_t n) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  for (int64_t i = n - 1; i >= 1; --i) {
    const int64_t j = static_cast<int64_t>(next() % static_cast<uint64_t>(i + 1));
    std::swap(p[i], p[j]);
  }
  return p;
}

Rng::RowDraw Rng::plan_rows(int64_t n, int64_t rows) const {
  if (shard_.total <= 0) return {0, static_cast<uint64_t>(n)};
  PDNN_CHECK(rows == shard_.rows && rows > 0 && n % rows == 0,
             "random draw over %lld values in %lld rows, but this rank holds rows %lld..%lld of "
             "a global batch of %lld (a draw inside a data-parallel step must be over the batch)",
             static_cast<long long>(n), static_cast<long long>(rows),
             static_cast<long long>(shard_.row0), static_cast<long long>(shard_.row0 + shard_.rows),
             static_cast<long long>(shard_.total));
  const uint64_t per_row = static_cast<uint64_t>(n / rows);
  return {per_row * static_cast<uint64_t>(shard_.row0),
          per_row * static_cast<uint64_t>(shard_.total)};
}

}  // namespace pdnn
