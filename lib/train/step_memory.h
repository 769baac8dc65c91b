// The memory plan of a classifier's training step on the run's device, made before the first
// step from the run's flags: --memory-plan prints it (model/memory_plan.h), --gpu-memory-limit
// must be met, or the run stops here, before any training, naming the smallest limit that
// would do.
//
// Layer times are estimated from FLOPs (a nominal rate: the plan says so) unless --layer-times
// names a profile; the host-device bandwidth, the device's memory bandwidth and the rate of the
// host's optimizer update are measured on the GPU; the CUDA context's own memory (driver,
// kernel images, cuBLAS's and cuDNN's handles) is measured once, after a warm-up.
//
// Without a limit nothing changes, unless the step may not fit the GPU as its layers run it
// by default (every convolution keeping its forward's columns for backward, the fastest
// algorithms' workspace: device_limit_for_uncapped): then it is planned under 98% of the
// device's memory, as if --gpu-memory-limit had said it, and a line says so. Under a limit the
// model carries the plan out: the optimizer's
// state placed first (on the device, or in pinned host memory where the plan offloads it:
// Optimizer::place_state), the shared workspace allocated at the plan's budget and capped
// there (an algorithm that would need more is left out), outputs and gradients in one buffer
// laid out by lifetime (Model::set_placements), offloaded on a copy stream or recomputed,
// pools' argmax found again where planned, the batch in micro-batches where planned
// (Model::set_micro_batch); convolutions put dy through their activation in place; the
// step still one CUDA graph computing the same numbers. Under --precision bf16 the plan counts
// each tensor in its type: bf16 activations, gradients and host copies, the weights' bf16 copy
// and the casts at the model's edges beside float32 parameters, gradients, optimizer state,
// BatchNorm statistics and loss. The caching allocator is then capped at the limit less the
// context's own bytes, so a step that needs more than planned fails as out of memory, naming
// the tensor's role, rather than quietly taking more.
#pragma once
#include "core/context.h"
#include "core/shape.h"
#include "model/memory_plan.h"
#include "model/model.h"
#include "optim/optimizer.h"
#include "run/run_config.h"

namespace pdnn {

// Does nothing (returns false) unless cfg asks for a plan or a limit, or the step may not fit
// the GPU without one (above); --least-workspace (GPU) holds the shared workspace to the least
// every layer runs in, the convolutions as under a limit, with or without a plan (returns
// false without one). batch: the training
// batch's input shape (N, ...); eval_batch: the rows of the evaluation's batches (0: no
// evaluation in this run, e.g. --steps).
// plan (optional): the plan made.
bool plan_step_memory(Context& ctx, Model& model, Optimizer& opt, const Shape& batch,
                      const RunConfig& cfg, int64_t eval_batch = 0, MemoryPlan* plan = nullptr);

// After an uncapped GPU run with --memory-plan (no limit held the workspace): the plan once more,
// of the step as it ran, printed as "memory plan as run: peak ...". The plan made before the
// first step cannot know the algorithms the chooser will time and pick, so it counts every
// convolution's columns kept for backward and the least workspace; this one counts the columns
// the chosen forwards keep (PlanFor::as_run) and the workspace as held (fitted to what the
// chosen algorithms ask: StepGraph), the peak the steps' to compare with. Does nothing
// otherwise. batch, eval_batch: as given to plan_step_memory.
void report_plan_as_run(Context& ctx, Model& model, Optimizer& opt, const Shape& batch,
                        const RunConfig& cfg, int64_t eval_batch = 0);

// The plan's decisions carried out on the model and optimizer (placements, argmax records,
// micro-batch, offloaded optimizer state): for plan_step_memory and tests. m: the description
// the plan was made from (its micro-batch's).
void apply_memory_plan(Context& ctx, Model& model, Optimizer& opt, const StepMem& m,
                       const MemoryPlan& p, int64_t state_chunk_bytes);

// Replaces m's layer times (and update time) with those of a --profile CSV (layer, kind,
// output_shape, fwd_ms, bwd_ms, update_ms, ...; train/profiler.h) made for the same model: a
// layer fused into the one before in m takes its time there. A profile of another batch or
// size (a layer's output of the same channels, another count of elements) is scaled by each
// layer's output elements; returns whether any was. Throws pdnn::Error naming the file and the
// problem (unreadable, not a profile, a layer of another model: other channels or rank) and the
// flag that gave it. workspace_limit (nullable): the GPU workspace's limit the profile ran under
// (its workspace_limit_bytes column; 0 where it has none or ran without one), scaled as the
// times are (by the layers' output elements, all of them together).
bool read_layer_times(StepMem& m, const std::string& path, const char* flag = "--layer-times",
                      int64_t* workspace_limit = nullptr);

// Host-device bandwidth of pinned copies on ctx's GPU, GB/s (1e9 bytes/s) each way; 0 on the
// CPU.
struct CopyBandwidth {
  double h2d_gb_s = 0, d2h_gb_s = 0;
};
CopyBandwidth measure_copy_bandwidth(Context& ctx, size_t bytes = size_t{256} << 20);
// The rate (1e9 bytes/s of parameters, gradients and state) at which ctx's host threads run an
// AdaGrad update (the offloaded update on the host), and the device's memory bandwidth (a
// device-to-device copy; 0 on the CPU).
double measure_host_update_gb_s(Context& ctx, int64_t floats = int64_t{8} << 20);
double measure_device_gb_s(Context& ctx, size_t bytes = size_t{256} << 20);

}  // namespace pdnn
