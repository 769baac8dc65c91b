// The command-line flags of the shared run loop (run_loop.h), for every training app: --epochs,
// --seed, --threads, --out, --checkpoint, --resume, --overwrite, --save-init, --save-weights,
// --steps, --bench-csv, --profile, --profile-out, the device flags and the data-parallel ones
// (--distributed, --overlap, --bucket-mb, --dist-timeout); and validators that give readable
// messages for out-of-range values.
// Header-only on purpose: CLI11 is an app dependency, and only apps include this file.
#pragma once
#include <CLI/CLI.hpp>
#include <omp.h>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/context.h"
#include "core/cuda_state.h"
#include "core/device.h"
#include "core/error.h"
#include "core/precision.h"
#include "dist/communicator.h"
#include "model/memory_plan.h"
#include "ops/conv/conv2d_algo.h"
#include "run/output_files.h"
#include "run/run_info.h"
#include "run/run_config.h"

namespace pdnn {

// The context a run's flags ask for: --device cuda fails here, in one line, without a GPU or a
// CUDA build; TF32 set as asked.
inline Device run_device(const RunConfig& cfg) {
  return cfg.device == "cuda" ? Device::CUDA : Device::CPU;
}
// The GPU a run's context opens: a data-parallel rank's local rank (one GPU per rank), else 0.
//   Context ctx(threads, rc.seed, run_device(rc), run_gpu(rc));
inline int run_gpu(const RunConfig& cfg) { return cfg.comm ? cfg.comm->local_rank() : 0; }

// A whole number 0..2^64-1 written in decimal: no sign, no exponent, no wrap-around.
inline bool parse_u64(const std::string& s, uint64_t& v) {
  if (s.empty() || s.size() > 20 || s.find_first_not_of("0123456789") != std::string::npos)
    return false;
  errno = 0;
  const unsigned long long x = std::strtoull(s.c_str(), nullptr, 10);
  if (errno == ERANGE) return false;
  v = x;
  return true;
}

inline CLI::Validator u64_validator() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        uint64_t v;
        return parse_u64(s, v) ? std::string()
                               : "'" + s + "' is not a whole number from 0 to 18446744073709551615";
      },
      "0..2^64-1");
}

// A finite number > 0 (CLI::PositiveNumber lets nan and inf through and prints DBL_MAX in
// full when it refuses).
inline CLI::Validator positive_finite_validator() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double v = std::strtod(s.c_str(), &end);
        if (end == s.c_str() || *end != '\0') return "'" + s + "' is not a number";
        if (!std::isfinite(v) || errno == ERANGE || v <= 0)
          return "'" + s + "' must be a positive finite number";
        return std::string();
      },
      "> 0");
}

// --memory-plan and --gpu-memory-limit, for the apps that train a Sequential classifier (the
// planner describes one model's step).
inline void add_memory_flags(CLI::App& app, RunConfig& cfg) {
  app.add_flag("--memory-plan", cfg.memory_plan,
               "print the training step's memory plan before training: per layer the bytes it "
               "keeps for backward, which backward reads them, where they live, the peak");
  app.add_option_function<std::string>(
         "--gpu-memory-limit",
         [&cfg](const std::string& v) { cfg.gpu_memory_limit = parse_memory_size(v, "--gpu-memory-limit"); },
         "device memory the training step must fit under, e.g. 20G (K, M, G, T: powers of "
         "1024): the plan chooses what to keep, offload to host or recompute, and a step that "
         "cannot fit stops before training, naming the smallest limit that would")
      ->type_name("SIZE")
      ->check([](const std::string& v) { return memory_size_problem(v, nullptr); });
  CLI::Option* times =
      app.add_option("--layer-times", cfg.layer_times,
                     "a --profile CSV of the same model: the plan's cost model uses its measured "
                     "layer times instead of estimates from FLOPs (made at another batch or size, "
                     "each layer's scaled by its output elements)")
          ->check(CLI::ExistingFile);
  // The profiles read beside --layer-times: each a file that exists.
  const auto beside_times = [&app, times](const char* flag, std::string& path, const char* what) {
    app.add_option(flag, path, what)->check(CLI::ExistingFile)->needs(times);
  };
  beside_times("--layer-times-least", cfg.layer_times_least,
               "with --layer-times: a --profile CSV made with --least-workspace, the times of "
               "the layers whose faster algorithms the limit's workspace leaves out");
  beside_times("--layer-times-mid", cfg.layer_times_mid,
               "with --layer-times-least: a --profile CSV made with --workspace-held, the "
               "times of the layers whose im2col columns the limit's workspace leaves out "
               "while it holds at least that workspace (scaled as the times are)");
  beside_times("--layer-times-wide", cfg.layer_times_wide,
               "with --layer-times: a --profile CSV made with --conv-algo implicit, the times "
               "of the convolutions whose images pass 2^31 elements at this size, which only "
               "the implicit GEMM's 64-bit kernels run (scaled as the times are)");
  app.add_option_function<std::string>(
         "--workspace-held",
         [&cfg](const std::string& v) { cfg.workspace_held = parse_memory_size(v, "--workspace-held"); },
         "on the GPU: the convolutions' shared workspace held to SIZE (at least what every layer "
         "runs in), as a plan's limit holds it, to profile the algorithms that fit for "
         "--layer-times-mid")
      ->type_name("SIZE")
      ->check([](const std::string& v) { return memory_size_problem(v, nullptr); });
  app.add_option("--plan-copy-gbs", cfg.plan_copy_gb_s,
                 "on the CPU: the GPU's host<->device copy rate (GB/s, each way) a --memory-plan "
                 "made there assumes for its offloads (default 20; a GPU run measures its own)")
      ->check(CLI::Range(0.001, 1e4));
  app.add_option_function<std::string>(
         "--plan-context",
         [&cfg](const std::string& v) { cfg.plan_context = parse_memory_size(v, "--plan-context"); },
         "on the CPU: a --memory-plan made there counts a CUDA context of SIZE, cuBLAS's workspace "
         "and the batch's second staging buffer, as a GPU run does (its context measured: ~606M "
         "on an H200 with cuDNN; without the flag none of them, and a tight limit's plan is "
         "optimistic)")
      ->type_name("SIZE")
      ->check([](const std::string& v) { return memory_size_problem(v, nullptr); });
  app.add_flag("--least-workspace", cfg.least_workspace,
               "on the GPU: the convolutions run only the algorithms asking the least workspace, "
               "as under a tight --gpu-memory-limit (im2col's columns left out, cuDNN within it), to "
               "profile them for --layer-times-least");
}

// fp32, tf32 or bf16 (core/precision.h).
inline CLI::Validator precision_validator() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        Precision p;
        return parse_precision(s, &p) ? std::string()
                                      : "'" + s + "' is not one of fp32, tf32, bf16";
      },
      "fp32|tf32|bf16");
}

// Why a run of cfg's precision cannot run here ("" when it can): the CPU has no bf16 path
// (never a silent fp32 run). bf16 runs under a memory plan too (--gpu-memory-limit,
// --memory-plan), which counts its activations' 2 bytes and the weights' bf16 copy.
inline std::string precision_refusal(const RunConfig& cfg) {
  if (cfg.precision != Precision::Bf16) return "";
  if (cfg.device != "cuda")
    return "--precision bf16: the CPU has no bf16 path (pdnn's bf16 kernels run on the GPU); "
           "use fp32 on the CPU";
  return "";
}

// Flags whose values need converting after parsing (finish_run_flags).
struct RunFlagText {
  std::string seed = "1";
  int* threads = nullptr;  // the app's --threads
  bool distributed = false;
  DistOptions dist;
};

// Adds the run-loop flags to `app`, writing into cfg (its fields hold the defaults) and
// threads. `app_name` names the app in help texts (results/<app_name>/...).
inline void add_run_flags(CLI::App& app, RunConfig& cfg, int& threads, RunFlagText& text,
                          const std::string& app_name) {
  text.seed = std::to_string(cfg.seed);
  text.threads = &threads;
  app.add_option("--epochs", cfg.epochs, "epochs in all (a resumed run continues up to this)")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxEpochs));
  app.add_option("--threads", threads,
                 strprintf("OpenMP/OpenBLAS threads (0 = all cores: %d here; with "
                           "--distributed, the cores divided among the ranks)",
                           omp_get_num_procs()))
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  app.add_option("--device", cfg.device,
                 "cpu or cuda (the first GPU; with --distributed, the rank's local GPU)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option_function<std::string>(
         "--cuda-graph", [&cfg](const std::string& v) { cfg.cuda_graph = v == "on"; },
         "on the GPU, capture the whole training step as one CUDA graph and replay it "
         "(default on)")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option_function<std::string>(
         "--batch-copy",
         [&cfg](const std::string& v) { cfg.overlap_batch_copy = v == "overlapped"; },
         "on the GPU, copy the next batch from the host on a copy stream while the step before "
         "runs (overlapped, default; the batch then takes its device memory twice) or on the "
         "compute stream after it (serial)")
      ->check(CLI::IsMember({"overlapped", "serial"}));
  auto* precision =
      app.add_option_function<std::string>(
             "--precision", [&cfg](const std::string& v) { parse_precision(v, &cfg.precision); },
             "on the GPU, the arithmetic: fp32 (default), tf32 (the matrix products on the "
             "tensor cores with TF32 inputs, fp32 sums) or bf16 (autocast: bf16 activations and "
             "weight copies, fp32 sums, fp32 weights, optimizer, BatchNorm statistics and "
             "losses; GPU only)")
          ->type_name("PREC")
          ->check(precision_validator());
  app.add_flag_callback(
         "--tf32", [&cfg] { cfg.precision = Precision::Tf32; }, "the same as --precision tf32")
      ->excludes(precision);
  app.add_flag("--conv-transforms", cfg.conv_transforms,
               "on the GPU in fp32, let cuDNN's FFT and Winograd algorithms compete for the "
               "convolutions, as PyTorch's fp32 does (faster weight gradients; their rounding "
               "error is larger than summation's, within TF32's; default: sums only)");
  app.add_option("--conv-algo", cfg.conv_algo,
                 std::string("on the GPU, the convolution algorithms: auto (time each, cuDNN "
                             "included where found, at the first step of each shape), own "
                             "(pdnn's kernels only), or one of them; one of: ") +
                     gpu_conv_policies())
      ->capture_default_str()
      ->check([](const std::string& v) {
        return valid_gpu_conv_policy(v) ? std::string()
                                        : "'" + v + "' is not one of " + gpu_conv_policies();
      });
  app.add_option("--conv-algo-cache", cfg.conv_algo_cache,
                 "file that keeps the GPU's per-shape algorithm choices across runs (default "
                 "$XDG_CACHE_HOME/pdnn/algorithms.tsv, else ~/.cache/pdnn/algorithms.tsv; "
                 "none: keep nothing; a CPU run checks that it can be written and says it does "
                 "not use it)");
  app.add_option("--seed", text.seed,
                 "seed of the initial weights, data order and dropout (0..2^64-1)")
      ->capture_default_str()
      ->type_name("UINT")
      ->check(u64_validator());
  app.add_option("--out", cfg.out,
                 "CSV to append one row per epoch to (default runs/" + app_name +
                     "/<model>_<dataset>.csv)");
  auto* checkpoint = app.add_option(
      "--checkpoint", cfg.checkpoint,
      "checkpoint file, written before the first epoch and at each epoch end");
  auto* save_init = app.add_option(
      "--save-init", cfg.save_init,
      "also write the initial weights as a checkpoint (for scripts/twins/torch_reference.py; an "
      "existing file is replaced only with --overwrite)");
  app.add_option("--save-weights", cfg.save_weights,
                 "after the last epoch, write the trained weights alone (no optimizer state; "
                 "e.g. the judge of gan_score --classifier; an existing file is replaced only "
                 "with --overwrite)");
  auto* resume = app.add_flag("--resume", cfg.resume,
                              "continue from --checkpoint (weights, optimizer, epoch, RNG)")
                     ->needs(checkpoint)
                     ->excludes(save_init);
  // Needs --checkpoint, --save-init or --save-weights: the run loop checks that (CLI11's
  // needs() is an "and").
  app.add_flag("--overwrite", cfg.overwrite,
               "a fresh run may replace an existing --checkpoint, --save-init or --save-weights "
               "file (without "
               "it the run refuses, so a trained checkpoint is never lost)")
      ->excludes(resume);
  app.add_option("--steps", cfg.steps,
                 "benchmark: run this many training steps (over as many epochs as that takes; "
                 "no evaluation, CSV or checkpoint) and print step times")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_option("--bench-csv", cfg.bench_csv,
                 "with --steps: append the step-time row (median/min/max ms) to this CSV")
      ->needs("--steps");
  app.add_flag("--profile", cfg.profile, "per-layer time table (printed, and written as CSV)");
  app.add_option("--profile-out", cfg.profile_out,
                 "profile CSV (default runs/" + app_name +
                     "/profile_<model>_<dataset>_b<batch>_t<threads>.csv)");
  auto* dist = app.add_flag(
      "--distributed", text.distributed,
      "data-parallel training, one process per rank started by  mpirun -np N  (one GPU per rank "
      "with --device cuda): rank r trains on rows [r*B/N, (r+1)*B/N) of every global batch B, "
      "gradients are averaged over the ranks; rank 0 writes the files (--threads default: the "
      "cores divided among the ranks)");
  app.add_option_function<std::string>(
         "--overlap", [&text](const std::string& v) { text.dist.overlap = v == "on"; },
         "with --distributed: all-reduce gradient buckets during backward (on, default) or the "
         "whole gradient after it (off)")
      ->check(CLI::IsMember({"on", "off"}))
      ->needs(dist);
  app.add_option("--bucket-mb", text.dist.bucket_mb,
                 "with --distributed: gradient bucket size in MB (the first is capped at 1)")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 1e6))
      ->needs(dist);
  app.add_option("--dist-timeout", text.dist.timeout_s,
                 "with --distributed: seconds a rank waits for the others before it gives up "
                 "(a rank died or hangs)")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 1e6))
      ->needs(dist);
}

// After app.parse(): the converted values and which flags were given.
inline void finish_run_flags(const CLI::App& app, RunConfig& cfg, const RunFlagText& text) {
  PDNN_CHECK(parse_u64(text.seed, cfg.seed), "--seed: '%s' is not a whole number 0..2^64-1",
             text.seed.c_str());
  cfg.seed_given = app.count("--seed") > 0;
  if (const std::string why = precision_refusal(cfg); !why.empty()) PDNN_FAIL("%s", why.c_str());
  PDNN_CHECK(!cfg.conv_transforms || (cfg.device == "cuda" && cfg.precision == Precision::Fp32),
             "--conv-transforms: %s",
             cfg.device != "cuda"
                 ? "a GPU flag (cuDNN's FFT and Winograd); the CPU's convolutions choose "
                   "Winograd per shape"
                 : "for --precision fp32 only (TF32 lets them compete already; bf16 keeps "
                   "direct sums)");
  PDNN_CHECK(!cfg.least_workspace || cfg.device == "cuda",
             "--least-workspace: the CPU's convolutions have no shared workspace to hold to the "
             "least (a GPU's flag, for --layer-times-least)");
  PDNN_CHECK(cfg.workspace_held == 0 || cfg.device == "cuda",
             "--workspace-held: the CPU's convolutions have no shared workspace to hold (a GPU's "
             "flag, for --layer-times-mid)");
  PDNN_CHECK(cfg.workspace_held == 0 || !cfg.least_workspace,
             "--workspace-held and --least-workspace: one workspace to hold, not both");
  PDNN_CHECK(cfg.workspace_held == 0 || cfg.gpu_memory_limit == 0,
             "--workspace-held and --gpu-memory-limit: a plan holds the workspace to what "
             "its limit leaves");
  PDNN_CHECK(cfg.plan_copy_gb_s == 0 || cfg.device == "cpu",
             "--plan-copy-gbs: for a plan made on the CPU (a GPU run measures its copies)");
  PDNN_CHECK(cfg.plan_context < 0 || cfg.device == "cpu",
             "--plan-context: for a plan made on the CPU (a GPU run measures its context)");
  PDNN_CHECK(cfg.layer_times_mid.empty() || !cfg.layer_times_least.empty(),
             "--layer-times-mid: also give --layer-times-least (the times below its workspace)");
  // On the GPU reading the metrics is a synchronisation: only at progress lines and epoch ends
  // (data-parallel: every 10 steps, when the loop synchronises anyway, so that every rank
  // reads them at the same steps).
  if (cfg.device == "cuda") cfg.check_every = text.distributed ? 10 : 0;
  // The algorithm cache is the GPU's, but a path that cannot be written fails here on every
  // device, before any work; a CPU run says once that it keeps nothing there.
  const bool cache_named = !cfg.conv_algo_cache.empty() && cfg.conv_algo_cache != "none";
  if (cache_named) check_output_files({{"--conv-algo-cache", cfg.conv_algo_cache}}, {});
  const auto note_cache = [&cfg, cache_named](bool first_rank) {
    if (cache_named && cfg.device != "cuda" && first_rank)
      std::printf("%s: --conv-algo-cache %s: not used on the CPU (it keeps the GPU's "
                  "convolution algorithm choices)\n",
                  cfg.app.c_str(), cfg.conv_algo_cache.c_str());
  };
  if (!text.distributed) return note_cache(true);
  // Every rank must agree on these: all the flags as parsed, defaults included.
  cfg.flags_text = app.config_to_str(true, false);
  cfg.comm = Communicator::join(text.dist);  // fails in one line without a launcher or MPI
  note_cache(cfg.comm->rank() == 0);
  if (text.threads && *text.threads == 0) *text.threads = default_rank_threads(*cfg.comm);
  if (text.threads && *text.threads > allowed_cpus())
    std::fprintf(stderr,
                 "pdnn: rank %d: %d threads on the %d CPU(s) the launcher bound this rank to: "
                 "run mpirun with --bind-to none (or --map-by slot:PE=%d)\n",
                 cfg.comm->rank(), *text.threads, allowed_cpus(),
                 *text.threads);
}

// app.parse(): returns -1 when the run goes on, else the exit status (0 after --help; 2 for a
// bad flag, said in one line "<name>: <problem> (see --help)"). Every app parses through it.
inline int parse_flags(CLI::App& app, const char* name, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: %s (see --help)\n", name, e.what());
    return 2;
  }
  return -1;
}

// parse_flags() and finish_run_flags(), for the training apps.
inline int parse_run_flags(CLI::App& app, RunConfig& cfg, const RunFlagText& text, int argc,
                           char** argv) {
  const int status = parse_flags(app, cfg.app.c_str(), argc, argv);
  if (status < 0) finish_run_flags(app, cfg, text);
  return status;
}

// The default file of --conv-algo-cache: $XDG_CACHE_HOME/pdnn/algorithms.tsv, else
// $HOME/.cache/pdnn/algorithms.tsv ("" when neither variable is set).
inline std::string default_algo_cache() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return std::string(x) + "/pdnn/algorithms.tsv";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/pdnn/algorithms.tsv";
  return "";
}

// The device settings a run's flags ask for, on its context: the precision, and on a GPU the
// convolution algorithm policy and the cache file of its choices (its folder made if missing).
inline void apply_device_flags(Context& ctx, const RunConfig& cfg) {
  PDNN_CHECK(precision_refusal(cfg).empty(), "%s", precision_refusal(cfg).c_str());
  ctx.set_precision(cfg.precision);
  if (!ctx.has_cuda()) return;
  ctx.set_conv_transforms(cfg.conv_transforms);
  ctx.tuning().set_policy(cfg.conv_algo);
  const std::string cache = cfg.conv_algo_cache.empty() ? default_algo_cache() : cfg.conv_algo_cache;
  if (cache.empty() || cache == "none") return;
  create_parent_folders(cache);
  // A choice is the GPU's and the build's: another revision's kernels (faster, new, or timed
  // under a profiler that stretched them) choose again instead of inheriting its choices, which
  // stay in the file for that revision.
  ctx.tuning().set_cache_file(cache, ctx.cuda().info().name + " | pdnn " + build_revision());
}

// The run header's device part: "cpu", or "cuda: <GPU> | fp32, CUDA graph on, batch copy
// overlapped, ...".
inline std::string run_device_text(const RunConfig& cfg, const std::string& gpu) {
  if (cfg.device != "cuda") return "cpu";
  return strprintf("cuda: %s | %s, CUDA graph %s, batch copy %s, convolutions %s | %s",
                   gpu.c_str(),
                   cfg.precision == Precision::Tf32   ? "TF32"
                   : cfg.precision == Precision::Bf16 ? "bf16 (autocast)"
                   : cfg.conv_transforms              ? "fp32 (convolutions may use FFT and Winograd)"
                                                      : "fp32",
                   cfg.cuda_graph ? "on" : "off", cfg.overlap_batch_copy ? "overlapped" : "serial",
                   cfg.conv_algo.c_str(), cudnn_status().c_str());
}

}  // namespace pdnn
