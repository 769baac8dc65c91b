// Element types a Tensor can hold: float32 for all activations and parameters, bfloat16 for the
// GPU's mixed-precision activations and weight copies (ops/cast.h: the parameters, their
// gradients and optimizer state stay float32), float64 for the Hebbian benchmark's
// double-precision runs and metric accumulators, int32 for labels, int64 for counters that live
// on the device (optimizer step, RNG position), uint8 for max pooling's argmax (the offset of
// the maximum inside its window: a quarter of an int32 index's memory).
#pragma once
#include <cstddef>
#include <cstdint>

namespace pdnn {

enum class DType : uint8_t { F32, F64, I32, I64, U8, BF16 };

// A bfloat16 value as stored: the high 16 bits of the float32 it rounds (ops/kit/round.h:
// bf16_bits, round to nearest even; bf16_float back, exact). A type of its own, so that
// Tensor::data<bf16>() cannot be confused with any integer tensor's.
struct bf16 {
  uint16_t bits;
};
static_assert(sizeof(bf16) == 2, "bf16 is two bytes");

inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::F64:
    case DType::I64: return 8;
    case DType::F32:
    case DType::I32: return 4;
    case DType::BF16: return 2;
    case DType::U8: return 1;
  }
  return 0;
}
inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "float32";
    case DType::F64: return "float64";
    case DType::I32: return "int32";
    case DType::I64: return "int64";
    case DType::U8: return "uint8";
    case DType::BF16: return "bfloat16";
  }
  return "?";
}

// dtype_of<float>() == DType::F32, for the typed accessors Tensor::data<T>().
template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::F32; }
template <> constexpr DType dtype_of<double>() { return DType::F64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::I32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::I64; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::U8; }
template <> constexpr DType dtype_of<bf16>() { return DType::BF16; }

}  // namespace pdnn
