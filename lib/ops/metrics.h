// On-device metric accumulators for training loops that must not read back every step (a GAN
// step replayed as a CUDA graph), beside the losses' own (ops/loss.h):
//   prob_mean_into: m = mean(p) of a batch of probabilities (summed in double, index order on
//     the CPU, a fixed tree on the GPU); acc[slot] += m (the running sum of batch means) and
//     acc[slot+1] = max(acc[slot+1], min(m, 1 - m)): how far from 0 or 1 the farthest batch
//     mean since the last reset was. A value below eps at an epoch's end means every batch's
//     mean was within eps of 0 or 1 (a discriminator stuck at certainty).
//   append_row: history[*row, 0:k] = acc[0:k] and *row += 1 (rows past the end are dropped):
//     the running sums after every step, read back once per epoch (per-iteration curves).
//   segmentation_confusion: counts[t * k + p] += the pixels of true class t whose argmax over
//     the class axis of logits (n,k,plane) (ties: the lowest index) is p; integer counts, the
//     same whatever order they are added in. IoU and Dice per class follow from them.
#pragma once
#include <cstdint>

#include "core/context.h"
#include "core/exec.h"
#include "core/tensor.h"

namespace pdnn {

namespace cpu {
void prob_mean_into(int64_t n, const float* p, double* acc, CpuExec e);
void append_row(int64_t k, int64_t rows, const double* acc, double* history, int64_t* row,
                CpuExec e);
void segmentation_confusion(int64_t n, int64_t k, int64_t plane, const float* z,
                            const int32_t* labels, int64_t* counts, CpuExec e);
}  // namespace cpu

namespace cuda {
void prob_mean_into(int64_t n, const float* p, double* acc, CudaExec e);
void append_row(int64_t k, int64_t rows, const double* acc, double* history, int64_t* row,
                CudaExec e);
void segmentation_confusion(int64_t n, int64_t k, int64_t plane, const float* z,
                            const int32_t* labels, int64_t* counts, CudaExec e);
}  // namespace cuda

namespace ops {
// p: float32, any shape; acc: float64 with slots slot, slot + 1.
void prob_mean_into(Context& ctx, const Tensor& p, Tensor& acc, int64_t slot);
// acc: float64 (>= k); history: float64 (rows, k); row: (1) int64, all on one device.
void append_row(Context& ctx, const Tensor& acc, Tensor& history, Tensor& row);
// z: logits (n,k,h,w) or (n,k); labels: n*h*w int32 in [0,k) (checked on the CPU; on the GPU
// a label outside is not counted); counts: int64 (k*k), added to.
void segmentation_confusion(Context& ctx, const Tensor& z, const Tensor& labels, Tensor& counts);
}  // namespace ops

}  // namespace pdnn
