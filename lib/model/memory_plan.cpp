// The memory planner (memory_plan.h): a lifetime walk over the step's positions, a timeline of
// the compute stream and the two copy directions, and a greedy choice per layer.
#include "model/memory_plan.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>

#include "core/error.h"
#include "model/sequential.h"
#include "optim/optimizer.h"

namespace pdnn {

const char* placement_name(Placement p) {
  switch (p) {
    case Placement::Keep: return "device";
    case Placement::Offload: return "host";
    case Placement::Recompute: return "recompute";
  }
  return "?";
}

namespace {

// The executed layers and what their backward passes read, independent of any choice.
struct Walk {
  const StepMem& m;
  std::vector<int> exec;  // indices into m.layers of the layers not fused into the one before
  int L = 0;
  explicit Walk(const StepMem& mem) : m(mem) {
    for (size_t i = 0; i < m.layers.size(); ++i)
      if (!m.layers[i].absorbed) exec.push_back(static_cast<int>(i));
    L = static_cast<int>(exec.size());
  }
  const LayerMem& at(int k) const { return m.layers[static_cast<size_t>(exec[static_cast<size_t>(k)])]; }
  int fwd(int k) const { return k; }
  int bwd(int k) const { return 2 * L - 1 - k; }
};

// One layer's pieces of memory under a choice of placements and a timeline.
struct Choice {
  std::vector<Placement> where;
};

struct Sim {
  std::vector<SavedPlan> saved;
  std::vector<int64_t> live;
  std::vector<double> start, end;
  double step_ms = 0;
  int64_t peak_live = 0, host = 0;
  int peak_pos = 0;
};

// Backward positions that read layer k's output: its own backward with a fused activation
// (and the last layer's, whose logits the loss reads), the next layer's when it reads x.
std::vector<int> own_out_uses(const Walk& w, int k) {
  std::vector<int> uses;
  if (w.at(k).bwd_reads_output || k == w.L - 1) uses.push_back(w.bwd(k));
  if (k + 1 < w.L && w.at(k + 1).bwd_reads_input) uses.push_back(w.bwd(k + 1));
  return uses;
}

// The first backward position that needs layer k's output (-1: none): where a recomputed
// layer is made again.
int own_first_use(const Walk& w, int k) {
  int first = -1;
  for (int u : own_out_uses(w, k)) first = first < 0 ? u : std::min(first, u);
  return first;
}

// Adds `bytes` to live over [a, b].
void add_range(std::vector<int64_t>& live, int a, int b, int64_t bytes) {
  for (int p = std::max(a, 0); p <= b && p < static_cast<int>(live.size()); ++p)
    live[static_cast<size_t>(p)] += bytes;
}

double copy_ms(int64_t bytes, double gb_s) { return static_cast<double>(bytes) / (gb_s * 1e6); }

// Uses and sizes of what each layer keeps under choice c (the input of a recomputed layer is
// read again where that layer is made again).
void fill_uses(const Walk& w, const Choice& c, Sim& s, std::vector<int>& out_last) {
  for (int k = 0; k < w.L; ++k) {
    SavedPlan& sp = s.saved[static_cast<size_t>(k)];
    const LayerMem& l = w.at(k);
    std::vector<int> uses = own_out_uses(w, k);
    if (k + 1 < w.L && c.where[static_cast<size_t>(k + 1)] == Placement::Recompute)
      uses.push_back(own_first_use(w, k + 1));
    out_last[static_cast<size_t>(k)] = uses.empty() ? -1 : *std::max_element(uses.begin(), uses.end());
    sp.layer = w.exec[static_cast<size_t>(k)];
    sp.where = c.where[static_cast<size_t>(k)];
    sp.last_fwd_use = k + 1 < w.L ? w.fwd(k + 1) : w.fwd(k);
    sp.saved_bytes = uses.empty() ? 0 : l.out_bytes;
    sp.first_bwd_use = uses.empty() ? -1 : *std::min_element(uses.begin(), uses.end());
    sp.last_bwd_use = uses.empty() ? -1 : *std::max_element(uses.begin(), uses.end());
  }
}

// Prefetch issue positions, from a timeline without stalls (est[p]: start of position p): the
// latest position from which the copy, queued behind the earlier ones, lands before the use.
void schedule_prefetch(const Walk& w, const Choice& c, const PlanOptions& o,
                       const std::vector<double>& est, const std::vector<int>& order, Sim& s) {
  double d2h_busy = 0, h2d_busy = 0;
  std::vector<double> d2h_done(static_cast<size_t>(w.L), 0.0);
  for (int k = 0; k < w.L; ++k)
    if (c.where[static_cast<size_t>(k)] == Placement::Offload) {
      d2h_busy = std::max(d2h_busy, est[static_cast<size_t>(k) + 1]) +
                 copy_ms(s.saved[static_cast<size_t>(k)].saved_bytes, o.d2h_gb_s);
      d2h_done[static_cast<size_t>(k)] = d2h_busy;
    }
  for (int k : order) {
    SavedPlan& sp = s.saved[static_cast<size_t>(k)];
    const double need = est[static_cast<size_t>(sp.first_bwd_use)];
    const double t = copy_ms(sp.saved_bytes, o.h2d_gb_s);
    auto done_from = [&](int q) {
      return std::max({est[static_cast<size_t>(q)], h2d_busy, d2h_done[static_cast<size_t>(k)]}) + t;
    };
    int q = sp.first_bwd_use - 1;
    while (q > sp.last_fwd_use + 1 && done_from(q) > need) --q;
    sp.back_at = q;
    h2d_busy = done_from(q);
  }
}

// Bytes on the device at each position for layer k's output and gradient (its scratch is the
// layer's own for the whole run: fixed).
void add_layer_memory(const Walk& w, const std::vector<int>& out_last,
                      const std::vector<double>& d2h_done, int k, Sim& s) {
  SavedPlan& sp = s.saved[static_cast<size_t>(k)];
  const int P = 2 * w.L;
  const int64_t ob = w.at(k).out_bytes;
  const bool needed = out_last[static_cast<size_t>(k)] >= 0;
  const int last_out = needed ? out_last[static_cast<size_t>(k)] : sp.last_fwd_use;
  // dL/d(output of k): written by the next layer's backward, read by k's (the last layer's is
  // the loss's own buffer).
  if (k + 1 < w.L) add_range(s.live, w.bwd(k + 1), w.bwd(k), ob);
  if (sp.where == Placement::Keep || !needed) {
    add_range(s.live, k, std::max(last_out, sp.last_fwd_use), ob);
    return;
  }
  if (sp.where == Placement::Recompute) {
    sp.dropped_after = sp.last_fwd_use;
    sp.back_at = sp.first_bwd_use;
    add_range(s.live, k, sp.last_fwd_use, ob);
    add_range(s.live, sp.back_at, last_out, ob);
    return;
  }
  // Offload: on the device until its copy out is done (through the position it finishes in;
  // a later buffer there waits for that copy), and again from the prefetch's issue on.
  int gone = sp.last_fwd_use;
  for (int p = 0; p < P; ++p)
    if (s.start[static_cast<size_t>(p)] < d2h_done[static_cast<size_t>(k)]) gone = std::max(gone, p);
  sp.dropped_after = gone;
  s.host += sp.saved_bytes;
  if (sp.back_at <= gone + 1) {  // never really leaves
    sp.back_at = gone + 1;
    add_range(s.live, k, last_out, ob);
    return;
  }
  add_range(s.live, k, gone, ob);
  add_range(s.live, sp.back_at, last_out, ob);
}

Sim simulate(const Walk& w, const Choice& c, const PlanOptions& o) {
  const int L = w.L, P = 2 * L;
  Sim s;
  s.saved.resize(static_cast<size_t>(L));
  s.live.assign(static_cast<size_t>(P), 0);
  std::vector<int> out_last(static_cast<size_t>(L), -1);  // last backward use of the output
  fill_uses(w, c, s, out_last);
  std::vector<double> cost(static_cast<size_t>(P), 0.0);
  for (int k = 0; k < L; ++k) {
    cost[static_cast<size_t>(w.fwd(k))] += w.at(k).fwd_ms;
    cost[static_cast<size_t>(w.bwd(k))] += w.at(k).bwd_ms;
    if (c.where[static_cast<size_t>(k)] == Placement::Recompute)
      cost[static_cast<size_t>(s.saved[static_cast<size_t>(k)].first_bwd_use)] += w.at(k).fwd_ms;
  }
  std::vector<double> est(static_cast<size_t>(P) + 1, 0.0);
  for (int p = 0; p < P; ++p)
    est[static_cast<size_t>(p) + 1] = est[static_cast<size_t>(p)] + cost[static_cast<size_t>(p)];
  std::vector<int> order;  // offloaded layers in the order their backward needs them
  for (int k = 0; k < L; ++k)
    if (c.where[static_cast<size_t>(k)] == Placement::Offload) order.push_back(k);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return s.saved[static_cast<size_t>(a)].first_bwd_use < s.saved[static_cast<size_t>(b)].first_bwd_use;
  });
  schedule_prefetch(w, c, o, est, order, s);
  // The timeline with stalls: a backward waits for its prefetches (an event, no host sync).
  s.start.assign(static_cast<size_t>(P), 0.0);
  s.end.assign(static_cast<size_t>(P), 0.0);
  std::vector<double> d2h_done(static_cast<size_t>(L), 0.0), h2d_done(static_cast<size_t>(L), 0.0);
  double t = 0, d2h_busy = 0, h2d_busy = 0;
  for (int p = 0; p < P; ++p) {
    for (int k : order)
      if (s.saved[static_cast<size_t>(k)].first_bwd_use == p) t = std::max(t, h2d_done[static_cast<size_t>(k)]);
    s.start[static_cast<size_t>(p)] = t;
    for (int k : order)
      if (s.saved[static_cast<size_t>(k)].back_at == p) {
        h2d_busy = std::max({t, h2d_busy, d2h_done[static_cast<size_t>(k)]}) +
                   copy_ms(s.saved[static_cast<size_t>(k)].saved_bytes, o.h2d_gb_s);
        h2d_done[static_cast<size_t>(k)] = h2d_busy;
      }
    t += cost[static_cast<size_t>(p)];
    s.end[static_cast<size_t>(p)] = t;
    if (p < L && c.where[static_cast<size_t>(p)] == Placement::Offload) {
      d2h_busy = std::max(d2h_busy, t) + copy_ms(s.saved[static_cast<size_t>(p)].saved_bytes, o.d2h_gb_s);
      d2h_done[static_cast<size_t>(p)] = d2h_busy;
    }
  }
  s.step_ms = t + w.m.update_ms;
  for (int k = 0; k < L; ++k) add_layer_memory(w, out_last, d2h_done, k, s);
  for (int p = 0; p < P; ++p)
    if (s.live[static_cast<size_t>(p)] > s.peak_live)
      s.peak_live = s.live[static_cast<size_t>(p)], s.peak_pos = p;
  return s;
}

int64_t excess(const Sim& s, int64_t fixed, int64_t limit) {
  int64_t e = 0;
  for (int64_t v : s.live) e += std::max<int64_t>(0, fixed + v - limit);
  return e;
}

// Whether layer k may take placement p: something to gain (a gap between its last forward use
// and its first backward use) and, for recomputation, a cheap layer whose input is not itself
// recomputed (no chains: its input must be on the device when it is made again).
bool allowed(const Walk& w, const Choice& c, const Sim& s, int k, Placement p) {
  const SavedPlan& sp = s.saved[static_cast<size_t>(k)];
  if (p == Placement::Keep) return true;
  if (sp.saved_bytes <= 0 || sp.first_bwd_use < 0 || sp.first_bwd_use <= sp.last_fwd_use + 1)
    return false;
  if (p == Placement::Offload) return true;
  if (!w.at(k).recomputable) return false;
  if (k > 0 && c.where[static_cast<size_t>(k - 1)] == Placement::Recompute) return false;
  if (k + 1 < w.L && c.where[static_cast<size_t>(k + 1)] == Placement::Recompute) return false;
  return true;
}

// Every layer that can leave the device does: recomputed where allowed (prefer_recompute),
// else offloaded. The floor under which no plan of this kind goes.
Choice release_all(const Walk& w, const PlanOptions& o, bool prefer_recompute) {
  Choice c{std::vector<Placement>(static_cast<size_t>(w.L), Placement::Keep)};
  for (int k = 0; k < w.L; ++k) {
    const Sim s = simulate(w, c, o);
    if (prefer_recompute && allowed(w, c, s, k, Placement::Recompute))
      c.where[static_cast<size_t>(k)] = Placement::Recompute;
    else if (allowed(w, c, s, k, Placement::Offload))
      c.where[static_cast<size_t>(k)] = Placement::Offload;
  }
  return c;
}

int64_t fixed_bytes(const StepMem& m) {
  int64_t f = m.input_bytes + m.loss_bytes, ws = 0;
  for (const LayerMem& l : m.layers) {
    f += l.param_bytes + l.grad_bytes + l.opt_state_bytes + l.scratch_bytes;
    ws = std::max(ws, l.workspace_bytes);
  }
  return f + ws;
}

// The executor without a plan (Sequential): every output for the whole step (the layers'
// scratch is in the fixed bytes), and two gradient buffers that grow to the largest dx each
// has held.
int64_t keep_all(const Walk& w) {
  int64_t b = 0, g[2] = {0, 0};
  for (int k = 0; k < w.L; ++k) b += w.at(k).out_bytes;
  int gi = -1;
  for (int k = w.L - 1; k >= 1; --k) {
    const int di = gi == 0 ? 1 : 0;
    g[di] = std::max(g[di], w.at(k - 1).out_bytes);
    gi = di;
  }
  return b + g[0] + g[1];
}

}  // namespace

namespace {

void check_description(const StepMem& m, const PlanOptions& o) {
  PDNN_CHECK(o.h2d_gb_s > 0 && o.d2h_gb_s > 0 && std::isfinite(o.h2d_gb_s) && std::isfinite(o.d2h_gb_s),
             "memory plan: host-device bandwidth %g / %g GB/s must be positive", o.h2d_gb_s,
             o.d2h_gb_s);
  PDNN_CHECK(o.limit_bytes >= 0, "memory plan: negative limit");
  PDNN_CHECK(!m.layers.empty() && !m.layers.front().absorbed,
             "memory plan: a step needs layers, the first not fused into another");
  for (const LayerMem& l : m.layers)
    PDNN_CHECK(l.out_bytes >= 0 && l.scratch_bytes >= 0 && l.workspace_bytes >= 0 &&
                   l.fwd_ms >= 0 && l.bwd_ms >= 0,
               "memory plan: layer %d (%s) has a negative size or time", l.index, l.name.c_str());
}

// The plan's fields from a simulation of choice c.
MemoryPlan make_plan(const Walk& w, const Sim& s, const PlanOptions& o) {
  MemoryPlan plan;
  plan.positions = 2 * w.L;
  plan.fixed_bytes = fixed_bytes(w.m);
  plan.keep_all_bytes = plan.fixed_bytes + keep_all(w);
  for (int k = 0; k < w.L; ++k) plan.compute_ms += w.at(k).fwd_ms + w.at(k).bwd_ms;
  plan.compute_ms += w.m.update_ms;
  plan.saved = s.saved;
  plan.live_bytes = s.live;
  plan.peak_bytes = plan.fixed_bytes + s.peak_live;
  plan.peak_position = s.peak_pos;
  plan.host_bytes = s.host;
  plan.step_ms = s.step_ms;
  plan.fits = o.limit_bytes == 0 || plan.peak_bytes <= o.limit_bytes;
  int64_t floor = plan.peak_bytes;
  for (bool rec : {false, true})
    floor = std::min(floor, plan.fixed_bytes + simulate(w, release_all(w, o, rec), o).peak_live);
  plan.min_limit_bytes = floor;
  return plan;
}

}  // namespace

MemoryPlan simulate_plan(const StepMem& m, const std::vector<Placement>& where,
                         const PlanOptions& o) {
  check_description(m, o);
  const Walk w(m);
  PDNN_CHECK(static_cast<int>(where.size()) == w.L,
             "memory plan: %zu placements for %d executed layers", where.size(), w.L);
  Choice c{where};
  Choice check{std::vector<Placement>(static_cast<size_t>(w.L), Placement::Keep)};
  for (int k = 0; k < w.L; ++k) {
    const Placement p = where[static_cast<size_t>(k)];
    PDNN_CHECK(allowed(w, check, simulate(w, check, o), k, p),
               "memory plan: layer %d (%s) cannot be placed '%s'", w.at(k).index,
               w.at(k).name.c_str(), placement_name(p));
    check.where[static_cast<size_t>(k)] = p;
  }
  return make_plan(w, simulate(w, c, o), o);
}

MemoryPlan plan_memory(const StepMem& m, const PlanOptions& o) {
  check_description(m, o);
  const Walk w(m);
  const int64_t fixed = fixed_bytes(m);
  Choice c{std::vector<Placement>(static_cast<size_t>(w.L), Placement::Keep)};
  Sim s = simulate(w, c, o);
  if (o.limit_bytes > 0) {
    // Greedy: the choice that removes the most bytes over the limit per millisecond it adds.
    int64_t e = excess(s, fixed, o.limit_bytes);
    while (e > 0) {
      int best_k = -1;
      Placement best_p = Placement::Keep;
      double best_score = std::numeric_limits<double>::infinity();
      int64_t best_gain = 0;
      for (int k = 0; k < w.L; ++k) {
        if (c.where[static_cast<size_t>(k)] != Placement::Keep) continue;
        for (Placement p : {Placement::Recompute, Placement::Offload}) {
          if (!allowed(w, c, s, k, p)) continue;
          Choice t = c;
          t.where[static_cast<size_t>(k)] = p;
          const Sim ts = simulate(w, t, o);
          const int64_t gain = e - excess(ts, fixed, o.limit_bytes);
          if (gain <= 0) continue;
          const double score =
              (std::max(0.0, ts.step_ms - s.step_ms) + 1e-9) / static_cast<double>(gain);
          if (score < best_score || (score == best_score && gain > best_gain))
            best_k = k, best_p = p, best_score = score, best_gain = gain;
        }
      }
      if (best_k < 0) break;
      c.where[static_cast<size_t>(best_k)] = best_p;
      s = simulate(w, c, o);
      e = excess(s, fixed, o.limit_bytes);
    }
    // Greedy can miss what releasing everything reaches (a peak that only falls when two
    // layers leave together): then start from that; when nothing fits, report the lowest peak.
    for (bool rec : {true, false}) {
      if (e == 0) break;
      const Choice all = release_all(w, o, rec);
      const Sim as = simulate(w, all, o);
      const int64_t ae = excess(as, fixed, o.limit_bytes);
      if (ae == 0 || as.peak_live < s.peak_live) c = all, s = as, e = ae;
    }
    // Undo choices the final plan does without (a later choice may have made one needless).
    if (e == 0)
      for (int k = w.L - 1; k >= 0; --k) {
        if (c.where[static_cast<size_t>(k)] == Placement::Keep) continue;
        Choice t = c;
        t.where[static_cast<size_t>(k)] = Placement::Keep;
        const Sim ts = simulate(w, t, o);
        if (excess(ts, fixed, o.limit_bytes) == 0 && ts.step_ms <= s.step_ms) c = t, s = ts;
      }
  }
  return make_plan(w, s, o);
}

void require_fits(const MemoryPlan& p, const PlanOptions& o, const char* flag) {
  if (p.fits) return;
  PDNN_FAIL("%s %s: the training step does not fit; the smallest limit it fits under is %s "
            "(fixed: %s of parameters, gradients, optimizer state, the layers' own buffers, batch "
            "and workspace; the "
            "rest is what the layers at the tightest point need at once): raise %s, or lower "
            "--batch or --size",
            flag, format_bytes(o.limit_bytes).c_str(), format_bytes(p.min_limit_bytes).c_str(),
            format_bytes(p.fixed_bytes).c_str(), flag);
}

std::string memory_size_problem(const std::string& text, int64_t* bytes) {
  const char* s = text.c_str();
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s, &end);
  if (text.empty() || end == s || !std::isdigit(static_cast<unsigned char>(text[0])))
    return "'" + text + "' is not a size (a number with K, M, G or T, e.g. 20G)";
  const std::string unit(end);
  double mult = 1;
  if (!unit.empty()) {
    const std::string rest = unit.substr(1);
    const char u = static_cast<char>(std::toupper(static_cast<unsigned char>(unit[0])));
    const char* units = "KMGT";
    const char* at = std::strchr(units, u);
    if (at == nullptr || u == '\0' || !(rest.empty() || rest == "iB" || rest == "ib" || rest == "IB"))
      return "'" + text + "': unknown unit '" + unit +
             "' (K, M, G or T, powers of 1024, optionally as KiB..TiB; not KB/GB, which would "
             "be ambiguous)";
    for (const char* c = units; c <= at; ++c) mult *= 1024.0;
  }
  const double b = v * mult;
  if (!std::isfinite(b) || errno == ERANGE || b < 1 || b >= 9.2e18)
    return "'" + text + "' must be a positive size below 8 EiB";
  if (bytes) *bytes = static_cast<int64_t>(std::llround(b));
  return "";
}

int64_t parse_memory_size(const std::string& text, const char* flag) {
  int64_t bytes = 0;
  const std::string problem = memory_size_problem(text, &bytes);
  if (!problem.empty()) PDNN_FAIL("%s %s", flag, problem.c_str());
  return bytes;
}

std::string format_bytes(int64_t b) {
  const double v = static_cast<double>(b);
  if (b >= (int64_t{1} << 30)) return strprintf("%.2f GiB", v / (1 << 30));
  if (b >= (int64_t{1} << 20)) return strprintf("%.1f MiB", v / (1 << 20));
  if (b >= 1024) return strprintf("%.1f KiB", v / 1024);
  return strprintf("%lld B", static_cast<long long>(b));
}

std::string position_name(const StepMem& m, const MemoryPlan& p, int pos) {
  const Walk w(m);
  if (pos < 0 || pos >= p.positions) return "-";
  const int k = pos < w.L ? pos : 2 * w.L - 1 - pos;
  return strprintf("%s %d", pos < w.L ? "fwd" : "bwd", w.at(k).index);
}

std::string format_plan(const StepMem& m, const MemoryPlan& p, const PlanOptions& o) {
  const Walk w(m);
  std::string out = strprintf("%-3s %-40s %11s %11s  %-16s %-9s %-9s %s\n", "#", "layer", "output",
                              "kept", "read by", "lives", "dropped", "back at");
  size_t k = 0;
  for (const LayerMem& l : m.layers) {
    if (l.absorbed) {
      out += strprintf("%-3d %-40s (fused into the layer before)\n", l.index, l.name.c_str());
      continue;
    }
    const SavedPlan& sp = p.saved[k++];
    std::string reads;
    if (sp.first_bwd_use >= 0)
      reads = position_name(m, p, sp.first_bwd_use) +
              (sp.last_bwd_use != sp.first_bwd_use ? ".." + position_name(m, p, sp.last_bwd_use).substr(4) : "");
    const bool moved = sp.where != Placement::Keep;
    out += strprintf("%-3d %-40s %11s %11s  %-16s %-9s %-9s %s\n", l.index, l.name.c_str(),
                     format_bytes(l.out_bytes).c_str(), format_bytes(sp.saved_bytes).c_str(),
                     reads.empty() ? "-" : reads.c_str(), placement_name(sp.where),
                     moved ? position_name(m, p, sp.dropped_after).c_str() : "-",
                     moved ? position_name(m, p, sp.back_at).c_str() : "-");
  }
  int64_t params = 0, grads = 0, state = 0, ws = 0, scratch = 0;
  for (const LayerMem& l : m.layers) {
    params += l.param_bytes, grads += l.grad_bytes, state += l.opt_state_bytes;
    scratch += l.scratch_bytes;
    ws = std::max(ws, l.workspace_bytes);
  }
  out += strprintf("fixed %s: parameters %s, gradients %s, optimizer state %s, layers' own "
                   "(argmax, masks) %s, workspace %s, batch %s, loss %s\n",
                   format_bytes(p.fixed_bytes).c_str(), format_bytes(params).c_str(),
                   format_bytes(grads).c_str(), format_bytes(state).c_str(),
                   format_bytes(scratch).c_str(), format_bytes(ws).c_str(),
                   format_bytes(m.input_bytes).c_str(), format_bytes(m.loss_bytes).c_str());
  out += strprintf("peak %s at %s (limit %s); every buffer kept all step: %s; smallest limit "
                   "possible: %s; pinned host: %s\n",
                   format_bytes(p.peak_bytes).c_str(), position_name(m, p, p.peak_position).c_str(),
                   o.limit_bytes > 0 ? format_bytes(o.limit_bytes).c_str() : "none",
                   format_bytes(p.keep_all_bytes).c_str(), format_bytes(p.min_limit_bytes).c_str(),
                   format_bytes(p.host_bytes).c_str());
  out += strprintf("predicted step %.1f ms (compute %.1f ms; recomputation and copy stalls add "
                   "%.1f ms; bandwidth %.1f GB/s to the device, %.1f GB/s back)%s\n",
                   p.step_ms, p.compute_ms, p.step_ms - p.compute_ms, o.h2d_gb_s, o.d2h_gb_s,
                   p.fits ? "" : "; DOES NOT FIT");
  return out;
}

namespace {

struct Interval {
  int64_t floats;
  int start, end;  // positions, inclusive
  int64_t* offset;
};

// First fit by decreasing size: each buffer at the lowest offset where it overlaps, in memory,
// no buffer placed before it that it overlaps in time.
int64_t pack(std::vector<Interval>& v) {
  std::stable_sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) {
    return a.floats > b.floats;
  });
  int64_t top = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    std::vector<std::pair<int64_t, int64_t>> used;  // [offset, end) of time-overlapping ones
    for (size_t j = 0; j < i; ++j)
      if (v[j].start <= v[i].end && v[i].start <= v[j].end)
        used.emplace_back(*v[j].offset, *v[j].offset + v[j].floats);
    std::sort(used.begin(), used.end());
    int64_t at = 0;
    for (const auto& u : used) {
      if (u.first >= at + v[i].floats) break;
      at = std::max(at, u.second);
    }
    *v[i].offset = at;
    top = std::max(top, at + v[i].floats);
  }
  return top;
}

}  // namespace

ArenaLayout layout_arena(const std::vector<int64_t>& out_floats, const std::vector<Placement>& where,
                         const std::vector<int>& dropped_after, const std::vector<int>& back_at) {
  const int L = static_cast<int>(out_floats.size());
  PDNN_CHECK(L > 0 && where.size() == out_floats.size() && where.back() == Placement::Keep,
             "arena layout: %zu placements for %d layers, the last must be kept", where.size(), L);
  auto bwd = [L](int k) { return 2 * L - 1 - k; };
  ArenaLayout a;
  a.out_offset.assign(static_cast<size_t>(L), 0);
  a.back_offset.assign(static_cast<size_t>(L), -1);
  a.grad_offset.assign(static_cast<size_t>(L), -1);
  a.back_at.assign(static_cast<size_t>(L), -1);
  // Where each output comes back: the backward of layer i brings back i and i-1, a recomputed
  // one its input first (Sequential::restore_output).
  std::vector<char> present(static_cast<size_t>(L));
  for (int k = 0; k < L; ++k) present[static_cast<size_t>(k)] = where[static_cast<size_t>(k)] == Placement::Keep;
  std::function<void(int, int)> restore = [&](int k, int pos) {
    if (present[static_cast<size_t>(k)]) return;
    if (where[static_cast<size_t>(k)] == Placement::Recompute && k > 0) restore(k - 1, pos);
    a.back_at[static_cast<size_t>(k)] = pos;
    present[static_cast<size_t>(k)] = 1;
  };
  for (int i = L - 1; i >= 0; --i) {
    restore(i, bwd(i));
    if (i > 0) restore(i - 1, bwd(i));
  }
  auto given = [](const std::vector<int>& v, int k) {
    return k < static_cast<int>(v.size()) ? v[static_cast<size_t>(k)] : -1;
  };
  std::vector<int> fwd_end(static_cast<size_t>(L));
  for (int k = 0; k < L; ++k) {
    const size_t u = static_cast<size_t>(k);
    fwd_end[u] = where[u] == Placement::Keep ? (k == L - 1 ? 2 * L : bwd(k)) : k + 1;
    if (where[u] == Placement::Offload) {
      fwd_end[u] = std::max(fwd_end[u], std::min(given(dropped_after, k), 2 * L - 1));
      // A prefetch issued earlier than the model's own restore overlaps with compute.
      const int b = given(back_at, k);
      if (b >= 0) a.back_at[u] = std::min(a.back_at[u], std::max(b, L));
    }
  }
  constexpr int64_t kAlign = 128;  // 512 bytes, as the caching allocator's blocks
  auto round = [](int64_t n) { return (std::max<int64_t>(n, 1) + kAlign - 1) / kAlign * kAlign; };
  std::vector<Interval> v;
  for (int k = 0; k < L; ++k) {
    const size_t u = static_cast<size_t>(k);
    const int64_t f = round(out_floats[u]);
    if (where[u] == Placement::Keep) {
      v.push_back({f, k, fwd_end[u], &a.out_offset[u]});
    } else {
      v.push_back({f, k, fwd_end[u], &a.out_offset[u]});
      a.back_offset[u] = 0;
      v.push_back({f, a.back_at[u], bwd(k), &a.back_offset[u]});
    }
    if (k > 0) {
      a.grad_offset[u] = 0;
      v.push_back({round(out_floats[u - 1]), bwd(k), bwd(k - 1), &a.grad_offset[u]});
    }
  }
  a.floats = pack(v);
  a.reuse_at.assign(static_cast<size_t>(L), -1);
  for (int k = 0; k < L; ++k) {
    const size_t u = static_cast<size_t>(k);
    if (where[u] != Placement::Offload) continue;
    const int64_t lo = a.out_offset[u], hi = lo + round(out_floats[u]);
    for (const Interval& x : v)
      if (x.start > fwd_end[u] && *x.offset < hi && lo < *x.offset + x.floats &&
          (a.reuse_at[u] < 0 || x.start < a.reuse_at[u]))
        a.reuse_at[u] = x.start;
  }
  return a;
}

StepMem describe_step(Sequential& model, const Shape& in, Optimizer* opt, double gflops_per_s) {
  PDNN_CHECK(gflops_per_s > 0 && std::isfinite(gflops_per_s),
             "memory plan: compute rate %g GFLOP/s must be positive", gflops_per_s);
  model.prepare_fusion();
  // The optimizer keeps state_bytes per parameter byte (AdaGrad 1, Adam 2).
  double state_per_byte = 0;
  if (opt) {
    int64_t state = 0, params = 0;
    for (const auto& kv : opt->state()) state += kv.second->numel();
    for (const Param& p : model.params()) params += p.value->numel();
    state_per_byte = params > 0 ? static_cast<double>(state) / static_cast<double>(params) : 0.0;
  }
  StepMem m;
  Shape s = in;
  for (size_t i = 0; i < model.size(); ++i) {
    Layer& l = model.layer(i);
    LayerMem lm;
    lm.index = static_cast<int>(i);
    lm.name = l.describe();
    lm.absorbed = model.absorbed(i);
    const Shape out = l.output_shape(s);
    lm.out_shape = out.str();
    lm.out_bytes = lm.absorbed ? 0 : out.numel() * static_cast<int64_t>(sizeof(float));
    for (const Param& p : l.params()) lm.param_bytes += p.value->numel() * static_cast<int64_t>(sizeof(float));
    lm.grad_bytes = lm.param_bytes;
    lm.opt_state_bytes = static_cast<int64_t>(std::llround(state_per_byte * static_cast<double>(lm.param_bytes)));
    if (!lm.absorbed) {
      const BackwardNeeds b = l.backward_needs(s);
      lm.bwd_reads_input = b.input;
      lm.bwd_reads_output = b.output;
      lm.scratch_bytes = b.scratch_bytes;
      lm.recomputable = b.recomputable;
      lm.workspace_bytes = b.workspace_bytes;
      lm.argmax_bytes = b.argmax_bytes;
      lm.fwd_ms = l.flops(s) / (gflops_per_s * 1e6);
      lm.bwd_ms = 2 * lm.fwd_ms;
    }
    m.layers.push_back(lm);
    s = out;
  }
  const int64_t f = static_cast<int64_t>(sizeof(float));
  m.input_bytes = in.numel() * f + in.n() * static_cast<int64_t>(sizeof(int32_t));
  m.loss_bytes = 2 * s.numel() * f + 64;  // dL/dlogits and the loss's per-row values; metrics
  return m;
}

}  // namespace pdnn
