// The fixed-order split-K sum (ops/kit/split_k.cu): a reduction split over blocks, each writing
// its partial tile to a workspace, is added up here in split order, so that the result does not
// depend on which block finished first (deterministic, as everything in pdnn; the cuDNN
// algorithms PyTorch picks for weight gradients add with atomics and are not).
#pragma once
#include <algorithm>
#include <cstdint>

#include "core/exec.h"
#include "ops/kit/host_device.h"

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

// dw[i] += the sum of part[z][i] over the splits z (partial M x N tiles); db[m] += that of
// bias_part[z][m] likewise when db is given. `what` names the caller in a launch error.
// The order is fixed, a function of the split count and the length alone: the splits fall into
// G = sum_split_groups(splits, length) groups of ceil(splits / G) consecutive splits (the last
// ones shorter or empty); each group is summed left to right from 0, then the groups' sums left
// to right from 0, and that is added to dw[i]. One serial sum per element (the order until
// issue 32's W4 profile) left the GPU idle where the tile is small and the splits many: W4
// conv1's 864 weights over 392 splits ran on 4 blocks, 63 us at ncu's clocks for 1.4 MB, and the
// six sums of a W4 bf16 step took 292 us where their bytes take ~40 (in groups: 82).
void sum_splits(int splits, int M, int N, const float* part, const float* bias_part, float* dw,
                float* db, CudaExec e, const char* what);
// G: a power of two up to 32 (8 past 16,384 elements, which fill the GPU by themselves), and
// at most the split count.
inline int sum_split_groups(int splits, int64_t length) {
  const int most = length <= 16384 ? 32 : 8;
  int g = 1;
  while (g * 2 <= most && g * 2 <= splits) g *= 2;
  return g;
}
// Group grp's splits [first, last) of G groups: the kernel's and the host twin's one rule.
struct SplitGroup {
  int first, last;
};
PDNN_HD SplitGroup split_group(int splits, int G, int grp) {
  const int per = (splits + G - 1) / G, first = grp * per;
  return {first, first + per < splits ? first + per : splits};
}
// The same sum on the host, in the same order, bit for bit (the test's twin): out[i] += the
// sum of part[z * length + i] over z < splits, for i < length.
inline void sum_splits_host(int splits, int64_t length, const float* part, float* out) {
  const int G = sum_split_groups(splits, length);
  for (int64_t i = 0; i < length; ++i) {
    float t = 0.f;
    for (int grp = 0; grp < G; ++grp) {
      const SplitGroup r = split_group(splits, G, grp);
      float s = 0.f;
      for (int z = r.first; z < r.last; ++z) s += part[static_cast<int64_t>(z) * length + i];
      t += s;
    }
    out[i] += t;
  }
}

}  // namespace kit
}  // namespace pdnn
