// Per-layer profiler: accumulation, table and CSV.
#include "train/profiler.h"

#include <algorithm>
#include <cstdio>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/cuda_state.h"

namespace pdnn {

TimeMark time_mark(Context& ctx) {
  TimeMark m{std::chrono::steady_clock::now(), nullptr};
  if (ctx.has_cuda()) m.event = cuda_event_record(ctx.cuda().stream());
  return m;
}

double ms_since(Context& ctx, const TimeMark& start) {
  if (start.event) return cuda_event_elapsed_ms(start.event, cuda_event_record(ctx.cuda().stream()));
  const auto d = std::chrono::steady_clock::now() - start.t;
  return std::chrono::duration<double, std::milli>(d).count();
}

void Profiler::begin_step(Context& ctx) {
  PDNN_CHECK(!in_step_, "profiler: begin_step() called twice without end_step()");
  in_step_ = true;
  step_start_ = time_mark(ctx);
}

void Profiler::end_step(Context& ctx) {
  PDNN_CHECK(in_step_, "profiler: end_step() without begin_step()");
  step_total_ms_ += ms_since(ctx, step_start_);
  ++steps_;
  in_step_ = false;
}

double Profiler::step_ms() const { return steps_ > 0 ? step_total_ms_ / steps_ : 0.0; }

void Profiler::reset() {
  entries_.clear();
  index_.clear();
  update_keys_.clear();
  step_total_ms_ = 0;
  steps_ = 0;
  in_step_ = false;
}

Profiler::Entry* Profiler::find(const void* key) {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

void Profiler::begin_pass(Context& ctx) { pass_start_ = time_mark(ctx); }

void Profiler::end_forward(Context& ctx, const ProfiledForward& f) {
  const double ms = ms_since(ctx, pass_start_);
  if (!in_step_) return;
  Entry* e = find(f.key);
  if (!e) {
    index_[f.key] = entries_.size();
    entries_.push_back(Entry{f.label, f.kind, f.describe, f.out});
    e = &entries_.back();
  }
  e->out = f.out;
  e->fwd_ms += ms;
  e->fwd_flops += f.flops;
}

void Profiler::end_backward(Context& ctx, const void* key) {
  const double ms = ms_since(ctx, pass_start_);
  if (!in_step_) return;
  if (Entry* e = find(key)) e->bwd_ms += ms;
}

void Profiler::end_update(Context& ctx, const std::string& label, const std::string& optimizer) {
  const double ms = ms_since(ctx, pass_start_);
  if (!in_step_) return;
  // Keyed by the address of a string this profiler owns, one per label.
  const std::string& key = update_keys_.emplace(label, label).first->second;
  Entry* e = find(&key);
  if (!e) {
    index_[&key] = entries_.size();
    entries_.push_back(Entry{label, "update", optimizer + " (all parameters, fused)", Shape{}});
    e = &entries_.back();
  }
  e->update_ms += ms;
}

std::vector<Profiler::Row> Profiler::rows() const {
  std::vector<Row> out;
  const double steps = static_cast<double>(std::max<int64_t>(steps_, 1));
  const double step = step_ms();
  double in_layers = 0;
  for (const Entry& e : entries_) {
    Row r;
    r.layer = e.label;
    r.kind = e.kind;
    r.describe = e.describe;
    r.output_shape = e.out.str();
    r.fwd_ms = e.fwd_ms / steps;
    r.bwd_ms = e.bwd_ms / steps;
    r.update_ms = e.update_ms / steps;
    const double total = r.fwd_ms + r.bwd_ms + r.update_ms;
    in_layers += total;
    r.share = step > 0 ? total / step : 0.0;
    // ms -> s is 1e-3, FLOP -> GFLOP is 1e-9: GFLOP/s = flops / ms * 1e-6.
    r.gflops = e.bwd_ms > 0 ? 3.0 * e.fwd_flops / (e.fwd_ms + e.bwd_ms) * 1e-6 : 0.0;
    out.push_back(r);
  }
  Row other;
  other.layer = "other";
  other.kind = "other";
  other.describe = "loss, zero_grad, data, overhead";
  other.fwd_ms = std::max(0.0, step - in_layers);
  other.share = step > 0 ? other.fwd_ms / step : 0.0;
  out.push_back(other);
  return out;
}

std::string Profiler::table() const {
  const std::vector<Row> rs = rows();
  size_t wl = 1, wd = 5, ws = 12;
  for (const Row& r : rs) {
    wl = std::max(wl, r.layer.size());
    wd = std::max(wd, r.describe.size());
    ws = std::max(ws, r.output_shape.size());
  }
  std::string s = strprintf("profile: %lld steps, %.3f ms per step (means per step)\n",
                            static_cast<long long>(steps_), step_ms());
  const int il = static_cast<int>(wl), id = static_cast<int>(wd), is = static_cast<int>(ws);
  s += strprintf("%-*s  %-*s  %-*s  %10s  %10s  %10s  %6s  %8s\n", il, "#", id, "layer", is,
                 "output shape", "fwd ms", "bwd ms", "update ms", "share", "GFLOP/s");
  s += std::string(wl + wd + ws + 4 + 3 * 12 + 8 + 10, '-') + "\n";
  double f = 0, b = 0, u = 0, sh = 0;
  for (const Row& r : rs) {
    s += strprintf("%-*s  %-*s  %-*s  %10.3f  %10.3f  %10.3f  %5.1f%%  %8.2f\n", il,
                   r.layer.c_str(), id, r.describe.c_str(), is, r.output_shape.c_str(), r.fwd_ms,
                   r.bwd_ms, r.update_ms, 100.0 * r.share, r.gflops);
    f += r.fwd_ms;
    b += r.bwd_ms;
    u += r.update_ms;
    sh += r.share;
  }
  s += std::string(wl + wd + ws + 4 + 3 * 12 + 8 + 10, '-') + "\n";
  s += strprintf("%-*s  %-*s  %-*s  %10.3f  %10.3f  %10.3f  %5.1f%%\n", il, "total", id, "", is,
                 "", f, b, u, 100.0 * sh);
  return s;
}

void Profiler::write_csv(const std::string& path, int64_t workspace_limit_bytes) const {
  AtomicFile file(path);
  std::ostream& o = file.stream();
  o << "layer,kind,output_shape,fwd_ms,bwd_ms,update_ms,share,gflops,workspace_limit_bytes\n";
  for (const Row& r : rows()) {
    // Shapes contain commas: quote them (RFC 4180).
    o << r.layer << ',' << r.kind << ",\"" << r.output_shape << "\","
      << strprintf("%.6f,%.6f,%.6f,%.6f,%.4f,%lld", r.fwd_ms, r.bwd_ms, r.update_ms, r.share,
                   r.gflops, static_cast<long long>(workspace_limit_bytes))
      << '\n';
  }
  file.commit();
}

}  // namespace pdnn
