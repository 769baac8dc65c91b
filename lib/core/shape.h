// Shape of a tensor: up to 4 dimensions, NCHW order for images, (N, F) for features.
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace pdnn {

class Shape {
 public:
  static constexpr int kMaxRank = 4;
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);

  int rank() const { return rank_; }
  int64_t operator[](int i) const;  // i may be negative: -1 is the last dimension
  int64_t numel() const;
  // Named accessors for NCHW (rank 4); n() is dimension 0 for any rank.
  int64_t n() const { return (*this)[0]; }
  int64_t c() const;
  int64_t h() const;
  int64_t w() const;
  // Elements of one sample: numel() / n().
  int64_t per_sample() const;
  // Same shape with dimension 0 replaced (batch size changes).
  Shape with_n(int64_t n) const;
  std::string str() const;  // "(8,1,28,28)"
  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

}  // namespace pdnn
