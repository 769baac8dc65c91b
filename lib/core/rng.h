// Seeded random numbers, counter-based (splitmix64): value i of a stream is mix(seed + i*gamma),
// so a block of values can be drawn in parallel with the same result at any thread count, and
// scripts/twins/torch_reference.py reproduces pdnn's initial weights and data order in numpy.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

namespace pdnn {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) : seed_(seed) {}
  void seed(uint64_t s) { seed_ = s; counter_ = 0; }
  uint64_t seed() const { return seed_; }
  uint64_t counter() const { return counter_; }
  void set_counter(uint64_t c) { counter_ = c; }

  // The i-th value of the stream (1-based), without advancing it.
  static uint64_t at(uint64_t seed, uint64_t i) {
    uint64_t z = seed + i * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0,1) with 53 random bits.
  static double to_unit(uint64_t v) { return static_cast<double>(v >> 11) * 0x1.0p-53; }

  uint64_t next() { return at(seed_, ++counter_); }
  double uniform() { return to_unit(next()); }
  // lo + (hi - lo) * u rounded once, as an explicit fused multiply-add: left to the compiler,
  // the expression was contracted to an FMA at -O2/-O3 with FMA hardware but not in a Debug
  // build, so initial weights differed by up to 3e-8 between builds, and
  // scripts/pylib/pdnn_rng.py reproduces the fused form.
  float uniform(float lo, float hi) {
    return std::fmaf(hi - lo, static_cast<float>(uniform()), lo);
  }
  // Standard normal by Box-Muller: one value per two draws (no cached spare, so the stream
  // position after n normals is always 2n: simple to reproduce elsewhere).
  double normal();
  // The normal that normal() draws from stream values k + 1 and k + 2 (k: the position before
  // it); 1 - u keeps the log argument in (0, 1].
  static double normal_at(uint64_t seed, uint64_t k) {
    const double u1 = 1.0 - to_unit(at(seed, k + 1));
    const double u2 = to_unit(at(seed, k + 2));
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }
  // p[i] = the i-th of n calls of uniform(lo, hi) / fmaf(stddev, float(normal()), mean), the
  // stream moved as by those calls, drawn on threads() threads: the same values at any thread
  // count (the stream is counter-based). Initial weights use these: W4 at 1344 px draws 3.7 G
  // values (49 s on one core of the GPU host, most of it the first touch of 14.8 GB).
  void fill_uniform(float* p, int64_t n, float lo, float hi);
  void fill_normal(float* p, int64_t n, float mean, float stddev);
  // Threads of the fills above: a Context sets its own thread count on its Rng (1 otherwise).
  void set_threads(int n) { threads_ = n > 0 ? n : 1; }
  int threads() const { return threads_; }
  // Reserve n consecutive values for a parallel draw: value k (0-based) is at(seed(), base+k+1).
  uint64_t reserve(uint64_t n) { uint64_t b = counter_; counter_ += n; return b; }
  // Fisher-Yates shuffle of 0..n-1: for i = n-1..1, j = next() % (i+1), swap.
  std::vector<int64_t> permutation(int64_t n);

  // Data-parallel training (lib/dist): this process holds rows [row0, row0 + rows) of a global
  // batch of `total` rows. A draw of one value per element of a batch-major tensor (dropout's
  // mask) then moves the stream by the whole global batch's count and gives this process the
  // values of its own rows, so every row draws what one process with the whole batch would
  // draw for it, whatever the number of ranks. total == 0: no shard (the default).
  struct RowShard {
    int64_t row0 = 0, rows = 0, total = 0;
  };
  void set_row_shard(const RowShard& s) { shard_ = s; }
  const RowShard& row_shard() const { return shard_; }
  // For such a draw over n elements in `rows` rows: element i takes value
  // at(seed(), start + skip + i + 1), start the stream's position before the draw, and the
  // stream moves by `advance` (n, skip 0 without a shard). Throws when the tensor's rows are
  // not this process's shard of the batch. Does not move the stream (reserve(advance) does).
  struct RowDraw {
    uint64_t skip = 0, advance = 0;
  };
  RowDraw plan_rows(int64_t n, int64_t rows) const;

 private:
  uint64_t seed_;
  uint64_t counter_ = 0;
  RowShard shard_;
  int threads_ = 1;
};

}  // namespace pdnn
