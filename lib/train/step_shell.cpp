// StepShell (step_shell.h).
#include "train/step_shell.h"

#include <string>

#include "core/cuda_state.h"
#include "core/error.h"

namespace pdnn {

namespace {
// A captureless function: a MemoryRole over it allocates nothing per step (the name is made
// only when an allocation fails).
std::string training_batch_role() { return "the training batch"; }
}  // namespace

const Tensor& stage_tensor(Context& ctx, const Tensor& src, DType t, Device dev, Tensor& buf) {
  if (dev == Device::CPU && src.device() == Device::CPU) return src;
  buf.resize(src.shape(), t, dev, ctx);
  copy_into(buf, src, ctx);
  return buf;
}

// The overlapped copy's stream and events (GPU). The ordering, step k+1 staged while step k's
// graph is queued or running on the compute stream (one staging buffer per host tensor):
//   copy stream:    wait(read) -> host -> staging_i (each tensor) -> record(copied) [fence]
//   compute stream: ... step k ... wait(copied) -> staging_i -> buf_i -> record(read) -> step k+1
// - A host copy never overwrites staging data still to be read: it waits for `read`, recorded
//   after the device copies of step k, which the host queued (in stage() of step k) before
//   this copy; so it waits for those copies only, not for step k, and runs beside step k.
//   Two staging buffers would let it start earlier, before step k's device copies, which run
//   at the start of step k anyway: nothing more would overlap. A staging buffer newly
//   allocated (the first step, a larger batch) may be memory the caching allocator handed back
//   while queued compute still uses it (the allocator orders reuse on the compute stream
//   only): `read` is then recorded anew at the compute stream's tail, and that copy waits for
//   all the compute queued before it (no overlap on that step).
// - A device copy never reads a staging buffer before its host copy ran (it waits for
//   `copied`), and never overwrites buf_ while step k reads it: both are on the compute stream,
//   in order (step k, then step k+1's copies).
// - The host refills its buffer only after the host copies out of it ran: the fence is
//   recorded on the copy stream after them and run() waits for it (CopyFence), as before; a
//   staging buffer is freed (resized) only in stage(), after that fence, and its last reader is
//   on the compute stream, which the allocator's reuse follows.
// The device copies are queued in stage(), not captured in the step's graph: a capture may not
// wait on an event recorded outside it, the graph stays the same on both paths, and whatever
// the task queues between stage() and run() reads the batch as on the serial path. They cost
// one copy of the batch on the device (W4's 38.5 MB read and written: ~25 us at ~3 TB/s) and a
// launch per tensor, against the host copy they hide (W4: 0.7-1.5 ms at 25-54 GB/s).
struct StepShell::CopyLane {
  CUstream_st* stream = nullptr;
  CUevent_st *copied = nullptr, *read = nullptr;
  CopyLane() {
    stream = cuda_stream_create();
    copied = cuda_event_create();
    read = cuda_event_create();
  }
  ~CopyLane() {
    cuda_event_destroy(copied);
    cuda_event_destroy(read);
    cuda_stream_destroy(stream);
  }
  CopyLane(const CopyLane&) = delete;
  CopyLane& operator=(const CopyLane&) = delete;
};

StepShell::StepShell(std::vector<Optimizer*> opts, const char* what, bool cuda_graph,
                     bool overlap_copy)
    : use_graph_(cuda_graph), overlap_copy_(overlap_copy), graph_(std::move(opts), what) {}

void StepShell::stage(Context& ctx, Device dev, std::initializer_list<Input> batch) {
  PDNN_CHECK(batch.size() >= 1, "step shell: an empty batch");
  fence_.wait();  // (a step that failed part way left its fence)
  if (buf_.size() < batch.size()) buf_.resize(batch.size());
  use_.resize(batch.size());
  bool from_host = false;
  for (const Input& in : batch) from_host = from_host || in.src->device() == Device::CPU;
  MemoryRole role(ctx, std::function<std::string()>(training_batch_role));
  if (dev == Device::CUDA && from_host && overlap_copy_) {
    stage_overlapped(ctx, batch);
    return;
  }
  size_t i = 0;
  for (const Input& in : batch) {
    use_[i] = &stage_tensor(ctx, *in.src, in.dtype, dev, buf_[i]);
    ++i;
  }
  if (dev == Device::CUDA && from_host) fence_.record(ctx);
}

void StepShell::stage_overlapped(Context& ctx, std::initializer_list<Input> batch) {
  if (staging_.size() < batch.size()) staging_.resize(batch.size());
  if (!lane_) lane_ = std::make_shared<CopyLane>();
  CUstream_st* compute = ctx.cuda().stream();
  bool fresh = false;
  size_t i = 0;
  for (const Input& in : batch) {  // sizes first: a new block before any copy is queued
    buf_[i].resize(in.src->shape(), in.dtype, Device::CUDA, ctx);
    if (in.src->device() == Device::CPU) {
      Tensor& s = staging_[i];
      const void* before = s.empty() ? nullptr : s.raw_data();
      s.resize(in.src->shape(), in.dtype, Device::CUDA, ctx);
      fresh = fresh || s.raw_data() != before;
    }
    use_[i] = &buf_[i];
    ++i;
  }
  if (fresh) cuda_event_record_on(lane_->read, compute);
  cuda_stream_wait_event(lane_->stream, lane_->read);
  i = 0;
  for (const Input& in : batch) {
    const Tensor& src = *in.src;
    PDNN_CHECK(src.dtype() == in.dtype, "step shell: batch tensor %zu is %s, the step reads %s",
               i, dtype_name(src.dtype()), dtype_name(in.dtype));
    if (src.device() == Device::CPU && src.nbytes() > 0) {
      cuda_copy(staging_[i].raw_data(), Device::CUDA, src.raw_data(), Device::CPU, src.nbytes(),
                lane_->stream, false);
      ctx.count_transfer(Device::CUDA, Device::CPU, src.nbytes());
    }
    ++i;
  }
  cuda_event_record_on(lane_->copied, lane_->stream);
  fence_.record(lane_->stream);
  cuda_stream_wait_event(compute, lane_->copied);
  i = 0;
  for (const Input& in : batch) {  // a tensor already on the device: as on the serial path
    copy_into(buf_[i], in.src->device() == Device::CPU ? staging_[i] : *in.src, ctx);
    ++i;
  }
  cuda_event_record_on(lane_->read, compute);
}

void StepShell::run(Context& ctx, const std::function<void()>& step, bool eager) {
  struct WaitOnError {  // a step that throws still lets the host refill its buffer only after
    CopyFence& f;       // the copies out of it have run
    ~WaitOnError() {
      try {
        f.wait();
      } catch (...) {  // already unwinding from the error that matters
      }
    }
  } wait_on_error{fence_};
  const Tensor& x = batch(0);
  if (x.device() == Device::CUDA && use_graph_ && !eager && !ctx.profile_hook()) {
    // The shard's place in the batch is part of the captured step (its dropout masks and
    // noise draws).
    const Rng::RowShard& shard = ctx.rng().row_shard();
    graph_.run(ctx, StepGraph::Key(x.shape(), shard.row0, shard.total), step);
  } else {
    step();  // the CPU, cuda_graph off, a step not to capture, a profiled run
  }
  fence_.wait();
}

Tensor StepShell::batch_rows(size_t i, int64_t row0, int64_t rows) const {
  const Tensor& t = batch(i);
  return t.slice(row0 * (t.numel() / t.shape(0)), t.shape().with_n(rows));
}

void StepShell::save_rng(Context& ctx, bool gpu) {
  rng_start_ = ctx.rng().counter();
  if (gpu) {
    if (rng_start_dev_.empty())
      rng_start_dev_ = Tensor::empty(Shape{1}, DType::I64, Device::CUDA, ctx);
    copy_into(rng_start_dev_, ctx.device_rng_counter(), ctx);
  }
}

void StepShell::rewind_rng(Context& ctx, bool gpu) {
  ctx.rewind_rng(rng_start_);
  if (gpu) copy_into(ctx.device_rng_counter(), rng_start_dev_, ctx);
}

}  // namespace pdnn
