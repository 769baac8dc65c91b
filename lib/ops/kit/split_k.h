// The fixed-order split-K sum (ops/kit/split_k.cu): a reduction split over blocks, each writing
// its partial tile to a workspace, is added up here in split order, so that the result does not
// depend on which block finished first (deterministic, as everything in pdnn; the cuDNN
// algorithms PyTorch picks for weight gradients add with atomics and are not).
#pragma once
#include <algorithm>
#include <cstdint>

#include "core/exec.h"

namespace pdnn {
namespace kit {

// How a reduction of K elements, walked BK at a time by each block of `tiles` output tiles, is
// split over blocks (blockIdx.z): enough splits for about four blocks a multiprocessor, each
// at least 16 steps long; k_chunk (a multiple of bk) elements a split, the last one shorter.
struct KSplit {
  int splits, k_chunk;
};
// For a device of `sms` multiprocessors: host arithmetic, so that a memory plan made without a
// device sizes the split's partial sums as the kernels will (ops/conv/conv2d_gpu_ws.h).
inline KSplit split_k_for(int64_t tiles, int64_t K, int bk, int sms) {
  const int64_t want =
      std::max<int64_t>(1, 4 * static_cast<int64_t>(sms) / std::max<int64_t>(1, tiles));
  const int64_t steps = (K + bk - 1) / bk;
  const int64_t splits = std::max<int64_t>(1, std::min<int64_t>(want, steps / 16));
  const int64_t per = (steps + splits - 1) / splits;
  KSplit s;
  s.k_chunk = static_cast<int>(per * bk);
  s.splits = static_cast<int>((K + s.k_chunk - 1) / s.k_chunk);
  return s;
}
// The current device's multiprocessors, and the split for it (split_k.cu).
int device_sms();
KSplit split_k(int64_t tiles, int64_t K, int bk);

// dw[i] += part[0][i] + part[1][i] + ... (splits partial M x N tiles, left to right, one float
// sum per element); db[m] += bias_part[0][m] + ... likewise when db is given. `what` names the
// caller in a launch error.
void sum_splits(int splits, int M, int N, const float* part, const float* bias_part, float* dw,
                float* db, CudaExec e, const char* what);

}  // namespace kit
}  // namespace pdnn
