// The arithmetic a run asks for on the GPU (--precision, carried by the Context):
//   fp32  float32 everywhere (the default);
//   tf32  float32 tensors, the matrix products on the tensor cores with their inputs rounded to
//         TF32 (10-bit mantissas; fp32 sums);
//   bf16  autocast: convolutions and dense layers on bfloat16 activations and bfloat16 copies
//         of the weights with fp32 accumulation; master weights, parameter gradients and
//         optimizer state, BatchNorm's statistics, softmax and the losses stay fp32. GPU only
//         (the Model is the autocast boundary: model/model.h); the CPU has no bf16 path,
//         so run_flags and the Model refuse it there in one line.
#pragma once
#include <cstdint>
#include <string>

namespace pdnn {

enum class Precision : uint8_t { Fp32, Tf32, Bf16 };

inline const char* precision_name(Precision p) {
  return p == Precision::Tf32 ? "tf32" : p == Precision::Bf16 ? "bf16" : "fp32";
}
// The arithmetic as step-time rows and the convolutions' tuning keys name it: precision_name's,
// and "fp32+transforms" for fp32 whose convolutions may use cuDNN's FFT and Winograd
// (--conv-transforms, Context::conv_transforms; TF32 and bf16 keep their own rules).
inline const char* arithmetic_name(Precision p, bool conv_transforms) {
  return p == Precision::Fp32 && conv_transforms ? "fp32+transforms" : precision_name(p);
}
// The precision named s (precision_name's names); false when there is none.
inline bool parse_precision(const std::string& s, Precision* p) {
  for (Precision q : {Precision::Fp32, Precision::Tf32, Precision::Bf16})
    if (s == precision_name(q)) {
      *p = q;
      return true;
    }
  return false;
}

}  // namespace pdnn
