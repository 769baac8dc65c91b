// The memory plan of a classifier's training step on the run's device, made before the first
// step from the run's flags: --memory-plan prints it (model/memory_plan.h), --gpu-memory-limit
// must be met, or the run stops here, before any training, naming the smallest limit that
// would do. On the GPU the caching allocator is then capped at the limit, so a step that needs
// more than planned fails as out of memory rather than quietly taking more.
//
// Layer times are estimated from FLOPs (a nominal rate: the plan says so); the host-device
// bandwidth is measured on the GPU (one 256 MiB pinned copy each way).
//
// Without a limit, or where the step fits the limit as Sequential runs it without a plan
// (every buffer for the whole step: MemoryPlan::keep_all_bytes), nothing changes. Otherwise the
// model carries the plan out (Sequential::set_placements): outputs and gradients in one buffer
// laid out by lifetime, outputs offloaded (on a copy stream beside compute, at the plan's
// positions) or recomputed, the step still one CUDA graph computing the same numbers.
#pragma once
#include "core/context.h"
#include "core/shape.h"
#include "model/memory_plan.h"
#include "model/sequential.h"
#include "optim/optimizer.h"
#include "run/run_config.h"

namespace pdnn {

// Does nothing (returns false) unless cfg asks for a plan or a limit. batch: the training
// batch's input shape (N, ...).
bool plan_step_memory(Context& ctx, Sequential& model, Optimizer& opt, const Shape& batch,
                      const RunConfig& cfg);

// Replaces m's layer times (and update time) with those of a --profile CSV (layer, kind,
// output_shape, fwd_ms, bwd_ms, update_ms, ...; train/profiler.h) made for the same model and
// input: a layer fused into the one before in m takes its time there. Throws pdnn::Error naming
// the file and the problem (unreadable, not a profile, a layer of another shape).
void read_layer_times(StepMem& m, const std::string& path);

// Host-device bandwidth of pinned copies on ctx's GPU, GB/s (1e9 bytes/s) each way; 0 on the
// CPU.
struct CopyBandwidth {
  double h2d_gb_s = 0, d2h_gb_s = 0;
};
CopyBandwidth measure_copy_bandwidth(Context& ctx, size_t bytes = size_t{256} << 20);

}  // namespace pdnn
