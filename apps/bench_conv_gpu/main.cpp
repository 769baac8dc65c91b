// Per-layer GPU convolution benchmark (make bench-conv-gpu): every convolution of W3, W4 and W5
// (D's Conv2d and G's ConvTranspose2d layers, at their batch sizes; with --filter UNet, the
// U-Net's every convolution at 512 x 512, batch 4), each pass (forward,
// backward-data, backward-weights with the bias) timed separately with each GPU algorithm
// (im2col + cuBLAS, implicit GEMM, cuDNN where found), in fp32, TF32 and bf16 (--precisions;
// bf16: bf16 x, w, y, dy, dx with fp32 bias and parameter gradients, as mixed precision runs
// them), against the device's ceilings measured in the same run (cuBLAS's 8192^3 GEMM in fp32,
// TF32 and bf16 with fp32 sums, a 1 GiB device-to-device copy). Per pass: the median and min of
// --repeat timed runs (CUDA events, after warm-up), the achieved TFLOP/s (the direct
// convolution's FLOPs over the time) and GB/s (the pass's fewest bytes: every input read once,
// every output written once, at the tensors' element sizes), and its floor max(FLOPs / the
// precision's GEMM rate, bytes / copy rate). Rows to --out with the columns of
// scripts/twins/torch_conv_layers.py, which times PyTorch's (cuDNN's) same layers. An algorithm
// "implicit:TILE" (e.g. implicit:64x128) forces the implicit-GEMM kernels' block tile in the
// forward and backward-weights passes (its backward-data keeps the chosen tile; fp32 and TF32).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/cuda_state.h"
#include "ops/cast.h"
#include "ops/conv/conv2d.h"
#include "ops/conv/conv2d_algo.h"
#include "ops/conv/conv2d_gpu.h"
#include "ops/dense.h"
#include "ops/gemm.h"
#include "ops/optim.h"
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
  bool on_request = false;  // run only when --filter names it (the U-Net's large layers)
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
    // The U-Net of issue 34's speed target (512 x 512, batch 4, base 64, depth 4), every
    // convolution in the model's order: its speed against the PyTorch twin's is the sum of
    // these passes' (and the concatenations', pools' and loss's), so the per-pass comparison
    // with scripts/twins/torch_conv_layers.py says where a step's difference is. --filter UNet
    // (or one layer: --filter "UNet up1").
    {"UNet", "enc1.conv1", 4, 3, 512, 512, 64, 3, 1, 1, FusedAct::ReLU, false, false, true},
    {"UNet", "enc1.conv2", 4, 64, 512, 512, 64, 3, 1, 1, FusedAct::ReLU, false, true, true},
    {"UNet", "enc2.conv1", 4, 64, 256, 256, 128, 3, 1, 1, FusedAct::ReLU, false, true, true},
    {"UNet", "enc2.conv2", 4, 128, 256, 256, 128, 3, 1, 1, FusedAct::ReLU, false, true, true},
    {"UNet", "enc3.conv1", 4, 128, 128, 128, 256, 3, 1, 1, FusedAct::ReLU, false, true, true},
    {"UNet", "enc3.conv2", 4, 256, 128, 128, 256, 3, 1, 1, FusedAct::ReLU, false, true, true},
    {"UNet", "enc4.conv1", 4, 256, 64, 64, 512, 3, 1, 1, FusedAct::ReLU, false, true, true},
    {"UNet", "enc4.conv2", 4, 512, 64, 64, 512, 3, 1, 1, FusedAct::ReLU, false, true, true},
    {"UNet", "mid.conv1", 4, 512, 32, 32, 1024, 3, 1, 1, FusedAct::ReLU, false, true, true},
    {"UNet", "mid.conv2", 4, 1024, 32, 32, 1024, 3, 1, 1, FusedAct::ReLU, false, true, true},
    {"UNet", "up4", 4, 1024, 32, 32, 512, 2, 2, 0, FusedAct::None, true, true, true},
    {"UNet", "dec4.conv1", 4, 1024, 64, 64, 512, 3, 1, 1, FusedAct::ReLU, false, true, true},
    {"UNet", "dec4.conv2", 4, 512, 64, 64, 512, 3, 1, 1, FusedAct::ReLU, false, true, true},
    {"UNet", "up3", 4, 512, 64, 64, 256, 2, 2, 0, FusedAct::None, true, true, true},
    {"UNet", "dec3.conv1", 4, 512, 128, 128, 256, 3, 1, 1, FusedAct::ReLU, false, true, true},
    {"UNet", "dec3.conv2", 4, 256, 128, 128, 256, 3, 1, 1, FusedAct::ReLU, false, true, true},
    {"UNet", "up2", 4, 256, 128, 128, 128, 2, 2, 0, FusedAct::None, true, true, true},
    {"UNet", "dec2.conv1", 4, 256, 256, 256, 128, 3, 1, 1, FusedAct::ReLU, false, true, true},
    {"UNet", "dec2.conv2", 4, 128, 256, 256, 128, 3, 1, 1, FusedAct::ReLU, false, true, true},
    {"UNet", "up1", 4, 128, 256, 256, 64, 2, 2, 0, FusedAct::None, true, true, true},
    {"UNet", "dec1.conv1", 4, 128, 512, 512, 64, 3, 1, 1, FusedAct::ReLU, false, true, true},
    {"UNet", "dec1.conv2", 4, 64, 512, 512, 64, 3, 1, 1, FusedAct::ReLU, false, true, true},
    {"UNet", "head", 4, 64, 512, 512, 2, 1, 1, 0, FusedAct::None, false, true, true},
};

const std::vector<std::string> kColumns = {
    "app",       "workload", "layer",  "pass",   "algo",     "precision", "n",   "c",
    "h",         "w",        "k",      "kh",     "kw",       "stride",    "pad", "transposed",
    "act",       "median_ms", "min_ms", "gflop", "tflops",   "gbytes",    "gbps", "framework",
    "gpu",       "versions", "git_rev", "host",  "timestamp"};

// Median and min of `repeat` timed calls of f (after 3 untimed), each between two events
// recorded after a delay kernel, so that the host has queued all of f before the GPU starts it.
TimingStats time_ms(Context& ctx, int repeat, const std::function<void()>& f) {
  for (int i = 0; i < 3; ++i) f();
  std::vector<double> ms;
  for (int i = 0; i < repeat; ++i) {
    cuda_delay(ctx.cuda().stream(), 1000);  // the GPU's time alone, as in a CUDA graph
    CUevent_st* t0 = cuda_event_record(ctx.cuda().stream());
    f();
    ms.push_back(cuda_event_elapsed_ms(t0, cuda_event_record(ctx.cuda().stream())));
  }
  return timing_stats(ms);
}

struct Ceilings {
  double fp32_tflops = 0, tf32_tflops = 0, bf16_tflops = 0, copy_gbps = 0;
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
    ctx.set_precision(tf32 ? Precision::Tf32 : Precision::Fp32);
    const TimingStats st = time_ms(ctx, std::max(3, repeat / 4), [&] {
#if PDNN_HAVE_CUDA  // a CPU build has no cuda::gemm (and never gets here: no CUDA context)
      cuda::gemm(false, false, N, N, N, 1.f, a.data(), b.data(), 0.f, d.data(), ctx.cuda_exec());
#endif
    });
    (tf32 ? c.tf32_tflops : c.fp32_tflops) = flop / (st.median * 1e-3) * 1e-12;
  }
  ctx.set_precision(Precision::Fp32);
  {  // cuBLAS's bf16 GEMM (cublasGemmEx, fp32 sums, bf16 C): the bf16 passes' compute ceiling
    Tensor a16 = Tensor::empty(Shape{N, N}, DType::BF16, Device::CUDA, ctx);
    Tensor b16 = a16.clone(ctx), d16 = a16.clone(ctx);
    ops::cast(ctx, a, a16);
    ops::cast(ctx, b, b16);
    const TimingStats st = time_ms(ctx, std::max(3, repeat / 4), [&] {
#if PDNN_HAVE_CUDA
      cuda::gemm(false, false, N, N, N, 1.f, a16.data<bf16>(), b16.data<bf16>(), 0.f,
                 d16.data<bf16>(), ctx.cuda_exec());
#endif
    });
    c.bf16_tflops = flop / (st.median * 1e-3) * 1e-12;
  }
  const int64_t bytes = N * N * 4;  // 256 MiB each way
  const TimingStats cp = time_ms(ctx, repeat, [&] { copy_into(d, a, ctx); });
  c.copy_gbps = 2.0 * bytes / (cp.median * 1e-3) * 1e-9;  // read + write
  return c;
}

}  // namespace

static // The rest of W4's step against its memory floor (bytes over the measured copy rate): the
// Dense(100352 -> 1024) + ReLU backward at batch 64 (reads x, w, dw and dy; writes dw, dx) and
// the fused AdaGrad over W4's 104,104,230 parameters (reads g, w, sum; writes w, sum).
void rest_of_w4(Context& ctx, const Ceilings& ceil, int repeat, CsvWriter& csv,
                const RunInfo& info, const std::string& versions) {
  const int64_t n = 64, in = 100352, out = 1024, params = 104104230;
  auto dev = [&](int64_t count) {
    Tensor h(Shape{count});
    for (int64_t i = 0; i < count; ++i) h[i] = static_cast<float>((i * 2654435761u) % 1000) * 1e-3f;
    return h.to(Device::CUDA, ctx);
  };
  Tensor x = dev(n * in), w = dev(out * in), dy = dev(n * out), y = dev(n * out),
         dw = dev(out * in), db = dev(out), dx = dev(n * in), ws = dev(n * out);
  const TimingStats dense = time_ms(ctx, repeat, [&] {
    cuda::dense_backward(n, in, out, x.data(), w.data(), dy.data(), y.data(), dw.data(),
                         db.data(), dx.data(), Act{FusedAct::ReLU, 0.f}, ws.data(),
                         /*dw_zero=*/false, ctx.cuda_exec());
  });
  x = Tensor();
  dx = Tensor();
  Tensor g = dev(params), p = dev(params), sum = dev(params);
  Tensor step = Tensor(Shape{1}, DType::I64);
  step.data<int64_t>()[0] = 1;
  step = step.to(Device::CUDA, ctx);
  const AdagradArgs args{0.01, 0.0, 0.f, 1e-10f};
  const TimingStats ada = time_ms(ctx, repeat, [&] {
    cuda::adagrad_update(params, args, step.data<int64_t>(), g.data(), p.data(), sum.data(),
                         ctx.cuda_exec());
  });
  struct Row {
    const char* layer;
    const char* pass;
    TimingStats t;
    double flop, bytes;
  };
  const Row rows[] = {
      {"dense1", "backward", dense, 4.0 * n * in * out,
       4.0 * (n * in + 3.0 * out * in + 2.0 * n * out + n * in)},
      {"adagrad", "update", ada, 0.0, 4.0 * 5.0 * params}};
  for (const Row& r : rows) {
    const double floor_ms = std::max(r.flop / (ceil.fp32_tflops * 1e12),
                                     r.bytes / (ceil.copy_gbps * 1e9)) * 1e3;
    std::printf("W4   %-8s %-16s fp32  %8.3f ms  floor %.3f ms  (%.2fx the floor; %.0f GB/s)\n",
                r.layer, r.pass, r.t.median, floor_ms, r.t.median / floor_ms,
                r.bytes / (r.t.median * 1e-3) * 1e-9);
    csv.row({"bench_conv_gpu", "W4", r.layer, r.pass, r.flop > 0 ? "cublas" : "fused", "fp32",
             "", "", "", "", "", "", "", "", "", "", "", fmt(r.t.median, 4), fmt(r.t.min, 4),
             fmt(r.flop * 1e-9, 3), fmt(r.flop / (r.t.median * 1e-3) * 1e-12, 2),
             fmt(r.bytes * 1e-9, 4), fmt(r.bytes / (r.t.median * 1e-3) * 1e-9, 1), "pdnn",
             info.gpu, versions, info.git_rev, info.host, iso8601_utc_now()});
  }
}

int run(int argc, char** argv) {
  CLI::App app{"GPU convolution benchmark: every W3/W4/W5 convolution, each pass and algorithm"};
  std::string out = "runs/bench/conv_gpu.csv", filter, algos_text = "im2col,implicit";
  const std::vector<std::string> kPrecisions = {"fp32", "fp32+transforms", "tf32", "bf16"};
  std::vector<std::string> precs = {"fp32", "tf32"};
  int repeat = 20;
  app.add_option("--out", out, "CSV to append the rows to")->capture_default_str();
  app.add_option("--filter", filter, "only layers whose 'workload layer' contains this (W4, D.)");
  app.add_option("--algos", algos_text,
                 "comma list of im2col, implicit, direct, cudnn, implicit:TILE (TILE one of "
                 "128x128, 64x128, 32x256, 32x128, 32x32), direct:TILE (m128, m64, m32)")
      ->capture_default_str();
  app.add_option("--precisions", precs,
                 "comma list of fp32, fp32+transforms, tf32, bf16 (bf16: every algorithm and "
                 "direct:TILE, which runs W5's 4x4 stride-2 layers there too; implicit:TILE "
                 "does not run it; fp32+transforms: cudnn only, with FFT and Winograd "
                 "competing, as --conv-transforms)")
      ->delimiter(',')
      ->check(CLI::IsMember(kPrecisions))
      ->capture_default_str();
  std::string images_text = "auto";
  app.add_option("--direct-images", images_text,
                 "bf16 direct:TILE at small outputs: auto, one (one image a block) or many "
                 "(several images a block; an error where an image's outputs exceed a patch)")
      ->capture_default_str();
  app.add_option("--repeat", repeat, "timed runs per pass")->check(CLI::Range(3, 1000))->capture_default_str();
  if (const int st = parse_flags(app, "bench_conv_gpu", argc, argv); st >= 0) return st;
  cuda::DirectImages dimgs = cuda::DirectImages::Auto;
  {
    bool found = false;
    for (cuda::DirectImages m : {cuda::DirectImages::Auto, cuda::DirectImages::One,
                                 cuda::DirectImages::Many})
      if (images_text == cuda::direct_images_name(m)) dimgs = m, found = true;
    PDNN_CHECK(found, "--direct-images: '%s' is not auto, one or many", images_text.c_str());
  }

  struct Algo {
    ConvAlgo a;
    cuda::ConvTile tile;
    std::string name;
    cuda::DirectTile dtile = cuda::DirectTile::Auto;
  };
  std::vector<Algo> algos;
  for (size_t s = 0; s <= algos_text.size();) {
    const size_t e = std::min(algos_text.find(',', s), algos_text.size());
    const std::string item = algos_text.substr(s, e - s);
    const size_t colon = item.find(':');
    Algo al{ConvAlgo::Auto, cuda::ConvTile::Auto, item};
    PDNN_CHECK(parse_conv_algo(item.substr(0, colon), &al.a) &&
                   (al.a == ConvAlgo::Im2col || al.a == ConvAlgo::Implicit ||
                    al.a == ConvAlgo::Direct || al.a == ConvAlgo::Cudnn) &&
                   (colon == std::string::npos || al.a == ConvAlgo::Implicit ||
                    al.a == ConvAlgo::Direct),
               "--algos: '%s' is not im2col, implicit, direct, cudnn, implicit:TILE or "
               "direct:TILE", item.c_str());
    if (colon != std::string::npos && al.a == ConvAlgo::Direct) {
      bool found = false;
      for (cuda::DirectTile t : {cuda::DirectTile::M128, cuda::DirectTile::M64, cuda::DirectTile::M32})
        if (item.substr(colon + 1) == cuda::direct_tile_name(t)) al.dtile = t, found = true;
      PDNN_CHECK(found, "--algos: '%s': no such tile (m128, m64, m32)", item.c_str());
    } else if (colon != std::string::npos) {
      bool found = false;
      for (cuda::ConvTile t : {cuda::ConvTile::T128x128, cuda::ConvTile::T64x128,
                               cuda::ConvTile::T32x256, cuda::ConvTile::T32x128,
                               cuda::ConvTile::T32x32})
        if (item.substr(colon + 1) == cuda::conv_tile_name(t)) al.tile = t, found = true;
      PDNN_CHECK(found, "--algos: '%s': no such tile", item.c_str());
    }
    algos.push_back(al);
    s = e + 1;
  }
  Context ctx(1, 1, Device::CUDA);
  const RunInfo info = run_info(ctx);
  std::printf("bench_conv_gpu: %s | %s\n", info.gpu.c_str(), info.git_rev.c_str());
  // cuDNN is opened only where asked for (a forced algorithm does not open it by itself).
  if (std::any_of(algos.begin(), algos.end(), [](const Algo& a) { return a.a == ConvAlgo::Cudnn; })) {
    PDNN_CHECK(ctx.cuda().cudnn() != nullptr, "--algos cudnn: %s", cudnn_status().c_str());
    std::printf("%s\n", cudnn_status().c_str());
  }
  const Ceilings ceil = measure_ceilings(ctx, repeat);
  std::printf("ceilings: GEMM 8192^3 fp32 %.1f TFLOP/s, TF32 %.1f TFLOP/s, bf16 %.1f TFLOP/s; "
              "device copy %.0f GB/s\n",
              ceil.fp32_tflops, ceil.tf32_tflops, ceil.bf16_tflops, ceil.copy_gbps);
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
  ceiling_row("gemm_bf16", ceil.bf16_tflops, 0);
  ceiling_row("copy", 0, ceil.copy_gbps);
  if (filter.empty() || filter == "W4") rest_of_w4(ctx, ceil, repeat, csv, info, versions);

  std::printf("%-4s %-8s %-16s %-5s", "wl", "layer", "pass", "prec");
  for (const Algo& a : algos) std::printf(" %18s", a.name.c_str());
  std::printf(" %9s %6s\n", "floor ms", "best/fl");
  for (const Layer& L : kLayers) {
    if (L.on_request && filter.empty()) continue;
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
    // Bytes of x, y (and dy, dx) and w as the pass's precision stores them (es: 4, bf16 2); the
    // weight gradient is fp32 in every precision (fw32).
    double es = 4.0;
    const double fw32 = 4.0 * k * g.col_rows();
    auto fx = [&] { return es * n * g.image_size(); };
    auto fy = [&] { return es * n * k * g.oh * g.ow; };
    auto fw = [&] { return es * k * g.col_rows(); };
    // Passes in the layer's own terms. For Conv2d: forward = conv forward, backward-data = conv
    // backward-data, backward-weights = conv backward-weights. For ConvTranspose2d: forward = conv
    // backward-data (its output is the conv's "dx"), backward-data = conv forward, backward-weights = the
    // conv's backward-weights with the roles of x and dy swapped.
    struct PassRun {
      const char* name;
      double bytes;
      std::function<void(const Algo&)> f;
    };
    std::vector<PassRun> passes;
    // The convolution's operands (ops/conv/conv_args.h), by pass; ConvTranspose2d's are the
    // convolution's with the roles named above.
    const ConvFwdTensors fwd =
        ConvFwdTensors::of(ConvShape{g, n, k}, &X, &W, conv_bias ? &B : nullptr, &Y, cact);
    // dx from dy (through the activation read off y); dw, db from x and dy
    const ConvBwdTensors data = ConvBwdTensors::of(fwd, &dY, nullptr, nullptr, &dX);
    const ConvBwdTensors wgrad =
        ConvBwdTensors::of(fwd, &dY, &dW, conv_bias ? &dB : nullptr, nullptr);
    ConvFwdTensors t_fwd = fwd;  // ConvTranspose2d's backward-data: the convolution's forward
    t_fwd.b = nullptr;
    t_fwd.act = Act{};
    ConvBwdTensors t_data = data;  // ConvTranspose2d's forward: the convolution's backward-data
    t_data.y = nullptr;
    t_data.act = Act{};
    // The same operands in bf16 (x, w, y, dy, dx bf16; b, dw, db fp32), for --precisions bf16.
    auto to16 = [&](const Tensor& t) {
      Tensor h = Tensor::empty(t.shape(), DType::BF16, Device::CUDA, ctx);
      ops::cast(ctx, t, h);
      return h;
    };
    Tensor X16 = to16(X), W16 = to16(W), Y16 = to16(Y), dY16 = to16(dY), dX16 = to16(dX);
    const ConvFwdTensors fwd16 =
        ConvFwdTensors::of(ConvShape{g, n, k}, &X16, &W16, conv_bias ? &B : nullptr, &Y16, cact);
    const ConvBwdTensors data16 = ConvBwdTensors::of(fwd16, &dY16, nullptr, nullptr, &dX16);
    const ConvBwdTensors wgrad16 =
        ConvBwdTensors::of(fwd16, &dY16, &dW, conv_bias ? &dB : nullptr, nullptr);
    ConvFwdTensors t_fwd16 = fwd16;
    t_fwd16.b = nullptr;
    t_fwd16.act = Act{};
    ConvBwdTensors t_data16 = data16;
    t_data16.y = nullptr;
    t_data16.act = Act{};
    bool b16 = false;  // the passes run on the bf16 operands
    // the direct kernels' workspace for a pass at the current precision (direct:TILE)
    auto direct_ws = [&](ConvPass p) {
      return ctx.workspace(Device::CUDA,
                           cuda::conv2d_direct_ws(p, g, n, k, b16 ? DType::BF16 : DType::F32,
                                                  ctx.cuda().info().sm_count));
    };
    auto with_algo = [&](const auto& t32, const auto& t16, ConvAlgo a) {
      auto t = b16 ? t16 : t32;
      t.algo = a;
      return t;
    };
    auto act_read = [&] { return cact.kind == FusedAct::None ? 0.0 : fy(); };
    passes.push_back({"forward", 0.0, [&](const Algo& a) {
                        if (L.transposed && a.dtile != cuda::DirectTile::Auto && b16)
                          cuda::conv2d_direct_backward_data(  // the kernel alone
                              ops::conv_ptrs_bf16(t_data16), direct_ws(ConvPass::BackwardData),
                              ctx.cuda_exec(), a.dtile, dimgs);
                        else if (L.transposed)
                          ops::conv2d_backward(ctx, with_algo(t_data, t_data16, a.a));
                        else if (a.dtile != cuda::DirectTile::Auto && b16)
                          cuda::conv2d_direct_forward(ops::conv_ptrs_bf16(fwd16),
                                                      direct_ws(ConvPass::Forward), ctx.cuda_exec(),
                                                      a.dtile, dimgs);
                        else if (a.dtile != cuda::DirectTile::Auto)
                          cuda::conv2d_direct_forward(ops::conv_ptrs(fwd),
                                                      direct_ws(ConvPass::Forward), ctx.cuda_exec(),
                                                      a.dtile);
                        else if (a.tile != cuda::ConvTile::Auto)
                          cuda::conv2d_implicit_forward(ops::conv_ptrs(fwd), ctx.cuda_exec(), a.tile);
                        else
                          ops::conv2d_forward(ctx, with_algo(fwd, fwd16, a.a));
                      }});
    if (L.need_dx)
      passes.push_back({"backward-data", 0.0,
                        [&](const Algo& a) {
                          if (L.transposed && a.dtile != cuda::DirectTile::Auto && b16)
                            cuda::conv2d_direct_forward(ops::conv_ptrs_bf16(t_fwd16),
                                                        direct_ws(ConvPass::Forward),
                                                        ctx.cuda_exec(), a.dtile, dimgs);
                          else if (L.transposed)
                            ops::conv2d_forward(ctx, with_algo(t_fwd, t_fwd16, a.a));
                          else if (a.dtile != cuda::DirectTile::Auto && b16)
                            cuda::conv2d_direct_backward_data(  // the kernel alone, on dy as is
                                ops::conv_ptrs_bf16(t_data16), direct_ws(ConvPass::BackwardData),
                                ctx.cuda_exec(), a.dtile, dimgs);
                          else if (a.dtile != cuda::DirectTile::Auto)
                            cuda::conv2d_direct_backward_data(
                                ops::conv_ptrs(t_data), direct_ws(ConvPass::BackwardData),
                                ctx.cuda_exec(), a.dtile);
                          else
                            ops::conv2d_backward(ctx, with_algo(data, data16, a.a));
                        }});
    passes.push_back({"backward-weights", 0.0, [&](const Algo& a) {
                        if (a.dtile != cuda::DirectTile::Auto && b16) {
                          cuda::conv2d_direct_backward_weights(
                              ops::conv_ptrs_bf16(wgrad16), direct_ws(ConvPass::BackwardWeights),
                              ctx.cuda_exec(), a.dtile, dimgs);
                        } else if (a.dtile != cuda::DirectTile::Auto) {
                          cuda::conv2d_direct_backward_weights(
                              ops::conv_ptrs(wgrad), direct_ws(ConvPass::BackwardWeights),
                              ctx.cuda_exec(), a.dtile);
                        } else if (a.tile != cuda::ConvTile::Auto) {
                          float* ws = ctx.workspace(
                              Device::CUDA,
                              cuda::conv2d_implicit_backward_weights_ws(
                                  g, n, k, ctx.cuda().info().sm_count, a.tile));
                          cuda::conv2d_implicit_backward_weights(ops::conv_ptrs(wgrad), ws,
                                                                 ctx.cuda_exec(), a.tile);
                        } else {
                          ops::conv2d_backward(ctx, with_algo(wgrad, wgrad16, a.a));
                        }
                      }});
    for (const std::string& prec : kPrecisions) {
      if (std::find(precs.begin(), precs.end(), prec) == precs.end()) continue;
      b16 = prec == "bf16";
      es = b16 ? 2.0 : 4.0;
      ctx.set_precision(prec == "tf32" ? Precision::Tf32 : Precision::Fp32);
      // Only cuDNN's choice changes with the transforms (FFT and Winograd: fewer products, so
      // the floor below, of the direct FLOPs, may be beaten).
      const bool transforms = prec == "fp32+transforms";
      ctx.set_conv_transforms(transforms);
      const double peak =
          (prec == "tf32" ? ceil.tf32_tflops : b16 ? ceil.bf16_tflops : ceil.fp32_tflops) * 1e12;
      // the passes' fewest bytes at this precision's element sizes
      passes[0].bytes = L.transposed ? fy() + fw() + fx() : fx() + fw() + fy();
      if (L.need_dx)
        passes[1].bytes = L.transposed ? fx() + fw() + fy() : fy() + act_read() + fw() + fx();
      passes.back().bytes = fx() + fy() + act_read() + fw32 + fw32;
      for (PassRun& p : passes) {
        const double floor_ms =
            std::max(flop / peak, p.bytes / (ceil.copy_gbps * 1e9)) * 1e3;
        std::printf("%-4s %-8s %-16s %-5s", L.workload, L.name, p.name, prec.c_str());
        double best = 1e30;
        for (const Algo& a : algos) {
          if ((transforms && a.a != ConvAlgo::Cudnn) || (a.tile != cuda::ConvTile::Auto &&
               (b16 || L.transposed || std::string(p.name) == "backward-data")) ||
              (a.dtile != cuda::DirectTile::Auto &&
               ((L.transposed && !b16) ||
                !cuda::direct_applies(g, b16 ? DType::BF16 : DType::F32)))) {
            std::printf(" %18s", "-");  // a forced tile where its kernel does not run
            continue;
          }
          TimingStats st{};
          try {
            st = time_ms(ctx, repeat, [&] { p.f(a); });
          } catch (const Error& e) {
            std::fprintf(stderr, "%s %s %s %s: %s\n", L.workload, L.name, p.name, a.name.c_str(), e.what());
            std::printf(" %18s", "n/a");
            continue;
          }
          best = std::min(best, st.median);
          const double tflops = flop / (st.median * 1e-3) * 1e-12;
          const double gbps = p.bytes / (st.median * 1e-3) * 1e-9;
          std::printf(" %8.3f (%5.1f TF)", st.median, tflops);
          csv.row({"bench_conv_gpu", L.workload, L.name, p.name, a.name, prec,
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
