// The bodies of the libFuzzer targets (test/fuzz/fuzz_<name>.cpp), shared with the ordinary
// test suite (test/test_fuzz_corpus.cpp), which runs every committed seed and every input a
// fuzzer ever crashed on through the same body. A body may throw pdnn::Error (bad input,
// reported cleanly) and nothing else; crashes, hangs, leaks and undefined behaviour are bugs.
//
// Adding a target: write fuzz_<name>_one() here, a
// test/fuzz/fuzz_<name>.cpp calling it from LLVMFuzzerTestOneInput, seeds in
// test/fuzz/corpus/<name>/; CMake (PDNN_FUZZ=ON) builds every test/fuzz/fuzz_*.cpp as
// build-fuzz/bin/fuzz_<name>, `make fuzz` runs each, and test_fuzz_corpus.cpp lists the bodies.
#pragma once
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "data/idx.h"
#ifdef PDNN_HAVE_OPENCV
#include "data/image_decode.h"
#endif
#include "layers/activation.h"
#include "layers/batchnorm2d.h"
#include "layers/conv2d.h"
#include "layers/dense.h"
#include "layers/flatten.h"
#include "model/checkpoint.h"
#include "model/sequential.h"
#include "optim/adam.h"

namespace pdnn {
namespace fuzz {

// The readers take paths: the input goes to a per-process scratch file first.
inline const std::string& scratch_path(const char* name) {
  static const std::string p = "/tmp/pdnn_fuzz_" + std::string(name) + "_" +
                               std::to_string(static_cast<long long>(::getpid()));
  return p;
}

inline void write_scratch(const std::string& path, const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) PDNN_FAIL("fuzz: cannot write %s", path.c_str());
  if (size > 0) std::fwrite(data, 1, size, f);
  std::fclose(f);
}

// IDX reader: the bytes as an image file and as a label file (raw or gzip, by magic).
inline void fuzz_idx_one(const uint8_t* data, size_t size) {
  const std::string& p = scratch_path("idx");
  write_scratch(p, data, size);
  try {
    const IdxImages im = read_idx_images(p);
    const Tensor t = idx_to_tensor(im);
    if (t.numel() != im.n * im.rows * im.cols) PDNN_FAIL("fuzz: tensor size mismatch");
  } catch (const Error&) {
  }
  try {
    read_idx_labels(p);
  } catch (const Error&) {
  }
  std::remove(p.c_str());
}

// The model the checkpoint target loads into: parameters, BatchNorm buffers and Adam state,
// so every kind of tensor name and the optimizer checks are reachable.
struct CheckpointModel {
  Sequential model;
  std::unique_ptr<Adam> opt;
  CheckpointModel() {
    Rng rng(7);
    model.emplace<Conv2d>(1, 2, 3, 1, 1);
    model.emplace<BatchNorm2d>(2);
    model.emplace<ReLU>();
    model.emplace<Flatten>();
    model.emplace<Dense>(2 * 4 * 4, 3);
    model.reset_parameters(rng);
    opt = std::make_unique<Adam>(model.parameters());
  }
};

inline CheckpointModel& checkpoint_model() {
  static CheckpointModel m;
  return m;
}
// The second model of a two-model checkpoint (format version 2: "G." and "D.").
inline CheckpointModel& checkpoint_model_d() {
  static CheckpointModel m;
  return m;
}

// Checkpoint loader: the bytes loaded with and without the optimizer, as one model and as two
// named ones. The last 4 bytes are
// replaced by the CRC-32 of all but the 12-byte trailer first: mutations would almost never
// pass the checksum, and so never reach the checks behind it.
inline void fuzz_checkpoint_one(const uint8_t* data, size_t size) {
  const std::string& p = scratch_path("checkpoint");
  std::vector<uint8_t> bytes(data, data + size);
  if (size >= 12) {
    const uint32_t c = static_cast<uint32_t>(
        crc32(crc32(0, nullptr, 0), bytes.data(), static_cast<uInt>(size - 12)));
    std::memcpy(bytes.data() + size - 4, &c, sizeof c);
  }
  write_scratch(p, bytes.data(), bytes.size());
  CheckpointModel& m = checkpoint_model();
  try {
    load_checkpoint(p, m.model, m.opt.get());
  } catch (const Error&) {
  }
  try {
    load_checkpoint(p, m.model, nullptr);
  } catch (const Error&) {
  }
  CheckpointModel& d = checkpoint_model_d();
  try {
    load_checkpoint(p, {{"G", &m.model, m.opt.get()}, {"D", &d.model, d.opt.get()}});
  } catch (const Error&) {
  }
  try {
    load_checkpoint(p, {{"G", &m.model, nullptr}});
  } catch (const Error&) {
  }
  std::remove(p.c_str());
}

#ifdef PDNN_HAVE_OPENCV
// Image-folder loader: the bytes as one image file, through the loader's own per-file decode
// (sniffing, the JPEG marker walk, OpenCV's decode, grey/alpha/16-bit conversion, crop and
// resize). The cache side and the centre crop are taken from the input's length, not from its
// bytes, so that inputs stay plain image files (the seeds are ordinary JPEG, PNG and BMP files)
// while mutations still reach every path: sides 1 and 3 make libjpeg decode at 1/8 or 1/4 scale
// and the resize shrink, 17 and 64 enlarge small images.
inline void fuzz_image_folder_one(const uint8_t* data, size_t size) {
  static const int kSides[] = {1, 3, 17, 64};
  const int side = kSides[size % 4];
  const bool center_crop = (size / 4) % 2 == 1;
  const std::vector<uint8_t> bytes(data, data + size);
  std::vector<uint8_t> out(static_cast<size_t>(side) * side * 3);
  const std::string problem = decode_image_bytes(bytes, side, center_crop, out.data());
  // A skipped file must say why: an empty reason would be counted as a readable image.
  if (!problem.empty() && problem.find_first_not_of(' ') == std::string::npos)
    PDNN_FAIL("fuzz: blank skip reason");
}
#endif

}  // namespace fuzz
}  // namespace pdnn
