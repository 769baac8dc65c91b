// Checkpoints: a model's parameters and buffers, optionally an optimizer's state and step count,
// and a few named int64 values (epoch, RNG counter, ...), in one binary file written atomically.
//
// Format (version 1, host byte order: little-endian on every machine pdnn targets):
//   "PDNNCKPT"  u32 version  u32 n_values  { u32 len, name, i64 value } x n_values
//   u32 len, optimizer kind ("" when saved without an optimizer)
//   u32 n_tensors  { u32 len, name, u32 rank, i64 dims[rank], f32 data[numel] } x n_tensors
//   u64 bytes before this field   u32 CRC-32 (zlib's) of those bytes
// Tensor names: "param:<model name>", "buffer:<model name>", "optim:<Optimizer::state() name>".
// Values: "epoch", "optim.steps" (with an optimizer), then the caller's.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "model/sequential.h"
#include "optim/optimizer.h"

namespace pdnn {

constexpr uint32_t kCheckpointVersion = 1;

struct CheckpointInfo {
  int64_t epoch = 0;
  std::string optimizer;                  // kind() of the optimizer saved, "" if none
  std::map<std::string, int64_t> values;  // the caller's named values
};

// Throws pdnn::Error if the file cannot be written; an existing file at `path` is replaced only
// once the new one is complete. `values` may not use the reserved names "epoch", "optim.steps".
// ctx: needed when the model (or optimizer) lives on a device: its tensors are copied to the
// host through it.
void save_checkpoint(const std::string& path, Sequential& model, Optimizer* opt = nullptr,
                     int64_t epoch = 0, const std::map<std::string, int64_t>& values = {},
                     Context* ctx = nullptr);

// Reads and validates the whole file (magic, version, length, checksum, every size with
// overflow-checked arithmetic against the bytes left, no repeated or negative epoch/step
// fields, every name and shape against the model and, when opt is given, the optimizer's kind
// and state) before touching anything; refuses FIFOs and devices without reading them; on any problem throws pdnn::Error naming the file and the problem, with the model
// and optimizer unchanged. Optimizer state in the file is ignored when opt is nullptr.
CheckpointInfo load_checkpoint(const std::string& path, Sequential& model,
                               Optimizer* opt = nullptr, Context* ctx = nullptr);

}  // namespace pdnn
