// Optimizer base: the step count on the device, state placement (offloaded state included),
// state views.
#include "optim/optimizer.h"

#include <algorithm>
#include <cstring>

#include "core/cuda_state.h"
#include "core/error.h"
#include "core/profile_hook.h"
#include "ops/basic.h"

namespace pdnn {

const char* offload_mode_name(OffloadMode m) { return m == OffloadMode::Stream ? "stream" : "host"; }

// What the offloaded updates need besides the state: chunk buffers (the streamed update's on
// the device, the host update's in pinned memory), and on the GPU three streams beside the
// compute stream (copies in, the update itself, copies out) with their events; per chunk of
// the host update, the job its host function runs.
struct Optimizer::Lane {
  int64_t chunk = 0;
  std::vector<Tensor> stage[2];  // Stream: per slot, a chunk of state (ping-pong)
  Tensor hg[2], hw[2];           // Host: a chunk of gradients and of weights (ping-pong)
  Tensor step_host;              // Host: the step count, copied out before the first chunk
  struct Job {
    Optimizer* opt;
    Context* ctx;
    int64_t lo, len, at;  // the flat stretch, and where its state is in the host buffers
    int b;                // its chunk buffers
  };
  std::vector<Job> jobs;             // Host: every chunk of every offloaded stretch, in order
  std::vector<size_t> first_job;     // per host segment: its first job
  size_t next = 0;                   // chunks issued this step (ping-pong and waits)
  std::string error;                 // a host job's failure, reported by the next step()
  // GPU only.
  CUstream_st *in = nullptr, *work = nullptr, *out = nullptr;
  CUevent_st *ready = nullptr, *fin = nullptr;
  CUevent_st *copied_in[2] = {}, *worked[2] = {}, *freed[2] = {};
  bool gpu = false;
  ~Lane() {
    if (!gpu) return;
    for (CUevent_st* e : {ready, fin, copied_in[0], copied_in[1], worked[0], worked[1], freed[0], freed[1]})
      cuda_event_destroy(e);
    for (CUstream_st* s : {in, work, out}) cuda_stream_destroy(s);
  }
};

Optimizer::~Optimizer() = default;

Tensor Optimizer::state_like(float v) const {
  PDNN_CHECK(ps_.built(), "optimizer: the parameters are not gathered yet (ParamSet::build)");
  // Zeros (most state) come from the allocator as they are: at W4's 1344 px writing them
  // touched 14.8 GB of host memory, and on a GPU run the state moves to the device anyway.
  if (v == 0.f) return Tensor::zeros(ps_.values().shape());
  Tensor t(ps_.values().shape());
  t.fill(v);
  return t;
}

void Optimizer::update(Context& ctx, const Tensor& step) {
  std::vector<Tensor> st;
  for (auto& [name, t] : slots())
    if (!t->empty()) st.push_back(*t);
  update_views(ctx, step, ps_.grads(), ps_.values(), st);
}

void Optimizer::update_views(Context&, const Tensor&, const Tensor&, Tensor&, std::vector<Tensor>&) {
  PDNN_FAIL("optimizer %s: cannot update a part of its buffers (its state cannot be offloaded)",
            kind().c_str());
}

void Optimizer::advance(Context& ctx) {
  const Device dev = ps_.device();
  if (!step_synced_ || step_.empty() || step_.device() != dev) {
    Tensor host(Shape{1}, DType::I64);
    host.data<int64_t>()[0] = steps_;
    MemoryRole role(ctx, "the optimizer's step count");
    step_ = dev == Device::CPU ? host : host.to(dev, ctx);
    step_synced_ = true;
  }
  ops::counter_add(ctx, step_, 1);
  ++steps_;
}

void Optimizer::step(Context& ctx) {
  ProfileHook* prof = ctx.profile_hook();
  if (prof) prof->begin_pass(ctx);
  const Device dev = ps_.device();
  for (auto& [name, t] : slots()) {
    if (t->empty() || t->device() == dev) continue;
    PDNN_CHECK(!placed_, "optimizer %s: the parameters moved to %s after the memory plan placed "
               "the state", kind().c_str(), device_name(dev));
    MemoryRole role(ctx, strprintf("optimizer state (%s: %s)", kind().c_str(), name));
    *t = t->to(dev, ctx);
  }
  if (lane_ && !lane_->error.empty()) PDNN_FAIL("%s", lane_->error.c_str());
  if (!advanced_) advance(ctx);
  advanced_ = false;
  if (host_segs_.empty()) {
    update(ctx, step_);
  } else {
    const auto sl = slots();
    for (const Segment& s : dev_segs_) {
      const int64_t len = s.hi - s.lo;
      std::vector<Tensor> st;
      for (auto& [name, t] : sl)
        if (!t->empty()) st.push_back(t->slice(s.at, Shape{len}));
      Tensor w = ps_.values().slice(s.lo, Shape{len});
      update_views(ctx, step_, ps_.grads().slice(s.lo, Shape{len}), w, st);
    }
    for (size_t s = 0; s < host_segs_.size(); ++s)
      if (!issued_[s]) update_offloaded(ctx, s);
    if (lane_->gpu) cuda_stream_wait_event(ctx.cuda().stream(), lane_->fin);  // joins a capture too
    std::fill(issued_.begin(), issued_.end(), 0);
    lane_->next = 0;
  }
  if (prof) prof->end_update(ctx, label_, kind());
}

void Optimizer::begin_backward(Context& ctx) {
  if (host_segs_.empty()) return;
  if (!advanced_) advance(ctx);
  advanced_ = true;
  std::fill(issued_.begin(), issued_.end(), 0);
  lane_->next = 0;
}

void Optimizer::grads_ready(Context& ctx, size_t layer) {
  if (!advanced_) return;  // no begin_backward: step() updates everything
  for (size_t s = 0; s < host_segs_.size(); ++s)
    if (!issued_[s] && static_cast<size_t>(seg_layer_[s]) == layer) update_offloaded(ctx, s);
}

StateList Optimizer::state() {
  StateList out;
  views_.clear();
  const auto s = slots();
  const std::vector<Param>& ps = ps_.params();
  views_.reserve(ps.size() * s.size());
  for (size_t i = 0; i < ps.size(); ++i) {
    const int64_t at = ps_.offset(i);
    size_t slot = 0;
    for (const auto& [name, flat] : s) {
      if (flat->empty()) continue;
      const Tensor* buf = flat;
      int64_t pos = at;
      if (placed_) {  // the stretch holding it, on the device or the host
        bool found = false;
        for (const Segment& g : dev_segs_)
          if (at >= g.lo && at < g.hi) pos = g.at + at - g.lo, found = true;
        for (const Segment& g : host_segs_)
          if (!found && at >= g.lo && at < g.hi) buf = &host_state_[slot], pos = g.at + at - g.lo;
      }
      views_.push_back(buf->slice(pos, ps[i].value->shape()));
      out.emplace_back(std::to_string(i) + "." + name, &views_.back());
      ++slot;
    }
  }
  return out;
}

int64_t Optimizer::host_state_bytes() const {
  int64_t b = 0;
  for (const Tensor& t : host_state_) b += t.empty() ? 0 : static_cast<int64_t>(t.nbytes());
  return b;
}

int64_t Optimizer::staging_bytes() const {
  int64_t b = 0;
  if (lane_ && lane_->gpu)
    for (const auto& v : lane_->stage)
      for (const Tensor& t : v) b += static_cast<int64_t>(t.nbytes());
  return b;
}

void Optimizer::place_state(Context& ctx, const StateOffload* offload) {
  PDNN_CHECK(ps_.built(), "optimizer: the parameters are not gathered yet (ParamSet::build)");
  const Device dev = ps_.device();
  const int64_t n = ps_.values().numel();
  const size_t np = ps_.params().size();
  std::vector<char> host(np, 0);
  if (offload)
    for (int i : offload->params) {
      PDNN_CHECK(i >= 0 && static_cast<size_t>(i) < np,
                 "optimizer: offloaded parameter %d of %zu", i, np);
      host[static_cast<size_t>(i)] = 1;
    }
  // The flat buffers in stretches, each wholly on the device or the host (a parameter's
  // stretch runs to the next one's start: the padding goes with it).
  dev_segs_.clear();
  host_segs_.clear();
  seg_layer_.clear();
  int64_t n_dev = 0, n_host = 0;
  for (size_t i = 0; i < np; ++i) {
    const int64_t lo = i == 0 ? 0 : ps_.offset(i), hi = i + 1 < np ? ps_.offset(i + 1) : n;
    std::vector<Segment>& v = host[i] ? host_segs_ : dev_segs_;
    int64_t& used = host[i] ? n_host : n_dev;
    const int layer = offload && i < offload->param_layers.size()
                          ? static_cast<int>(offload->param_layers[i]) : 0;
    if (!v.empty() && v.back().hi == lo) {
      v.back().hi = hi;
      if (host[i]) seg_layer_.back() = std::min(seg_layer_.back(), layer);
    } else {
      v.push_back(Segment{lo, hi, used});
      if (host[i]) seg_layer_.push_back(layer);
    }
    used += hi - lo;
  }
  if (np == 0) dev_segs_.push_back(Segment{0, n, 0}), n_dev = n;
  // The state: the device's stretches back to back on the device, the others on the host.
  host_state_.clear();
  for (auto& [name, t] : slots()) {
    if (t->empty()) {
      host_state_.emplace_back();
      continue;
    }
    const Tensor full = t->device() == Device::CPU ? *t : t->to(Device::CPU, ctx);
    MemoryRole role(ctx, strprintf("optimizer state (%s: %s)", kind().c_str(), name));
    Tensor d = Tensor::empty(Shape{std::max<int64_t>(n_dev, 1)}, DType::F32, dev, ctx);
    for (const Segment& s : dev_segs_) {
      Tensor dst = d.slice(s.at, Shape{s.hi - s.lo});
      copy_into(dst, full.slice(s.lo, Shape{s.hi - s.lo}), ctx);
    }
    Tensor h;
    if (n_host > 0) {
      h = Tensor(Shape{n_host}, DType::F32, dev == Device::CPU ? host_allocator() : ctx.staging_allocator());
      for (const Segment& s : host_segs_)
        std::memcpy(h.data() + s.at, full.data() + s.lo, static_cast<size_t>(s.hi - s.lo) * sizeof(float));
    }
    *t = d;
    host_state_.push_back(h);
  }
  placed_ = true;
  issued_.assign(host_segs_.size(), 0);
  lane_.reset();
  if (host_segs_.empty()) return;
  PDNN_CHECK(updates_in_parts(), "optimizer %s: cannot update a part of its buffers (its state "
             "cannot be offloaded)", kind().c_str());
  offload_ = *offload;
  auto lane = std::make_shared<Lane>();
  int64_t longest = 0;
  for (const Segment& s : host_segs_) longest = std::max(longest, s.hi - s.lo);
  lane->chunk = std::min(longest, std::max<int64_t>(16, (offload_.chunk_floats + 15) / 16 * 16));
  lane->gpu = dev == Device::CUDA;
  const bool stream = offload_.mode == OffloadMode::Stream;
  MemoryRole role(ctx, "the offloaded update's chunk buffers");
  if (stream) {
    for (auto& v : lane->stage)
      for (auto& [name, t] : slots())
        v.push_back(t->empty() ? Tensor() : Tensor::empty(Shape{lane->chunk}, DType::F32, dev, ctx));
  } else {
    for (int b = 0; b < 2; ++b) {
      lane->hg[b] = Tensor(Shape{lane->chunk}, DType::F32, ctx.staging_allocator());
      lane->hw[b] = Tensor(Shape{lane->chunk}, DType::F32, ctx.staging_allocator());
    }
    lane->step_host = Tensor(Shape{1}, DType::I64, ctx.staging_allocator());
    int b = 0;
    for (const Segment& s : host_segs_) {
      lane->first_job.push_back(lane->jobs.size());
      for (int64_t c = 0; c < s.hi - s.lo; c += lane->chunk, b ^= 1)
        lane->jobs.push_back(Lane::Job{this, &ctx, s.lo + c, std::min(lane->chunk, s.hi - s.lo - c),
                                       s.at + c, b});
    }
  }
  if (lane->gpu) {
    lane->in = cuda_stream_create();
    lane->work = cuda_stream_create();
    lane->out = cuda_stream_create();
    lane->ready = cuda_event_create();
    lane->fin = cuda_event_create();
    for (int b = 0; b < 2; ++b) {
      lane->copied_in[b] = cuda_event_create();
      lane->worked[b] = cuda_event_create();
      lane->freed[b] = cuda_event_create();
    }
  }
  lane_ = std::move(lane);
}

// One offloaded stretch's update, queued (GPU: on the lane's streams, after the compute
// stream's work so far, which made its gradients; CPU: done now), chunk by chunk, two chunks
// in flight.
void Optimizer::update_offloaded(Context& ctx, size_t seg) {
  issued_[seg] = 1;
  Lane& L = *lane_;
  const Segment& s = host_segs_[seg];
  const auto sl = slots();
  const bool stream = offload_.mode == OffloadMode::Stream;
  const size_t f = sizeof(float);
  if (L.gpu) {
    cuda_event_record_on(L.ready, ctx.cuda().stream());
    cuda_stream_wait_event(stream ? L.in : L.out, L.ready);
  }
  if (!stream && L.gpu) {  // the host update reads the step count from host memory
    cuda_copy(L.step_host.raw_data(), Device::CPU, step_.raw_data(), Device::CUDA, sizeof(int64_t),
              L.out, false);
  }
  size_t job = stream ? 0 : L.first_job[seg];
  for (int64_t c = 0; c < s.hi - s.lo; c += L.chunk, ++L.next, ++job) {
    const int64_t m = std::min(L.chunk, s.hi - s.lo - c), lo = s.lo + c, at = s.at + c;
    const int b = static_cast<int>(L.next % 2);
    Tensor g = ps_.grads().slice(lo, Shape{m}), w = ps_.values().slice(lo, Shape{m});
    if (stream) {
      // State in, the device's update, state out; chunk buffer b again once its last copy out
      // is done.
      if (L.gpu && L.next >= 2) cuda_stream_wait_event(L.in, L.freed[b]);
      std::vector<Tensor> st;
      size_t j = 0;
      for (auto& [name, t] : sl) {
        if (!t->empty()) {
          Tensor dst = L.stage[b][j].slice(0, Shape{m});
          const Tensor src = host_state_[j].slice(at, Shape{m});
          if (L.gpu) {
            cuda_copy(dst.raw_data(), Device::CUDA, src.raw_data(), Device::CPU, m * f, L.in, false);
            ctx.count_transfer(Device::CUDA, Device::CPU, m * f);
          } else {
            std::memcpy(dst.data(), src.data(), m * f);
          }
          st.push_back(dst);
        }
        ++j;
      }
      if (L.gpu) {
        cuda_event_record_on(L.copied_in[b], L.in);
        cuda_stream_wait_event(L.work, L.copied_in[b]);
        ctx.set_work_stream(L.work);
        try {
          update_views(ctx, step_, g, w, st);
        } catch (...) {
          ctx.set_work_stream(nullptr);
          throw;
        }
        ctx.set_work_stream(nullptr);
        cuda_event_record_on(L.worked[b], L.work);
        cuda_stream_wait_event(L.out, L.worked[b]);
      } else {
        update_views(ctx, step_, g, w, st);
      }
      j = 0;
      for (auto& [name, t] : sl) {
        if (!t->empty()) {
          Tensor dst = host_state_[j].slice(at, Shape{m});
          if (L.gpu) {
            cuda_copy(dst.raw_data(), Device::CPU, L.stage[b][j].raw_data(), Device::CUDA, m * f,
                      L.out, false);
            ctx.count_transfer(Device::CPU, Device::CUDA, m * f);
          } else {
            std::memcpy(dst.data(), L.stage[b][j].data(), m * f);
          }
        }
        ++j;
      }
      if (L.gpu) cuda_event_record_on(L.freed[b], L.out);
    } else if (L.gpu) {
      // Gradients and weights out, the host's update (a host function on the work stream), the
      // weights back in.
      if (L.next >= 2) cuda_stream_wait_event(L.out, L.freed[b]);
      L.jobs[job].b = b;  // issued in the same order every step: a replay reads the same
      cuda_copy(L.hg[b].raw_data(), Device::CPU, g.raw_data(), Device::CUDA, m * f, L.out, false);
      cuda_copy(L.hw[b].raw_data(), Device::CPU, w.raw_data(), Device::CUDA, m * f, L.out, false);
      ctx.count_transfer(Device::CPU, Device::CUDA, 2 * m * f);
      cuda_event_record_on(L.copied_in[b], L.out);
      cuda_stream_wait_event(L.work, L.copied_in[b]);
      cuda_launch_host_func(L.work, &Optimizer::host_job, &L.jobs[job]);
      cuda_event_record_on(L.worked[b], L.work);
      cuda_stream_wait_event(L.in, L.worked[b]);
      cuda_copy(w.raw_data(), Device::CUDA, L.hw[b].raw_data(), Device::CPU, m * f, L.in, false);
      ctx.count_transfer(Device::CUDA, Device::CPU, m * f);
      cuda_event_record_on(L.freed[b], L.in);
    } else {
      // The model on the CPU: the host update on the parameters themselves.
      std::vector<Tensor> st;
      size_t j = 0;
      for (auto& [name, t] : sl) {
        if (!t->empty()) st.push_back(host_state_[j].slice(at, Shape{m}));
        ++j;
      }
      update_views(ctx, step_, g, w, st);
    }
  }
  if (L.gpu) cuda_event_record_on(L.fin, stream ? L.out : L.in);
}

void Optimizer::host_job(void* arg) {
  auto* j = static_cast<Lane::Job*>(arg);
  j->opt->update_host_chunk(static_cast<size_t>(j - j->opt->lane_->jobs.data()));
}

// Runs on a driver thread (a host function of the work stream): no CUDA calls, no throwing.
void Optimizer::update_host_chunk(size_t index) {
  Lane& L = *lane_;
  const Lane::Job& j = L.jobs[index];
  try {
    std::vector<Tensor> st;
    size_t k = 0;
    for (auto& [name, t] : slots()) {
      if (!t->empty()) st.push_back(host_state_[k].slice(j.at, Shape{j.len}));
      ++k;
    }
    Tensor w = L.hw[j.b].slice(0, Shape{j.len});
    update_views(*j.ctx, L.step_host, L.hg[j.b].slice(0, Shape{j.len}), w, st);
  } catch (const std::exception& e) {
    if (L.error.empty()) L.error = std::string("optimizer: the host's update of offloaded state failed: ") + e.what();
  }
}

}  // namespace pdnn
