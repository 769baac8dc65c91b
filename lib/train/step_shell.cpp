// StepShell (step_shell.h).
#include "train/step_shell.h"

#include <string>

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

StepShell::StepShell(std::vector<Optimizer*> opts, const char* what, bool cuda_graph)
    : use_graph_(cuda_graph), graph_(std::move(opts), what) {}

void StepShell::stage(Context& ctx, Device dev, std::initializer_list<Input> batch) {
  PDNN_CHECK(batch.size() >= 1, "step shell: an empty batch");
  fence_.wait();  // (a step that failed part way left its fence)
  if (buf_.size() < batch.size()) buf_.resize(batch.size());
  use_.resize(batch.size());
  bool from_host = false;
  {
    MemoryRole role(ctx, std::function<std::string()>(training_batch_role));
    size_t i = 0;
    for (const Input& in : batch) {
      use_[i] = &stage_tensor(ctx, *in.src, in.dtype, dev, buf_[i]);
      from_host = from_host || in.src->device() == Device::CPU;
      ++i;
    }
  }
  if (dev == Device::CUDA && from_host) fence_.record(ctx);
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
