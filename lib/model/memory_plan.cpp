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

#include "core/allocator.h"
#include "core/error.h"
#include "core/rng.h"
#include "layers/merge.h"
#include "model/model.h"
#include "ops/loss.h"
#include "optim/optimizer.h"

namespace pdnn {

int64_t least_workspace_bytes(const StepMem& m) {
  int64_t ws = m.workspace_floor;
  for (const LayerMem& l : m.layers) ws = std::max(ws, l.workspace_bytes);
  return ws;
}

const char* placement_name(Placement p) {
  switch (p) {
    case Placement::Keep: return "device";
    case Placement::Offload: return "host";
    case Placement::Recompute: return "recompute";
  }
  return "?";
}

namespace {

// Layer i's inputs as described (the layer before when none are given).
std::vector<int> raw_inputs(const StepMem& m, size_t i) {
  const LayerMem& l = m.layers[i];
  return l.inputs.empty() ? std::vector<int>{static_cast<int>(i) - 1} : l.inputs;
}

// The executed graph of m (indices among the executed layers), given exec_of (per layer: its
// executed index, -1 when fused into its input, whose output it then shares).
ExecGraph exec_graph(const StepMem& m, const std::vector<int>& exec_of) {
  ExecGraph g;
  auto holder = [&](int r) {  // the executed layer whose output layer r's output is
    while (r >= 0 && exec_of[static_cast<size_t>(r)] < 0) r = raw_inputs(m, static_cast<size_t>(r))[0];
    return r < 0 ? -1 : exec_of[static_cast<size_t>(r)];
  };
  for (size_t i = 0; i < m.layers.size(); ++i) {
    if (exec_of[i] < 0) continue;
    std::vector<int> in;
    for (int r : raw_inputs(m, i)) in.push_back(holder(r));
    g.inputs.push_back(std::move(in));
    g.restores_inputs.push_back(m.layers[i].restores_inputs);
    g.reads_input.push_back(m.layers[i].bwd_reads_input);
    g.reads_output.push_back(m.layers[i].bwd_reads_output);
  }
  return g;
}

std::vector<int> exec_indices(const StepMem& m) {
  std::vector<int> exec_of(m.layers.size(), -1);
  int k = 0;
  for (size_t i = 0; i < m.layers.size(); ++i)
    if (!m.layers[i].absorbed) exec_of[i] = k++;
  return exec_of;
}

// The readers of each executed layer's output (increasing), and which inputs' gradients a
// layer's backward writes to a temporary (every reader but the first in backward order, the
// last in forward order, which writes the gradient itself; the step's input has none).
struct Readers {
  std::vector<std::vector<int>> users;
  std::vector<std::vector<char>> temp;
  explicit Readers(const ExecGraph& g) : users(g.inputs.size()), temp(g.inputs.size()) {
    const int L = static_cast<int>(g.inputs.size());
    for (int c = 0; c < L; ++c)
      for (int p : g.inputs[static_cast<size_t>(c)]) {
        if (p < 0) continue;
        std::vector<int>& u = users[static_cast<size_t>(p)];
        if (u.empty() || u.back() != c) u.push_back(c);
      }
    std::vector<char> written(static_cast<size_t>(L), 0);
    for (int c = L - 1; c >= 0; --c)
      for (int p : g.inputs[static_cast<size_t>(c)]) {
        temp[static_cast<size_t>(c)].push_back(p >= 0 && written[static_cast<size_t>(p)]);
        if (p >= 0) written[static_cast<size_t>(p)] = 1;
      }
  }
};

// The executed layers and what their backward passes read, independent of any choice; `micro`
// micro-batches of this description make the step.
struct Walk {
  const StepMem& m;
  std::vector<int> exec;  // indices into m.layers of the layers not fused into the one before
  std::vector<int> param_exec;  // per m.params entry: its layer's executed index
  ExecGraph g;                  // the executed layers' inputs
  std::vector<std::vector<int>> users;  // ... and readers (increasing)
  std::vector<std::vector<char>> temp;  // per input of each: its gradient via a temporary
  int L = 0;
  int micro = 1;
  int64_t param_total = 0;
  std::vector<double> fwd_ms, bwd_ms;  // per executed layer, at the workspace timed_at
  // timed_at: the workspace the layers' times are taken at (a layer whose fastest algorithms
  // ask more runs on those asking the least: its least times where it has them); -1: each
  // layer at its fastest (no limit: the chooser's workspace is not bounded).
  Walk(const StepMem& mem, int micro_batches, int64_t timed_at = -1) : m(mem), micro(micro_batches) {
    const std::vector<int> exec_of = exec_indices(m);
    for (size_t i = 0; i < m.layers.size(); ++i)
      if (exec_of[i] >= 0) exec.push_back(static_cast<int>(i));
    L = static_cast<int>(exec.size());
    for (int k = 0; k < L; ++k) {
      double f = 0, b = 0;
      layer_times_at(at(k), timed_at, &f, &b);
      fwd_ms.push_back(f);
      bwd_ms.push_back(b);
    }
    g = exec_graph(m, exec_of);
    Readers r(g);
    users = std::move(r.users);
    temp = std::move(r.temp);
    for (const ParamMem& p : m.params) {
      int k = p.layer >= 0 && p.layer < static_cast<int>(m.layers.size()) ? exec_of[static_cast<size_t>(p.layer)] : -1;
      for (int i = p.layer; k < 0 && i >= 0; --i)  // a fused layer's parameters: its host's
        k = exec_of[static_cast<size_t>(i)];
      param_exec.push_back(std::max(k, 0));
      param_total += p.bytes;
    }
  }
  const LayerMem& at(int k) const { return m.layers[static_cast<size_t>(exec[static_cast<size_t>(k)])]; }
  int fwd(int k) const { return k; }
  int bwd(int k) const { return 2 * L - 1 - k; }
  const std::vector<int>& in(int k) const { return g.inputs[static_cast<size_t>(k)]; }
  const std::vector<int>& readers(int k) const { return users[static_cast<size_t>(k)]; }
  // The last forward that reads layer k's output (its own for the last layer).
  int last_reader(int k) const { return readers(k).empty() ? k : readers(k).back(); }
};

// The planner's choices.
struct Choice {
  std::vector<Placement> where;  // per executed layer
  std::vector<char> again;       // per executed layer: its argmax found again in backward
  std::vector<char> off;         // per m.params entry: its optimizer state on the host
  std::vector<char> waits;       // per executed layer, offloaded: its copies not overlapped
};

Choice keep_choice(const Walk& w) {
  return Choice{std::vector<Placement>(static_cast<size_t>(w.L), Placement::Keep),
                std::vector<char>(static_cast<size_t>(w.L), 0),
                std::vector<char>(w.m.params.size(), 0),
                std::vector<char>(static_cast<size_t>(w.L), 0)};
}

struct Sim {
  std::vector<SavedPlan> saved;
  std::vector<int64_t> live;
  std::vector<double> start, end;
  double micro_ms = 0;  // one micro-batch's forward and backward, stalls included
  double step_ms = 0;
  int64_t peak_live = 0, host = 0;
  int peak_pos = 0;
  FixedBytes fixed;
  int64_t fixed_total = 0;
  StatePlan state;
};

// Whether layer k's backward reads its input under choice c.
bool reads_input(const Walk& w, const Choice& c, int k) {
  return w.at(k).bwd_reads_input || c.again[static_cast<size_t>(k)];
}

// Backward positions that read layer k's output: its own backward with a fused activation
// (and the last layer's, whose logits the loss reads), its readers' when they read x.
std::vector<int> own_out_uses(const Walk& w, const Choice& c, int k) {
  std::vector<int> uses;
  if (w.at(k).bwd_reads_output || k == w.L - 1) uses.push_back(w.bwd(k));
  for (int u : w.readers(k))
    if (reads_input(w, c, u)) uses.push_back(w.bwd(u));
  return uses;
}

// The first backward position that needs layer k's output (-1: none): where a recomputed
// layer is made again.
int own_first_use(const Walk& w, const Choice& c, int k) {
  int first = -1;
  for (int u : own_out_uses(w, c, k)) first = first < 0 ? u : std::min(first, u);
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
    std::vector<int> uses = own_out_uses(w, c, k);
    for (int u : w.readers(k))
      if (c.where[static_cast<size_t>(u)] == Placement::Recompute) uses.push_back(own_first_use(w, c, u));
    out_last[static_cast<size_t>(k)] = uses.empty() ? -1 : *std::max_element(uses.begin(), uses.end());
    sp.layer = w.exec[static_cast<size_t>(k)];
    sp.where = c.where[static_cast<size_t>(k)];
    sp.last_fwd_use = w.fwd(w.last_reader(k));
    sp.saved_bytes = uses.empty() ? 0 : l.out_bytes;
    sp.first_bwd_use = uses.empty() ? -1 : *std::min_element(uses.begin(), uses.end());
    sp.last_bwd_use = uses.empty() ? -1 : *std::max_element(uses.begin(), uses.end());
    sp.waits = sp.where == Placement::Offload && c.waits[static_cast<size_t>(k)];
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
    int q = sp.first_bwd_use - (sp.waits ? 0 : 1);
    while (!sp.waits && q > sp.last_fwd_use + 1 && done_from(q) > need) --q;
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
  // dL/d(output of k): written by its last reader's backward, read by k's (the last layer's is
  // the loss's own buffer); the temporaries of its other readers' backward passes.
  if (!w.readers(k).empty()) add_range(s.live, w.bwd(w.readers(k).back()), w.bwd(k), ob);
  for (int u : w.readers(k))
    for (size_t j = 0; j < w.in(u).size(); ++j)
      if (w.in(u)[j] == k && w.temp[static_cast<size_t>(u)][j]) add_range(s.live, w.bwd(u), w.bwd(u), ob);
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
  for (int p = 0; p < P && !sp.waits; ++p)
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

// The most a faster algorithm may ask of the workspace (least_workspace_bytes: what every layer
// can run in).
int64_t max_workspace(const StepMem& m) {
  int64_t ws = 0;
  for (const LayerMem& l : m.layers) ws = std::max({ws, l.workspace_bytes, l.fast_workspace_bytes});
  return ws;
}

// Under a limit a plan's layers are timed at the workspace it leaves them: a layer whose
// fastest algorithms ask more runs on those asking the least (its least times, LayerMem), as
// the GPU's chooser then runs it. The workspace is what the limit leaves once the plan is
// made, so the plan is made timed at the least every layer runs in; where the workspace it
// then leaves lets some layers run faster algorithms, it is made once more timed at that
// workspace, and kept if it fits and leaves them as much. (The U-Net at batch 1 under
// PyTorch's peaks: 36-120 MiB of workspace against im2col's GiBs, every pass on the implicit
// GEMM or the direct kernels, 7-14% slower than an uncapped profile's choices.)
// The workspace may also be bought (buy): where a larger one times layers faster (their mid
// times' workspace, or their fastest algorithms'), the step is planned with the workspace held
// to it, the rest under what the limit then leaves (more offloaded or recomputed), and the plan
// with the shortest predicted step that fits is kept (the device's limit, and the host's
// pinned memory, o.host_limit_bytes). (With cuDNN's transforms the U-Net's
// capped steps at 1024 and 2048 ran 1.31-1.36x their uncapped ones on 37-248 MiB of workspace,
// their copies costing under 0.1 ms.) plan_at(d, w): the plan of description d with its layers
// timed at workspace w (-1: each at its fastest, as without a limit).
template <class PlanAt>
MemoryPlan timed_by_workspace(const StepMem& m, const PlanOptions& o, PlanAt plan_at,
                              bool buy = true) {
  if (o.limit_bytes <= 0) return plan_at(m, -1);
  const auto host_fits = [&o](const MemoryPlan& q) {
    return o.host_limit_bytes <= 0 || q.host_bytes <= o.host_limit_bytes;
  };
  const int64_t least = least_workspace_bytes(m);
  MemoryPlan p = plan_at(m, least);
  bool faster = false;  // a layer runs faster algorithms in p's workspace than in the least
  for (const LayerMem& l : m.layers) {
    double f0 = 0, b0 = 0, f1 = 0, b1 = 0;
    layer_times_at(l, least, &f0, &b0);
    layer_times_at(l, p.fixed.workspace, &f1, &b1);
    faster = faster || f1 + b1 < f0 + b0;
  }
  if (p.fits && faster) {
    const MemoryPlan q = plan_at(m, p.fixed.workspace);
    if (q.fits && q.fixed.workspace >= p.fixed.workspace && (host_fits(q) || !host_fits(p))) p = q;
  }
  if (!p.fits || !buy || !o.buy_workspace) return p;
  std::vector<int64_t> wants;  // workspaces past p's at which a layer's times drop
  for (const LayerMem& l : m.layers) {
    if (l.mid_fwd_ms >= 0 && l.mid_workspace_bytes > p.fixed.workspace)
      wants.push_back(l.mid_workspace_bytes);
    if ((l.least_fwd_ms >= 0 || l.mid_fwd_ms >= 0) && l.fast_workspace_bytes > p.fixed.workspace)
      wants.push_back(l.fast_workspace_bytes);
  }
  std::sort(wants.begin(), wants.end());
  // Workspaces within 5% of each other are planned once, at the largest (the U-Net's
  // convolutions ask 20, 13 of them within 4% of cuDNN's 1 GiB allowance): a plan takes
  // milliseconds, and the training step's planner makes one per micro-batch count.
  std::vector<int64_t> tries;
  for (size_t i = 0; i < wants.size();) {
    size_t j = i;
    while (j + 1 < wants.size() && wants[j + 1] <= wants[i] + wants[i] / 20) ++j;
    tries.push_back(wants[j]);
    i = j + 1;
  }
  StepMem held = m;
  for (int64_t w : tries) {
    if (w >= o.limit_bytes) break;
    held.workspace_floor = w;
    MemoryPlan q = plan_at(held, w);
    q.workspace_bought = w;
    if (q.fits && host_fits(q) && q.step_ms < p.step_ms) p = q;
  }
  return p;
}

// Where and how the state of the parameters choice c moves off the device is updated, and
// what it costs once backward has made their gradients (from `ready` on, the step's backward
// ending at `end`; the device's own update of the rest, update_dev, runs meanwhile too).
StatePlan plan_state(const Walk& w, const Choice& c, const PlanOptions& o, const Sim& s) {
  StatePlan st;
  // The update streams the state in stretches of parameters adjacent in ParamSet order, a
  // chunk of up to state_chunk_bytes at a time (Optimizer::place_state): a chunk may span
  // several parameters. (Counted by the largest parameter, the U-Net's chunks were 36 MiB
  // against the optimizer's 64: its tightest plans ran out of memory by up to 112 MiB.)
  int64_t bytes = 0, stretch = 0, run = 0;
  int lowest = w.L;  // the offloaded parameter whose gradient is made last
  for (size_t j = 0; j < w.m.params.size(); ++j) {
    run = c.off[j] ? run + w.m.params[j].bytes : 0;
    stretch = std::max(stretch, run);
    if (c.off[j]) {
      st.params.push_back(static_cast<int>(j));
      bytes += w.m.params[j].bytes;
      lowest = std::min(lowest, w.param_exec[j]);
    }
  }
  if (st.params.empty()) return st;
  const int64_t slots = w.m.state_slots;
  const int64_t chunk = std::min((o.state_chunk_bytes + 63) / 64 * 64, stretch);
  const double update_floats = 3.0 + 2.0 * static_cast<double>(slots);  // g, w in/out, state in/out
  const double dev_ms = update_floats * static_cast<double>(bytes) / (o.device_gb_s * 1e6);
  // Streamed: each slot in and out over the link (both directions at once), the device's kernel
  // between; pipelined chunk by chunk, so the slowest stage plus one chunk of the others.
  const double in = copy_ms(slots * bytes, o.h2d_gb_s), out = copy_ms(slots * bytes, o.d2h_gb_s);
  st.stream_ms = std::max({in, out, dev_ms}) + copy_ms(slots * chunk, o.h2d_gb_s) +
                 copy_ms(slots * chunk, o.d2h_gb_s);
  // On the host: gradients and weights out, the update on the cores, the weights back in.
  const double g_out = copy_ms(2 * bytes, o.d2h_gb_s), w_in = copy_ms(bytes, o.h2d_gb_s);
  const double host = update_floats * static_cast<double>(bytes) / (o.host_update_gb_s * 1e6);
  st.host_ms = std::max({g_out, host, w_in}) + copy_ms(2 * chunk, o.d2h_gb_s) + copy_ms(chunk, o.h2d_gb_s) +
               update_floats * static_cast<double>(chunk) / (o.host_update_gb_s * 1e6);
  st.mode = st.stream_ms <= st.host_ms ? StateMode::Stream : StateMode::Host;
  const double t = std::min(st.stream_ms, st.host_ms);
  const double ready = s.end.empty() ? 0.0 : s.end[static_cast<size_t>(w.bwd(lowest))];
  const double end = s.end.empty() ? 0.0 : s.end.back();
  const double update_dev =
      w.m.update_ms * (1.0 - static_cast<double>(bytes) / static_cast<double>(std::max<int64_t>(w.param_total, 1)));
  st.stall_ms = std::max(0.0, t - (end - ready) - update_dev);
  st.host_bytes = slots * bytes + (st.mode == StateMode::Host ? 4 * chunk : 0);
  st.device_bytes = st.mode == StateMode::Stream ? 2 * slots * chunk : 0;
  return st;
}

FixedBytes fixed_of(const Walk& w, const Choice& c, const StatePlan& st) {
  const StepMem& m = w.m;
  FixedBytes f;
  for (const LayerMem& l : m.layers) {
    f.params += l.param_bytes;
    f.grads += l.grad_bytes;
    f.state += l.opt_state_bytes;
    f.scratch += l.scratch_bytes;
  }
  for (int k = 0; k < w.L; ++k)
    if (c.again[static_cast<size_t>(k)]) f.scratch -= w.at(k).argmax_bytes;
  for (size_t j = 0; j < m.params.size(); ++j)
    if (c.off[j]) f.state -= m.state_slots * m.params[j].bytes;
  f.state = std::max<int64_t>(f.state, 0);
  f.workspace = m.workspace_held >= 0 ? m.workspace_held : least_workspace_bytes(m);
  f.input = m.input_bytes;
  f.loss = m.loss_bytes;
  f.context = m.context_bytes;
  f.context_given = m.context_given;
  f.cublas = m.cublas_bytes;
  f.eval = m.eval_bytes;
  f.small = m.small_bytes;
  f.staging = st.device_bytes;
  f.weight_copy = m.weight_copy_bytes;
  f.casts = m.cast_bytes;
  return f;
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
    const double fwd = w.fwd_ms[static_cast<size_t>(k)];
    cost[static_cast<size_t>(w.fwd(k))] += fwd;
    cost[static_cast<size_t>(w.bwd(k))] += w.bwd_ms[static_cast<size_t>(k)];
    if (c.where[static_cast<size_t>(k)] == Placement::Recompute)
      cost[static_cast<size_t>(s.saved[static_cast<size_t>(k)].first_bwd_use)] += fwd;
    if (c.again[static_cast<size_t>(k)]) cost[static_cast<size_t>(w.bwd(k))] += fwd;
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
    // (A copy in issued here, at its first use, is one the backward then waits for; an
    // offload without overlap frees its slot after its last forward use, so the position
    // after waits for its copy out.)
    for (int k : order)
      if (s.saved[static_cast<size_t>(k)].back_at == p) {
        h2d_busy = std::max({t, h2d_busy, d2h_done[static_cast<size_t>(k)]}) +
                   copy_ms(s.saved[static_cast<size_t>(k)].saved_bytes, o.h2d_gb_s);
        h2d_done[static_cast<size_t>(k)] = h2d_busy;
      }
    for (int k : order) {
      const SavedPlan& sp = s.saved[static_cast<size_t>(k)];
      if (sp.first_bwd_use == p) t = std::max(t, h2d_done[static_cast<size_t>(k)]);
      if (sp.waits && sp.last_fwd_use + 1 == p) t = std::max(t, d2h_done[static_cast<size_t>(k)]);
    }
    s.start[static_cast<size_t>(p)] = t;
    t += cost[static_cast<size_t>(p)];
    s.end[static_cast<size_t>(p)] = t;
    if (p < L && c.where[static_cast<size_t>(p)] == Placement::Offload) {
      d2h_busy = std::max(d2h_busy, t) + copy_ms(s.saved[static_cast<size_t>(p)].saved_bytes, o.d2h_gb_s);
      d2h_done[static_cast<size_t>(p)] = d2h_busy;
    }
  }
  s.micro_ms = t;
  s.state = plan_state(w, c, o, s);
  int64_t off_bytes = 0;
  for (int j : s.state.params) off_bytes += w.m.params[static_cast<size_t>(j)].bytes;
  const double update_dev =
      w.m.update_ms * (1.0 - static_cast<double>(off_bytes) / static_cast<double>(std::max<int64_t>(w.param_total, 1)));
  s.step_ms = w.micro * s.micro_ms + (w.micro - 1) * o.micro_batch_ms + update_dev + s.state.stall_ms;
  for (int k = 0; k < L; ++k) add_layer_memory(w, out_last, d2h_done, k, s);
  for (int p = 0; p < P; ++p)
    if (s.live[static_cast<size_t>(p)] > s.peak_live)
      s.peak_live = s.live[static_cast<size_t>(p)], s.peak_pos = p;
  s.fixed = fixed_of(w, c, s.state);
  s.fixed_total = s.fixed.total();
  return s;
}

int64_t excess(const Sim& s, int64_t limit) {
  int64_t e = 0;
  for (int64_t v : s.live) e += std::max<int64_t>(0, s.fixed_total + v - limit);
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
  if (!w.at(k).recomputable || w.in(k).size() != 1) return false;
  for (int p : w.in(k))
    if (p >= 0 && c.where[static_cast<size_t>(p)] == Placement::Recompute) return false;
  for (int u : w.readers(k))
    if (c.where[static_cast<size_t>(u)] == Placement::Recompute) return false;
  return true;
}

bool again_allowed(const Walk& w, const Choice& c, const PlanOptions& o, int k) {
  return o.argmax_again && k > 0 && w.at(k).argmax_bytes > 0 && !c.again[static_cast<size_t>(k)];
}

bool off_allowed(const Walk& w, const Choice& c, const PlanOptions& o, size_t j) {
  return o.offload_state && w.m.state_slots > 0 && w.m.params[j].bytes > 0 && !c.off[j];
}

// Every layer that can leave the device does: recomputed where allowed (prefer_recompute),
// else offloaded (without overlap: waits); every argmax found again, every optimizer state on
// the host. The floor under which no plan of this kind goes.
Choice release_all(const Walk& w, const PlanOptions& o, bool prefer_recompute, bool waits) {
  Choice c = keep_choice(w);
  for (int k = 0; k < w.L; ++k)
    if (again_allowed(w, c, o, k)) c.again[static_cast<size_t>(k)] = 1;
  for (size_t j = 0; j < w.m.params.size(); ++j)
    if (off_allowed(w, c, o, j)) c.off[j] = 1;
  for (int k = 0; k < w.L; ++k) {
    const Sim s = simulate(w, c, o);
    if (prefer_recompute && allowed(w, c, s, k, Placement::Recompute))
      c.where[static_cast<size_t>(k)] = Placement::Recompute;
    else if (allowed(w, c, s, k, Placement::Offload))
      c.where[static_cast<size_t>(k)] = Placement::Offload, c.waits[static_cast<size_t>(k)] = waits;
  }
  return c;
}

// The executor without a plan (Model): every output for the whole step (the layers' scratch
// is in the fixed bytes), and its pool of gradient buffers, each grown to the largest it has
// held: a backward takes the lowest free ones for its inputs' gradients (and temporaries),
// then gives back the temporaries and its own output's gradient (a chain: two buffers, in
// turn).
int64_t keep_all(const Walk& w) {
  int64_t b = 0;
  for (int k = 0; k < w.L; ++k) b += w.at(k).out_bytes;
  std::vector<int64_t> pool;
  std::vector<char> busy;
  std::vector<int> at(static_cast<size_t>(w.L), -1);
  auto take = [&](int64_t bytes) {
    size_t i = 0;
    while (i < busy.size() && busy[i]) ++i;
    if (i == pool.size()) pool.push_back(0), busy.push_back(0);
    pool[i] = std::max(pool[i], bytes);
    busy[i] = 1;
    return static_cast<int>(i);
  };
  for (int k = w.L - 1; k >= 0; --k) {
    std::vector<int> temps;
    for (int p : w.in(k)) {
      if (p < 0) continue;
      if (at[static_cast<size_t>(p)] < 0) at[static_cast<size_t>(p)] = take(w.at(p).out_bytes);
      else temps.push_back(take(w.at(p).out_bytes));
    }
    for (int t : temps) busy[static_cast<size_t>(t)] = 0;
    if (k != w.L - 1) busy[static_cast<size_t>(at[static_cast<size_t>(k)])] = 0;
  }
  for (int64_t p : pool) b += p;
  return b;
}

void check_description(const StepMem& m, const PlanOptions& o) {
  PDNN_CHECK(o.h2d_gb_s > 0 && o.d2h_gb_s > 0 && std::isfinite(o.h2d_gb_s) && std::isfinite(o.d2h_gb_s),
             "memory plan: host-device bandwidth %g / %g GB/s must be positive", o.h2d_gb_s,
             o.d2h_gb_s);
  PDNN_CHECK(o.host_update_gb_s > 0 && o.device_gb_s > 0 && o.state_chunk_bytes > 0,
             "memory plan: host update rate %g GB/s, device bandwidth %g GB/s and state chunk "
             "%lld bytes must be positive", o.host_update_gb_s, o.device_gb_s,
             static_cast<long long>(o.state_chunk_bytes));
  PDNN_CHECK(o.limit_bytes >= 0, "memory plan: negative limit");
  PDNN_CHECK(!m.layers.empty() && !m.layers.front().absorbed,
             "memory plan: a step needs layers, the first not fused into another");
  PDNN_CHECK(m.act_elem_bytes > 0 && m.weight_copy_bytes >= 0 && m.cast_bytes >= 0,
             "memory plan: activation elements of %lld bytes, a weight copy of %lld, casts of %lld",
             static_cast<long long>(m.act_elem_bytes), static_cast<long long>(m.weight_copy_bytes),
             static_cast<long long>(m.cast_bytes));
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const LayerMem& l = m.layers[i];
    bool good = !(l.absorbed && l.inputs.size() > 1);
    for (int r : l.inputs) good = good && r >= -1 && r < static_cast<int>(i) && !(l.absorbed && r < 0);
    PDNN_CHECK(good, "memory plan: layer %d (%s) reads layers that do not come before it, or is "
               "fused into something other than one layer", l.index, l.name.c_str());
  }
  const Walk w(m, 1);
  for (int k = 0; k + 1 < w.L; ++k)
    PDNN_CHECK(!w.readers(k).empty(), "memory plan: nothing reads the output of layer %d (%s)",
               w.at(k).index, w.at(k).name.c_str());
  for (const LayerMem& l : m.layers)
    PDNN_CHECK(l.out_bytes >= 0 && l.scratch_bytes >= 0 && l.workspace_bytes >= 0 &&
                   l.argmax_bytes >= 0 && l.argmax_bytes <= l.scratch_bytes &&
                   l.fwd_ms >= 0 && l.bwd_ms >= 0,
               "memory plan: layer %d (%s) has a negative size or time", l.index, l.name.c_str());
  for (const ParamMem& p : m.params)
    PDNN_CHECK(p.bytes >= 0 && p.layer >= 0 && p.layer < static_cast<int>(m.layers.size()),
               "memory plan: parameter %s of layer %d is not in the step", p.name.c_str(), p.layer);
}

// The plan's fields from a simulation of choice c.
MemoryPlan make_plan(const Walk& w, const Choice& c, const Sim& s, const PlanOptions& o) {
  MemoryPlan plan;
  plan.positions = 2 * w.L;
  plan.micro_batches = w.micro;
  plan.micro_rows = w.m.rows;
  plan.fixed = s.fixed;
  plan.fixed_bytes = s.fixed_total;
  const Choice none = keep_choice(w);
  plan.keep_all_bytes = fixed_of(w, none, StatePlan{}).total() + keep_all(w);
  for (int k = 0; k < w.L; ++k)
    plan.compute_ms += w.fwd_ms[static_cast<size_t>(k)] + w.bwd_ms[static_cast<size_t>(k)];
  plan.compute_ms = plan.compute_ms * w.micro + w.m.update_ms;
  plan.saved = s.saved;
  plan.argmax_again = c.again;
  plan.state = s.state;
  plan.live_bytes = s.live;
  plan.peak_bytes = plan.fixed_bytes + s.peak_live;
  plan.peak_position = s.peak_pos;
  plan.host_bytes = s.host + s.state.host_bytes;
  plan.step_ms = s.step_ms;
  plan.fits = o.limit_bytes == 0 || plan.peak_bytes <= o.limit_bytes;
  int64_t floor = plan.peak_bytes;
  for (int r = 0; r < 4; ++r) {
    const Sim f = simulate(w, release_all(w, o, r % 2 == 1, r >= 2), o);
    floor = std::min(floor, f.fixed_total + f.peak_live);
  }
  plan.min_limit_bytes = floor;
  // Under a limit the workspace takes what the limit leaves, up to what the fastest algorithms
  // may ask, and the GPU's chooser runs only what fits it (without one the algorithms' choice
  // is not bounded: the plan counts what every layer runs in, the algorithms asking the
  // least, which keep no columns where the implicit GEMM or the direct kernels run a pass).
  if (o.limit_bytes > 0) {
    const int64_t ws_min = least_workspace_bytes(w.m), ws_max = max_workspace(w.m);
    const int64_t extra = std::min(std::max<int64_t>(0, o.limit_bytes - plan.peak_bytes), ws_max - ws_min);
    plan.fixed.workspace += extra;
    plan.fixed_bytes += extra;
    plan.peak_bytes += extra;
  }
  return plan;
}

// The plan for w (its micro-batch count) under o: greedy over every choice, the one that
// removes the most bytes over the limit per millisecond it adds.
MemoryPlan plan_walk(const Walk& w, const PlanOptions& o) {
  Choice c = keep_choice(w);
  Sim s = simulate(w, c, o);
  if (o.limit_bytes > 0) {
    int64_t e = excess(s, o.limit_bytes);
    while (e > 0) {
      Choice best;
      double best_score = std::numeric_limits<double>::infinity();
      int64_t best_gain = 0;
      bool found = false;
      auto consider = [&](const Choice& t) {
        const Sim ts = simulate(w, t, o);
        const int64_t gain = e - excess(ts, o.limit_bytes);
        if (gain <= 0) return;
        const double score = (std::max(0.0, ts.step_ms - s.step_ms) + 1e-9) / static_cast<double>(gain);
        if (score < best_score || (score == best_score && gain > best_gain))
          best = t, best_score = score, best_gain = gain, found = true;
      };
      for (int k = 0; k < w.L; ++k) {
        if (c.where[static_cast<size_t>(k)] == Placement::Keep)
          for (Placement p : {Placement::Recompute, Placement::Offload}) {
            if (!allowed(w, c, s, k, p)) continue;
            Choice t = c;
            t.where[static_cast<size_t>(k)] = p;
            t.waits[static_cast<size_t>(k)] = 0;
            consider(t);
          }
        // An offload's overlap holds its slot while the copy out runs and from the prefetch
        // on: without it, those bytes for the copies' time.
        if (c.where[static_cast<size_t>(k)] == Placement::Offload && !c.waits[static_cast<size_t>(k)]) {
          Choice t = c;
          t.waits[static_cast<size_t>(k)] = 1;
          consider(t);
        }
        if (again_allowed(w, c, o, k)) {
          Choice t = c;
          t.again[static_cast<size_t>(k)] = 1;
          consider(t);
        }
      }
      for (size_t j = 0; j < w.m.params.size(); ++j)
        if (off_allowed(w, c, o, j)) {
          Choice t = c;
          t.off[j] = 1;
          consider(t);
        }
      if (!found) break;
      c = best;
      s = simulate(w, c, o);
      e = excess(s, o.limit_bytes);
    }
    // Greedy can miss what releasing everything reaches (a peak that only falls when two
    // layers leave together): then start from that; when nothing fits, report the lowest peak.
    for (int r = 0; r < 4; ++r) {
      if (e == 0) break;
      const Choice all = release_all(w, o, r % 2 == 0, r >= 2);
      const Sim as = simulate(w, all, o);
      const int64_t ae = excess(as, o.limit_bytes);
      if (ae == 0 || as.fixed_total + as.peak_live < s.fixed_total + s.peak_live) c = all, s = as, e = ae;
    }
    // Undo choices the final plan does without (a later choice may have made one needless).
    if (e == 0) {
      auto try_undo = [&](Choice t) {
        const Sim ts = simulate(w, t, o);
        if (excess(ts, o.limit_bytes) == 0 && ts.step_ms <= s.step_ms) c = t, s = ts;
      };
      for (int k = w.L - 1; k >= 0; --k) {
        if (c.waits[static_cast<size_t>(k)]) {
          Choice t = c;
          t.waits[static_cast<size_t>(k)] = 0;
          try_undo(t);
        }
        if (c.where[static_cast<size_t>(k)] != Placement::Keep) {
          Choice t = c;
          t.where[static_cast<size_t>(k)] = Placement::Keep;
          try_undo(t);
        }
        if (c.again[static_cast<size_t>(k)]) {
          Choice t = c;
          t.again[static_cast<size_t>(k)] = 0;
          try_undo(t);
        }
      }
      for (size_t j = 0; j < w.m.params.size(); ++j)
        if (c.off[j]) {
          Choice t = c;
          t.off[j] = 0;
          try_undo(t);
        }
    }
  }
  return make_plan(w, c, s, o);
}

}  // namespace

const char* state_mode_name(StateMode m) {
  switch (m) {
    case StateMode::Device: return "device";
    case StateMode::Stream: return "streamed through the GPU";
    case StateMode::Host: return "host CPU";
  }
  return "?";
}

MemoryPlan simulate_plan(const StepMem& m, const std::vector<Placement>& where,
                         const PlanOptions& o, const std::vector<char>& argmax_again,
                         const std::vector<int>& host_state) {
  check_description(m, o);
  const Walk w(m, 1);
  PDNN_CHECK(static_cast<int>(where.size()) == w.L &&
                 (argmax_again.empty() || static_cast<int>(argmax_again.size()) == w.L),
             "memory plan: %zu placements and %zu argmax choices for %d executed layers",
             where.size(), argmax_again.size(), w.L);
  Choice c = keep_choice(w);
  c.where = where;
  Choice check = keep_choice(w);
  for (int k = 0; k < w.L; ++k) {
    const Placement p = where[static_cast<size_t>(k)];
    PDNN_CHECK(allowed(w, check, simulate(w, check, o), k, p),
               "memory plan: layer %d (%s) cannot be placed '%s'", w.at(k).index,
               w.at(k).name.c_str(), placement_name(p));
    check.where[static_cast<size_t>(k)] = p;
    if (!argmax_again.empty() && argmax_again[static_cast<size_t>(k)]) {
      PDNN_CHECK(again_allowed(w, c, PlanOptions{}, k),
                 "memory plan: layer %d (%s) keeps no argmax to find again", w.at(k).index,
                 w.at(k).name.c_str());
      c.again[static_cast<size_t>(k)] = 1;
    }
  }
  for (int j : host_state) {
    PDNN_CHECK(j >= 0 && j < static_cast<int>(m.params.size()) &&
                   off_allowed(w, c, PlanOptions{}, static_cast<size_t>(j)),
               "memory plan: parameter %d has no optimizer state to move to the host", j);
    c.off[static_cast<size_t>(j)] = 1;
  }
  return timed_by_workspace(
      m, o,
      [&](const StepMem& d, int64_t at) {
        const Walk timed(d, 1, at);
        return make_plan(timed, c, simulate(timed, c, o), o);
      },
      /*buy=*/false);  // the placements are given: nothing more can move
}

MemoryPlan plan_memory(const StepMem& m, const PlanOptions& o) {
  check_description(m, o);
  return timed_by_workspace(
      m, o, [&](const StepMem& d, int64_t at) { return plan_walk(Walk(d, 1, at), o); });
}

namespace {

// The plan of m in `micro` micro-batches whose step, as the model runs it (outputs and
// gradients in layout_arena's buffer, with the plan's copy positions), fits o.limit_bytes: the
// planner's model of the lifetimes differs a little from the model's (an output kept to its own
// backward rather than its last reader's), so the planner's limit is lowered by the
// difference until it does.
MemoryPlan plan_as_run_timed(const StepMem& m, int micro, const PlanOptions& o, int64_t timed_at) {
  const Walk w(m, micro, timed_at);
  MemoryPlan p = plan_walk(w, o);
  auto as_run = [&](const MemoryPlan& q) {
    return q.fixed_bytes - q.fixed.workspace + least_workspace_bytes(m) + arena_bytes(m, q);
  };
  if (o.limit_bytes <= 0) return p;  // nothing to carry out: the step runs without a plan
  PlanOptions tight = o;
  for (int tries = 0; tries < 8 && p.fits; ++tries) {
    const int64_t over = as_run(p) - o.limit_bytes;
    if (over <= 0) break;
    // Below the plan's own peak at the least workspace, not below the last limit tried: a plan
    // whose peak sits under that limit is chosen again until the limit passes its peak (at
    // 3.3G the U-Net's 1024 plan came back 8 times, a few bytes over as run, and the step
    // fell back to the lowest-peak plan, 1.4x slower).
    tight.limit_bytes = std::min(tight.limit_bytes, p.peak_bytes - p.fixed.workspace + least_workspace_bytes(m)) - over;
    if (tight.limit_bytes <= p.fixed_bytes - p.fixed.workspace) break;
    p = plan_walk(w, tight);
  }
  if (!(p.fits && as_run(p) <= o.limit_bytes)) {
    // Else the plan with the lowest peak (everything that can leave does) or the one that only
    // frees buffers after their last use, whichever is smaller as run, if it fits; if not, its
    // size as run is the smallest limit known to work.
    PlanOptions lowest = o, none = o;
    lowest.limit_bytes = 1;
    none.limit_bytes = 0;
    MemoryPlan best = plan_walk(w, lowest);
    int64_t best_run = as_run(best);
    const MemoryPlan keep = plan_walk(w, none);
    if (const int64_t r = as_run(keep); r < best_run) best = keep, best_run = r;
    if (best_run > o.limit_bytes) {
      p.fits = false;
      p.min_limit_bytes = best_run;
      return p;
    }
    p = best;
  }
  // As run, with the workspace given what is left under the limit.
  const int64_t ws_min = least_workspace_bytes(m), ws_max = max_workspace(m);
  const int64_t base = as_run(p) - ws_min;
  const int64_t ws = std::max(ws_min, std::min(ws_max, o.limit_bytes - base));
  p.fixed_bytes += ws - p.fixed.workspace;
  p.fixed.workspace = ws;
  p.peak_bytes = base + ws;
  p.fits = p.peak_bytes <= o.limit_bytes;
  return p;
}

MemoryPlan plan_as_run(const StepMem& m, int micro, const PlanOptions& o) {
  return timed_by_workspace(m, o, [&](const StepMem& d, int64_t at) {
    return plan_as_run_timed(d, micro, o, at);
  });
}

}  // namespace

int64_t arena_bytes(const StepMem& m, const MemoryPlan& p) {
  std::vector<Placement> where;
  std::vector<int64_t> elems;
  std::vector<int> dropped, back;
  for (const SavedPlan& s : p.saved) {
    where.push_back(s.where);
    const int64_t bytes = m.layers[static_cast<size_t>(s.layer)].out_bytes;
    elems.push_back((bytes + m.act_elem_bytes - 1) / m.act_elem_bytes);  // (odd made-up sizes: up)
    dropped.push_back(s.dropped_after);
    back.push_back(s.back_at);
  }
  ExecGraph g = exec_graph(m, exec_indices(m));
  for (size_t k = 0; k < g.reads_input.size() && k < p.argmax_again.size(); ++k)
    g.reads_input[k] = g.reads_input[k] || p.argmax_again[k];  // a pool finding its argmax in x
  return layout_arena(elems, where, dropped, back, g).elements *
         m.act_elem_bytes;
}

MemoryPlan plan_training_step(const std::function<StepMem(int64_t rows)>& describe,
                              int64_t batch_rows, const PlanOptions& o) {
  PDNN_CHECK(batch_rows >= 1, "memory plan: a batch of %lld rows", static_cast<long long>(batch_rows));
  const StepMem whole = describe(batch_rows);
  check_description(whole, o);
  MemoryPlan first = plan_as_run(whole, 1, o);
  bool coupled = false;
  for (const LayerMem& l : whole.layers) coupled = coupled || (l.batch_coupled && !l.absorbed);
  MemoryPlan best = first;
  bool have = first.fits;
  // The smallest limit over every micro-batch count, with or without a limit: the plan
  // without one (the uncapped run, --memory-plan) says how low a cap may go, and micro-batches
  // take it below one pass's floor.
  int64_t floor = o.limit_bytes > 0 && first.fits ? first.peak_bytes : first.min_limit_bytes;
  const int64_t kmax = coupled ? 1 : std::min<int64_t>(batch_rows, std::max(1, o.max_micro_batches));
  int64_t last_rows = batch_rows;
  for (int64_t k = 2; k <= kmax; ++k) {
    const int64_t rows = (batch_rows + k - 1) / k;
    if (rows == last_rows) continue;  // the same slices as fewer micro-batches
    last_rows = rows;
    const int64_t slices = (batch_rows + rows - 1) / rows;
    const StepMem m = describe(rows);
    check_description(m, o);
    if (o.limit_bytes <= 0) {  // only the floor (as run: under a 1-byte limit nothing fits,
      PlanOptions least = o;   // and the plan says the smallest that does); without a cap one
      least.limit_bytes = 1;   // pass is the plan
      floor = std::min(floor, plan_as_run(m, static_cast<int>(slices), least).min_limit_bytes);
      continue;
    }
    const MemoryPlan p = plan_as_run(m, static_cast<int>(slices), o);
    floor = std::min(floor, p.fits ? p.peak_bytes : p.min_limit_bytes);
    if (p.fits && (!have || p.step_ms < best.step_ms)) best = p, have = true;
  }
  if (!have) {
    best = first;
    best.fits = false;
  }
  best.min_limit_bytes = std::min(best.min_limit_bytes, floor);
  return best;
}

int64_t device_limit_for_uncapped(const StepMem& m, int64_t device_bytes, int64_t* most) {
  const MemoryPlan keep = plan_memory(m, PlanOptions{});
  const int64_t bytes = keep.peak_bytes + max_workspace(m) - least_workspace_bytes(m);
  if (most) *most = bytes;
  const int64_t usable = device_bytes / 50 * 49;
  return bytes > usable ? usable : 0;
}

void require_fits(const MemoryPlan& p, const PlanOptions& o, const char* flag) {
  if (p.fits) return;
  // A limit the user gave is named with its flag and may be raised; the device's is neither.
  const std::string limit = flag ? strprintf("%s %s", flag, format_bytes(o.limit_bytes).c_str())
                                 : strprintf("the GPU's memory (planned under %s, 98%% of it)",
                                             format_bytes(o.limit_bytes).c_str());
  PDNN_FAIL("%s: the training step does not fit; the smallest limit it fits under is %s "
            "(with every output offloaded or recomputed where it can be, every pool's argmax "
            "found again, the optimizer state on the host and the batch in as many micro-batches "
            "as helps; what stays is the parameters, their gradients, the batch, the smallest "
            "workspace and what the layers at the tightest point need at once): %slower --batch "
            "or --size",
            limit.c_str(), format_bytes(p.min_limit_bytes).c_str(),
            flag ? strprintf("raise %s, or ", flag).c_str() : "");
}

int64_t pinnable_host_bytes(int64_t available) { return available > 0 ? available / 10 * 9 : 0; }

void require_host_fits(const MemoryPlan& p, int64_t available, const char* flag) {
  if (available <= 0 || p.host_bytes <= pinnable_host_bytes(available)) return;
  PDNN_FAIL("the memory plan keeps %s in pinned host memory (offloaded outputs %s, optimizer "
            "state %s), more than 90%% of the %s this host has available: here the host's "
            "memory runs out, not the GPU's; %slower --batch or --size",
            format_bytes(p.host_bytes).c_str(), format_bytes(p.host_bytes - p.state.host_bytes).c_str(),
            format_bytes(p.state.host_bytes).c_str(), format_bytes(available).c_str(),
            flag ? strprintf("raise %s toward the GPU's memory (what stays there need not come "
                             "here), or ", flag).c_str()
                 : "");
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

namespace {
// A layer's name in the plan's tables: its profiler label, or its index.
std::string name_of(const LayerMem& l) { return l.label.empty() ? std::to_string(l.index) : l.label; }

// What the workspace the plan counts means for the GPU's convolutions: the least every layer
// runs in and the most the fastest algorithms may ask; under a limit, which convolutions the
// workspace leaves without im2col (the chooser runs only what fits: a capped run may be
// slower for it); without one, that the run's choice may take more than the plan counts.
std::string workspace_note(const StepMem& m, const MemoryPlan& p, const PlanOptions& o) {
  const int64_t ws = p.fixed.workspace, least = least_workspace_bytes(m), most = max_workspace(m);
  int convs = 0, excluded = 0;
  int64_t columns = 0;
  const LayerMem* sets = nullptr;  // the layer whose least is the least
  for (const LayerMem& l : m.layers) {
    if (l.absorbed) continue;
    if (!sets && l.workspace_bytes == least) sets = &l;
    if (l.columns_bytes <= 0) continue;
    ++convs;
    columns = std::max(columns, l.columns_bytes);
    excluded += l.columns_bytes > ws;
  }
  std::string s = strprintf("workspace %s: every layer runs in %s", format_bytes(ws).c_str(),
                            format_bytes(least).c_str());
  if (sets && least > 0) {
    s += " (set by " + name_of(*sets) + ")";
    if (sets->columns_bytes > 0 && least == sets->columns_bytes)
      s += ", im2col's columns: nothing else runs all its passes (the implicit GEMM indexes "
           "a plane and the batch's pixels in 32 bits; or im2col forced)";
  }
  s += ", the fastest algorithms may ask " + format_bytes(most);
  if (o.limit_bytes <= 0) {
    s += "; without a limit the plan counts the least, and an uncapped run's choice, which "
         "times every algorithm the free memory holds (cuDNN's too), may grow it past that";
  } else if (excluded > 0) {
    s += strprintf("; im2col excluded where its columns exceed it (%d of %d convolutions, columns "
                   "up to %s): the implicit GEMM or the direct kernels run those passes",
                   excluded, convs, format_bytes(columns).c_str());
  } else if (convs > 0) {
    s += "; im2col's columns fit it in every convolution";
  }
  if (p.workspace_bought > 0)
    s += strprintf("; bought: at least %s held for faster algorithms, more of the rest moved off "
                   "the device for it (the predicted step is shorter so)",
                   format_bytes(p.workspace_bought).c_str());
  return s + "\n";
}
}  // namespace

std::string position_name(const StepMem& m, const MemoryPlan& p, int pos) {
  const Walk w(m, 1);
  if (pos < 0 || pos >= p.positions) return "-";
  const int k = pos < w.L ? pos : 2 * w.L - 1 - pos;
  return strprintf("%s %s", pos < w.L ? "fwd" : "bwd", name_of(w.at(k)).c_str());
}

std::string format_plan(const StepMem& m, const MemoryPlan& p, const PlanOptions& o) {
  const Walk w(m, 1);
  std::string out = strprintf("%-3s %-40s %11s %11s  %-16s %-9s %-9s %s\n", "#", "layer", "output",
                              "kept", "read by", "lives", "dropped", "back at");
  size_t k = 0;
  for (const LayerMem& l : m.layers) {
    if (l.absorbed) {
      out += strprintf("%-3s %-40s (fused into the layer before)\n", name_of(l).c_str(), l.name.c_str());
      continue;
    }
    const SavedPlan& sp = p.saved[k];
    const bool again = k < p.argmax_again.size() && p.argmax_again[k];
    ++k;
    std::string reads;
    if (sp.first_bwd_use >= 0)
      reads = position_name(m, p, sp.first_bwd_use) +
              (sp.last_bwd_use != sp.first_bwd_use ? ".." + position_name(m, p, sp.last_bwd_use).substr(4) : "");
    const bool moved = sp.where != Placement::Keep;
    out += strprintf("%-3s %-40s %11s %11s  %-16s %-9s %-9s %s%s\n", name_of(l).c_str(), l.name.c_str(),
                     format_bytes(l.out_bytes).c_str(), format_bytes(sp.saved_bytes).c_str(),
                     reads.empty() ? "-" : reads.c_str(), placement_name(sp.where),
                     moved ? position_name(m, p, sp.dropped_after).c_str() : "-",
                     moved ? position_name(m, p, sp.back_at).c_str() : "-",
                     (std::string(sp.waits ? "   copies not overlapped (waited for)" : "") +
                      (again ? "   argmax found again in backward" : "")).c_str());
  }
  const FixedBytes& f = p.fixed;
  out += strprintf("fixed %s: parameters %s, gradients %s, optimizer state %s, layers' own "
                   "(argmax, masks) %s, workspace %s, batch %s, loss %s",
                   format_bytes(p.fixed_bytes).c_str(), format_bytes(f.params).c_str(),
                   format_bytes(f.grads).c_str(), format_bytes(f.state).c_str(),
                   format_bytes(f.scratch).c_str(), format_bytes(f.workspace).c_str(),
                   format_bytes(f.input).c_str(), format_bytes(f.loss).c_str());
  if (f.eval) out += ", evaluation batch " + format_bytes(f.eval);
  if (f.staging) out += ", streamed update's chunks " + format_bytes(f.staging);
  if (f.weight_copy) out += ", the weights' bf16 copy " + format_bytes(f.weight_copy);
  if (f.casts) out += ", bf16/float32 casts at the model's edges " + format_bytes(f.casts);
  if (f.cublas) out += ", cuBLAS workspace " + format_bytes(f.cublas);
  if (f.small) out += ", small buffers " + format_bytes(f.small);
  if (f.context)
    out += std::string(", CUDA context (") + (f.context_given ? "given, --plan-context" : "measured") +
           ") " + format_bytes(f.context);
  out += "\n" + workspace_note(m, p, o);
  if (p.micro_batches > 1)
    out += strprintf("micro-batches: %d of %lld rows (the batch %lld): gradients summed over them, "
                     "one update\n",
                     p.micro_batches, static_cast<long long>(p.micro_rows),
                     static_cast<long long>(m.batch_rows));
  if (!p.state.params.empty()) {
    int64_t bytes = 0;
    std::string names;
    for (int j : p.state.params) {
      bytes += m.params[static_cast<size_t>(j)].bytes;
      if (names.size() < 60) names += (names.empty() ? "" : ", ") + m.params[static_cast<size_t>(j)].name;
    }
    out += strprintf("optimizer state of %zu parameter(s) (%s; %s of weights) in pinned host "
                     "memory, updated %s: %.1f ms (streamed through the GPU %.1f ms, host CPU "
                     "%.1f ms), %.1f ms of it beyond backward\n",
                     p.state.params.size(), names.c_str(), format_bytes(bytes).c_str(),
                     state_mode_name(p.state.mode), std::min(p.state.stream_ms, p.state.host_ms),
                     p.state.stream_ms, p.state.host_ms, p.state.stall_ms);
  }
  out += strprintf("peak %s at %s (limit %s); every buffer kept all step: %s; smallest limit "
                   "possible: %s; pinned host: %s\n",
                   format_bytes(p.peak_bytes).c_str(), position_name(m, p, p.peak_position).c_str(),
                   o.limit_bytes > 0 ? format_bytes(o.limit_bytes).c_str() : "none",
                   format_bytes(p.keep_all_bytes).c_str(), format_bytes(p.min_limit_bytes).c_str(),
                   format_bytes(p.host_bytes).c_str());
  out += strprintf("predicted step %.1f ms (compute %.1f ms; recomputation, copy and update stalls "
                   "add %.1f ms; bandwidth %.1f GB/s to the device, %.1f GB/s back)%s\n",
                   p.step_ms, p.compute_ms, p.step_ms - p.compute_ms, o.h2d_gb_s, o.d2h_gb_s,
                   p.fits ? "" : "; DOES NOT FIT");
  return out;
}

namespace {

struct Interval {
  int64_t elems;
  int start, end;  // positions, inclusive
  int64_t* offset;
};

// Each buffer in the given order at the lowest offset (best_fit: in the smallest gap, else on
// top) where it overlaps, in memory, no buffer placed before it that it overlaps in time.
// Returns the buffer's size; at[i]: v[i]'s offset.
int64_t fit_in_order(const std::vector<Interval>& v, const std::vector<size_t>& order, bool best_fit,
                  std::vector<int64_t>& at) {
  at.assign(v.size(), 0);
  int64_t top = 0;
  std::vector<std::pair<int64_t, int64_t>> used;  // [offset, end) of time-overlapping ones
  for (size_t n = 0; n < order.size(); ++n) {
    const Interval& x = v[order[n]];
    used.clear();
    for (size_t m = 0; m < n; ++m) {
      const Interval& y = v[order[m]];
      if (y.start <= x.end && x.start <= y.end) used.emplace_back(at[order[m]], at[order[m]] + y.elems);
    }
    std::sort(used.begin(), used.end());
    int64_t o = 0;
    if (!best_fit) {
      for (const auto& u : used) {
        if (u.first >= o + x.elems) break;
        o = std::max(o, u.second);
      }
    } else {  // the smallest gap it fits in, else the top
      int64_t end = 0, gap = -1;
      for (const auto& u : used) {
        if (u.first >= end + x.elems && (gap < 0 || u.first - end < gap)) gap = u.first - end, o = end;
        end = std::max(end, u.second);
      }
      if (gap < 0) o = end;
    }
    at[order[n]] = o;
    top = std::max(top, o + x.elems);
  }
  return top;
}

// The smallest of first fit and best fit in a few orders (finding the least buffer is NP-hard;
// no single order wins every step): by decreasing size, the longer-lived first among equal
// sizes; by decreasing size x lifetime; by decreasing lifetime; by start; then each of those
// orders with neighbours swapped at random (a fixed seed: the same layout every run), until
// the buffer is the intervals' largest live sum, which no packing beats. By size alone the
// hand-counted step of MemoryPlan.ArenaHoldsAnOutputToItsLastUse packs 17% over its largest
// live sum, which another order reaches. The U-Net for an H200 at batch 1 packed 9-14% over it
// in every fixed order at the study's caps (1024 under 3.3G, 2048 under 12.2G, 3072 under
// 18.3G), and the plan as run, planned again under a limit lowered by that, moved more than it
// needed (at 1024 with the H200's measured times: 150.8 ms where 141.5 fits); the swapped
// orders reach the live sum there (512 of them at most: 64 did not at 2048 under 12.2G;
// GraphMemoryPlan.TheStepsBufferPacksToTheLargestLiveSum). Ten U-Net plans and their buffers
// took 0.43 s of one EPYC core with them.
int64_t pack(std::vector<Interval>& v) {
  auto life = [&](size_t i) { return static_cast<int64_t>(v[i].end - v[i].start + 1); };
  const std::vector<std::function<bool(size_t, size_t)>> orders = {
      [&](size_t a, size_t b) { return v[a].elems > v[b].elems; },
      [&](size_t a, size_t b) {
        return v[a].elems != v[b].elems ? v[a].elems > v[b].elems : life(a) > life(b);
      },
      [&](size_t a, size_t b) { return v[a].elems * life(a) > v[b].elems * life(b); },
      [&](size_t a, size_t b) {
        return life(a) != life(b) ? life(a) > life(b) : v[a].elems > v[b].elems;
      },
      [&](size_t a, size_t b) {
        return v[a].start != v[b].start ? v[a].start < v[b].start : v[a].elems > v[b].elems;
      },
  };
  // The largest sum of sizes live at one position: no layout is smaller.
  int last = 0;
  for (const Interval& x : v) last = std::max(last, x.end);
  int64_t live = 0;
  for (int p = 0; p <= last; ++p) {
    int64_t sum = 0;
    for (const Interval& x : v) sum += x.start <= p && p <= x.end ? x.elems : 0;
    live = std::max(live, sum);
  }
  int64_t best = -1;
  std::vector<int64_t> at, best_at;
  std::vector<size_t> order(v.size());
  auto fit = [&]() {
    for (bool best_fit : {false, true}) {
      const int64_t top = fit_in_order(v, order, best_fit, at);
      if (best < 0 || top < best) best = top, best_at = at;
    }
  };
  std::vector<std::vector<size_t>> sorted;
  for (const auto& before : orders) {
    for (size_t i = 0; i < v.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), before);
    sorted.push_back(order);
    fit();
  }
  Rng rng(0x5eed);
  constexpr int kSwappedOrders = 512;
  for (int t = 0; t < kSwappedOrders && best > live; ++t) {
    order = sorted[static_cast<size_t>(t) % sorted.size()];
    for (size_t i = 0; i + 1 < order.size(); ++i)
      if (rng.next() % 4 == 0) std::swap(order[i], order[i + 1]);
    fit();
  }
  for (size_t i = 0; i < v.size(); ++i) *v[i].offset = best_at[i];
  return std::max<int64_t>(best, 0);
}

}  // namespace

ArenaLayout layout_arena(const std::vector<int64_t>& out_elems, const std::vector<Placement>& where,
                         const std::vector<int>& dropped_after, const std::vector<int>& back_at,
                         const ExecGraph& graph) {
  const int L = static_cast<int>(out_elems.size());
  PDNN_CHECK(L > 0 && where.size() == out_elems.size() && where.back() == Placement::Keep,
             "arena layout: %zu placements for %d layers, the last must be kept", where.size(), L);
  ExecGraph g = graph;
  if (g.inputs.empty())  // a chain
    for (int k = 0; k < L; ++k) g.inputs.push_back({k - 1});
  if (g.restores_inputs.empty()) g.restores_inputs.assign(static_cast<size_t>(L), 1);
  PDNN_CHECK(static_cast<int>(g.inputs.size()) == L && static_cast<int>(g.restores_inputs.size()) == L,
             "arena layout: the graph has %zu layers, the sizes %d", g.inputs.size(), L);
  for (int k = 0; k < L; ++k)
    for (int p : g.inputs[static_cast<size_t>(k)])
      PDNN_CHECK(p >= -1 && p < k, "arena layout: layer %d reads layer %d", k, p);
  const Readers r(g);
  auto bwd = [L](int k) { return 2 * L - 1 - k; };
  ArenaLayout a;
  a.out_offset.assign(static_cast<size_t>(L), 0);
  a.back_offset.assign(static_cast<size_t>(L), -1);
  a.grad_offset.assign(static_cast<size_t>(L), -1);
  a.back_at.assign(static_cast<size_t>(L), -1);
  a.temp_offset.resize(static_cast<size_t>(L));
  for (int k = 0; k < L; ++k) a.temp_offset[static_cast<size_t>(k)].assign(g.inputs[static_cast<size_t>(k)].size(), -1);
  // Where each output comes back: the backward of layer i brings back i and, where it does,
  // its inputs; a recomputed one its input first (Model::restore_output).
  std::vector<char> present(static_cast<size_t>(L));
  for (int k = 0; k < L; ++k) present[static_cast<size_t>(k)] = where[static_cast<size_t>(k)] == Placement::Keep;
  std::function<void(int, int)> restore = [&](int k, int pos) {
    if (present[static_cast<size_t>(k)]) return;
    if (where[static_cast<size_t>(k)] == Placement::Recompute)
      for (int p : g.inputs[static_cast<size_t>(k)])
        if (p >= 0) restore(p, pos);
    a.back_at[static_cast<size_t>(k)] = pos;
    present[static_cast<size_t>(k)] = 1;
  };
  for (int i = L - 1; i >= 0; --i) {
    restore(i, bwd(i));
    if (g.restores_inputs[static_cast<size_t>(i)])
      for (int p : g.inputs[static_cast<size_t>(i)])
        if (p >= 0) restore(p, bwd(i));
  }
  auto given = [](const std::vector<int>& v, int k) {
    return k < static_cast<int>(v.size()) ? v[static_cast<size_t>(k)] : -1;
  };
  // The last backward position that needs each output (its own backward without the reads).
  const bool reads_known = static_cast<int>(g.reads_input.size()) == L &&
                           static_cast<int>(g.reads_output.size()) == L;
  std::vector<int> last_use(static_cast<size_t>(L));
  for (int k = 0; k < L; ++k) {
    const size_t u = static_cast<size_t>(k);
    if (!reads_known) {
      last_use[u] = bwd(k);
      continue;
    }
    int last = g.reads_output[u] || k == L - 1 ? bwd(k) : -1;
    for (int i : r.users[u]) {
      if (g.reads_input[static_cast<size_t>(i)]) last = std::max(last, bwd(i));
      if (where[static_cast<size_t>(i)] == Placement::Recompute)  // its forward again reads k
        last = std::max(last, a.back_at[static_cast<size_t>(i)]);
    }
    last_use[u] = std::max(last, a.back_at[u]);
  }
  std::vector<int> fwd_end(static_cast<size_t>(L));
  for (int k = 0; k < L; ++k) {
    const size_t u = static_cast<size_t>(k);
    const int last_reader = r.users[u].empty() ? k : r.users[u].back();
    fwd_end[u] = where[u] == Placement::Keep ? (k == L - 1 ? 2 * L : std::max(last_reader, last_use[u]))
                                             : last_reader;
    if (where[u] == Placement::Offload) {
      fwd_end[u] = std::max(fwd_end[u], std::min(given(dropped_after, k), 2 * L - 1));
      // A prefetch issued earlier than the model's own restore overlaps with compute.
      const int b = given(back_at, k);
      if (b >= 0) a.back_at[u] = std::min(a.back_at[u], std::max(b, L));
    }
  }
  // 512 bytes in float32, as the caching allocator's blocks; 256 in bf16 (the kernels' widest
  // loads are 16 bytes).
  constexpr int64_t kAlign = 128;
  auto round = [](int64_t n) { return (std::max<int64_t>(n, 1) + kAlign - 1) / kAlign * kAlign; };
  std::vector<Interval> v;
  for (int k = 0; k < L; ++k) {
    const size_t u = static_cast<size_t>(k);
    const int64_t f = round(out_elems[u]);
    v.push_back({f, k, fwd_end[u], &a.out_offset[u]});
    if (where[u] != Placement::Keep) {
      a.back_offset[u] = 0;
      v.push_back({f, a.back_at[u], std::max(a.back_at[u], last_use[u]), &a.back_offset[u]});
    }
    // What its backward writes: the gradients w.r.t. its inputs it is the first to write (from
    // here to the input's own backward), temporaries for the others (here only).
    const std::vector<int>& in = g.inputs[u];
    for (size_t j = 0; j < in.size(); ++j) {
      const int p = in[j];
      if (p < 0) continue;
      const int64_t pf = round(out_elems[static_cast<size_t>(p)]);
      if (r.temp[u][j]) {
        a.temp_offset[u][j] = 0;
        v.push_back({pf, bwd(k), bwd(k), &a.temp_offset[u][j]});
      } else {
        a.grad_offset[static_cast<size_t>(p)] = 0;
        v.push_back({pf, bwd(k), bwd(p), &a.grad_offset[static_cast<size_t>(p)]});
      }
    }
  }
  a.elements = pack(v);
  a.reuse_at.assign(static_cast<size_t>(L), -1);
  for (int k = 0; k < L; ++k) {
    const size_t u = static_cast<size_t>(k);
    if (where[u] != Placement::Offload) continue;
    const int64_t lo = a.out_offset[u], hi = lo + round(out_elems[u]);
    for (const Interval& x : v)
      if (x.start > fwd_end[u] && *x.offset < hi && lo < *x.offset + x.elems &&
          (a.reuse_at[u] < 0 || x.start < a.reuse_at[u]))
        a.reuse_at[u] = x.start;
  }
  return a;
}

StepMem describe_step(Model& model, const Shape& in, Optimizer* opt, double gflops_per_s,
                      int64_t batch_rows, double device_gb_s, Precision precision,
                      int batch_copies, int gpu_sms, const std::string& conv_policy,
                      bool as_run, const CudnnLeastFn& cudnn_least) {
  PDNN_CHECK(batch_copies == 1 || batch_copies == 2, "memory plan: %d copies of the batch",
             batch_copies);
  PDNN_CHECK(gflops_per_s > 0 && std::isfinite(gflops_per_s),
             "memory plan: compute rate %g GFLOP/s must be positive", gflops_per_s);
  PDNN_CHECK(in.rank() >= 1 && in.n() >= 1, "memory plan: input %s has no rows", in.str().c_str());
  model.prepare_fusion();
  const int64_t f = static_cast<int64_t>(sizeof(float));
  // The activations' type (the Model is the autocast boundary: model/model.h).
  const bool bf16 = precision == Precision::Bf16;
  const DType act = bf16 ? DType::BF16 : DType::F32;
  const int64_t a = static_cast<int64_t>(dtype_size(act));
  // The optimizer keeps state_slots floats per parameter (AdaGrad 1, Adam 2).
  int slots = 0;
  if (opt) {
    int64_t state = 0, params = 0;
    for (const auto& kv : opt->state()) state += kv.second->numel();
    for (const Param& p : model.params()) params += p.value->numel();
    slots = params > 0 ? static_cast<int>(std::llround(static_cast<double>(state) / static_cast<double>(params))) : 0;
  }
  StepMem m;
  m.state_slots = slots;
  m.act_elem_bytes = a;
  m.rows = in.n();
  m.batch_rows = batch_rows > 0 ? batch_rows : in.n();
  // Parameters in ParamSet order (layer by layer), each owned by its layer.
  std::vector<size_t> owner = model.param_layers();
  const std::vector<Param> params = model.params();
  for (size_t j = 0; j < params.size(); ++j)
    m.params.push_back(ParamMem{static_cast<int>(j), static_cast<int>(owner[j]), params[j].name,
                                params[j].value->numel() * f});
  // A block of the caching allocator is a multiple of 512 bytes.
  auto block = device_block_bytes;
  const std::vector<Shape> shapes = model.node_shapes(in);
  int64_t timing = 0;  // the chooser's scratch at the first step, the largest layer's
  for (size_t i = 0; i < model.size(); ++i) {
    Layer& l = model.layer(i);
    LayerMem lm;
    lm.index = static_cast<int>(i);
    lm.name = l.describe();
    lm.label = model.label(i);
    lm.inputs = model.node_inputs(i);
    lm.absorbed = model.absorbed(i);
    const int first = lm.inputs[0];
    const Shape s = first < 0 ? in : shapes[static_cast<size_t>(first)];  // its (first) input
    const Shape& out = shapes[i];
    lm.out_shape = out.str();
    lm.out_bytes = lm.absorbed ? 0 : out.numel() * a;
    for (const Param& p : l.params()) lm.param_bytes += p.value->numel() * f;
    lm.grad_bytes = lm.param_bytes;
    lm.opt_state_bytes = slots * lm.param_bytes;
    if (!lm.absorbed) {
      const BackwardNeeds b = l.backward_needs(s, PlanFor{act, gpu_sms, conv_policy, as_run,
                                                        cudnn_least});
      lm.restores_inputs = dynamic_cast<MergeLayer*>(&l) == nullptr || b.input;
      lm.bwd_reads_input = b.input;
      lm.bwd_reads_output = b.output;
      lm.scratch_bytes = b.scratch_bytes > 0 ? block(b.scratch_bytes) : 0;
      lm.recomputable = b.recomputable;
      lm.workspace_bytes = b.workspace_bytes;
      lm.fast_workspace_bytes = b.fast_workspace_bytes;
      lm.columns_bytes = b.columns_bytes;
      lm.past_32bit = b.past_32bit;
      timing = std::max(timing, b.timing_bytes);
      lm.argmax_bytes = std::min(b.argmax_bytes, lm.scratch_bytes);
      lm.batch_coupled = b.batch_coupled;
      lm.fwd_ms = l.flops(s) / (gflops_per_s * 1e6);
      lm.bwd_ms = 2 * lm.fwd_ms;
      if (device_gb_s > 0) {  // the weights read once forward; read, and dW read and written, backward
        lm.fwd_ms += static_cast<double>(lm.param_bytes) / (device_gb_s * 1e6);
        lm.bwd_ms += 3.0 * static_cast<double>(lm.param_bytes) / (device_gb_s * 1e6);
      }
    }
    m.layers.push_back(lm);
  }
  const int64_t row = in.numel() / in.n();
  // The loss's labels: one per row of logits (N,K), one per pixel of a map (N,K,H,W).
  const Shape& s = shapes.back();
  const int64_t labels = s.numel() / std::max<int64_t>(1, s.rank() >= 2 ? s[0] * s[1] : s[0]);
  m.input_bytes = batch_copies * (block(m.batch_rows * row * f) +
                                  block(m.batch_rows * labels * static_cast<int64_t>(sizeof(int32_t))));
  // The loss's softmax, dL/dlogits, per-row (per-pixel) losses and labels, and its metrics'
  // per-chunk sums (softmax_cross_entropy.h).
  m.loss_bytes = 2 * block(s.numel() * f) + block(s.n() * labels * f) +
                 block(s.n() * labels * static_cast<int64_t>(sizeof(int32_t))) +
                 block(ops::metric_parts(s.n() * labels) * static_cast<int64_t>(sizeof(double)));
  if (bf16) {
    // The flat parameter buffer's bf16 copy (its 64-byte gaps included), and Model::forward's
    // and backward's casts: the input to bf16, the output to float32 (what the loss reads),
    // dL/d(output) to bf16 (a float32 last layer, Model::fp32_tail: its input's gradient in
    // float32 instead). (A caller asking for the input's gradient, a GAN's, would add one
    // more in bf16 and the float32 result; a classifier's step does not.)
    m.weight_copy_bytes = block(model.parameters().numel() * a);
    m.cast_bytes = block(in.numel() * a) + block(s.numel() * f) +
                   block(s.numel() * (model.fp32_tail() ? f : a));
  }
  // The optimizer's step count, the RNG position, the recomputations' RNG slots, the metric
  // sums; and a reserve of 1 MiB the description does not itemise: the allocator rounds every
  // tensor to 512 bytes, where a layer's scratch above is rounded once for all its tensors
  // (BatchNorm's mean and inverse std, a pool's argmax and dropout mask), and a plan that gives
  // the workspace every byte left under the cap must not fail on the last 64-byte tensor
  // (issue 26: W4-small ran out under a cap equal to its plan's peak on the H100).
  constexpr int64_t kAllocatorReserve = int64_t{1} << 20;
  // And the chooser's scratch weight gradient while it times a convolution's passes at the
  // first step (BackwardNeeds::timing_bytes): a U-Net at 1024 x 1024, batch 1, under a 4G cap
  // that held every other byte ran out of memory asking for dec2.conv1's (1.1 MiB; its
  // largest, mid.conv2's, is 36 MiB).
  m.small_bytes = 4 * 512 + kAllocatorReserve + timing;
  return m;
}

void layer_times_at(const LayerMem& l, int64_t w, double* fwd_ms, double* bwd_ms) {
  *fwd_ms = l.fwd_ms;
  *bwd_ms = l.bwd_ms;
  if (w < 0 || l.fast_workspace_bytes <= w) return;
  if (l.mid_fwd_ms >= 0 && l.mid_workspace_bytes >= 0 && l.mid_workspace_bytes <= w) {
    *fwd_ms = l.mid_fwd_ms;
    *bwd_ms = l.mid_bwd_ms;
  } else if (l.least_fwd_ms >= 0) {
    *fwd_ms = l.least_fwd_ms;
    *bwd_ms = l.least_bwd_ms;
  }
}

}  // namespace pdnn
