// The fixed-order split-K sum (ops/kit/split_k.cu): a reduction split over blocks, each writing
// its partial tile to a workspace, is added up here in split order, so that the result does not
// depend on which block finished first (deterministic, as everything in pdnn; the cuDNN
// algorithms PyTorch picks for weight gradients add with atomics and are not).
#pragma once
#include <cstdint>

#include "core/exec.h"

namespace pdnn {
namespace kit {

// How a reduction of K elements, walked BK at a time by each block of `tiles` output tiles, is
// split over blocks (blockIdx.z): enough splits for about four blocks a multiprocessor of the
// current device, each at least 16 steps long; k_chunk (a multiple of bk) elements a split,
// the last one shorter.
struct KSplit {
  int splits, k_chunk;
};
KSplit split_k(int64_t tiles, int64_t K, int bk);

// dw[i] += part[0][i] + part[1][i] + ... (splits partial M x N tiles, left to right, one float
// sum per element); db[m] += bias_part[0][m] + ... likewise when db is given. `what` names the
// caller in a launch error.
void sum_splits(int splits, int M, int N, const float* part, const float* bias_part, float* dw,
                float* db, CudaExec e, const char* what);

}  // namespace kit
}  // namespace pdnn
