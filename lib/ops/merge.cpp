// Concat's channel copies and elementwise sums: CPU kernels and dispatch (merge.h).
#include "ops/merge.h"

#include <cstring>

#include "core/parallel.h"
#include "ops/dispatch.h"

namespace pdnn {

namespace cpu {

void channel_copy(int64_t n, int64_t c, int64_t plane, const float* src, int64_t src_c,
                  int64_t src_at, float* dst, int64_t dst_c, int64_t dst_at, CpuExec e) {
  const size_t bytes = static_cast<size_t>(c * plane) * sizeof(float);
  parallel_for(e, n, PDNN_PAR(n * c * plane), [=](int64_t i) {
    std::memcpy(dst + (i * dst_c + dst_at) * plane, src + (i * src_c + src_at) * plane, bytes);
  });
}

void add(int64_t n, const float* a, const float* b, float* y, CpuExec e) {
  parallel_for(e, n, PDNN_PAR(n), [=](int64_t i) PDNN_INLINE { y[i] = a[i] + b[i]; });
}

}  // namespace cpu

namespace ops {

void channel_copy(Context& ctx, const Tensor& src, int64_t src_at, Tensor& dst, int64_t dst_at,
                  int64_t c) {
  const char* op = "channel_copy";
  const Shape &s = src.shape(), &d = dst.shape();
  PDNN_CHECK(s.rank() >= 2 && d.rank() >= 2 && s[0] == d[0] && s[1] > 0 && d[1] > 0 &&
                 s.numel() / s[1] == d.numel() / d[1],
             "%s: %s and %s differ in rows or in elements per channel", op, s.str().c_str(),
             d.str().c_str());
  PDNN_CHECK(c >= 0 && src_at >= 0 && dst_at >= 0 && src_at + c <= s[1] && dst_at + c <= d[1],
             "%s: channels [%lld, %lld) of %s into [%lld, %lld) of %s", op,
             static_cast<long long>(src_at), static_cast<long long>(src_at + c), s.str().c_str(),
             static_cast<long long>(dst_at), static_cast<long long>(dst_at + c), d.str().c_str());
  if (c == 0 || s[0] == 0) return;
  const int64_t plane = s.numel() / (s[0] * s[1]);
  check_same_dtype(op, {&src, &dst});
  const Device dev = op_device(op, {&src, &dst});
  PDNN_DISPATCH_TYPED(ctx, dev, src.dtype(), channel_copy, s[0], c, plane, src.data<E>(), s[1],
                      src_at, dst.data<E>(), d[1], dst_at);
}

void add(Context& ctx, const Tensor& a, const Tensor& b, Tensor& y) {
  const char* op = "add";
  check_same_shape(op, a.shape(), b.shape());
  check_same_shape(op, y.shape(), a.shape());
  if (a.numel() == 0) return;
  check_same_dtype(op, {&a, &b, &y});
  const Device dev = op_device(op, {&a, &b, &y});
  PDNN_DISPATCH_TYPED(ctx, dev, a.dtype(), add, a.numel(), a.data<E>(), b.data<E>(),
                      y.data<E>());
}

}  // namespace ops
}  // namespace pdnn
