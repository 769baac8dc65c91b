// Parallel helpers. OpenMP on the outermost independent loop only, and only above a size
// threshold: below it a parallel region's fork/join (~1-2 us) costs more than the loop.
#pragma once
#include <cstdint>

namespace pdnn {

// Elements of simple elementwise work below which a loop stays serial.
constexpr int64_t kParallelMin = 1 << 15;

}  // namespace pdnn

// `#pragma omp parallel for if(PDNN_PAR(n))`
#define PDNN_PAR(n) ((n) >= ::pdnn::kParallelMin)
