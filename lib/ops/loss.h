// Loss kernels and the on-device metric accumulators (so a training step never reads back).
//   softmax cross-entropy, fused and stable: probs = softmax(z) per row (max subtracted, sums in
//     double); row_loss = log sum exp(z - m) - (z_label - m); dz = (probs - onehot) * scale.
//     A row is a sample of logits (n,k), or a pixel of a map (n,k,plane): its k values `plane`
//     apart (the same arithmetic; plane 1 is the classifier's case).
//   soft Dice (dice_*): per class c, over every pixel of the batch, I_c = sum p_c [label = c],
//     P_c = sum p_c, G_c = sum [label = c] (p = softmax over the class axis), each summed in
//     double per chunk of kLossChunk pixels in index order, then over the chunks in order;
//     D_c = (2 I_c + s) / (P_c + G_c + s), loss = 1 - mean over the k classes of D_c.
//   binary cross-entropy on probabilities (PyTorch's BCELoss: logs clamped at -100) and on
//     logits (BCEWithLogitsLoss: max(z,0) - z t + log1p(exp(-|z|))): per-chunk sums `parts`
//     (kLossChunk elements each, summed in double in index order), so the total is the same at
//     any thread count; dp = scale (p - t) / max(p (1-p), 1e-12); dz = scale (sigmoid(z) - t).
//   classifier_metrics: acc[0] += sum of row_loss, acc[1] += rows whose argmax (ties: lowest
//     index) is the label, acc[2] += rows  (acc: float64 on the device); both sums per chunk of
//     kLossChunk rows into parts (float64, 2 per chunk), then over the chunks in order: a
//     segmentation's million pixels a step are summed by a block per chunk on the GPU, not by
//     one block (which took ~4 ms of a 512x512 U-Net step), and the total does not depend on the
//     thread count.
//   sum_into: acc[0] += scale * sum(x) (in double, fixed order).
// Labels outside [0,K) are refused on the CPU; on the GPU they give a NaN loss (the run then
// stops as diverged): loaders check labels before they reach the device.
#pragma once
#include <cstdint>

#include "core/context.h"
#include "core/exec.h"
#include "core/tensor.h"

namespace pdnn {

constexpr int64_t kLossChunk = 4096;
inline int64_t loss_chunks(int64_t n) { return (n + kLossChunk - 1) / kLossChunk; }

namespace cpu {
void softmax_cross_entropy_forward(int64_t n, int64_t k, int64_t plane, const float* z,
                                   const int32_t* labels, float* probs, float* row_loss, CpuExec e);
void softmax_cross_entropy_backward(int64_t n, int64_t k, int64_t plane, float scale,
                                    const float* probs, const int32_t* labels, float* dz, CpuExec e);
void classifier_metrics(int64_t n, int64_t k, int64_t plane, const float* z,
                        const int32_t* labels, const float* row_loss, double* parts, double* acc,
                        CpuExec e);
// Dice: probs (n,k,plane) = softmax(z); parts (chunks, k, 3) = per chunk of pixels, I, P, G.
void dice_forward(int64_t n, int64_t k, int64_t plane, const float* z, const int32_t* labels,
                  float* probs, double* parts, CpuExec e);
// stats (3k + 1): I, P, G per class summed over the chunks in order, then the loss (also into
// *loss, as float).
void dice_finish(int64_t chunks, int64_t k, float smooth, const double* parts, double* stats,
                 float* loss, CpuExec e);
// dz (=, or += when add) = scale * dL/dz.
void dice_backward(int64_t n, int64_t k, int64_t plane, float smooth, float scale,
                   const float* probs, const int32_t* labels, const double* stats, float* dz,
                   bool add, CpuExec e);
void binary_cross_entropy_forward(int64_t n, const float* p, const float* t, float* parts,
                                  CpuExec e);
void binary_cross_entropy_backward(int64_t n, float scale, const float* p, const float* t,
                                   float* dp, CpuExec e);
void bce_with_logits_forward(int64_t n, const float* z, const float* t, float* parts, CpuExec e);
void bce_with_logits_backward(int64_t n, float scale, const float* z, const float* t, float* dz,
                              CpuExec e);
void sum_into(int64_t n, float scale, const float* x, double* acc, CpuExec e);
}  // namespace cpu

// The GPU twins of the losses are templates over the logits' (probabilities') and their
// gradient's type Z, float or bf16 (read in fp32; probabilities, losses, targets and sums stay
// float32), both instantiated in loss.cu.
namespace cuda {
template <class Z>
void softmax_cross_entropy_forward(int64_t n, int64_t k, int64_t plane, const Z* z,
                                   const int32_t* labels, float* probs, float* row_loss, CudaExec e);
template <class Z>
void softmax_cross_entropy_backward(int64_t n, int64_t k, int64_t plane, float scale,
                                    const float* probs, const int32_t* labels, Z* dz, CudaExec e);
template <class Z>
void classifier_metrics(int64_t n, int64_t k, int64_t plane, const Z* z,
                        const int32_t* labels, const float* row_loss, double* parts, double* acc,
                        CudaExec e);
// Dice reads and writes float32 only (the model's output is cast back to float32).
void dice_forward(int64_t n, int64_t k, int64_t plane, const float* z, const int32_t* labels,
                  float* probs, double* parts, CudaExec e);
void dice_finish(int64_t chunks, int64_t k, float smooth, const double* parts, double* stats,
                 float* loss, CudaExec e);
void dice_backward(int64_t n, int64_t k, int64_t plane, float smooth, float scale,
                   const float* probs, const int32_t* labels, const double* stats, float* dz,
                   bool add, CudaExec e);
template <class Z>
void binary_cross_entropy_forward(int64_t n, const Z* p, const float* t, float* parts,
                                  CudaExec e);
template <class Z>
void binary_cross_entropy_backward(int64_t n, float scale, const Z* p, const float* t, Z* dp,
                                   CudaExec e);
template <class Z>
void bce_with_logits_forward(int64_t n, const Z* z, const float* t, float* parts, CudaExec e);
template <class Z>
void bce_with_logits_backward(int64_t n, float scale, const Z* z, const float* t, Z* dz,
                              CudaExec e);
void sum_into(int64_t n, float scale, const float* x, double* acc, CudaExec e);
}  // namespace cuda

namespace ops {
// Mixed precision: z / p and dz / dp of the cross-entropies may be bfloat16 (GPU only);
// everything else float32 (Dice's too).
// z (n,k), (n,k,1,1) or a map (n,k,h,w); labels (n) or (n,h,w) int32 (any shape of that many);
// probs (z's elements), row_loss (n, or n*h*w) written.
void softmax_cross_entropy_forward(Context& ctx, const Tensor& z, const Tensor& labels,
                                   Tensor& probs, Tensor& row_loss);
// probs: as forward wrote them, with z's shape (or (n,k) for (n,k,1,1) logits).
void softmax_cross_entropy_backward(Context& ctx, float scale, const Tensor& probs,
                                    const Tensor& labels, Tensor& dz);
// acc: float64 (>= 3); parts: float64 scratch of >= metric_parts(rows) (rows: n, or n*h*w).
inline int64_t metric_parts(int64_t rows) { return 2 * loss_chunks(rows); }
void classifier_metrics(Context& ctx, const Tensor& z, const Tensor& labels,
                        const Tensor& row_loss, Tensor& parts, Tensor& acc);
// The soft Dice of logits z (n,k,h,w) (or (n,k)) against labels (n*h*w int32): probs (z's
// shape), parts (float64, loss_chunks(n*h*w) * k * 3) scratch, stats (float64, 3k + 1), loss
// (float32, 1).
void dice_forward(Context& ctx, float smooth, const Tensor& z, const Tensor& labels,
                  Tensor& probs, Tensor& parts, Tensor& stats, Tensor& loss);
// dz = scale * dL/dz (add: +=), from dice_forward's probs and stats.
void dice_backward(Context& ctx, float smooth, float scale, const Tensor& probs,
                   const Tensor& labels, const Tensor& stats, Tensor& dz, bool add);
// parts: float32 (loss_chunks(n)).
void binary_cross_entropy_forward(Context& ctx, const Tensor& p, const Tensor& t, Tensor& parts);
void binary_cross_entropy_backward(Context& ctx, float scale, const Tensor& p, const Tensor& t,
                                   Tensor& dp);
void bce_with_logits_forward(Context& ctx, const Tensor& z, const Tensor& t, Tensor& parts);
void bce_with_logits_backward(Context& ctx, float scale, const Tensor& z, const Tensor& t,
                              Tensor& dz);
// acc: float64; acc[slot] += scale * sum(x).
void sum_into(Context& ctx, float scale, const Tensor& x, Tensor& acc, int64_t slot = 0);
}  // namespace ops

}  // namespace pdnn
