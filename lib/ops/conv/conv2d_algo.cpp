// The GPU's per-shape convolution algorithm choice (conv2d_algo.h).
#include "ops/conv/conv2d_algo.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <limits>

#include "core/allocator.h"
#include "core/cuda_state.h"
#include "core/error.h"
#include "ops/conv/conv2d_3x3.h"
#include "ops/conv/conv2d_gpu_ws.h"
#include "ops/conv/conv2d_gpu.h"
#include "ops/conv/conv2d_k4s2.h"

namespace pdnn {

const char* gpu_conv_policies() {
  return "auto, own, im2col, implicit, direct, cudnn, or per pass: [WORD,]PASS=WORD,... with PASS one of "
         "fwd, bwd-data, bwd-weights";
}

namespace {

bool valid_word(const std::string& p) {
  return p == "auto" || p == "own" || p == "im2col" || p == "implicit" || p == "direct" ||
         p == "cudnn";
}

// Splits "own,bwd-weights=implicit" into its default word and the per-pass words; false on a
// malformed string (an unknown word or pass, a pass named twice, two bare words).
bool split_policy(const std::string& policy, std::string* def, std::string pass_word[3]) {
  *def = "";
  for (int i = 0; i < 3; ++i) pass_word[i] = "";
  size_t start = 0;
  while (true) {
    const size_t comma = policy.find(',', start);
    const std::string item = policy.substr(start, comma == std::string::npos ? std::string::npos
                                                                             : comma - start);
    const size_t eq = item.find('=');
    if (eq == std::string::npos) {
      if (!def->empty() || !valid_word(item)) return false;
      *def = item;
    } else {
      const std::string pass = item.substr(0, eq), word = item.substr(eq + 1);
      int i = 0;
      while (i < 3 && pass != conv_pass_name(static_cast<ConvPass>(i))) ++i;
      if (i == 3 || !pass_word[i].empty() || !valid_word(word)) return false;
      pass_word[i] = word;
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (def->empty()) *def = "auto";
  return true;
}

}  // namespace

bool valid_gpu_conv_policy(const std::string& p) {
  std::string def, words[3];
  return split_policy(p, &def, words);
}

int64_t gpu_conv_timing_bytes(const std::string& policy, ConvAlgo forced, int64_t weight_elems,
                              int64_t bias_elems) {
  if (forced != ConvAlgo::Auto) return 0;
  const std::string pp = gpu_conv_pass_policy(policy, ConvPass::BackwardWeights);
  if (pp != "auto" && pp != "own") return 0;
  return device_block_bytes(weight_elems * 4) +
         (bias_elems > 0 ? device_block_bytes(bias_elems * 4) : 0);
}

std::string gpu_conv_pass_policy(const std::string& policy, ConvPass pass) {
  std::string def, words[3];
  PDNN_CHECK(split_policy(policy, &def, words), "--conv-algo %s: not one of %s", policy.c_str(),
             gpu_conv_policies());
  const std::string& w = words[static_cast<int>(pass)];
  return w.empty() ? def : w;
}

namespace {

// im2col's kernels (im2col.cu) index a chunk of images in 32 bits, and a chunk is one image
// at the least.
bool im2col_fits(const ConvGeom& g) { return g.c * g.h * g.w < INT_MAX; }

bool own_algo(ConvAlgo a) {
  return a == ConvAlgo::Im2col || a == ConvAlgo::Implicit || a == ConvAlgo::Direct;
}

}  // namespace

bool gpu_conv_image_past_32bit(const ConvGeom& g, int64_t k) {
  return g.c * g.h * g.w >= INT_MAX || k * g.oh * g.ow >= INT_MAX;
}

std::vector<ConvAlgo> gpu_conv_candidates(ConvPass pass, const ConvGeom& g, int64_t n, int64_t k,
                                          const std::string& policy, bool have_cudnn,
                                          DType dtype) {
  (void)pass;
  std::vector<ConvAlgo> all;
  // The implicit GEMM takes images past 2^31 elements in its 64-bit instantiation
  // (conv_implicit_fits, conv2d_gpu_ws.h: a plane and n*oh*ow stay under 2^31).
  if (cuda::conv_implicit_fits(g, n, k)) all.push_back(ConvAlgo::Implicit);
  // im2col where its kernels can run the shape, or where nothing else is left (its own check
  // then says why the pass cannot run)
  if (im2col_fits(g) || all.empty()) all.insert(all.begin(), ConvAlgo::Im2col);
  // the halo-tile kernels (conv2d_direct.cu): 3x3 stride-1 layers in fp32, TF32 and bf16, 4x4
  // stride-2 padding-1 layers in bf16 (over their space-to-depth phases: 4c channels)
  const bool k4s2 = dtype == DType::BF16 && conv4x4s2_applies(g) &&
                    4 * g.c * (g.h / 2 + 1) * (g.w / 2 + 2) < INT_MAX;  // its phases' indexing
  if ((conv3x3_applies(g) || k4s2) && !gpu_conv_image_past_32bit(g, k))
    all.push_back(ConvAlgo::Direct);
  // cuDNN's 4-d descriptors hold an image of fewer than 2^31 elements (conv2d_cudnn.cu)
  if (have_cudnn && !gpu_conv_image_past_32bit(g, k)) all.push_back(ConvAlgo::Cudnn);
  std::vector<ConvAlgo> out;
  ConvAlgo forced = ConvAlgo::Auto;
  if (policy != "auto" && policy != "own") PDNN_CHECK(parse_conv_algo(policy, &forced),
                                                      "--conv-algo %s: not one of %s",
                                                      policy.c_str(), gpu_conv_policies());
  for (ConvAlgo a : all) {
    if (forced != ConvAlgo::Auto) {
      if (a == forced) out.push_back(a);
    } else if (policy == "auto" || own_algo(a)) {
      out.push_back(a);
    }
  }
  if (out.empty())  // the forced algorithm cannot run this pass: pdnn's own
    for (ConvAlgo a : all)
      if (own_algo(a)) out.push_back(a);
  return out;
}

ConvWorkspaceBounds gpu_conv_workspace_bounds(const ConvGeom& g, int64_t n, int64_t k, Act act,
                                              DType dtype, int sms, const std::string& policy,
                                              ConvAlgo forced, const CudnnLeastFn& cudnn_least) {
  ConvWorkspaceBounds b;
  const int64_t f = static_cast<int64_t>(sizeof(float));
  // im2col's columns only where it is a candidate (gpu_conv_candidates: none past its 32-bit
  // indexing while the implicit GEMM runs the shape)
  b.columns = im2col_fits(g) || !cuda::conv_implicit_fits(g, n, k)
                  ? static_cast<int64_t>(cuda_conv_workspace_floats(g, n, k)) * f
                  : 0;
  const bool by_layer =
      forced != ConvAlgo::Auto && forced != ConvAlgo::PerImage && forced != ConvAlgo::Batched;
  for (ConvPass pass : {ConvPass::Forward, ConvPass::BackwardData, ConvPass::BackwardWeights}) {
    // The chooser's candidates under a plan (gpu_conv_choose): cuDNN under auto too, where it
    // runs only if the workspace leaves it room (its least counts where it is named, or alone).
    const std::string pp = gpu_conv_pass_policy(policy, pass);
    const std::vector<ConvAlgo> cands =
        by_layer ? std::vector<ConvAlgo>{forced}
                 : gpu_conv_candidates(pass, g, n, k, pp, pp == "cudnn" || pp == "auto", dtype);
    const bool cudnn_least_counts = cands.size() == 1 || pp == "cudnn";
    int64_t least = std::numeric_limits<int64_t>::max();
    for (ConvAlgo a : cands) {
      int64_t lo = 0, hi = 0;
      if (a == ConvAlgo::Cudnn) {
        // what it keeps beside its own algorithm (dy through the activation, bf16's weight
        // gradient, the weight gradient's scratch its algorithm is found with under a plan),
        // and its algorithm, which asks at most the plan's allowance and at least what cuDNN
        // says (counted where cuDNN's least counts: the plan's least may run it alone)
        const bool b16 = dtype == DType::BF16;
        const int64_t beside =
            static_cast<int64_t>(cuda::conv2d_cudnn_beside_floats(pass, g, n, k, act, b16) +
                                 cuda::conv2d_cudnn_find_scratch_floats(pass, g, k, b16)) * f;
        const int64_t own =
            cudnn_least_counts && cudnn_least ? (cudnn_least(pass, g, n, k, dtype) + f - 1) / f * f
                                              : 0;
        lo = beside + own;
        hi = beside + std::max(own, static_cast<int64_t>(cuda::kCudnnPlanWorkspaceBytes));
      } else {
        lo = hi = static_cast<int64_t>(gpu_conv_own_ws_floats(pass, a, g, n, k, act, dtype, sms)) * f;
      }
      if (a != ConvAlgo::Cudnn || cudnn_least_counts) least = std::min(least, lo);
      b.most = std::max(b.most, hi);
    }
    b.least = std::max(b.least, least);
  }
  return b;
}

CudnnLeastFn gpu_conv_cudnn_least(Context& ctx) {
#if PDNN_HAVE_CUDA
  if (!ctx.has_cuda()) return {};
  return [&ctx](ConvPass pass, const ConvGeom& g, int64_t n, int64_t k, DType dtype) -> int64_t {
    if (ctx.cuda().cudnn() == nullptr) return 0;  // cuDNN cannot run: the pass says so
    return static_cast<int64_t>(
        cuda::conv2d_cudnn_least_bytes(pass, g, n, k, ctx.cuda_exec(), dtype));
  };
#else
  (void)ctx;
  return {};
#endif
}

const char* gpu_conv_precision(bool bf16, bool tf32, bool transforms) {
  return arithmetic_name(bf16 ? Precision::Bf16 : tf32 ? Precision::Tf32 : Precision::Fp32,
                         transforms);
}

std::string gpu_conv_key(ConvPass pass, const ConvGeom& g, int64_t n, int64_t k, Act act,
                         const char* precision) {
  char s[256];
  std::snprintf(s, sizeof s, "conv2d %s n%lld c%lldx%lldx%lld k%lld %lldx%lld s%lld,%lld p%lld,%lld %s %s",
                conv_pass_name(pass), (long long)n, (long long)g.c, (long long)g.h,
                (long long)g.w, (long long)k, (long long)g.kh, (long long)g.kw, (long long)g.sh,
                (long long)g.sw, (long long)g.ph, (long long)g.pw,
                act.kind == FusedAct::None ? "none" : fused_act_name(act.kind), precision);
  return s;
}

namespace {

double mib(size_t floats) { return static_cast<double>(floats) * 4.0 / 1048576.0; }

// The timing's early ends (choose_algo): one timed run from this many ms; none more for a
// candidate this many times the best so far.
constexpr double kOneRunMs = 20.0;
constexpr double kLosingRatio = 1.5;

// "conv2d fwd n1 c128x1024x1024 ... (in dec1.conv1 forward)": the pass's key and, inside a
// model's step, the layer it runs for (the context's memory role).
std::string who(Context& ctx, const std::string& key) {
  const std::string role = ctx.memory_role();
  return role.empty() ? key : key + " (in " + role + ")";
}

// A forced algorithm that asks more than the shared workspace's limit: a clear error, before
// anything is asked of the workspace.
[[noreturn]] void fail_too_big(Context& ctx, const std::string& key, ConvAlgo a, size_t need,
                               size_t limit, const char* how) {
  PDNN_FAIL("%s: convolution algorithm %s (%s) needs %.1f MiB of workspace, but the memory "
            "plan's shared workspace is %.1f MiB (--gpu-memory-limit): choose an algorithm that "
            "fits (--conv-algo own or auto choose among those that do) or raise the limit",
            who(ctx, key).c_str(), conv_algo_name(a), how, mib(need), mib(limit));
}

// cuDNN's own algorithm for a pass the tuning chose cuDNN for, in the tuning beside the choice
// ("cudnn-pick " + its key), so that a run reading the cache file runs the algorithm the run
// that timed the choice found, rather than finding again on a GPU that has run nothing yet
// (conv2d_gpu.h, conv2d_cudnn_picks).
const std::string kCudnnPick = "cudnn-pick ";
void keep_cudnn_picks(Context& ctx, ConvPass pass, const ConvGeom& g, int64_t n, int64_t k,
                      Act act, DType dtype) {
#if PDNN_HAVE_CUDA
  for (const auto& [key, value] : cuda::conv2d_cudnn_picks(pass, g, n, k, act, ctx.cuda_exec(), dtype))
    ctx.tuning().keep(kCudnnPick + key, value);
#else
  (void)ctx, (void)pass, (void)g, (void)n, (void)k, (void)act, (void)dtype;
#endif
}
void adopt_cudnn_picks(Context& ctx, ConvPass pass, const ConvGeom& g, int64_t n, int64_t k,
                       Act act, DType dtype) {
#if PDNN_HAVE_CUDA
  const Tuning& tune = ctx.tuning();
  cuda::conv2d_cudnn_adopt_picks(pass, g, n, k, act, ctx.cuda_exec(), dtype,
                                 [&](const std::string& key) -> const std::string* {
                                   const Tuning::Choice* c = tune.find(kCudnnPick + key);
                                   return c ? &c->choice : nullptr;
                                 });
#else
  (void)ctx, (void)pass, (void)g, (void)n, (void)k, (void)act, (void)dtype;
#endif
}

}  // namespace

ConvAlgo gpu_conv_choose(Context& ctx, ConvPass pass, const ConvGeom& g, int64_t n, int64_t k,
                         Act act, DType dtype, ConvAlgo requested,
                         const std::function<size_t(ConvAlgo)>& ws_floats,
                         const std::function<void(ConvAlgo, bool timing)>& run) {
  CudaState& cs = ctx.cuda();
  // One rule for every way an algorithm is chosen (forced by the layer or by --conv-algo, read
  // from the tuning, or timed): under a memory plan the shared workspace has a limit
  // (Context::set_workspace_limit, the plan's budget), and an algorithm asking more than it is
  // not run. cuDNN's own algorithms are picked within it too (conv2d_cudnn.cu).
  const size_t limit = ctx.workspace_limit(Device::CUDA);
  const bool is_bf16 = dtype == DType::BF16;
  const char* prec = gpu_conv_precision(is_bf16, ctx.precision() == Precision::Tf32,
                                        ctx.conv_transforms());
  // cuDNN's handle is made on first use: a choice of cuDNN (forced, or read from a cache file)
  // opens it here, before the pass asks the context for its handle.
  if (requested != ConvAlgo::Auto && requested != ConvAlgo::PerImage &&
      requested != ConvAlgo::Batched) {
    PDNN_CHECK(requested != ConvAlgo::Cudnn || cs.cudnn() != nullptr,
               "convolution algorithm cudnn: %s", cudnn_status().c_str());
    if (limit > 0) {
      const size_t need = ws_floats(requested);
      if (need > limit)
        fail_too_big(ctx, gpu_conv_key(pass, g, n, k, act, prec), requested, need, limit,
                     "the layer's");
    }
    return requested;
  }
  Tuning& tune = ctx.tuning();
  const std::string policy = gpu_conv_pass_policy(tune.policy(), pass);
  // Under a memory plan (--gpu-memory-limit: the workspace has a limit) cuDNN finds its
  // algorithm in the pass's own buffers and the plan's workspace (conv2d_cudnn.cu): nothing
  // outside the plan. Its choices are kept apart from an unplanned run's.
  const bool planned = limit > 0 && policy == "auto";
  // The pass's policy is part of the key: "own" must not reuse a cuDNN choice "auto" made (nor
  // a planned run one an unplanned run made).
  const std::string unplanned_key = gpu_conv_key(pass, g, n, k, act, prec) + " " + policy;
  const std::string key = planned ? unplanned_key + "-planned" : unplanned_key;
  const size_t listed = tune.made().size();  // lookup lists a choice at its first use
  if (const Tuning::Choice* c = tune.lookup(key)) {
    ConvAlgo a;
    PDNN_CHECK(parse_conv_algo(c->choice, &a) && a != ConvAlgo::Auto,
               "algorithm cache %s: '%s' is no convolution algorithm (for %s); remove the file",
               tune.cache_file().c_str(), c->choice.c_str(), key.c_str());
    PDNN_CHECK(a != ConvAlgo::Cudnn || cs.cudnn() != nullptr,
               "algorithm cache %s chose cudnn for %s, but %s: remove the file or pass "
               "--conv-algo-cache none", tune.cache_file().c_str(), key.c_str(),
               cudnn_status().c_str());
    // cuDNN's own algorithm as the run that chose cuDNN found it (conv2d_cudnn_picks), taken
    // at the choice's first use in this run (every call of the pass asks: eager steps).
    if (a == ConvAlgo::Cudnn && limit == 0 && tune.made().size() > listed)
      adopt_cudnn_picks(ctx, pass, g, n, k, act, dtype);
    // A choice made under a larger workspace (another cap, or none) is made again here.
    if (limit == 0 || ws_floats(a) <= limit) return a;
    std::printf("conv algorithm: %s: %s, chosen before, needs %.1f MiB of workspace, past the "
                "memory plan's %.1f MiB: chosen again\n",
                key.c_str(), conv_algo_name(a), mib(ws_floats(a)), mib(limit));
  }
  // Under a plan, the unplanned choice of the shape (this run's, or the cache file's) stands
  // where it is one of pdnn's own algorithms and fits the plan's workspace: those run the same
  // under a plan, while cuDNN, the one candidate a plan can slow (it finds its algorithm within
  // what the plan leaves), lost to it without one. A cuDNN choice is timed again. (The memory
  // table's capped runs timed every pass of their side a second time: W4 at 1344 under 77G.)
  if (planned) {
    ConvAlgo a;
    const Tuning::Choice* c = tune.find(unplanned_key);
    if (c && parse_conv_algo(c->choice, &a) && own_algo(a) && ws_floats(a) <= limit) {
      tune.put(key, c->choice, c->ms);
      std::printf("conv algorithm: %s -> %s (the unplanned choice, %.3f ms: pdnn's own, within "
                  "the plan's %.1f MiB of workspace)\n",
                  key.c_str(), conv_algo_name(a), c->ms, mib(limit));
      return a;
    }
  }
  PDNN_CHECK(!cuda_stream_capturing(cs.stream()),
             "%s: no algorithm chosen before the CUDA graph capture (run the step eagerly once "
             "first)", key.c_str());
  // cuDNN is opened (and its handle made) only when the policy may use it.
  const bool want_cudnn = policy == "auto" || policy == "cudnn";
  const std::vector<ConvAlgo> cands =
      gpu_conv_candidates(pass, g, n, k, policy, want_cudnn && cs.cudnn() != nullptr, dtype);
  if (cands.size() == 1 && policy != "auto" && policy != "own") {
    // Forced, and able to run the pass: no timing (ms 0 in the summary says so).
    if (limit > 0 && ws_floats(cands.front()) > limit)
      fail_too_big(ctx, key, cands.front(), ws_floats(cands.front()), limit, "--conv-algo");
    tune.put(key, conv_algo_name(cands.front()), 0.0);
    std::printf("conv algorithm: %s -> %s (forced)\n", key.c_str(), conv_algo_name(cands.front()));
    return cands.front();
  }
  // Without a limit, workspace beyond what the context holds must come out of the free device
  // memory (with a margin for the allocator's rounding and cuBLAS).
  const size_t have = ctx.workspace_size(Device::CUDA) * sizeof(float);
  const size_t free_bytes = cs.free_memory();
  ConvAlgo best = cands.front();
  double best_ms = std::numeric_limits<double>::infinity();
  std::string tried, left_out;
  for (ConvAlgo a : cands) {
    double ms = std::numeric_limits<double>::infinity();
    try {
      const size_t need_floats = ws_floats(a), need = need_floats * sizeof(float);
      if (limit > 0 && need_floats > limit) {
        std::printf("conv algorithm: %s: %s left out: its workspace (%.1f MiB) is past the "
                    "memory plan's (%.1f MiB)\n", key.c_str(), conv_algo_name(a), mib(need_floats),
                    mib(limit));
        left_out += strprintf("%s%s %.1f MiB", left_out.empty() ? "" : ", ", conv_algo_name(a),
                              mib(need_floats));
        continue;
      }
      if (limit == 0 && cands.size() > 1 && need > have &&
          need - have + (size_t{64} << 20) > free_bytes) {
        std::printf("conv algorithm: %s: %s left out: its workspace (%.0f MB) does not fit the "
                    "free device memory\n", key.c_str(), conv_algo_name(a), need / 1e6);
        left_out += strprintf("%s%s %.0f MB (free memory)", left_out.empty() ? "" : ", ",
                              conv_algo_name(a), need / 1e6);
        continue;
      }
      WorkspaceTiming timing(ctx);  // a candidate's workspace is not yet the step's need
      run(a, true);                 // warm-up: loads the kernels, sizes the workspace
    } catch (const Error& e) {  // e.g. cuDNN has no algorithm for the shape: not a candidate
      std::printf("conv algorithm: %s: %s left out: %s\n", key.c_str(), conv_algo_name(a), e.what());
      left_out += strprintf("%s%s (%s)", left_out.empty() ? "" : ", ", conv_algo_name(a), e.what());
      continue;
    }
    // The best of up to 3 runs. Fewer where more cannot change the choice: a run of
    // kOneRunMs or more (its jitter, microseconds, is far below a percent of it), or one
    // already kLosingRatio times the best so far. At large sides the timing was most of a run's
    // first block (W4 at 1344: ~45 s of its 52; the U-Net at 5792: 237 s).
    for (int rep = 0; rep < 3; ++rep) {
      cuda_delay(cs.stream(), 1000);  // GPU time only, as in the step's CUDA graph
      CUevent_st* t0 = cuda_event_record(cs.stream());
      WorkspaceTiming timing(ctx);
      run(a, true);
      const double t = cuda_event_elapsed_ms(t0, cuda_event_record(cs.stream()));
      ms = std::min(ms, t);
      if (t >= kOneRunMs || t > kLosingRatio * best_ms) break;
    }
    if (ms < best_ms) {
      best_ms = ms;
      best = a;
    }
    char t[64];
    std::snprintf(t, sizeof t, "%s%s %.3f", tried.empty() ? "" : ", ", conv_algo_name(a), ms);
    tried += t;
  }
  if (tried.empty()) {
    const std::string in =
        limit > 0 ? strprintf(" in the memory plan's workspace of %.1f MiB", mib(limit)) : "";
    PDNN_FAIL("%s: no convolution algorithm can run this pass%s: %s%s", who(ctx, key).c_str(),
              in.c_str(), left_out.c_str(), limit > 0 ? " (raise --gpu-memory-limit)" : "");
  }
  tune.put(key, conv_algo_name(best), best_ms);
  if (best == ConvAlgo::Cudnn && limit == 0) keep_cudnn_picks(ctx, pass, g, n, k, act, dtype);
  // One line per choice, at the first step of each shape: the run's log says what ran.
  std::printf("conv algorithm: %s -> %s (ms: %s)\n", key.c_str(), conv_algo_name(best),
              tried.c_str());
  return best;
}

}  // namespace pdnn
