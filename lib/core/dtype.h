// Element types a Tensor can hold: float32 for all activations and parameters, float64 for the
// Hebbian benchmark's double-precision runs and metric accumulators, int32 for labels, int64 for
// counters that live on the device (optimizer step, RNG position), uint8 for max pooling's argmax
// (the offset of the maximum inside its window: a quarter of an int32 index's memory).
#pragma once
#include <cstddef>
#include <cstdint>

namespace pdnn {

enum class DType : uint8_t { F32, F64, I32, I64, U8 };

inline size_t dtype_size(DType t) {
  return t == DType::F64 || t == DType::I64 ? 8 : t == DType::U8 ? 1 : 4;
}
inline const char* dtype_name(DType t) {
  return t == DType::F32   ? "float32"
         : t == DType::F64 ? "float64"
         : t == DType::I32 ? "int32"
         : t == DType::I64 ? "int64"
                           : "uint8";
}

// dtype_of<float>() == DType::F32, for the typed accessors Tensor::data<T>().
template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::F32; }
template <> constexpr DType dtype_of<double>() { return DType::F64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::I32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::I64; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::U8; }

}  // namespace pdnn
