// FaultHook: the points where a test makes a run fail on purpose (kill the process, hang it, or
// corrupt a value), as an interface the test installs on the Context (Context::set_fault_hook).
// Production code only announces the points; no app installs a hook. The tests that need a
// process to die at an exact point run test/drivers/mnist_faults, the mnist app's own code with
// a hook installed.
#pragma once
#include <cstdint>

namespace pdnn {

class FaultHook {
 public:
  virtual ~FaultHook() = default;
  // The run got to `point` for the count-th time:
  //   "after_row"   count = the epoch (1-based) whose CSV row was just written, before its
  //                 checkpoint (train/run_loop.cpp);
  //   "train_step"  count = the training step about to run, 1-based over the process's run
  //                 (the classifier task; data-parallel: every rank counts its own).
  // True asks the caller to corrupt its state where the point says how ("train_step": one weight
  // of this process's model, which the ranks' weight check must catch); false: go on.
  virtual bool reached(const char* point, int64_t count) = 0;
};

}  // namespace pdnn
