// Vector accesses of 4 and 8 consecutive tensor elements as floats, for kernels templated on the
// element type E (float: one or two 16-byte float4 accesses; bf16: one or two 8-byte ones), and
// their scalar twin (1), so a kernel's loop is written once over V elements an access. p is
// aligned to the access (the caller checks it: a multiple of V elements from an aligned base).
// Device code only (include from .cu files).
#pragma once
#include "core/dtype.h"
#include "ops/kit/round.h"

namespace pdnn {
namespace kit {

__device__ __forceinline__ void load4(const float* p, float (&v)[4]) {
  const float4 a = *reinterpret_cast<const float4*>(p);
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
}
__device__ __forceinline__ void load4(const bf16* p, float (&v)[4]) {
  const uint2 u = *reinterpret_cast<const uint2*>(p);
  v[0] = bf16_float(static_cast<uint16_t>(u.x)), v[1] = bf16_float(static_cast<uint16_t>(u.x >> 16));
  v[2] = bf16_float(static_cast<uint16_t>(u.y)), v[3] = bf16_float(static_cast<uint16_t>(u.y >> 16));
}
template <class E>
__device__ __forceinline__ void load8(const E* p, float (&v)[8]) {
  float a[4], b[4];
  load4(p, a);
  load4(p + 4, b);
  for (int i = 0; i < 4; ++i) v[i] = a[i], v[4 + i] = b[i];
}
__device__ __forceinline__ void store4(float* p, const float (&v)[4]) {
  *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
}
__device__ __forceinline__ void store4(bf16* p, const float (&v)[4]) {
  *reinterpret_cast<uint2*>(p) = make_uint2(bf16x2_bits(v[0], v[1]), bf16x2_bits(v[2], v[3]));
}
template <class E>
__device__ __forceinline__ void store8(E* p, const float (&v)[8]) {
  const float a[4] = {v[0], v[1], v[2], v[3]}, b[4] = {v[4], v[5], v[6], v[7]};
  store4(p, a);
  store4(p + 4, b);
}

// V in {1, 4}: one element or one 4-element access.
template <int V, class E>
__device__ __forceinline__ void load(const E* p, float (&v)[V]) {
  if constexpr (V == 1) v[0] = to_f32(p[0]);
  else load4(p, v);
}
template <int V, class E>
__device__ __forceinline__ void store(E* p, const float (&v)[V]) {
  if constexpr (V == 1) p[0] = from_f32<E>(v[0]);
  else store4(p, v);
}

}  // namespace kit
}  // namespace pdnn
