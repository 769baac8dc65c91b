// Per-layer GPU convolution benchmark (make bench-conv-gpu): every convolution of W3, W4 and W5
// (D's Conv2d and G's ConvTranspose2d layers, at their batch sizes), each pass (forward,
// backward-data, backward-weights with the bias) timed separately with each GPU algorithm
// (im2col + cuBLAS, implicit GEMM, cuDNN where found), in fp32 and TF32, against the device's
// ceilings measured in the same run (cuBLAS sgemm 8192^3 in fp32 and TF32, a 1 GiB
// device-to-device copy). Per pass: the median and min of --repeat timed runs (CUDA events,
// after warm-up), the achieved TFLOP/s (the direct convolution's FLOPs over the time) and GB/s
// (the pass's fewest bytes: every input read once, every output written once), and its floor
// max(FLOPs / peak, bytes / bandwidth). Rows to --out with the columns of
// scripts/torch_conv_layers.py, which times PyTorch's (cuDNN's) same layers.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/cuda_state.h"
#include "ops/conv/conv2d.h"
#include "ops/conv/conv2d_algo.h"
#include "ops/gemm.h"
#include "run/csv.h"
#include "run/run_flags.h"
#include "run/run_info.h"
#include "run/timing.h"

using namespace pdnn;

namespace {

// A layer as its model declares it: Conv2d(cin -> cout) on cin x h x w, or
// ConvTranspose2d(cin -> cout) on cin x h x w (then the convolution below it runs backwards).
struct Layer {
  const char* workload;
  const char* name;
  int64_t n, cin, h, w, cout, kernel, stride, pad;
  FusedAct act;      // fused into the forward's output write
  bool transposed;
  bool need_dx;      // false for a first layer (its input needs no gradient)
};

const Layer kLayers[] = {
    {"W3", "conv1", 128, 1, 28, 28, 32, 3, 1, 0, FusedAct::ReLU, false, false},
    {"W3", "conv2", 128, 32, 26, 26, 64, 3, 1, 0, FusedAct::ReLU, false, true},
    {"W4", "conv1", 64, 3, 224, 224, 32, 3, 1, 1, FusedAct::ReLU, false, false},
    {"W4", "conv2", 64, 32, 224, 224, 32, 3, 1, 1, FusedAct::ReLU, false, true},
    {"W4", "conv3", 64, 32, 112, 112, 64, 3, 1, 1, FusedAct::ReLU, false, true},
    {"W4", "conv4", 64, 64, 112, 112, 64, 3, 1, 1, FusedAct::ReLU, false, true},
    {"W4", "conv5", 64, 64, 56, 56, 128, 3, 1, 1, FusedAct::ReLU, false, true},
    {"W4", "conv6", 64, 128, 56, 56, 128, 3, 1, 1, FusedAct::ReLU, false, true},
    {"W5", "D.conv1", 64, 3, 64, 64, 64, 4, 2, 1, FusedAct::LeakyReLU, false, true},
    {"W5", "D.conv2", 64, 64, 32, 32, 128, 4, 2, 1, FusedAct::None, false, true},
    {"W5", "D.conv3", 64, 128, 16, 16, 256, 4, 2, 1, FusedAct::None, false, true},
    {"W5", "D.conv4", 64, 256, 8, 8, 512, 4, 2, 1, FusedAct::None, false, true},
    {"W5", "D.conv5", 64, 512, 4, 4, 1, 4, 1, 0, FusedAct::None, false, true},
    {"W5", "G.convT1", 64, 100, 1, 1, 512, 4, 1, 0, FusedAct::None, true, false},
    {"W5", "G.convT2", 64, 512, 4, 4, 256, 4, 2, 1, FusedAct::None, true, true},
    {"W5", "G.convT3", 64, 256, 8, 8, 128, 4, 2, 1, FusedAct::None, true, true},
    {"W5", "G.convT4", 64, 128, 16, 16, 64, 4, 2, 1, FusedAct::None, true, true},
    {"W5", "G.convT5", 64, 64, 32, 32, 3, 4, 2, 1, FusedAct::None, true, true},
};

const std::vector<std::string> kColumns = {
    "app",       "workload", "layer",  "pass",   "algo",     "precision", "n",   "c",
    "h",         "w",        "k",      "kh",     "kw",       "stride",    "pad", "transposed",
    "act",       "median_ms", "min_ms", "gflop", "tflops",   "gbytes",    "gbps", "framework",
    "gpu",       "versions", "git_rev", "host",  "timestamp"};

// Median and min of `repeat` timed calls of f (after 3 untimed), each between two events.
TimingStats time_ms(Context& ctx, int repeat, const std::function<void()>& f) {
  for (int i = 0; i < 3; ++i) f();
  std::vector<double> ms;
  for (int i = 0; i < repeat; ++i) {
    CUevent_st* t0 = cuda_event_record(ctx.cuda().stream());
    f();
    ms.push_back(cuda_event_elapsed_ms(t0, cuda_event_record(ctx.cuda().stream())));
  }
  return timing_stats(ms);
}

struct Ceilings {
  double fp32_tflops = 0, tf32_tflops = 0, copy_gbps = 0;
};

Ceilings measure_ceilings(Context& ctx, int repeat) {
  Ceilings c;
  const int64_t N = 8192;
  Tensor a = Tensor::empty(Shape{N, N}, DType::F32, Device::CUDA, ctx);
  Tensor b = Tensor::empty(Shape{N, N}, DType::F32, Device::CUDA, ctx);
  Tensor d = Tensor::empty(Shape{N, N}, DType::F32, Device::CUDA, ctx);
  {  // random-ish values, not zeros (zeros can run faster than real data)
    Tensor h(Shape{N, N});
    for (int64_t i = 0; i < h.numel(); ++i) h[i] = static_cast<float>((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
    copy_into(a, h, ctx);
    copy_into(b, h, ctx);
  }
  const double flop = 2.0 * N * N * N;
  for (bool tf32 : {false, true}) {
    ctx.cuda().set_tf32(tf32);
    const TimingStats st = time_ms(ctx, std::max(3, repeat / 4), [&] {
#if PDNN_HAVE_CUDA  // a CPU build has no cuda::gemm (and never gets here: no CUDA context)
      cuda::gemm(false, false, N, N, N, 1.f, a.data(), b.data(), 0.f, d.data(), ctx.cuda_exec());
#endif
    });
    (tf32 ? c.tf32_tflops : c.fp32_tflops) = flop / (st.median * 1e-3) * 1e-12;
  }
  ctx.cuda().set_tf32(false);
  const int64_t bytes = N * N * 4;  // 256 MiB each way
  const TimingStats cp = time_ms(ctx, repeat, [&] { copy_into(d, a, ctx); });
  c.copy_gbps = 2.0 * bytes / (cp.median * 1e-3) * 1e-9;  // read + write
  return c;
}

}  // namespace

static int run(int argc, char** argv) {
  CLI::App app{"GPU convolution benchmark: every W3/W4/W5 convolution, each pass and algorithm"};
  std::string out = "results/bench/conv_gpu.csv", filter, algos_text = "im2col,implicit",
              precisions = "fp32,tf32";
  int repeat = 20;
  app.add_option("--out", out, "CSV to append the rows to")->capture_default_str();
  app.add_option("--filter", filter, "only layers whose 'workload layer' contains this (W4, D.)");
  app.add_option("--algos", algos_text, "comma list of im2col, implicit, cudnn")->capture_default_str();
  app.add_option("--precisions", precisions, "fp32, tf32 or both")->capture_default_str();
  app.add_option("--repeat", repeat, "timed runs per pass")->check(CLI::Range(3, 1000))->capture_default_str();
  if (const int st = parse_flags(app, "bench_conv_gpu", argc, argv); st >= 0) return st;

  std::vector<ConvAlgo> algos;
  for (size_t s = 0; s <= algos_text.size();) {
    const size_t e = std::min(algos_text.find(',', s), algos_text.size());
    ConvAlgo a;
    PDNN_CHECK(parse_conv_algo(algos_text.substr(s, e - s), &a) &&
                   (a == ConvAlgo::Im2col || a == ConvAlgo::Implicit || a == ConvAlgo::Cudnn),
               "--algos: '%s' is not im2col, implicit or cudnn", algos_text.substr(s, e - s).c_str());
    algos.push_back(a);
    s = e + 1;
  }
  Context ctx(1, 1, Device::CUDA);
  const RunInfo info = run_info(ctx);
  std::printf("bench_conv_gpu: %s | %s\n", info.gpu.c_str(), info.git_rev.c_str());
  // cuDNN is opened only where asked for (a forced algorithm does not open it by itself).
  if (std::find(algos.begin(), algos.end(), ConvAlgo::Cudnn) != algos.end()) {
    PDNN_CHECK(ctx.cuda().cudnn() != nullptr, "--algos cudnn: %s", cudnn_status().c_str());
    std::printf("%s\n", cudnn_status().c_str());
  }
  const Ceilings ceil = measure_ceilings(ctx, repeat);
  std::printf("ceilings: sgemm 8192^3 fp32 %.1f TFLOP/s, TF32 %.1f TFLOP/s; device copy %.0f GB/s\n",
              ceil.fp32_tflops, ceil.tf32_tflops, ceil.copy_gbps);
  create_parent_folders(out);
  CsvWriter csv(out, kColumns);
  const std::string versions = "pdnn " + info.git_rev;
  auto ceiling_row = [&](const char* what, double tflops, double gbps) {
    csv.row({"bench_conv_gpu", "ceiling", what, "", "", "", "", "", "", "", "", "", "", "", "",
             "", "", "", "", "", fmt(tflops, 2), "", fmt(gbps, 1), "cublas", info.gpu, versions,
             info.git_rev, info.host, iso8601_utc_now()});
  };
  ceiling_row("sgemm_fp32", ceil.fp32_tflops, 0);
  ceiling_row("sgemm_tf32", ceil.tf32_tflops, 0);
  ceiling_row("copy", 0, ceil.copy_gbps);

  std::printf("%-4s %-8s %-16s %-5s", "wl", "layer", "pass", "prec");
  for (ConvAlgo a : algos) std::printf(" %18s", conv_algo_name(a));
  std::printf(" %9s %6s\n", "floor ms", "best/fl");
  for (const Layer& L : kLayers) {
    if (!filter.empty() && (std::string(L.workload) + " " + L.name).find(filter) == std::string::npos)
      continue;
    // The convolution that runs: for a transposed layer, the one whose backward-data it is.
    ConvGeom g;
    int64_t k;
    if (!L.transposed) {
      g = conv_geom("bench", L.cin, L.h, L.w, L.kernel, L.kernel, L.stride, L.stride, L.pad, L.pad);
      k = L.cout;
    } else {
      const int64_t oh = (L.h - 1) * L.stride - 2 * L.pad + L.kernel;
      const int64_t ow = (L.w - 1) * L.stride - 2 * L.pad + L.kernel;
      g = conv_geom("bench", L.cout, oh, ow, L.kernel, L.kernel, L.stride, L.stride, L.pad, L.pad);
      k = L.cin;
    }
    const int64_t n = L.n;
    const Act act{L.act, L.act == FusedAct::LeakyReLU ? 0.2f : 0.f};
    Rng rng(3);
    auto rnd = [&](const Shape& s) {
      Tensor h(s);
      for (int64_t i = 0; i < h.numel(); ++i) h[i] = static_cast<float>(rng.uniform(-1, 1));
      return h.to(Device::CUDA, ctx);
    };
    // conv tensors: X (n,c,h,w), W (k,c,kh,kw), Y (n,k,oh,ow)
    Tensor X = rnd(Shape{n, g.c, g.h, g.w}), W = rnd(Shape{k, g.c, g.kh, g.kw}),
           Y = rnd(Shape{n, k, g.oh, g.ow}), dY = rnd(Shape{n, k, g.oh, g.ow}),
           dX = rnd(Shape{n, g.c, g.h, g.w}), dW = rnd(W.shape()), B = rnd(Shape{k}),
           dB = rnd(Shape{k});
    const bool conv_bias = !L.transposed && L.workload != std::string("W5");
    const Act cact = L.transposed ? Act{} : act;
    const double flop = 2.0 * n * k * g.col_rows() * g.oh * g.ow;
    const double fx = 4.0 * n * g.image_size(), fy = 4.0 * n * k * g.oh * g.ow,
                 fw = 4.0 * k * g.col_rows();
    // Passes in the layer's own terms. For Conv2d: forward = conv forward, backward-data = conv
    // backward-data, backward-weights = conv backward-weights. For ConvTranspose2d: forward = conv
    // backward-data (its output is the conv's "dx"), backward-data = conv forward, backward-weights = the
    // conv's backward-weights with the roles of x and dy swapped.
    struct PassRun {
      const char* name;
      double bytes;
      std::function<void(ConvAlgo)> f;
    };
    std::vector<PassRun> passes;
    const double act_read = cact.kind == FusedAct::None ? 0.0 : fy;
    passes.push_back({"forward", L.transposed ? fy + fw + fx : fx + fw + fy, [&](ConvAlgo a) {
                        if (L.transposed)
                          ops::conv2d_backward(ctx, g, n, k, nullptr, W, dY, nullptr, nullptr,
                                               nullptr, &dX, Act{}, a);
                        else
                          ops::conv2d_forward(ctx, g, n, k, X, W, conv_bias ? &B : nullptr, Y,
                                              cact, a);
                      }});
    if (L.need_dx)
      passes.push_back({"backward-data", L.transposed ? fx + fw + fy : fy + act_read + fw + fx,
                        [&](ConvAlgo a) {
                          if (L.transposed)
                            ops::conv2d_forward(ctx, g, n, k, X, W, nullptr, Y, Act{}, a);
                          else
                            ops::conv2d_backward(ctx, g, n, k, nullptr, W, dY, &Y, nullptr,
                                                 nullptr, &dX, cact, a);
                        }});
    passes.push_back({"backward-weights", fx + fy + act_read + 2 * fw, [&](ConvAlgo a) {
                        ops::conv2d_backward(ctx, g, n, k, &X, W, dY, &Y, &dW,
                                             conv_bias ? &dB : nullptr, nullptr, cact, a);
                      }});
    for (const std::string prec : {"fp32", "tf32"}) {
      if (precisions.find(prec) == std::string::npos) continue;
      ctx.cuda().set_tf32(prec == "tf32");
      const double peak = (prec == "tf32" ? ceil.tf32_tflops : ceil.fp32_tflops) * 1e12;
      for (PassRun& p : passes) {
        const double floor_ms =
            std::max(flop / peak, p.bytes / (ceil.copy_gbps * 1e9)) * 1e3;
        std::printf("%-4s %-8s %-16s %-5s", L.workload, L.name, p.name, prec.c_str());
        double best = 1e30;
        for (ConvAlgo a : algos) {
          TimingStats st{};
          try {
            st = time_ms(ctx, repeat, [&] { p.f(a); });
          } catch (const Error& e) {
            std::fprintf(stderr, "%s %s %s %s: %s\n", L.workload, L.name, p.name, conv_algo_name(a), e.what());
            std::printf(" %18s", "n/a");
            continue;
          }
          best = std::min(best, st.median);
          const double tflops = flop / (st.median * 1e-3) * 1e-12;
          const double gbps = p.bytes / (st.median * 1e-3) * 1e-9;
          std::printf(" %8.3f (%5.1f TF)", st.median, tflops);
          csv.row({"bench_conv_gpu", L.workload, L.name, p.name, conv_algo_name(a), prec,
                   std::to_string(n), std::to_string(L.cin), std::to_string(L.h),
                   std::to_string(L.w), std::to_string(L.cout), std::to_string(L.kernel),
                   std::to_string(L.kernel), std::to_string(L.stride), std::to_string(L.pad),
                   L.transposed ? "1" : "0", fused_act_name(L.act), fmt(st.median, 4),
                   fmt(st.min, 4), fmt(flop * 1e-9, 3), fmt(tflops, 2), fmt(p.bytes * 1e-9, 4),
                   fmt(gbps, 1), "pdnn", info.gpu, versions, info.git_rev, info.host,
                   iso8601_utc_now()});
        }
        std::printf(" %9.3f %6.2f\n", floor_ms, best / floor_ms);
      }
    }
  }
  std::printf("rows appended to %s\n", out.c_str());
  return 0;
}

int main(int argc, char** argv) { return run_app("bench_conv_gpu", run, argc, argv); }
