// Memory-bandwidth floors for kernels that sweep one array per step (the W6 Hebbian run): STREAM-
// like passes over n elements, split over threads in the same contiguous bands as the Hebbian
// rows, with a barrier per pass, all in one OpenMP region.
#pragma once
#include <cstdint>

#include "core/exec.h"

namespace pdnn {
namespace cpu {

// `passes` times a[i] = s * a[i]: reads and writes the same array, as Oja's in-place update of
// W does (2 n elements moved per pass, and no write-allocate traffic: the line is already read).
template <typename T>
void stream_scale(T* a, T s, int64_t n, int64_t passes, CpuExec e);

// `passes` times dst[i] = src[i]: STREAM's copy (2 n elements counted per pass; the hardware
// also reads dst before writing it unless it streams the stores, and two arrays take twice
// the cache).
template <typename T>
void stream_copy(T* dst, const T* src, int64_t n, int64_t passes, CpuExec e);

}  // namespace cpu
}  // namespace pdnn
