// libFuzzer target: the image-folder loader's per-file decode (JPEG/PNG/BMP sniffing, the JPEG
// marker walk, OpenCV's decode, conversion, resize) on arbitrary bytes. `make fuzz`.
#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pdnn::fuzz::fuzz_image_folder_one(data, size);
  return 0;
}
