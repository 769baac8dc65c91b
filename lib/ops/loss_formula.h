// The loss kernels' row geometry and the classifier's argmax rule, one definition for the CPU
// (loss.cpp) and GPU (loss.cu) kernels.
#pragma once
#include <cstdint>

#include "ops/kit/host_device.h"
#include "ops/kit/round.h"

namespace pdnn {

// Row i of logits (n, k, plane): a sample (plane 1) or a pixel, its k values `plane` apart.
PDNN_HD int64_t row_start(int64_t i, int64_t k, int64_t plane) {
  return (i / plane) * k * plane + i % plane;
}

// Whether the row's argmax is `label`: strict '>', so ties keep the lowest index (as PyTorch's
// argmax). Z: float, or bf16 compared as the floats they are.
template <class Z>
PDNN_HD bool argmax_is(int64_t k, int64_t plane, const Z* zi, int32_t label) {
  int64_t best = 0;
  for (int64_t j = 1; j < k; ++j)
    if (kit::to_f32(zi[j * plane]) > kit::to_f32(zi[best * plane])) best = j;
  return best == label;
}

// classifier_metrics' end (ops/loss.h): the chunks' (loss, correct) sums added in order.
PDNN_HD void metrics_finish(int64_t chunks, int64_t rows, const double* parts, double* acc) {
  double loss = 0.0, correct = 0.0;
  for (int64_t c = 0; c < chunks; ++c) {
    loss += parts[2 * c];
    correct += parts[2 * c + 1];
  }
  acc[0] += loss;
  acc[1] += correct;
  acc[2] += static_cast<double>(rows);
}

}  // namespace pdnn
