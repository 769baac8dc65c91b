// Checkpoints: one or several models' parameters and buffers, optionally each with its
// optimizer's state and step count, and a few named int64 values (epoch, RNG counter, ...), in
// one binary file written atomically.
//
// Format (host byte order: little-endian on every machine pdnn targets). Version 1, one model
// (what a single-model save writes, byte for byte as before version 2 existed):
//   "PDNNCKPT"  u32 version  u32 n_values  { u32 len, name, i64 value } x n_values
//   u32 len, optimizer kind ("" when saved without an optimizer)
//   u32 n_tensors  { u32 len, name, u32 rank, i64 dims[rank], f32 data[numel] } x n_tensors
//   u64 bytes before this field   u32 CRC-32 (zlib's) of those bytes
// Tensor names: "param:<model name>", "buffer:<model name>", "optim:<Optimizer::state() name>".
// Values: "epoch", "optim.steps" (with an optimizer), then the caller's.
// Version 2, several named models (a GAN's "G" and "D"): the optimizer kind field becomes
//   u32 n_models  { u32 len, model name, u32 len, optimizer kind ("" none) } x n_models
// and every tensor name and step count carries its model's name: "G.param:0.weight",
// "D.optim:3.exp_avg", value "G.optim.steps". Both versions load; a file of one kind given to
// a run that expects the other is refused with a message saying what it holds.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/model.h"
#include "optim/optimizer.h"

namespace pdnn {

constexpr uint32_t kCheckpointVersion = 1;       // one model
constexpr uint32_t kCheckpointVersionNamed = 2;  // several named models

struct CheckpointInfo {
  int64_t epoch = 0;
  std::string optimizer;                  // kind() of the optimizer saved, "" if none (the
                                          // first model's, in a version-2 file)
  std::map<std::string, int64_t> values;  // the caller's named values
};

// One model of a multi-model checkpoint: its name (letters, digits, '_' and '-'; "" only for a
// checkpoint of a single model, written as version 1) and, optionally, its optimizer.
struct CheckpointModel {
  std::string name;
  Model* model = nullptr;
  Optimizer* opt = nullptr;
};

// Throws pdnn::Error if the file cannot be written; an existing file at `path` is replaced only
// once the new one is complete. `values` may not use the reserved names "epoch", "optim.steps".
// ctx: needed when the model (or optimizer) lives on a device: its tensors are copied to the
// host through it.
void save_checkpoint(const std::string& path, Model& model, Optimizer* opt = nullptr,
                     int64_t epoch = 0, const std::map<std::string, int64_t>& values = {},
                     Context* ctx = nullptr);

// Reads and validates the whole file (magic, version, length, checksum, every size with
// overflow-checked arithmetic against the bytes left, no repeated or negative epoch/step
// fields, every name and shape against the model and, when opt is given, the optimizer's kind
// and state) before touching anything; refuses FIFOs and devices without reading them; on any problem throws pdnn::Error naming the file and the problem, with the model
// and optimizer unchanged. Optimizer state in the file is ignored when opt is nullptr.
CheckpointInfo load_checkpoint(const std::string& path, Model& model,
                               Optimizer* opt = nullptr, Context* ctx = nullptr);

// Several models in one file (version 2; a single model named "" gives version 1). Each name
// appears once. Values may not use the reserved names "epoch" and "<name>.optim.steps".
void save_checkpoint(const std::string& path, const std::vector<CheckpointModel>& models,
                     int64_t epoch = 0, const std::map<std::string, int64_t>& values = {},
                     Context* ctx = nullptr);
// Restores the named models (and the optimizers given) from a file holding at least them, with
// every check of the single-model load per model; models of the file not asked for are left
// alone (a generator loaded alone from a GAN's checkpoint). Nothing changes unless all load.
CheckpointInfo load_checkpoint(const std::string& path, const std::vector<CheckpointModel>& models,
                               Context* ctx = nullptr);

}  // namespace pdnn
