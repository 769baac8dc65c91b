// Rng: normal draws and permutations (see rng.h for the stream definition).
#include "core/rng.h"

#include <cmath>
#include <numeric>
#include <utility>

#include "core/error.h"

namespace pdnn {

double Rng::normal() {
  // 1 - u keeps the log argument in (0, 1].
  const double u1 = 1.0 - uniform();
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
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
