// libFuzzer target: the checkpoint loader on arbitrary bytes (with the checksum fixed up, so
// mutations reach the checks behind it). `make fuzz`.
#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pdnn::fuzz::fuzz_checkpoint_one(data, size);
  return 0;
}
