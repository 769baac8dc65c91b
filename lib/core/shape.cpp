// Shape: construction, checks and printing.
#include "core/shape.h"

#include "core/error.h"

namespace pdnn {

Shape::Shape(std::initializer_list<int64_t> dims) {
  PDNN_CHECK(dims.size() >= 1 && dims.size() <= kMaxRank, "shape: rank %zu not in 1..%d",
             dims.size(), kMaxRank);
  for (int64_t d : dims) {
    PDNN_CHECK(d >= 0, "shape: negative dimension %lld", static_cast<long long>(d));
    dims_[rank_++] = d;
  }
}

int64_t Shape::operator[](int i) const {
  int j = i < 0 ? rank_ + i : i;
  PDNN_CHECK(j >= 0 && j < rank_, "shape %s: no dimension %d", str().c_str(), i);
  return dims_[j];
}

int64_t Shape::numel() const {
  if (rank_ == 0) return 0;
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[i];
  return n;
}

int64_t Shape::c() const {
  PDNN_CHECK(rank_ == 4 || rank_ == 2, "shape %s: c() needs NCHW or (N,C)", str().c_str());
  return dims_[1];
}
int64_t Shape::h() const {
  PDNN_CHECK(rank_ == 4, "shape %s: h() needs NCHW", str().c_str());
  return dims_[2];
}
int64_t Shape::w() const {
  PDNN_CHECK(rank_ == 4, "shape %s: w() needs NCHW", str().c_str());
  return dims_[3];
}

int64_t Shape::per_sample() const { return dims_[0] == 0 ? 0 : numel() / dims_[0]; }

Shape Shape::with_n(int64_t n) const {
  PDNN_CHECK(rank_ >= 1, "shape: with_n on an empty shape");
  Shape s = *this;
  s.dims_[0] = n;
  return s;
}

std::string Shape::str() const {
  std::string s = "(";
  for (int i = 0; i < rank_; ++i) s += (i ? "," : "") + std::to_string(dims_[i]);
  return s + ")";
}

bool Shape::operator==(const Shape& o) const {
  if (rank_ != o.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[i] != o.dims_[i]) return false;
  return true;
}

}  // namespace pdnn
