// Times Conv2d forward + backward on the W2/W3 shapes for both ways of running a convolution
// (images in parallel with single-threaded GEMMs, or one batched GEMM with threaded BLAS) at
// 1 and 2 threads: median (min, max) of repeats after warm-up, and GFLOP/s.
// Also W5's (DCGAN) extreme shapes, where per-image GEMMs degenerate to matrix-vector products.
// Usage: bench_conv [repeats=9] [warmup=2] [filter: run only shapes whose name contains it]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/context.h"
#include "layers/conv2d.h"
#include "layers/conv_transpose2d.h"
#include "train/timing.h"

using namespace pdnn;

namespace {

struct ConvShape {
  const char* name;
  int64_t n, c, h, w, k, kernel, stride, pad;
  bool need_dx;     // false for a first layer, whose dx nobody needs
  bool transposed;  // ConvTranspose2d(c->k) instead of Conv2d(c->k)
};

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}


}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 9;
  const int warmup = argc > 2 ? std::atoi(argv[2]) : 2;
  const std::string filter = argc > 3 ? argv[3] : "";
  const ConvShape shapes[] = {
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
  for (const ConvShape& s : shapes) {
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
                    s.name, conv_algo_name(algo), threads, f.median, f.min, f.max, b.median, b.min, b.max,
                    t.median, t.min, t.max, flops / (t.median * 1e6));
        std::fflush(stdout);
      }
  }
  return 0;
}
