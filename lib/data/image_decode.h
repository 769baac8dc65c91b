// Internals the image loaders share (image_folder.cpp, image_mask_pairs.cpp): reading a file,
// the per-file decode, the header check before OpenCV allocates, and the per-channel
// statistics of decoded images. Exposed also so that the fuzz target
// (test/fuzz/fuzz_image_folder.cpp) and the tests reach the decode on bytes, without a folder.
// Applications use load_image_folder (image_folder.h) or load_image_mask_folder
// (image_mask_pairs.h). Built only with OpenCV.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/augment.h"

namespace pdnn {

// The most pixels one image may decode to (8192 x 8192; a JPEG counts at the 1/2, 1/4 or 1/8
// scale it is decoded at): above it the file is skipped, not decoded, as a corrupt header can
// claim gigabytes (16-bit RGBA at this limit is 512 MB).
constexpr int64_t kMaxImagePixels = int64_t{1} << 26;

// Reads a whole file into out; "" or the problem ("cannot open: No such file or directory").
std::string read_file_bytes(const std::string& path, std::vector<uint8_t>* out);

// For a PNG or BMP: "image too large (...)" when the size its header announces is above
// kMaxImagePixels, else "" (and "" for any other file: OpenCV rejects it itself).
std::string check_announced_size(const std::vector<uint8_t>& bytes);

// Sniffs the bytes (JPEG, PNG, BMP by their first bytes), checks a JPEG's markers up to its
// end-of-image marker, checks the size the header announces, decodes through OpenCV (JPEGs at
// reduced size when that still covers side), converts to RGB (center_crop: the largest centred
// square) and resizes into side x side x 3 bytes at dst. Returns "" on success, else why the file is skipped
// ("empty file", "truncated JPEG (no end-of-image marker)", ...); dst may then hold anything.
// src_w, src_h (optional): the image's size as stored (a JPEG's frame, whatever scale it was
// decoded at), before any crop or resize.
// Throws only what allocation throws (std::bad_alloc); OpenCV's errors become a reason.
std::string decode_image_bytes(const std::vector<uint8_t>& bytes, int side, bool center_crop,
                               uint8_t* dst, int* src_w = nullptr, int* src_h = nullptr);

// Per-channel mean and std of RGB bytes / 255 over the images `which` of a cache that holds
// images of bytes_per_image bytes (HWC) one after another. Integer sums are exact, so the
// result does not depend on the thread count or order. A constant channel gets std 1.
Normalization rgb_channel_statistics(const uint8_t* cache, size_t bytes_per_image,
                                     const std::vector<int64_t>& which, int threads);

}  // namespace pdnn
