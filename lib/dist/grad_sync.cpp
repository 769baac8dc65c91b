// GradSync (grad_sync.h): buckets, the CPU communication thread, NCCL launches.
#include "dist/grad_sync.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "core/cuda_state.h"

namespace pdnn {

namespace {
using Clock = std::chrono::steady_clock;
double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
constexpr double kFirstBucketMb = 1.0;  // DDP's first bucket
}  // namespace

// The CPU communication thread: sums the spans it is given, in order, one at a time.
struct GradSync::Worker {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<float*, int64_t>> queue;
  int64_t busy = 0;  // queued or in progress
  bool stop = false;
  std::exception_ptr error;
  double comm_ms = 0;
  std::thread thread;

  explicit Worker(Communicator& comm) {
    thread = std::thread([this, &comm] {
      std::unique_lock<std::mutex> lock(mu);
      for (;;) {
        cv.wait(lock, [this] { return stop || !queue.empty(); });
        if (stop) return;
        const auto job = queue.front();
        queue.pop_front();
        lock.unlock();
        const auto t0 = Clock::now();
        std::exception_ptr e;
        try {
          comm.sum(job.first, job.second, "the gradient all-reduce");
        } catch (...) {
          e = std::current_exception();
        }
        const double ms = ms_between(t0, Clock::now());
        lock.lock();
        comm_ms += ms;
        if (e && !error) error = e;
        --busy;
        cv.notify_all();
      }
    });
  }
  ~Worker() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    thread.join();
  }
  void push(float* p, int64_t n) {
    {
      std::lock_guard<std::mutex> lock(mu);
      queue.emplace_back(p, n);
      ++busy;
    }
    cv.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [this] { return busy == 0; });
    if (error) {
      std::exception_ptr e = error;
      error = nullptr;
      std::rethrow_exception(e);
    }
  }
};

std::vector<GradSync::Bucket> GradSync::plan(Model& model, double bucket_mb, bool overlap) {
  ParamSet& ps = model.parameters();
  // Each layer's span of the flat buffer: from its first parameter to the next layer's first
  // (the padding between parameters goes with the layer before it).
  const std::vector<size_t> owner = model.param_layers();
  struct Span {
    size_t layer;
    int64_t begin, end;
  };
  std::vector<Span> spans;
  for (size_t i = 0; i < owner.size(); ++i)
    if (spans.empty() || spans.back().layer != owner[i]) {
      if (!spans.empty()) spans.back().end = ps.offset(i);
      spans.push_back({owner[i], ps.offset(i), ps.numel()});
    }
  if (spans.empty()) return {};
  if (!overlap) return {Bucket{spans.front().layer, spans.back().layer, 0, ps.numel()}};
  // Reverse layer order, a bucket closed when it reaches its cap (DDP's rule).
  std::vector<Bucket> out;
  const double cap = bucket_mb * 1e6;
  Bucket cur;
  bool open = false;
  for (size_t k = spans.size(); k-- > 0;) {
    const Span& s = spans[k];
    if (!open) {
      cur = Bucket{s.layer, s.layer, s.begin, 0};
      open = true;
    }
    cur.first_layer = s.layer;
    cur.count += s.end - s.begin;
    cur.offset = s.begin;
    const double limit = out.empty() ? std::min(kFirstBucketMb * 1e6, cap) : cap;
    if (static_cast<double>(cur.count) * 4.0 >= limit) {
      out.push_back(cur);
      open = false;
    }
  }
  if (open) out.push_back(cur);
  return out;
}

GradSync::GradSync(Communicator& comm, Model& model, Context& ctx)
    : comm_(comm), model_(model), overlap_(comm.options().overlap) {
  ParamSet& ps = model.parameters();
  PDNN_CHECK(ps.numel() > 0, "--distributed: the model has no parameters to train");
  grads_ = ps.grads();
  PDNN_CHECK(grads_.device() == Device::CPU || comm.device_open(),
             "--distributed: gradients on %s but NCCL is not open (Communicator::open_device)",
             device_name(grads_.device()));
  buckets_ = plan(model, comm.options().bucket_mb, overlap_);
  if (!overlap_) return;
  if (grads_.device() == Device::CPU) worker_ = std::make_unique<Worker>(comm);
  model_.set_backward_hook([this](Context& c, size_t layer) { layer_done(c, layer); });
  (void)ctx;
}

GradSync::~GradSync() {
  if (overlap_) model_.set_backward_hook(nullptr);
}

int64_t GradSync::bytes_per_step() const {
  int64_t n = 0;
  for (const Bucket& b : buckets_) n += b.count;
  return n * 4;
}

std::string GradSync::describe(const char* overlapped_with) const {
  if (!overlap_)
    return strprintf("one all-reduce of %.2f MB after backward", bytes_per_step() / 1e6);
  std::string sizes;
  for (const Bucket& b : buckets_)
    sizes += strprintf("%s%.2f", sizes.empty() ? "" : ", ", b.count * 4 / 1e6);
  return strprintf("%zu bucket%s (%s MB), overlapped with %s", buckets_.size(),
                   buckets_.size() == 1 ? "" : "s", sizes.c_str(), overlapped_with);
}

GradSync::Stats GradSync::stats() const {
  Stats s = stats_;
  if (worker_) {
    std::lock_guard<std::mutex> lock(worker_->mu);
    s.comm_ms = worker_->comm_ms;
  }
  return s;
}

void GradSync::begin(Context& ctx) {
  (void)ctx;
  next_ = 0;
  armed_ = true;
}

void GradSync::layer_done(Context& ctx, size_t layer) {
  if (!armed_) return;  // a backward outside a training step (tests, a GAN's D feeding G)
  while (next_ < buckets_.size() && layer <= buckets_[next_].first_layer) launch(ctx, next_++);
}

void GradSync::launch(Context& ctx, size_t b) {
  const Bucket& k = buckets_[b];
  float* p = grads_.data() + k.offset;
  if (grads_.device() == Device::CPU) {
    if (worker_) {
      worker_->push(p, k.count);
    } else {
      const auto t0 = Clock::now();
      comm_.sum(p, k.count, "the gradient all-reduce");
      stats_.comm_ms += ms_between(t0, Clock::now());
    }
  } else if (overlap_) {
    comm_.device_sum_after(p, k.count, ctx.cuda().stream());
  } else {
    comm_.device_sum(p, k.count, ctx.cuda().stream());
  }
}

void GradSync::start_all(Context& ctx) {
  begin(ctx);
  while (next_ < buckets_.size()) launch(ctx, next_++);
}

void GradSync::finish(Context& ctx) {
  PDNN_CHECK(armed_ || !overlap_, "grad_sync: finish() without begin()");
  while (next_ < buckets_.size()) launch(ctx, next_++);
  armed_ = false;
  ++stats_.steps;
  if (grads_.device() != Device::CPU) {
    if (overlap_) comm_.device_join(ctx.cuda().stream());
    return;
  }
  if (worker_) {
    const auto t0 = Clock::now();
    worker_->wait();
    stats_.wait_ms += ms_between(t0, Clock::now());
  } else {
    stats_.wait_ms = stats_.comm_ms;  // nothing overlapped: all of it was waited for
  }
}

}  // namespace pdnn
