// Element types a tensor or a kernel works in: float32 (the default everywhere), float64 (for
// references and the W6 benchmark), int32 (labels, argmax, masks).
#pragma once
#include <cstddef>
#include <cstdint>

namespace pdnn {

enum class DType : uint8_t { F32, F64, I32 };

inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F64: return 8;
    case DType::I32: return 4;
  }
  return 0;
}

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "float32";
    case DType::F64: return "float64";
    case DType::I32: return "int32";
  }
  return "?";
}

}  // namespace pdnn
