// Helpers of the bf16 tests (test_bf16_ops.cpp, the bf16 cases of test_conv_gpu.cpp and
// test_conv_gpu_passes.cpp): test data rounded to bf16 on the host (ops/kit/round.h, the device's
// rounding bit for bit), bf16 tensors on a device, their values back as doubles, and the bound of
// a bf16 result.
//
// The bound. Every bf16 op here computes in fp32 from bf16 inputs and rounds once where it
// writes a bf16 tensor; a test's reference is computed in double from the same bf16 inputs, so
// the inputs contribute no error and what remains is
//   - the fp32 arithmetic: for a sum of K products on the tensor cores, (K + 2) 2^-23 S with S
//     the sum of the products' magnitudes (the products of two bf16 values are exact in fp32;
//     the tensor cores add with truncation, so 2^-23 a step rather than 2^-24, as the TF32
//     bound of conv_reference.h; +2 for a bias and a LeakyReLU slope); for an elementwise op a
//     few fp32 roundings, stated where used;
//   - the rounding of the output to bf16: unit roundoff 2^-8 of the value written (twice where
//     an op rounds twice: a convolution's dx and then the input activation's derivative
//     applied to it in place), before an fp32 base it accumulates into (+ 2^-24 of the sum).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/tensor.h"
#include "ops/cast.h"
#include "ops/kit/round.h"

namespace pdnn {
namespace testing {

constexpr double kBf16U = 0x1.0p-8;   // bf16's unit roundoff
constexpr double kFp32U = 0x1.0p-24;  // fp32's

// f's values rounded to bf16, as a float32 host tensor (what the GPU will see).
inline Tensor bf16_rounded(const Tensor& f) {
  Tensor r(f.shape());
  for (int64_t i = 0; i < f.numel(); ++i) r[i] = kit::round_bf16(f[i]);
  return r;
}

// A bf16 tensor on `dev` holding f (host float32) rounded to bf16.
inline Tensor to_bf16(const Tensor& f, Device dev, Context& ctx) {
  Tensor h(f.shape(), DType::BF16);
  cpu::cast_to_bf16(f.numel(), f.data(), h.data<bf16>(), CpuExec{1});
  return dev == Device::CPU ? h : h.to(dev, ctx);
}

// A bf16 tensor (any device) as a float32 host tensor (exact).
inline Tensor widened(const Tensor& b, Context& ctx) {
  const Tensor h = b.device() == Device::CPU ? b.clone() : b.to(Device::CPU, ctx);
  Tensor f(h.shape());
  cpu::cast_to_f32(h.numel(), h.data<bf16>(), f.data(), CpuExec{1});
  return f;
}

// A bf16 tensor of shape s on `dev` filled with NaN (every element must be written).
inline Tensor bf16_poisoned(const Shape& s, Device dev, Context& ctx) {
  Tensor f(s);
  f.fill(std::nanf(""));
  return to_bf16(f, dev, ctx);
}

// Expects |got[i] - ref[i]| <= rel * |ref[i]| + abs[i] (abs may be empty: 0) for every i;
// counts the elements outside and names the first.
inline void expect_within(const Tensor& got, const std::vector<double>& ref, double rel,
                          const std::vector<double>& abs, const std::string& what) {
  ASSERT_EQ(static_cast<size_t>(got.numel()), ref.size()) << what;
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double bound = rel * std::fabs(ref[i]) + (abs.empty() ? 0.0 : abs[i]);
    if (!(std::fabs(double(got[i]) - ref[i]) <= bound)) {
      if (first < 0) first = i;
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.numel() << " outside the bound; "
                    << "first at " << first << ": got " << (first >= 0 ? got[first] : 0.f)
                    << ", want " << (first >= 0 ? ref[first] : 0.0);
}

// The bound of a bf16 sum of `terms` products whose magnitudes add to abs_sum[i], written with
// relative rounding out_rel (2^-8 to bf16, 2 * 2^-8 rounded twice, 0 for an fp32 output) and,
// when base is given, added to it in fp32: |got - (base + ref)| <= acc + out_rel (|ref| + acc)
// + 2^-24 (|base| + |ref| + acc) with acc = (terms + 2) 2^-23 abs_sum.
// out_rel per element (empty: 0).
inline void expect_bf16_sum_within(const Tensor& got, const std::vector<double>& ref,
                                   const std::vector<double>& abs_sum, const Tensor* base,
                                   double terms, const std::vector<double>& out_rel,
                                   const std::string& what) {
  ASSERT_EQ(static_cast<size_t>(got.numel()), ref.size()) << what;
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double b = base ? double((*base)[i]) : 0.0;
    const double acc = (terms + 2) * 2 * kFp32U * abs_sum[i];
    const double out = out_rel.empty() ? 0.0 : out_rel[i];
    const double bound = acc + out * (std::fabs(ref[i]) + acc) +
                         (base ? kFp32U * (std::fabs(b) + std::fabs(ref[i]) + acc) : 0.0) + 1e-30;
    if (!(std::fabs(double(got[i]) - (b + ref[i])) <= bound)) {
      if (first < 0) first = i;
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.numel() << " outside the bf16 "
                    << "bound; first at " << first << ": got " << (first >= 0 ? got[first] : 0.f)
                    << ", want "
                    << (first >= 0 ? ref[first] + (base ? double((*base)[first]) : 0.0) : 0.0);
}

inline void expect_bf16_sum_within(const Tensor& got, const std::vector<double>& ref,
                                   const std::vector<double>& abs_sum, const Tensor* base,
                                   double terms, double out_rel, const std::string& what) {
  expect_bf16_sum_within(got, ref, abs_sum, base, terms,
                         std::vector<double>(ref.size(), out_rel), what);
}

// A sum rounded to bf16 twice: written in bf16 (its magnitude at most abs_sum), then the bias
// (and an activation) added in a pass of its own and rounded again (cuDNN's forward; a
// ConvTranspose2d's forward, whose bias is the layer's own pass): the first rounding is 2^-8 of
// at most abs_sum + acc, the second 2^-8 of the result (1% for the product of the two).
inline void expect_bf16_rounded_twice(const Tensor& got, const std::vector<double>& ref,
                                      const std::vector<double>& abs_sum, double terms,
                                      const std::string& what) {
  std::vector<double> abs(ref.size());
  for (size_t i = 0; i < abs.size(); ++i) {
    const double acc = (terms + 2) * 2 * kFp32U * abs_sum[i];
    abs[i] = acc * (1 + kBf16U) + kBf16U * (abs_sum[i] + acc) * 1.01;
  }
  expect_within(got, ref, kBf16U * 1.01, abs, what);
}

}  // namespace testing
}  // namespace pdnn
