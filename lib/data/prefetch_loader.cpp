// PrefetchLoader (see prefetch_loader.h). One mutex guards the hand-over state; the packing
// itself runs unlocked into a slot that only the background thread touches until it is
// published in ready_.
#include "data/prefetch_loader.h"

#include <chrono>

#include "core/error.h"

namespace pdnn {
namespace {

double seconds_between(std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

PrefetchLoader::PrefetchLoader(const Dataset& data, const LoaderOptions& opt, int depth,
                               BatchAllocator allocate)
    : data_(data), opt_(opt) {
  PDNN_CHECK(depth >= 1, "prefetch loader: depth %d must be >= 1", depth);
  PDNN_CHECK(opt.threads >= 1, "prefetch loader: %d threads (need at least 1)", opt.threads);
  plan_ = std::make_shared<const EpochPlan>(data, opt, 0);  // checks the options
  const Shape s = data.sample_shape();
  const Shape full{opt.batch, s[0], s[1], s[2]};
  const Shape ts = data.target_shape();
  PDNN_CHECK(ts.rank() == 0 || ts.rank() == 2,
             "prefetch loader: target shape %s, expected (H,W) or none", ts.str().c_str());
  const Shape full_target = ts.rank() == 2 ? Shape{opt.batch, ts[0], ts[1]} : Shape{};
  auto slot_tensor = [&](const Shape& shape, DType type) {
    Tensor t = allocate ? allocate(shape, type) : Tensor(shape, type);
    PDNN_CHECK(t.shape() == shape && t.dtype() == type,
               "prefetch loader: the allocator gave %s %s for %s %s", dtype_name(t.dtype()),
               t.shape().str().c_str(), dtype_name(type), shape.str().c_str());
    return t;
  };
  slots_.resize(static_cast<size_t>(depth) + 1);
  for (size_t k = 0; k < slots_.size(); ++k) {
    slots_[k].x = slot_tensor(full, DType::F32);
    if (ts.rank() == 2) slots_[k].target = slot_tensor(full_target, DType::I32);
    slots_[k].y.reserve(static_cast<size_t>(opt.batch));
    free_.push_back(static_cast<int>(k));
  }
  thread_ = std::thread([this] { run(); });
}

PrefetchLoader::~PrefetchLoader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void PrefetchLoader::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || (next_fill_ < plan_->num_batches() && !free_.empty()); });
    if (stop_) return;
    const int slot = free_.back();
    free_.pop_back();
    const int64_t b = next_fill_++;
    const uint64_t gen = generation_;
    const std::shared_ptr<const EpochPlan> plan = plan_;
    lock.unlock();

    Batch& batch = slots_[static_cast<size_t>(slot)];
    std::exception_ptr error;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      load_batch(data_, opt_, *plan, b, batch.x, batch.y, &batch.target);
      batch.epoch = plan->epoch();
      batch.index = b;
      batch.batch_rows = plan->batch_rows(b);
    } catch (...) {
      error = std::current_exception();
    }
    const double took = seconds_between(t0, std::chrono::steady_clock::now());

    lock.lock();
    if (gen != generation_) {  // start_epoch came in meanwhile: drop it
      free_.push_back(slot);
      continue;
    }
    stats_.prepare_s += took;
    if (error) {
      failed_[b] = error;
      free_.push_back(slot);
    } else {
      ready_[b] = slot;
    }
    cv_.notify_all();
  }
}

void PrefetchLoader::start_epoch(int64_t epoch) {
  auto plan = std::make_shared<const EpochPlan>(data_, opt_, epoch);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++generation_;
    plan_ = std::move(plan);
    next_fill_ = next_take_ = 0;
    for (const auto& [b, slot] : ready_) free_.push_back(slot);
    ready_.clear();
    failed_.clear();
    if (held_ >= 0) free_.push_back(held_);
    held_ = -1;
  }
  cv_.notify_all();
}

int64_t PrefetchLoader::epoch() const {
  std::lock_guard<std::mutex> lock(mu_);
  return plan_->epoch();
}

int64_t PrefetchLoader::num_batches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return plan_->num_batches();
}

int64_t PrefetchLoader::images_per_epoch() const {
  std::lock_guard<std::mutex> lock(mu_);
  return plan_->images();
}

bool PrefetchLoader::has_next() const {
  std::lock_guard<std::mutex> lock(mu_);
  return next_take_ < plan_->num_batches();
}

const Batch& PrefetchLoader::next() {
  std::unique_lock<std::mutex> lock(mu_);
  if (held_ >= 0) {
    free_.push_back(held_);
    held_ = -1;
    cv_.notify_all();
  }
  PDNN_CHECK(next_take_ < plan_->num_batches(),
             "prefetch loader: epoch %lld has %lld batches, all taken (call start_epoch)",
             static_cast<long long>(plan_->epoch()),
             static_cast<long long>(plan_->num_batches()));
  const int64_t b = next_take_;
  const auto t0 = std::chrono::steady_clock::now();
  cv_.wait(lock, [&] { return ready_.count(b) > 0 || failed_.count(b) > 0; });
  stats_.wait_s += seconds_between(t0, std::chrono::steady_clock::now());
  ++next_take_;
  const auto f = failed_.find(b);
  if (f != failed_.end()) {
    const std::exception_ptr error = f->second;
    failed_.erase(f);
    std::rethrow_exception(error);
  }
  const auto r = ready_.find(b);
  held_ = r->second;
  ready_.erase(r);
  ++stats_.batches;
  return slots_[static_cast<size_t>(held_)];
}

LoaderStats PrefetchLoader::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void PrefetchLoader::reset_stats() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_ = LoaderStats{};
}

}  // namespace pdnn
