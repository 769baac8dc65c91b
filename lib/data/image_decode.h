// The image-folder loader's per-file decode (image_folder.cpp), exposed so that its fuzz target
// (test/fuzz/fuzz_image_folder.cpp) and the tests reach it on bytes, without a folder. Internal:
// applications use load_image_folder (image_folder.h). Built only with OpenCV.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace pdnn {

// The most pixels one image may decode to (8192 x 8192; a JPEG counts at the 1/2, 1/4 or 1/8
// scale it is decoded at): above it the file is skipped, not decoded, as a corrupt header can
// claim gigabytes (16-bit RGBA at this limit is 512 MB).
constexpr int64_t kMaxImagePixels = int64_t{1} << 26;

// Sniffs the bytes (JPEG, PNG, BMP by their first bytes), checks a JPEG's markers up to its
// end-of-image marker, checks the size the header announces, decodes through OpenCV (JPEGs at reduced size when that still covers
// side), converts to RGB (center_crop: the largest centred square) and resizes into
// side x side x 3 bytes at dst. Returns "" on success, else why the file is skipped
// ("empty file", "truncated JPEG (no end-of-image marker)", ...); dst may then hold anything.
// Throws only what allocation throws (std::bad_alloc); OpenCV's errors become a reason.
std::string decode_image_bytes(const std::vector<uint8_t>& bytes, int side, bool center_crop,
                               uint8_t* dst);

}  // namespace pdnn
