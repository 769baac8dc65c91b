// Rounding float32 to the tensor cores' input formats, the same function on the host and on the
// device, bit for bit (test_kernel_kit.cpp checks every class of input on a GPU): the CPU's
// reference in tests, and a CPU bf16 path, round exactly as the kernels do.
//   TF32 (1 sign, 8 exponent, 10 mantissa bits, kept in a float with the low 13 bits 0): round
//     to nearest, ties away from zero: PTX's cvt.rna.tf32.f32, which pdnn's TF32 kernels have
//     always used (cuBLAS rounds the same way). On sm_80 and later it is integer arithmetic: add
//     0x1000 unless the input is an infinity or a NaN, then clear the low 13 bits; so a value at
//     or past the largest TF32 value's half-way point rounds to infinity, and a NaN keeps its
//     high payload bits (one whose payload lies only in the low 13 bits becomes an infinity:
//     that is what the hardware does, and no kernel here feeds it NaNs).
//   BF16 (1 sign, 8 exponent, 7 mantissa bits): round to nearest, ties to even: PTX's
//     cvt.rn.bf16.f32 (and cuda_bf16.h's __float2bfloat16_rn); overflow rounds to infinity;
//     a NaN becomes the canonical NaN 0x7fff on the host (cuda_bf16.h's host code does the same;
//     the device's NaN payload is not specified, so tests compare NaNs as NaNs).
// Unit roundoff (relative error of one rounding, normal range): TF32 2^-11, BF16 2^-8.
#pragma once
#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "ops/kit/host_device.h"

namespace pdnn {
namespace kit {

// v's bits as a To of the same size (C++20's std::bit_cast; a register move on both compilers).
template <class To, class From>
PDNN_HD To bit_cast(From v) {
  static_assert(sizeof(To) == sizeof(From), "bit_cast: sizes differ");
  To t;
  std::memcpy(&t, &v, sizeof t);
  return t;
}
PDNN_HD uint32_t float_bits(float f) { return bit_cast<uint32_t>(f); }
PDNN_HD float bits_float(uint32_t u) { return bit_cast<float>(u); }

// f rounded to TF32, as the bits of a float (the operand register of mma.sync .tf32).
PDNN_HD uint32_t tf32_bits(float f) {
#if defined(__CUDA_ARCH__)
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(f));
  return r;
#else
  uint32_t u = float_bits(f);
  if ((u & 0x7f800000u) != 0x7f800000u) u += 0x1000u;  // finite: half an ulp up in magnitude
  return u & 0xffffe000u;
#endif
}
// f rounded to TF32, as a float.
PDNN_HD float round_tf32(float f) { return bits_float(tf32_bits(f)); }

// f rounded to BF16: its 16 bits.
PDNN_HD uint16_t bf16_bits(float f) {
#if defined(__CUDA_ARCH__)
  uint16_t h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  const uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff;  // NaN
  // Half an ulp less one, plus the kept lowest bit: ties go to the even neighbour.
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
#endif
}
// Two floats rounded to BF16 and packed as mma.sync's .bf16x2 operands: lo in bits 0-15.
PDNN_HD uint32_t bf16x2_bits(float lo, float hi) {
#if defined(__CUDA_ARCH__)
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return static_cast<uint32_t>(bf16_bits(lo)) | static_cast<uint32_t>(bf16_bits(hi)) << 16;
#endif
}
// A BF16 value as float (exact).
PDNN_HD float bf16_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }
// f rounded to BF16, as a float.
PDNN_HD float round_bf16(float f) { return bf16_float(bf16_bits(f)); }

// A tensor element as float and back, for kernels templated on the tensors' type E (float or
// core's bf16): float itself; bf16 widened exactly and rounded to nearest even on the way back,
// so a bf16 kernel computes in fp32 and rounds once, where it writes.
PDNN_HD float to_f32(float v) { return v; }
PDNN_HD float to_f32(bf16 v) { return bf16_float(v.bits); }
template <class E>
PDNN_HD E from_f32(float v);
template <>
PDNN_HD float from_f32<float>(float v) {
  return v;
}
template <>
PDNN_HD bf16 from_f32<bf16>(float v) {
  return bf16{bf16_bits(v)};
}

}  // namespace kit
}  // namespace pdnn
