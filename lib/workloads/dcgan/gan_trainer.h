// GanTrainer: one DCGAN iteration (W5, as PyTorch's DCGAN tutorial runs it), the sequence the
// dcgan app, its tests and the benchmarks share:
//   D step: zero D's gradients; D(real) forward, BCE against 1, backward; z ~ N(0,1) drawn on
//           the device; fake = G(z); D(fake) forward, BCE against 0, backward (G untouched:
//           the fake batch is a constant here); Adam on D.
//   G step: zero G's gradients; D(fake) forward with the updated D, BCE against 1 (the
//           non-saturating loss), backward through D to its input (D's own parameter
//           gradients, unused, are not computed: 8% of an iteration), G backward; Adam on G.
// Each of D's three forwards gets its own backward before the next forward (the real and the
// fake batch pass through BatchNorm separately, in training mode, as in PyTorch); Sequential
// refuses a backward against overwritten activations.
//
// Metrics stay on the device (no read-back in a step): running sums of the D loss (real +
// fake), the G loss, the batch means of D(x) and D(G(z)) (the latter from the D step, the
// tutorial's D_G_z1), how far the farthest of those batch means came from 0 or 1, and after
// every step a row of those sums in a history buffer (per-iteration curves, read back once per
// epoch). The iteration runs inside the step shell (train/step_shell.h): on the GPU the real
// batch is copied into the shell's device buffer (the only transfer of a step) and, from the
// second step of a batch shape on, the whole iteration is one CUDA graph, replayed every step.
// (No micro-batches: D's BatchNorm normalises each batch over its rows.)
//
// Data-parallel (distribute(); the dcgan task sets the context's row shard): each rank steps
// on its rows of the global batch; its noise rows are those one process would draw for them
// (ops::normal_fill under the row shard); the losses and D's mean outputs are each rank's share
// of the global batch's means (divided by the global batch), so that the ranks' gradients and
// metrics sum to one process's; both models' gradients are summed over the ranks (GradSync:
// D's after its fake-batch backward, which holds the real batch's gradients too, G's after its
// backward); BatchNorm normalises each rank's rows by their own statistics.
//
// Deferred G update (data-parallel with --overlap on, on the GPU as a CUDA graph; or
// set_defer_g(kAlways)). G's gradient sum is the one all-reduce nothing inside an iteration
// hides: G's backward ends the iteration,
// its last bucket (G's first two layers: 11.7 of its 14.3 MB at W5's widths) can only start
// when that backward ends, and Adam on G waits for it. Nothing of the next iteration reads G
// before g_.forward(z), though: D's real-batch forward and backward do not. So an iteration
// ends after G's backward, and the next one starts G's sum (all of its buckets, on NCCL's
// stream or the communication thread), runs D's real-batch pass meanwhile, joins the sum and
// steps Adam on G, then draws z. Each tensor sees the same operations in the same order (Adam
// on G only moved past D's real-batch work, which touches none of G's tensors), so the weights
// are the undeferred run's bit for bit (test_dcgan, test_cuda_runtime, test_distributed).
// The sum starts at the next step's beginning rather than during G's backward with only its
// join deferred, because a step must end with nothing in flight: a CUDA graph's capture ends
// with NCCL's stream joined, and between steps the host makes MPI calls of its own (the
// metrics), which must not overlap the communication thread's (MPI_THREAD_SERIALIZED).
// Until the next step, G lags one update: flush() applies it, and whatever reads G or opt_g
// between steps (samples, checkpoints, weight hashes, finiteness checks) or changes opt_g's
// learning rate calls it first, on every rank (it sums over them). The first step, and the
// first after a flush, has no update to finish: not the captured step, it runs eagerly. One
// process has no sum to hide: by default only a data-parallel trainer on the GPU whose step is a
// CUDA graph defers (eagerly, with the sum's kernels beside D's real pass launched one by one,
// the 2-GPU step measured slower, not faster).
// D's sum cannot move: Adam on D needs it and the G step needs the updated D (the algorithm).
// Summing D's real-batch gradient apart, under G's forward and D's fake pass, would double D's
// bytes on a stream G's sum then occupies, and change the float sums (the ranks' real and fake
// parts summed apart, then added, round differently from their sums): it stays one sum after
// the fake batch's backward, overlapped with that backward.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "dist/grad_sync.h"
#include "losses/binary_cross_entropy.h"
#include "model/model.h"
#include "optim/optimizer.h"
#include "train/step_shell.h"

namespace pdnn {

// Sums since reset_metrics(); means per step by the accessors.
struct GanMetrics {
  double d_loss = 0, g_loss = 0, d_x = 0, d_g_z = 0;
  // The largest distance from {0, 1} of a batch mean of D(x), of D(G(z)), since the reset.
  double d_x_far = 0, d_g_z_far = 0;
  int64_t steps = 0;
  double mean(double sum) const { return steps > 0 ? sum / static_cast<double>(steps) : 0.0; }
};

// One step's values, from the history.
struct GanIteration {
  double d_loss, g_loss, d_x, d_g_z;
};

class GanTrainer {
 public:
  // g: z (N,nz,1,1) -> image; d: image -> probability (N,1,1,1). opt_g / opt_d built over their
  // models' parameters; all must outlive the trainer, the models on the device they train on.
  // history_rows: steps kept per reset for history() (the epoch's iterations). overlap_copy: on
  // the GPU, copy the real batch from the host beside the iteration before (train/step_shell.h).
  GanTrainer(Model& g, Model& d, Optimizer& opt_g, Optimizer& opt_d, int64_t nz,
             int64_t history_rows, bool cuda_graph = true, bool overlap_copy = true);
  ~GanTrainer();

  // One iteration on a batch of real images (N,C,H,W) float32: on the host (pinned memory
  // makes the copy asynchronous) or on the models' device. The caller may refill `real` as soon
  // as step() returns: on the GPU it waits until the batch has been copied (not for the
  // iteration, which stays queued).
  // global_batch: data-parallel, the global batch's rows (0: real is the whole batch).
  void step(Context& ctx, const Tensor& real, int64_t global_batch = 0);
  // Data-parallel from now on: the gradient all-reduce of both models (before the first step).
  void distribute(Communicator& comm, Context& ctx);
  // Whether G's update waits for the next step (the header): kAuto when data-parallel with
  // overlap on, on the GPU, with the step captured as a CUDA graph; kAlways whenever (also on
  // one process: tests of the reordering alone, and data-parallel on the CPU); kNever. Set while
  // no update is pending.
  enum class DeferG { kAuto, kNever, kAlways };
  void set_defer_g(DeferG d);
  bool defers_g() const;
  // Applies a pending G update (its gradient sum, then Adam): before anything reads G or opt_g
  // between steps; every rank at the same point when data-parallel. Nothing when none pends.
  void flush(Context& ctx);
  bool g_update_pending() const { return g_pending_; }
  const GradSync* grad_sync_g() const { return sync_g_.get(); }
  const GradSync* grad_sync_d() const { return sync_d_.get(); }
  // How far from 0 or 1 this rank's farthest batch means were (data-parallel: its shards'),
  // kept apart from the accumulator, whose D(x) and D(G(z)) slots then hold shares of the
  // global means.
  void shard_far(Context& ctx, double* d_x_far, double* d_g_z_far);
  GanMetrics metrics(Context& ctx);       // reads back: a sync on the GPU
  void reset_metrics(Context& ctx);
  // The values of each step since the reset (at most history_rows), read back.
  std::vector<GanIteration> history(Context& ctx);
  int64_t graph_replays() const { return shell_.graph_replays(); }
  int64_t graph_captures() const { return shell_.graph_captures(); }

 private:
  void run_step(Context& ctx);
  // Joins G's gradient sum (started by start_all) and steps Adam on G.
  void apply_g_update(Context& ctx);
  void ensure_buffers(Context& ctx, int64_t n);
  // D's mean output into the accumulator's slot (and its far slot).
  void prob_mean(Context& ctx, const Tensor& p, int64_t slot);

  Model& g_;
  Model& d_;
  Optimizer& opt_g_;
  Optimizer& opt_d_;
  int64_t nz_, history_rows_;
  StepShell shell_;
  BinaryCrossEntropy bce_real_, bce_fake_, bce_g_;
  const Tensor* x_ = nullptr;  // what the step reads: the shell's staged batch
  Tensor z_, ones_, zeros_, dp_;
  Tensor acc_, history_, row_;
  int64_t steps_ = 0;       // since the reset
  int64_t batch_ = -1;      // the batch size the targets and noise are sized for
  int64_t global_batch_ = 0;
  std::unique_ptr<GradSync> sync_g_, sync_d_;
  DeferG defer_ = DeferG::kAuto;
  bool g_pending_ = false;  // G's gradient awaits its sum and Adam (deferred)
  Tensor far_;              // data-parallel: prob_mean_into's (mean, far) pairs of this rank
};

// Slots of the accumulator (a float64 device tensor), in the history's column order.
enum GanSlot : int64_t {
  kGanDLoss = 0, kGanGLoss = 1, kGanDx = 2, kGanDxFar = 3, kGanDgz = 4, kGanDgzFar = 5,
  kGanSlots = 6
};

}  // namespace pdnn
