// The memory plan of a training step (issue 18, issue 26; vDNN, Rhu et al. 2016; TFLMS, Le et
// al. 2018; ZeRO-Offload, Ren et al. 2021): from a description of the model (per layer: the
// bytes of its output, of its own tensors kept for backward, which backward reads what, the
// layer's times; per parameter its bytes; the device memory outside the layers), the bytes the
// step holds at every point of a forward-then-backward walk, and its peak. Every device
// allocation of a step is in it: parameters, gradients, optimizer state, the layers' own
// tensors, the shared workspace, the batch, the loss, the evaluation's buffers, cuBLAS's
// workspace and the CUDA context itself (measured once). Under a limit the planner chooses:
//   per layer, where what it keeps for backward lives between its last forward use and its
//   first backward use:
//     keep       on the device the whole time;
//     offload    copied to pinned host memory on a copy stream once written, its device copy
//                dropped when that copy is done, prefetched back before its backward needs it;
//                costs time only where a copy is not hidden behind compute (bytes / measured
//                bandwidth, one copy at a time each way);
//     recompute  dropped after its last forward use and made again from its input just before
//                its first backward use (cheap layers: pooling, dropout with its counter-based
//                mask, ReLU, BatchNorm's output, Flatten); costs the layer's forward time;
//   per pooling layer, whether its one-byte argmax is kept or found again in x in backward
//   (costs the pool's forward time; x is then read by its backward);
//   per parameter, whether its optimizer state lives on the device or in pinned host memory
//   (ZeRO-Offload's idea), and for all such state one way to update it (StateMode): streamed
//   through the GPU in chunks, or updated by the host's cores, whichever the cost model says
//   is faster; the update starts once the parameter's last gradient is made and costs time
//   only where it outlasts the rest of backward;
//   the number of micro-batches (plan_training_step): the batch's rows in k slices, each
//   forward and backward in turn with the gradients summed, the update once; the activations
//   are those of one slice, the weights are read k times.
// The workspace gets at least what every layer's algorithms asking the least need (the GPU's
// convolutions on their implicit GEMM or direct kernels, which keep no columns: the minimum at
// batch 1 is then the activations', not im2col's column buffer), and what the limit leaves, up
// to what the fastest algorithms may ask; the GPU's chooser runs only the algorithms that fit
// what it got (ops/conv/conv2d_algo.h), and the printout says which it leaves out.
// Plain C++ over the description, no device: the decisions are unit-tested on the CPU with
// made-up budgets and times (test/test_memory_plan.cpp); describe_step() makes the description
// of a real Model.
//
// Positions: the executed layers (those not fused into the layer before) are numbered
// 0..L-1; position k is the forward of layer k, position 2L-1-k its backward (the loss sits at
// the boundary: the logits stay until the last layer's backward). Everything that lives the
// whole step (parameters, gradients, optimizer state, the batch, the shared workspace) is
// "fixed".
//
// A graph (model/model.h): each layer reads the outputs of earlier ones (LayerMem::inputs; a
// chain by default). An output lives until the last forward that reads it and whatever
// backward needs it; the gradient w.r.t. it from the backward of its last reader (which writes
// it) to its own, and each other reader's backward adds a temporary of its size (summed into
// it there): a U-Net's skip connection keeps its tensor from the encoder to the decoder, and
// its gradient from the decoder's backward to the encoder's.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/cuda_state.h"
#include "core/precision.h"
#include "core/shape.h"
#include "ops/conv/conv2d.h"

namespace pdnn {

class Optimizer;
class Model;

// One layer as the planner sees it.
struct LayerMem {
  int index = 0;                  // in the model
  std::string name;               // "Conv2d(32->32, k3 s1 p1) + ReLU"
  std::string label;              // its profiler row ("3", "enc1.conv1"; describe_step)
  // The layers whose outputs it reads (indices into StepMem::layers, -1: the step's input);
  // empty: the layer before (a chain). A layer fused into the one before reads that one.
  std::vector<int> inputs;
  // Whether its backward brings its inputs back when they were moved off the device (a layer
  // of one input gets x in backward, so it does; Concat and Add only where they read them).
  bool restores_inputs = true;
  std::string out_shape;          // "(64,32,224,224)" (describe_step)
  int64_t out_bytes = 0;          // its output (the next layer's input), in StepMem's
                                  // act_elem_bytes per element
  int64_t scratch_bytes = 0;      // its own tensors kept for backward (argmax, masks): the
                                  // layer holds them for the whole run (fixed bytes)
  bool bwd_reads_input = false;   // its backward reads x (the layer before's output)
  bool bwd_reads_output = false;  // its backward reads y (its own output: fused activations)
  bool recomputable = false;      // output and scratch are cheap to make again from x
  bool absorbed = false;          // fused into the layer before: no buffers, no pass of its own
  int64_t workspace_bytes = 0;    // scratch its passes need at least (the shared workspace:
                                  // the GPU's algorithms asking the least)
  int64_t fast_workspace_bytes = 0;  // ... and the most a faster algorithm may ask (0: as above)
  int64_t columns_bytes = 0;      // ... of which the column-based algorithm's (im2col's; 0: none)
  int64_t argmax_bytes = 0;       // of scratch_bytes, what backward can find again in x instead
  bool batch_coupled = false;     // its output depends on the other rows (BatchNorm's batch
                                  // statistics): no micro-batches
  int64_t param_bytes = 0, grad_bytes = 0, opt_state_bytes = 0;
  double fwd_ms = 0, bwd_ms = 0;
  // Its times on the algorithms asking the least workspace (workspace_bytes), where a limit
  // leaves its faster ones out (a workspace below fast_workspace_bytes); < 0: fwd_ms and
  // bwd_ms (no such measurement: the FLOPs' estimate knows no algorithms).
  double least_fwd_ms = -1, least_bwd_ms = -1;
  // Its times where the workspace holds mid_workspace_bytes or more but not
  // fast_workspace_bytes (a profile with the workspace held there, --workspace-held: cuDNN's
  // FFT and Winograd fit, im2col's columns may not); < 0: none (the least times hold there).
  double mid_fwd_ms = -1, mid_bwd_ms = -1;
  int64_t mid_workspace_bytes = -1;
  // A convolution whose images pass 32-bit indexing at this size: the implicit GEMM runs it
  // under any workspace (BackwardNeeds::past_32bit; its times from --layer-times-wide).
  bool past_32bit = false;
};

// l's times at workspace w (-1: unbounded): its fastest where w holds what they ask; else its
// mid times where w holds their workspace; else its least times (each where it has them).
void layer_times_at(const LayerMem& l, int64_t w, double* fwd_ms, double* bwd_ms);

// One parameter tensor (ParamSet order), for the choice of where its optimizer state lives.
struct ParamMem {
  int index = 0;         // in the model's ParamSet
  int layer = 0;         // index into StepMem::layers
  std::string name;      // "16.weight"
  int64_t bytes = 0;     // its float32 values (its gradient, and each state slot, the same; in
                         // bf16 too: master weights, gradients and state stay float32)
};

struct StepMem {
  std::vector<LayerMem> layers;
  int64_t input_bytes = 0;  // the batch and its labels on the device (the whole batch, each copy)
  int64_t loss_bytes = 0;   // the loss's own buffers (dL/dlogits, accumulators)
  double update_ms = 0;     // the optimizer step (all parameters, on the device)
  // The parameters (whose bytes are also in their layers' param_bytes) and the optimizer's
  // state floats per parameter float (AdaGrad 1, Adam 2, SGD without momentum 0).
  std::vector<ParamMem> params;
  int state_slots = 0;
  int64_t rows = 0;        // rows of the batch each forward sees (a micro-batch's; 0: unknown)
  int64_t batch_rows = 0;  // rows of the training batch
  // Device memory outside the layers: the CUDA context (driver, kernel images, cuBLAS's and
  // cuDNN's handles; measured, or given to a plan made on the CPU: context_given), cuBLAS's
  // workspace, the evaluation's batch buffers, and the small buffers (step count, RNG
  // position, metric sums, each a 512-byte block).
  int64_t context_bytes = 0, cublas_bytes = 0, eval_bytes = 0, small_bytes = 0;
  bool context_given = false;
  // The shared workspace as the run holds it (bytes; -1: the least every layer runs in, the
  // plan's own count): a plan of the step as run.
  int64_t workspace_held = -1;
  // The least workspace the plan holds beside every layer's least (least_workspace_bytes):
  // the planner's, where it buys a larger workspace for faster algorithms with more of the
  // other bytes moved (timed_by_workspace); 0 in a description.
  int64_t workspace_floor = 0;
  // The bytes of one activation element: 4 (float32), 2 under --precision bf16, whose
  // activations and their gradients are bfloat16. The layers' out_bytes are in it, and the
  // step's one buffer (layout_arena) is laid out in these elements.
  int64_t act_elem_bytes = 4;
  // bf16 only (0 otherwise), held the whole step: the bfloat16 copy of the flat parameter
  // buffer the convolutions and dense layers run on (refreshed at each forward), and the casts
  // at the model's edges (the input to bf16, the output to float32 for the loss, dL/d(output)
  // back to bf16).
  int64_t weight_copy_bytes = 0, cast_bytes = 0;
};

struct PlanOptions {
  int64_t limit_bytes = 0;  // 0: no limit (keep everything)
  double h2d_gb_s = 20.0;   // measured pinned-host bandwidth each way, 1e9 bytes per second
  double d2h_gb_s = 20.0;
  // Optimizer state off the device: allowed; the rate the host's cores stream an update at
  // (bytes of parameters, gradients and state read and written, 1e9 per second); the device's
  // memory bandwidth (its own update kernel, and the weights read again per micro-batch); the
  // chunk a streamed update moves per state slot (two chunks each on the device).
  bool offload_state = true;
  double host_update_gb_s = 10.0;
  double device_gb_s = 2000.0;
  int64_t state_chunk_bytes = int64_t{64} << 20;
  bool argmax_again = true;   // pools may find their argmax again instead of keeping it
  int max_micro_batches = 64; // plan_training_step's largest k (1: never split the batch)
  // What each micro-batch beyond the first costs besides its layers' times (the loss, the
  // launches of its kernels; a slice's kernels running below their batch's efficiency is not
  // modelled).
  double micro_batch_ms = 0.2;
  // A larger workspace may be bought with more of the other bytes moved, where it times layers
  // faster (memory_plan.cpp: timed_by_workspace); false: the workspace is what the plan leaves.
  bool buy_workspace = true;
  // The pinned host memory a plan may keep (host_bytes; 0: no bound): a workspace is not bought
  // where its plan would keep more (a GPU run's: pinnable_host_bytes(available), which
  // require_host_fits holds the plan to; the U-Net at 8192 under 137G, timed with its
  // implicit-GEMM layers, bought 22.75 GiB and moved 119 GiB to a host with 119.7 available).
  int64_t host_limit_bytes = 0;
};

// The pinned host memory a plan may keep on a host with `available` bytes free: 90% of it (0:
// unknown, no bound); pinned pages cannot be swapped, and the process and the system need some.
int64_t pinnable_host_bytes(int64_t available);

enum class Placement { Keep, Offload, Recompute };
const char* placement_name(Placement p);  // "device", "host", "recompute"

// Where the optimizer state of the parameters the plan moves off the device is updated.
//   Device  no state moved;
//   Stream  the state in pinned host memory, streamed through the GPU in chunks (copied in,
//           updated by the device's own kernel beside the weights and gradients, copied out);
//   Host    the state in pinned host memory, updated by the host's cores: the gradients and
//           weights copied out in chunks as soon as backward has made them, the same update
//           formula (bit for bit the device kernel's), the weights copied back.
enum class StateMode { Device, Stream, Host };
const char* state_mode_name(StateMode m);  // "device", "streamed through the GPU", "host CPU"

struct StatePlan {
  StateMode mode = StateMode::Device;
  std::vector<int> params;     // indices into StepMem::params whose state is on the host
  int64_t host_bytes = 0;      // pinned host memory: the state (and the host's chunk buffers)
  int64_t device_bytes = 0;    // on the device: the streamed update's chunks
  double stream_ms = 0, host_ms = 0;  // predicted time of each way for these parameters
  double stall_ms = 0;         // what the chosen way adds to the step (beyond the backward it
                               // overlaps)
};

// The fixed bytes by kind (MemoryPlan::fixed_bytes is their sum).
struct FixedBytes {
  int64_t params = 0, grads = 0, state = 0, scratch = 0, workspace = 0, input = 0, loss = 0;
  int64_t context = 0, cublas = 0, eval = 0, small = 0, staging = 0;
  int64_t weight_copy = 0, casts = 0;  // bf16 (StepMem::weight_copy_bytes, cast_bytes)
  bool context_given = false;          // StepMem::context_given
  int64_t total() const {
    return params + grads + state + scratch + workspace + input + loss + context + cublas +
           eval + small + staging + weight_copy + casts;
  }
};

// What the plan does with one executed layer's output when a backward reads it. Positions as
// above; -1 for none.
struct SavedPlan {
  int layer = 0;               // index into StepMem::layers
  int64_t saved_bytes = 0;     // its output, if a backward reads it (0 otherwise)
  Placement where = Placement::Keep;
  int last_fwd_use = -1;       // last position a forward reads it
  int first_bwd_use = -1;      // first (earliest) backward position that needs it
  int last_bwd_use = -1;       // the last one
  int dropped_after = -1;      // offload/recompute: the device copy is gone after this position
  int back_at = -1;            // ... and on the device again from this position
  // Offload without overlap (save_on_cpu's way, where the overlap's bytes do not fit): its
  // slot is free after its last forward use (whatever takes it first waits for the copy out)
  // and the copy in is issued where its first backward needs it, which waits for it.
  bool waits = false;
};

struct MemoryPlan {
  std::vector<SavedPlan> saved;     // one per executed layer, in order
  std::vector<char> argmax_again;   // per executed layer: its argmax found again in backward
  StatePlan state;                  // optimizer state off the device
  int micro_batches = 1;            // the batch in this many slices of micro_rows rows (the
  int64_t micro_rows = 0;           // last one the rest)
  std::vector<int64_t> live_bytes;  // per position, besides the fixed bytes
  FixedBytes fixed;                 // by kind
  int64_t fixed_bytes = 0;
  // The workspace the planner bought (0: none): the plan holds at least this much, the other
  // bytes planned under what the limit then leaves (PlanOptions::buy_workspace).
  int64_t workspace_bought = 0;
  int64_t peak_bytes = 0;           // fixed + the largest live_bytes
  int peak_position = 0;
  // What the step holds with every activation kept (the executor without a plan keeps every
  // buffer for the whole step, the two gradient buffers at the largest size included).
  int64_t keep_all_bytes = 0;
  int64_t host_bytes = 0;           // pinned host memory for offloaded tensors
  double compute_ms = 0;            // forward + backward + update, nothing added (all
                                    // micro-batches)
  double step_ms = 0;               // predicted, with recomputation, copy and update stalls
  bool fits = true;
  // The smallest limit this planner can fit the step under (the fixed bytes plus what no
  // choice can release; the lower of "offload all" and "recompute what can be, offload the
  // rest"), whatever the limit asked.
  int64_t min_limit_bytes = 0;
  int positions = 0;                // 2 L
};

// The workspace every layer of m can run in: the largest of the layers' workspace_bytes (the
// algorithms asking the least).
int64_t least_workspace_bytes(const StepMem& m);  // (and m.workspace_floor)

// The plan for `m` (one micro-batch's rows) under o.limit_bytes (fits == false when no choice
// fits it; the plan then holds the choices that got closest). Under a limit each layer is
// timed at the workspace the plan leaves it: its least times (LayerMem) where that is below
// what its fastest algorithms ask. Throws pdnn::Error on an inconsistent description.
MemoryPlan plan_memory(const StepMem& m, const PlanOptions& o);

// The plan of a training step of batch_rows rows, as the model carries it out (outputs and
// gradients in layout_arena's buffer): describe(rows) gives the step's description when each
// forward sees `rows` rows; the batch in 1, 2, ... micro-batches (up to o.max_micro_batches,
// never with a batch-coupled layer), each planned with plan_memory, the one that fits with
// the shortest predicted step kept (the fewest micro-batches at equal times). Without a limit:
// one micro-batch, nothing moved. Not fitting any way: fits == false and min_limit_bytes the
// smallest limit any number of micro-batches would take.
MemoryPlan plan_training_step(const std::function<StepMem(int64_t rows)>& describe,
                              int64_t batch_rows, const PlanOptions& o);
// The bytes of layout_arena's buffer for plan p of m (what the model's planned step holds
// besides the fixed bytes).
int64_t arena_bytes(const StepMem& m, const MemoryPlan& p);

// The plan with these placements (one per executed layer, in order), argmax records (empty:
// all kept) and parameters whose optimizer state is on the host (indices into m.params), for
// what-if tables and tests; throws pdnn::Error on a choice a layer cannot take.
MemoryPlan simulate_plan(const StepMem& m, const std::vector<Placement>& where,
                         const PlanOptions& o, const std::vector<char>& argmax_again = {},
                         const std::vector<int>& host_state = {});

// Without a limit a step runs as its layers default to (every convolution keeping its
// forward's columns where it can, the algorithms free to take the fastest's workspace): at
// most the plan without a limit's peak plus what the fastest algorithms may ask past the
// least. Where that is more than the device's `device_bytes` (the U-Net at batch 1 from 3072 x
// 3072 on an H200: its columns alone are 160 GiB), the step is planned under the device's
// memory instead: the limit for it (98% of device_bytes: the driver's pages and the caching
// allocator's rounding keep the rest), or 0 where the step fits as it is; most (optional):
// the uncapped step's bytes counted so.
int64_t device_limit_for_uncapped(const StepMem& m, int64_t device_bytes, int64_t* most = nullptr);

// Throws pdnn::Error, before anything trains, when the plan does not fit: "<flag> <limit>:
// the step needs at least <min> ...". flag nullptr: the limit is the device's own (an uncapped
// run planned under 98% of the GPU's memory), which the user cannot raise.
void require_fits(const MemoryPlan& p, const PlanOptions& o, const char* flag);

// Throws pdnn::Error, before anything trains, when what plan p keeps in pinned host memory
// (the outputs it offloads, the optimizer state it moves) is more than host_limit_bytes
// (available), the host's available memory in bytes (0: unknown, no check): past the GPU's
// memory the host's bounds a plan too, and the message says that this is the memory that ran
// out. flag: the limit's
// flag, for the advice (nullptr: the device's own limit, as require_fits).
void require_host_fits(const MemoryPlan& p, int64_t available, const char* flag);

// The per-layer table --memory-plan prints: bytes kept, which backward needs them, where they
// live, when they are dropped and back, then the fixed bytes, the peak and the step time.
std::string format_plan(const StepMem& m, const MemoryPlan& p, const PlanOptions& o);

// "20G", "1.5GiB", "512M", "4096": bytes (K, M, G, T are powers of 1024, "iB" optional; a plain
// number is bytes). Throws pdnn::Error naming `flag` and the problem.
int64_t parse_memory_size(const std::string& text, const char* flag);
// The same without throwing: "" and *bytes set, or what is wrong with text (for CLI checks).
std::string memory_size_problem(const std::string& text, int64_t* bytes);
// 1536 -> "1.5 KiB"; GiB for anything from 1 GiB on.
std::string format_bytes(int64_t bytes);
// The name of a position: "fwd 3" / "bwd 3" with the model's layer index.
std::string position_name(const StepMem& m, const MemoryPlan& p, int pos);

// Where a model carrying placements out (Model::set_placements) keeps its activations and
// gradients during a training step: offsets into one device buffer, so that nothing is
// allocated or freed inside the step (it stays one CUDA graph). Buffers whose lifetimes do not
// overlap share memory (first fit, as TFLite's arena planner, and best fit, in a few orders and
// then those orders with neighbours swapped at random, fixed seed, until the buffer is the
// intervals' largest live sum; the smallest kept). Lifetimes as the model runs: an output from its forward to its last use
// (Keep; the last layer's, the logits, to the end), or to its last reader's forward and again
// from where it is brought back (offloaded or recomputed: before the backward that first needs
// it) to its last use; its last use is the last backward that reads it, or recomputes a layer
// from it (ExecGraph's reads: without them, its own backward; the model passes a dead output
// to a backward that does not read it, whose slot may hold another buffer by then); the
// gradient w.r.t. an output from its last reader's backward to its own, and a temporary for
// each other reader at that reader's backward. Units: elements of the activations' type (float32,
// or bfloat16 under --precision bf16; the buffer is of that type), each buffer starting on a
// multiple of 128 of them.
struct ArenaLayout {
  std::vector<int64_t> out_offset;   // per executed layer: its output in forward
  std::vector<int64_t> back_offset;  // ... back for backward (-1: kept at out_offset)
  std::vector<int64_t> grad_offset;  // dL/d(its output) (-1 for the last layer: the loss's)
  // Per executed layer, per input: the temporary its backward writes that input's gradient to
  // (-1: none, it writes the input's gradient itself, or the input is the step's).
  std::vector<std::vector<int64_t>> temp_offset;
  std::vector<int> back_at;          // the position it is brought back at (-1: kept)
  // Offloaded: the first position at which a buffer sharing its forward slot's memory starts
  // (the copy out must be done by then; -1: none does).
  std::vector<int> reuse_at;
  int64_t elements = 0;              // the buffer's size
};
// The executed layers as a graph: each one's inputs (indices among the executed layers, -1:
// the step's input) and whether its backward brings them back (LayerMem::restores_inputs).
// Empty: a chain, each layer reading the one before and bringing it back. reads_input,
// reads_output (optional, one per executed layer): whether its backward reads its inputs' data
// (a pool finding its argmax again does) and its own output's (BackwardNeeds); given, an output
// is held to its last use (a backward that reads it, a recomputation that reads it, or where
// it is brought back) rather than to its own backward: a concatenation's output, or a
// convolution's whose next layer folds its activation, is free before their backward.
struct ExecGraph {
  std::vector<std::vector<int>> inputs;
  std::vector<char> restores_inputs;
  std::vector<char> reads_input, reads_output;
};
// out_elems[k], where[k]: executed layer k's output size and placement (the last one Keep).
// Optionally, from the plan (SavedPlan): dropped_after[k], the position an offloaded output's
// forward slot is kept through (its copy out still running: at least its last reader's
// forward), and back_at[k], where it is brought back (at most where the model itself would, at
// least the start of backward); empty or -1: as early as the model allows.
ArenaLayout layout_arena(const std::vector<int64_t>& out_elems, const std::vector<Placement>& where,
                         const std::vector<int>& dropped_after = {},
                         const std::vector<int>& back_at = {}, const ExecGraph& graph = {});

// The description of one training step of `model` on input `in` (the rows each forward sees)
// in training mode at `precision` (the context's: bf16 makes the activations, their gradients
// and what the layers keep in their type 2-byte and adds the weights' bf16 copy and the casts
// at the model's edges; fp32 and tf32 are float32 throughout); opt (nullable) gives the
// optimizer state; batch_rows (0: in's rows) the rows of the whole batch on the device. Layer
// times are estimated from FLOPs at gflops_per_s when no measurement is at hand (fwd = flops /
// rate, bwd = 2x that), plus, where device_gb_s > 0, reading the layer's weights (forward
// once; backward reads them and reads and writes their gradient); the caller may overwrite
// them with measured ones. batch_copies: the batch's copies on the device (2 on the GPU where
// the step shell overlaps the batch's copy with the step before: its staging buffers and the
// step's own, train/step_shell.h; else 1). gpu_sms, conv_policy: the multiprocessors of the
// GPU planned for (the device's on a GPU) and the run's --conv-algo: the convolutions'
// workspace depends on them (Layer::backward_needs, PlanFor). as_run: the layers' kept buffers as
// they ran (PlanFor::as_run), after the algorithms were chosen. cudnn_least: PlanFor's (the
// device's cuDNN, for convolutions forced to it).
StepMem describe_step(Model& model, const Shape& in, Optimizer* opt, double gflops_per_s,
                      int64_t batch_rows = 0, double device_gb_s = 0,
                      Precision precision = Precision::Fp32, int batch_copies = 1,
                      int gpu_sms = kPlanGpuSms, const std::string& conv_policy = "auto",
                      bool as_run = false, const CudnnLeastFn& cudnn_least = {});

}  // namespace pdnn
