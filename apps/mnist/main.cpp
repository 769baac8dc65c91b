// build/bin/mnist: trains W2 (small) or W3 (keras) of SPEC.md on MNIST-layout IDX data and
// writes one CSV row per epoch (train/test loss and accuracy, time, images/s). Also the
// step-time probe of the benchmarks (--steps) and the per-layer profile (--profile). The run
// itself is in mnist_app.cpp.
#include "mnist_app.h"
#include "run/timing.h"

int main(int argc, char** argv) {
  return pdnn::run_app("mnist", [](int c, char** v) { return mnist_app(c, v); }, argc, argv);
}
