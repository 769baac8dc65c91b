// build/bin/bench_kernels: the launch shape of pdnn's grid-stride GPU kernels, by measurement
// (as the PyCUDA DCGAN study tuned block and thread counts per kernel): each kernel at W3's and
// W5's sizes with 64..1024 threads per block, median of --repeat launches timed with CUDA
// events after --warmup. Prints the table and the fastest shape per kernel; appends rows to
// --out (runs/bench/gpu_launch.csv by default). The library's defaults (kThreads and the per-kernel
// choices in lib/ops/*.cu) are set from these results. Then BatchNorm's blocks a channel (1, 2, 4, 8
// forced) at W5's BatchNorm shapes in bf16: what cuda::batchnorm2d_splits's rule is set from.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "core/cuda_state.h"
#include "ops/activation.h"
#include "ops/basic.h"
#include "ops/batchnorm2d.h"
#include "ops/cast.h"
#include "ops/conv/conv2d.h"
#include "ops/dropout.h"
#include "ops/conv/im2col.h"
#include "ops/optim.h"
#include "ops/maxpool2d.h"
#include "run/csv.h"
#include "run/run_info.h"
#include "run/run_flags.h"
#include "run/timing.h"

namespace {

using namespace pdnn;

int run(int argc, char** argv) {
  CLI::App app{"Times pdnn's grid-stride GPU kernels at several threads per block"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  int repeat = 50, warmup = 10;
  std::string out = "runs/bench/gpu_launch.csv";
  app.add_option("--repeat", repeat, "timed launches per point")->capture_default_str();
  app.add_option("--warmup", warmup, "untimed launches before them")->capture_default_str();
  app.add_option("--out", out, "CSV to append rows to ('' = none)")->capture_default_str();
  if (const int status = parse_flags(app, "bench_kernels", argc, argv); status >= 0) return status;
#if !PDNN_HAVE_CUDA
  (void)repeat;
  (void)warmup;
  PDNN_FAIL("bench_kernels times GPU kernels: this pdnn was built without CUDA");
#else
  Context ctx(1, 1, Device::CUDA);
  const RunInfo info = run_info(ctx);
  std::printf("bench_kernels | cuda: %s | rev %s\n", info.gpu.c_str(), info.git_rev.c_str());
  auto dev = [&](int64_t n) {
    Tensor t = Tensor::empty(Shape{n}, DType::F32, Device::CUDA, ctx);
    ops::fill(ctx, t, 0.5f);
    return t;
  };
  // W3's largest activation (128,64,24,24), its conv2 geometry, W5's discriminator pool-free
  // shapes are covered by the same kernels at other sizes.
  const int64_t n_act = 128 * 64 * 24 * 24;
  Tensor a = dev(n_act), b = dev(n_act), c = dev(n_act);
  const ConvGeom g = conv_geom("bench", 32, 26, 26, 3, 3, 1, 1, 0, 0);
  Tensor x = dev(128 * g.image_size()), cols = dev(g.col_rows() * 128 * g.col_cols());
  const Pool2d pg{128 * 64, 24, 24, 12, 12, 2, 2};
  Tensor argmax = Tensor::empty(Shape{pg.planes * 144}, DType::U8, Device::CUDA, ctx);
  Tensor pooled = dev(pg.planes * 144);
  Tensor base = Tensor::zeros(Shape{1}, DType::I64).to(Device::CUDA, ctx);
  const int64_t n_par = 1199882;  // W3's parameters
  Tensor w = dev(n_par), gr = dev(n_par), m1 = dev(n_par), m2 = dev(n_par);
  Tensor step = Tensor::zeros(Shape{1}, DType::I64).to(Device::CUDA, ctx);
  ops::counter_add(ctx, step, 1);

  struct Kernel {
    std::string name;
    std::function<void(CudaExec)> launch;
  };
  const std::vector<Kernel> kernels = {
      {"relu_forward (4.7M)", [&](CudaExec e) { cuda::relu_forward(n_act, a.data(), b.data(), e); }},
      {"relu_backward (4.7M)",
       [&](CudaExec e) { cuda::relu_backward(n_act, a.data(), b.data(), c.data(), e); }},
      {"dropout_forward (4.7M)",
       [&](CudaExec e) {
         cuda::dropout_forward(n_act, 0.25f, 1, base.data<int64_t>(), 0, a.data(), b.data(), c.data(), e);
       }},
      {"maxpool2d_forward (W3)",
       [&](CudaExec e) { cuda::maxpool2d_forward(pg, a.data(), pooled.data(), argmax.data<uint8_t>(), e); }},
      {"maxpool2d_backward (W3)",
       [&](CudaExec e) { cuda::maxpool2d_backward<float>(pg, nullptr, pooled.data(), argmax.data<uint8_t>(), nullptr, Act{}, b.data(), e); }},
      {"im2col_batch (W3 conv2)",
       [&](CudaExec e) { cuda::im2col_batch(g, 128, x.data(), cols.data(), e); }},
      {"col2im_batch (W3 conv2)",
       [&](CudaExec e) { cuda::col2im_batch(g, 128, cols.data(), x.data(), e); }},
      {"nchw_to_cnhw (4.7M)",
       [&](CudaExec e) { cuda::nchw_to_cnhw(128, 64, 576, a.data(), b.data(), e); }},
      {"adam_update (1.2M)",
       [&](CudaExec e) {
         cuda::adam_update(n_par, AdamArgs{1e-3, 0.9, 0.999, 1e-8f, 0.f}, step.data<int64_t>(),
                           gr.data(), w.data(), m1.data(), m2.data(), e);
       }},
  };
  // Microseconds of f on e's stream: `warmup` untimed calls, then `repeat` timed one by one.
  auto time_us = [&](CudaExec e, const std::function<void()>& f) {
    for (int i = 0; i < warmup; ++i) f();
    std::vector<double> us;
    for (int i = 0; i < repeat; ++i) {
      CUevent_st* t0 = cuda_event_record(e.stream);
      f();
      us.push_back(1e3 * cuda_event_elapsed_ms(t0, cuda_event_record(e.stream)));
    }
    return timing_stats(us);
  };
  std::unique_ptr<CsvWriter> csv;
  if (!out.empty())
    csv = std::make_unique<CsvWriter>(
        out, std::vector<std::string>{"kernel", "threads", "median_us", "min_us", "gpu", "git_rev",
                                      "timestamp"});
  std::printf("%-26s %8s %10s %10s\n", "kernel", "threads", "median_us", "min_us");
  for (const Kernel& k : kernels) {
    double best = 1e30;
    int best_t = 0;
    for (int t : {64, 128, 256, 512, 1024}) {
      CudaExec e = ctx.cuda_exec();
      e.threads = t;
      const TimingStats st = time_us(e, [&] { k.launch(e); });
      std::printf("%-26s %8d %10.2f %10.2f\n", k.name.c_str(), t, st.median, st.min);
      if (st.median < best) best = st.median, best_t = t;
      if (csv)
        csv->row({k.name, std::to_string(t), fmt(st.median, 2), fmt(st.min, 2), info.gpu,
                  info.git_rev, iso8601_utc_now()});
    }
    std::printf("%-26s best: %d threads per block (%.2f us)\n", k.name.c_str(), best_t, best);
  }
  // BatchNorm's blocks a channel (cuda::batchnorm2d_splits picks by the shape; here each count
  // forced): W5's BatchNorm layers in bf16, the training forward then the backward to dx.
  std::printf("\n%-34s %6s %12s %12s\n", "batchnorm (bf16, W5)", "splits", "fwd_us", "bwd_us");
  struct BnShape {
    const char* name;
    int64_t n, c, hw;
  };
  for (const BnShape& bs : {BnShape{"G.10 (64,64,32,32)", 64, 64, 1024},
                            BnShape{"D.3/G.7 (64,128,16,16)", 64, 128, 256},
                            BnShape{"D.6/G.4 (64,256,8,8)", 64, 256, 64},
                            BnShape{"D.9/G.1 (64,512,4,4)", 64, 512, 16}}) {
    const int64_t total = bs.n * bs.c * bs.hw;
    Tensor xf = dev(total), bx = Tensor::empty(Shape{total}, DType::BF16, Device::CUDA, ctx),
           by = bx.clone(ctx), bdy = bx.clone(ctx), bdx = bx.clone(ctx);
    cuda::cast_to_bf16(total, xf.data(), bx.data<bf16>(), ctx.cuda_exec());
    cuda::cast_to_bf16(total, xf.data(), bdy.data<bf16>(), ctx.cuda_exec());
    Tensor gamma = dev(bs.c), beta = dev(bs.c), rm = dev(bs.c), rv = dev(bs.c), mean = dev(bs.c),
           invstd = dev(bs.c), dgamma = dev(bs.c), dbeta = dev(bs.c);
    for (const int splits : {1, 2, 4, 8}) {
      BnGeom g{bs.n, bs.c, bs.hw, 1e-5f, 0.1f, FusedAct::ReLU, 0.f};
      g.splits = splits;
      const CudaExec e = ctx.cuda_exec();
      const TimingStats f = time_us(e, [&] {
        cuda::batchnorm2d_forward_train(g, bx.data<bf16>(), gamma.data(), beta.data(), rm.data(),
                                        rv.data(), mean.data(), invstd.data(), by.data<bf16>(), e);
      });
      const TimingStats b = time_us(e, [&] {
        cuda::batchnorm2d_backward(g, true, bx.data<bf16>(), by.data<bf16>(), bdy.data<bf16>(),
                                   mean.data(), invstd.data(), gamma.data(), dgamma.data(),
                                   dbeta.data(), bdx.data<bf16>(), e);
      });
      const bool chosen = cuda::batchnorm2d_splits(BnGeom{bs.n, bs.c, bs.hw, 1e-5f, 0.1f,
                                                          FusedAct::ReLU, 0.f}) == splits;
      std::printf("%-34s %6d %12.2f %12.2f%s\n", bs.name, splits, f.median, b.median,
                  chosen ? "   <- the shape's choice" : "");
      if (csv)
        for (const auto& [pass, st] : {std::pair{"fwd", f}, std::pair{"bwd", b}})
          csv->row({strprintf("batchnorm bf16 %s %s splits %d", pass, bs.name, splits), "512",
                    fmt(st.median, 2), fmt(st.min, 2), info.gpu, info.git_rev, iso8601_utc_now()});
    }
  }
  return 0;
#endif
}

}  // namespace

int main(int argc, char** argv) { return pdnn::run_app("bench_kernels", run, argc, argv); }
