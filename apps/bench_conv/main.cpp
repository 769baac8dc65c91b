// Per-layer convolution benchmark, two modes.
//  --mode passes (default): each convolution of W3 and W4 (and W2's), forward, backward data
//    and backward weights (+ bias) timed separately for each algorithm (im2col per image,
//    Winograd, direct), runs of the algorithms alternating (in rotating order) so that a busy
//    machine disturbs them alike; median (min, max) of the repeats, effective GFLOP/s (the direct convolution's
//    FLOPs over the time, so a faster algorithm can exceed the machine's GEMM rate), and the
//    sgemm 2048^3 rate timed among them (once per repetition). CSV rows to --out.
//  --mode layers: Conv2d/ConvTranspose2d forward + backward for the two im2col ways (images in
//    parallel, one batched GEMM) on W2/W3/W5 shapes: the measurements behind conv_algo_for's
//    per-image/batched rule.
//  --mode sgemm: the sgemm 2048^3 rate alone at each thread count (the ceiling other benchmarks,
//    scripts/bench/bench_caltech.sh, set their layers' GFLOP/s against), one line per thread count:
//    "sgemm_gflops threads=T repeats=R median=... min=... max=...".

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/context.h"
#include "layers/conv2d.h"
#include "layers/conv_transpose2d.h"
#include "ops/conv/conv2d_k4s2.h"
#include "ops/conv/conv2d_winograd.h"
#include "ops/conv/conv2d.h"
#include "ops/gemm.h"
#include "run/csv.h"
#include "run/run_info.h"
#include "run/run_flags.h"
#include "run/timing.h"

using namespace pdnn;

namespace {

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

struct PassShape {
  const char* name;
  int64_t n, c, h, w, k, kernel, stride, pad;
  bool need_dx;     // false for a first layer, whose dx nobody needs
  bool transposed;  // ConvTranspose2d(c->k) instead of Conv2d(c->k)
};

// ---- sgemm ceiling -------------------------------------------------------------------------

// C = A B at 2048^3 with OpenBLAS: the GEMM rate of the machine at the moment, timed once per
// repetition between the convolutions so that it sees the same load they do.
struct Sgemm {
  static constexpr int kN = 2048;
  std::vector<float> a = std::vector<float>(kN * kN, 1.f), b = std::vector<float>(kN * kN, 0.5f),
                     c = std::vector<float>(kN * kN);
  // GFLOP/s of one product at `threads` threads.
  double run(int threads) {
    const double t0 = now_ms();
    cpu::gemm(false, false, kN, kN, kN, 1.f, a.data(), b.data(), 0.f, c.data(),
              CpuExec{threads});
    return 2.0 * kN * kN * kN / ((now_ms() - t0) * 1e6);
  }
};

// ---- passes mode ---------------------------------------------------------------------------

const PassShape kPassShapes[] = {
    {"W2 conv 1->10 28x28 p1", 128, 1, 28, 28, 10, 3, 1, 1, false, false},
    {"W3 conv1 1->32 28x28", 128, 1, 28, 28, 32, 3, 1, 0, false, false},
    {"W3 conv2 32->64 26x26", 128, 32, 26, 26, 64, 3, 1, 0, true, false},
    {"W4 conv1 3->32 224 p1", 64, 3, 224, 224, 32, 3, 1, 1, false, false},
    {"W4 conv2 32->32 224 p1", 64, 32, 224, 224, 32, 3, 1, 1, true, false},
    {"W4 conv3 32->64 112 p1", 64, 32, 112, 112, 64, 3, 1, 1, true, false},
    {"W4 conv4 64->64 112 p1", 64, 64, 112, 112, 64, 3, 1, 1, true, false},
    {"W4 conv5 64->128 56 p1", 64, 64, 56, 56, 128, 3, 1, 1, true, false},
    {"W4 conv6 128->128 56 p1", 64, 128, 56, 56, 128, 3, 1, 1, true, false},
    // W5's stride-2 layers: each geometry is a Conv2d of D and, with forward and backward data
    // swapped, a ConvTranspose2d of G (whose forward needs backward data even for D.0's shape).
    {"W5 D.0|G.12 3->64 64 s2", 64, 3, 64, 64, 64, 4, 2, 1, true, false},
    {"W5 D.2|G.9 64->128 32 s2", 64, 64, 32, 32, 128, 4, 2, 1, true, false},
    {"W5 D.5|G.6 128->256 16 s2", 64, 128, 16, 16, 256, 4, 2, 1, true, false},
    {"W5 D.8|G.3 256->512 8 s2", 64, 256, 8, 8, 512, 4, 2, 1, true, false},
};

const char* const kPassNames[3] = {"forward", "backward-data", "backward-weights"};

int run_passes(const std::vector<ConvAlgo>& algos, const std::vector<int>& thread_list,
               int repeats, int warmup, int64_t batch, const std::string& filter,
               const std::string& out) {
  Context info_ctx(1);
  const RunInfo info = run_info(info_ctx);
  std::printf("# bench_conv passes | %s, %s | OpenBLAS core %s | %s | rev %s | %s\n",
              info.host.c_str(), info.cpu_model.c_str(), info.blas_text.c_str(), blas_config(),
              info.git_rev.c_str(), info.compiler.c_str());
  std::printf("# %d repeats after %d warm-up, algorithms alternating; ms median (min-max); "
              "GFLOP/s = direct FLOPs / median\n", repeats, warmup);
  std::unique_ptr<CsvWriter> csv;
  if (!out.empty())
    csv = std::make_unique<CsvWriter>(
        out, std::vector<std::string>{"app", "shape", "batch", "pass", "algo", "threads",
                                      "median_ms", "min_ms", "max_ms", "gflops", "sgemm_gflops",
                                      "blas_core", "git_rev", "host", "cpu_model", "timestamp"});
  Sgemm sgemm;
  sgemm.run(1);  // first touch of its buffers
  std::printf("# sgemm: 2048^3 through OpenBLAS, timed once per repetition among the "
              "convolutions of each shape; x sgemm = GFLOP/s over its median\n");
  std::printf("%-26s %-17s %-10s %3s %24s %8s %7s %6s\n", "shape", "pass", "algo", "thr",
              "ms median (min-max)", "GFLOP/s", "sgemm", "x sgemm");
  for (const PassShape& s : kPassShapes) {
    if (std::string(s.name).find(filter) == std::string::npos) continue;
    const int64_t n = batch > 0 ? batch : s.n;
    const ConvGeom g = conv_geom("bench", s.c, s.h, s.w, s.kernel, s.kernel, s.stride, s.stride,
                                 s.pad, s.pad);
    Rng rng(7);
    auto fill = [&rng](std::vector<float>& v, float b) {
      for (float& e : v) e = rng.uniform(-b, b);
    };
    std::vector<float> x(n * g.image_size()), w(s.k * g.col_rows()), b(s.k);
    std::vector<float> y(n * s.k * g.col_cols()), dy(y.size()), dx(x.size()), dw(w.size()),
        db(s.k);
    fill(x, 1.f);
    fill(w, 0.1f);
    fill(b, 0.1f);
    fill(dy, 1.f);
    const double flops = 2.0 * n * s.k * g.col_size();
    for (int t : thread_list) {
      std::vector<ConvAlgo> run_algos;
      size_t ws_n = 0;
      for (ConvAlgo a : algos) {
        if (a == ConvAlgo::Winograd && !conv3x3_applies(g) && !conv4x4s2_applies(g)) continue;
        if (a == ConvAlgo::Direct && !conv3x3_applies(g)) continue;
        run_algos.push_back(a);
        ws_n = std::max(ws_n, conv_workspace_floats(g, n, s.k, a, t));
      }
      Tensor ws_t(Shape{static_cast<int64_t>(std::max<size_t>(ws_n, 1))});  // 64-byte aligned, as a Context's workspace
      float* ws = ws_t.data();
      // times[algo][pass]
      std::vector<std::vector<std::vector<double>>> times(
          run_algos.size(), std::vector<std::vector<double>>(3));
      std::vector<double> gemm_rates;
      for (int r = 0; r < warmup + repeats; ++r) {
        const double rate = sgemm.run(t);
        if (r >= warmup) gemm_rates.push_back(rate);
        // The order rotates, so that no algorithm always runs first after the sgemm (which
        // leaves the caches cold) or after another one that warmed x for it.
        for (size_t j = 0; j < run_algos.size(); ++j) {
          const size_t ai = (j + r) % run_algos.size();
          const ConvAlgo a = run_algos[ai];
          const ConvFwd f = ConvFwd::of(ConvShape{g, n, s.k}, x.data(), w.data(), b.data(),
                                        y.data(), Act{}, a);
          const ConvBwd d = ConvBwd::of(f, dy.data(), nullptr, nullptr, dx.data());  // data
          const ConvBwd bw = ConvBwd::of(f, dy.data(), dw.data(), db.data(), nullptr);  // weights
          double t0 = now_ms();
          cpu::conv2d_forward(f, ws, CpuExec{t});
          double t1 = now_ms();
          if (r >= warmup) times[ai][0].push_back(t1 - t0);
          if (s.need_dx) {
            t0 = now_ms();
            cpu::conv2d_backward(d, ws, CpuExec{t});
            t1 = now_ms();
            if (r >= warmup) times[ai][1].push_back(t1 - t0);
          }
          t0 = now_ms();
          cpu::conv2d_backward(bw, ws, CpuExec{t});
          t1 = now_ms();
          if (r >= warmup) times[ai][2].push_back(t1 - t0);
        }
      }
      const double ceiling = timing_stats(gemm_rates).median;
      for (int pass = 0; pass < 3; ++pass)
        for (size_t ai = 0; ai < run_algos.size(); ++ai) {
          if (times[ai][pass].empty()) continue;
          const TimingStats st = timing_stats(times[ai][pass]);
          const double gf = flops / (st.median * 1e6);
          std::printf("%-26s %-17s %-10s %3d %9.2f (%6.2f-%7.2f) %8.1f %7.1f %6.2f\n", s.name,
                      kPassNames[pass], conv_algo_name(run_algos[ai]), t, st.median, st.min,
                      st.max, gf, ceiling, gf / ceiling);
          if (csv)
            csv->row({"bench_conv", s.name, std::to_string(n), kPassNames[pass],
                      conv_algo_name(run_algos[ai]), std::to_string(t), fmt(st.median, 3),
                      fmt(st.min, 3), fmt(st.max, 3), fmt(gf, 1), fmt(ceiling, 1),
                      info.blas_core, info.git_rev, info.host, info.cpu_model,
                      iso8601_utc_now()});
        }
      std::fflush(stdout);
    }
  }
  if (csv) std::printf("wrote %s\n", out.c_str());
  return 0;
}

// ---- layers mode ---------------------------------------------------------------------------

int run_layers(int repeats, int warmup, const std::string& filter) {
  const PassShape shapes[] = {
      {"W3 conv1 1->32 k3 28x28", 128, 1, 28, 28, 32, 3, 1, 0, false, false},
      {"W3 conv2 32->64 k3 26x26", 128, 32, 26, 26, 64, 3, 1, 0, true, false},
      {"W2 conv 1->10 k3 p1 b8", 8, 1, 28, 28, 10, 3, 1, 1, false, false},
      {"W2 conv 1->10 k3 p1 b128", 128, 1, 28, 28, 10, 3, 1, 1, false, false},
      {"W5 G1 convT 100->512 1x1", 64, 100, 1, 1, 512, 4, 1, 0, false, true},
      {"W5 G2 convT 512->256 4x4", 64, 512, 4, 4, 256, 4, 2, 1, true, true},
      {"W5 G3 convT 256->128 8x8", 64, 256, 8, 8, 128, 4, 2, 1, true, true},
      {"W5 G4 convT 128->64 16x16", 64, 128, 16, 16, 64, 4, 2, 1, true, true},
      {"W5 D2 conv 64->128 32x32", 64, 64, 32, 32, 128, 4, 2, 1, true, false},
      {"W5 D4 conv 256->512 8x8", 64, 256, 8, 8, 512, 4, 2, 1, true, false},
      {"W5 D5 conv 512->1 4x4", 64, 512, 4, 4, 1, 4, 1, 0, true, false},
  };
  std::printf("# blas: %s (%s); repeats %d after %d warm-up; times in ms: median (min-max)\n",
              blas_config(), blas_core_name(), repeats, warmup);
  std::printf("%-26s %-9s %3s %22s %22s %22s %8s\n", "shape", "algo", "thr", "forward",
              "backward", "fwd+bwd", "GFLOP/s");
  for (const PassShape& s : shapes) {
    if (std::string(s.name).find(filter) == std::string::npos) continue;
    for (ConvAlgo algo : {ConvAlgo::PerImage, ConvAlgo::Batched, ConvAlgo::Auto})
      for (int threads : {1, 2}) {
        Context ctx(threads, 1);
        Conv2d plain(s.transposed ? 1 : s.c, s.k, s.kernel, s.stride, s.pad);
        ConvTranspose2d tr(s.transposed ? s.c : 1, s.k, s.kernel, s.stride, s.pad);
        Layer& conv = s.transposed ? static_cast<Layer&>(tr) : plain;
        plain.set_algo(algo);
        tr.set_algo(algo);
        conv.reset_parameters(ctx.rng());
        Tensor x(Shape{s.n, s.c, s.h, s.w});
        for (int64_t i = 0; i < x.numel(); ++i) x[i] = ctx.rng().uniform(-1.f, 1.f);
        Tensor y(conv.output_shape(x.shape()));
        Tensor dy(y.shape());
        for (int64_t i = 0; i < dy.numel(); ++i) dy[i] = ctx.rng().uniform(-1.f, 1.f);
        Tensor dx(x.shape());
        std::vector<double> tf, tb, tt;
        for (int r = 0; r < warmup + repeats; ++r) {
          const double t0 = now_ms();
          conv.forward(ctx, x, y);
          const double t1 = now_ms();
          conv.backward(ctx, x, y, dy, s.need_dx ? &dx : nullptr);
          const double t2 = now_ms();
          if (r >= warmup) {
            tf.push_back(t1 - t0);
            tb.push_back(t2 - t1);
            tt.push_back(t2 - t0);
          }
        }
        // forward F; backward: dW costs F, dx another F when needed.
        const double flops = conv.flops(x.shape()) * (s.need_dx ? 3.0 : 2.0);
        const TimingStats f = timing_stats(tf), b = timing_stats(tb), t = timing_stats(tt);
        std::printf("%-26s %-9s %3d %8.2f (%5.2f-%6.2f) %8.2f (%5.2f-%6.2f) %8.2f (%5.2f-%6.2f) %8.1f\n",
                    s.name, conv_algo_name(algo), threads, f.median, f.min, f.max, b.median, b.min,
                    b.max, t.median, t.min, t.max, flops / (t.median * 1e6));
        std::fflush(stdout);
      }
  }
  return 0;
}

int run_sgemm(const std::vector<int>& thread_list, int repeats, int warmup) {
  Sgemm sgemm;
  for (const int t : thread_list) {
    std::vector<double> rates;
    for (int r = 0; r < warmup + repeats; ++r) {
      const double rate = sgemm.run(t);
      if (r >= warmup) rates.push_back(rate);
    }
    const TimingStats st = timing_stats(rates);
    std::printf("sgemm_gflops threads=%d repeats=%d median=%.1f min=%.1f max=%.1f blas_core=%s\n",
                t, repeats, st.median, st.min, st.max, blas_core_name());
  }
  return 0;
}

int run(int argc, char** argv) {
  CLI::App app{"Convolution benchmark: algorithms per pass (passes), the im2col ways (layers), "
               "or the sgemm ceiling alone (sgemm)"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  std::string mode = "passes", filter, out = "runs/bench/conv.csv";
  std::vector<std::string> algo_names = {"per-image", "winograd", "direct"};
  std::vector<int> threads = {1, 2};
  int repeats = 7, warmup = 2;
  int64_t batch = 0;
  app.add_option("--mode", mode, "passes, layers or sgemm")->capture_default_str()
      ->check(CLI::IsMember({"passes", "layers", "sgemm"}));
  app.add_option("--algos", algo_names, "passes: comma list of per-image, batched, winograd, direct, auto")
      ->delimiter(',')->capture_default_str()
      ->check(CLI::IsMember({"per-image", "batched", "winograd", "direct", "auto"}));
  app.add_option("--threads", threads, "passes, sgemm: comma list of thread counts")->delimiter(',')
      ->capture_default_str()->check(CLI::Range(1, 4096));
  app.add_option("--repeats", repeats, "timed runs")->capture_default_str()->check(CLI::Range(1, 100000));
  app.add_option("--warmup", warmup, "untimed runs first")->capture_default_str()->check(CLI::Range(0, 100000));
  app.add_option("--batch", batch, "passes: batch for every shape (0 = the workload's)")
      ->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  app.add_option("--filter", filter, "only shapes whose name contains this");
  app.add_option("--out", out, "passes: CSV to append rows to ('' = none)")->capture_default_str();
  if (const int status = parse_flags(app, "bench_conv", argc, argv); status >= 0) return status;
  if (mode == "layers") return run_layers(repeats, warmup, filter);
  if (mode == "sgemm") return run_sgemm(threads, repeats, warmup);
  std::vector<ConvAlgo> algos;
  for (const std::string& a : algo_names)
    algos.push_back(a == "per-image" ? ConvAlgo::PerImage
                    : a == "batched" ? ConvAlgo::Batched
                    : a == "winograd" ? ConvAlgo::Winograd
                    : a == "direct"   ? ConvAlgo::Direct
                                      : ConvAlgo::Auto);
  return run_passes(algos, threads, repeats, warmup, batch, filter, out);
}

}  // namespace

int main(int argc, char** argv) { return run_app("bench_conv", run, argc, argv); }
