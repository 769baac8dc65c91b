// libFuzzer target: the IDX reader (raw and gzip) on arbitrary bytes. `make fuzz`.
#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pdnn::fuzz::fuzz_idx_one(data, size);
  return 0;
}
