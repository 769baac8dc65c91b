// RunConfig: what a run of a training app is asked to do (epochs, seed, output files, device,
// data-parallel ranks), filled from the command line by run_flags.h and carried out by the
// run loop (train/run_loop.h).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/precision.h"
#include "core/shape.h"
#include "run/output_files.h"

namespace pdnn {

class Communicator;

constexpr int kMaxEpochs = 100000;  // --epochs and a checkpoint's epoch field stay within this

struct RunConfig {
  std::string app;                  // for messages ("mnist")
  std::string model, dataset;       // the identifying columns of every row
  int64_t batch = 1;
  int epochs = 1;
  uint64_t seed = 1;
  bool seed_given = false;  // the user chose the seed: a resumed run must have been made with it
  int64_t steps = 0;        // > 0: benchmark: this many steps, no evaluation, CSV or checkpoint
  std::string out;          // CSV, one row per epoch
  std::string checkpoint;   // written at each epoch's end (and at epoch 0)
  bool resume = false;      // continue from `checkpoint`
  // A fresh run may replace an existing `checkpoint` (else it refuses: that file may hold a
  // trained run, and the epoch-0 checkpoint would destroy it before the first step).
  bool overwrite = false;
  std::string save_init;    // initial weights
  std::string save_weights;  // the weights after the last epoch, without the optimizer's state
  std::string bench_csv;    // with steps: the step-time row
  bool profile = false;
  std::string profile_out;  // with profile: the per-layer table as CSV
  std::vector<std::string> inputs;  // files the run reads; no output may be one of them
  // Files the task writes itself (end_epoch, finish), checked with the loop's own outputs.
  std::vector<OutputFile> extra_outputs;
  // Values saved in the checkpoint that a resumed run must equal (batch size, training set
  // size): a resumed run with others would not be the same run.
  std::map<std::string, int64_t> must_match;
  // Read train_metrics() every this many steps to catch divergence at the step it happens
  // (1 on the CPU, where reading is free; 0: only at progress lines and epoch ends).
  int64_t check_every = 1;
  // A text column "status" after the task's values: "ok", the task's epoch_status(), or, for an
  // epoch whose training metrics went non-finite, "diverged: ..." in a row written for that
  // epoch (its values as far as they were read) just before the run stops with its error. That
  // row is never followed by a checkpoint, so a resumed run drops it as it drops any row past
  // the checkpoint. Off by default (the CSV files of apps without it keep their columns).
  bool status_column = false;
  // Text columns with one value for the whole run, after the timing ones in every row (the
  // run's metadata beside git_rev, host, timestamp: caltech101's skipped_files).
  std::vector<std::pair<std::string, std::string>> run_columns;
  // The device flags (--device, --cuda-graph, --batch-copy, --precision or its alias --tf32): the app makes
  // its Context from them.
  std::string device = "cpu";
  bool cuda_graph = true;
  // --batch-copy: on the GPU, the batch's copy from the host beside the step before
  // (overlapped, the default) or on the compute stream after it (serial); train/step_shell.h.
  bool overlap_batch_copy = true;
  Precision precision = Precision::Fp32;
  // --conv-transforms: fp32 convolutions on the GPU may use cuDNN's FFT and Winograd algorithms
  // (Context::set_conv_transforms).
  bool conv_transforms = false;
  // --conv-algo (ops/conv/conv2d_algo.h's policies) and --conv-algo-cache (the file that keeps
  // the GPU's per-shape choices: "" for the default under the user's cache folder, "none").
  std::string conv_algo = "auto", conv_algo_cache;
  // --memory-plan (print the training step's memory plan, model/memory_plan.h) and
  // --gpu-memory-limit (bytes the step must fit under on the GPU; 0: none). Classifier apps.
  bool memory_plan = false;
  int64_t gpu_memory_limit = 0;
  // The training loss's device buffers beyond the softmax cross-entropy's (which the plan
  // counts itself) for logits of a given shape, bytes each; set by an app whose loss holds
  // more (segment's Dice loss: DiceLoss::buffer_bytes). The plan adds each, in the allocator's
  // blocks, to its loss bytes.
  std::function<std::vector<int64_t>(const Shape& logits)> loss_buffers;
  std::string layer_times;  // --layer-times: a --profile CSV whose times the plan uses
  // --layer-times-least: one made with --least-workspace, the times of the layers a limit
  // leaves on the algorithms asking the least; --least-workspace: the GPU's convolutions held
  // to those algorithms, as under a tight plan (to profile them).
  std::string layer_times_least;
  bool least_workspace = false;
  // --layer-times-mid: one made with --workspace-held (its CSV says the workspace), the times
  // of the layers a limit leaves that much workspace or more (cuDNN's FFT and Winograd need
  // GiBs: between the least and im2col's columns the least's times were up to 50% over);
  // --workspace-held: the GPU's workspace held to that many bytes, as a plan's (0: not held).
  std::string layer_times_mid;
  int64_t workspace_held = 0;
  // --layer-times-wide: one made with --conv-algo implicit, the times of the convolutions whose
  // images pass 32-bit indexing at this run's size (from 5793 x 5793 at 64 channels): there
  // only the implicit GEMM's 64-bit kernels run, which a profile at a smaller size, where the
  // direct kernels and cuDNN run them, did not time (the U-Net at 7168 on an H200: its step
  // 22% past the plan's without them).
  std::string layer_times_wide;
  // --plan-copy-gbs: the host<->GPU copy rate a plan made on the CPU assumes (1e9 bytes/s each
  // way; 0: its default, 20); a GPU run measures its own.
  double plan_copy_gb_s = 0;
  // --plan-context: a plan made on the CPU counts a CUDA context of that many bytes, cuBLAS's
  // workspace and the batch's second staging buffer, as a GPU run does (-1: none of them, as
  // before; a GPU run measures its own context).
  int64_t plan_context = -1;
  // --distributed: this run is one rank of several (set by finish_run_flags), and the
  // parsed flags as text, which every rank must share.
  std::shared_ptr<Communicator> comm;
  std::string flags_text;
};

}  // namespace pdnn
