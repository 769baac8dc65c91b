// ConvTranspose2d: forward against a naive scatter loop (PyTorch's definition), the adjoint
// identity with Conv2d sharing the weights, gradients by finite differences, shape errors,
// determinism and 1-vs-2-thread agreement.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "layers/conv2d.h"
#include "layers/conv_transpose2d.h"
#include "testing.h"

using namespace pdnn;
namespace pt = pdnn::testing;

namespace {

struct Cfg {
  int64_t n, cin, h, w, cout, kernel, stride, pad;
  bool bias;
};

// y[n][co][iy*s-p+ki][ix*s-p+kj] += x[n][ci][iy][ix] w[ci][co][ki][kj], plus b[co]; in double.
Tensor naive_conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor* b, int64_t s,
                              int64_t p) {
  const int64_t N = x.shape(0), CI = x.shape(1), H = x.shape(2), W = x.shape(3);
  const int64_t CO = w.shape(1), R = w.shape(2), S = w.shape(3);
  const int64_t OH = (H - 1) * s - 2 * p + R, OW = (W - 1) * s - 2 * p + S;
  std::vector<double> acc(N * CO * OH * OW, 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ci = 0; ci < CI; ++ci)
      for (int64_t iy = 0; iy < H; ++iy)
        for (int64_t ix = 0; ix < W; ++ix)
          for (int64_t co = 0; co < CO; ++co)
            for (int64_t ki = 0; ki < R; ++ki)
              for (int64_t kj = 0; kj < S; ++kj) {
                const int64_t oy = iy * s - p + ki, ox = ix * s - p + kj;
                if (oy < 0 || oy >= OH || ox < 0 || ox >= OW) continue;
                acc[((n * CO + co) * OH + oy) * OW + ox] +=
                    static_cast<double>(x[((n * CI + ci) * H + iy) * W + ix]) *
                    w[((ci * CO + co) * R + ki) * S + kj];
              }
  Tensor y(Shape{N, CO, OH, OW});
  for (int64_t i = 0; i < y.numel(); ++i)
    y[i] = static_cast<float>(acc[i] + (b ? (*b)[(i / (OH * OW)) % CO] : 0.0));
  return y;
}

const Cfg kCfgs[] = {
    {1, 3, 1, 1, 4, 4, 1, 0, true},   // DCGAN's first layer in miniature: 1x1 -> 4x4
    {2, 3, 4, 4, 2, 4, 2, 1, true},   // DCGAN's upsampling layers: k4 s2 p1
    {2, 2, 5, 3, 3, 3, 1, 1, true},   // odd sizes, padding 1
    {3, 2, 3, 5, 2, 3, 2, 0, false},  // stride 2, no bias
    {2, 2, 4, 3, 3, 5, 2, 2, true},   // padding 2
    {1, 3, 4, 4, 2, 1, 1, 0, true},   // kernel 1
    // The U-Net's up-sampling, k2 s2 p0: every output pixel from one tap. Auto runs the small
    // image as Batched and the one of 72 pixels as PerImage (conv_algo_for), both below.
    {2, 3, 3, 4, 2, 2, 2, 0, true},
    {1, 2, 8, 9, 3, 2, 2, 0, false},
};

}  // namespace

TEST(ConvTranspose2d, ForwardMatchesNaiveLoops) {
  for (int threads : {1, 2}) {
    Context ctx(threads, 9);
    for (const Cfg& f : kCfgs)
      for (ConvAlgo a : {ConvAlgo::PerImage, ConvAlgo::Batched, ConvAlgo::Auto}) {
        ConvTranspose2d ct(f.cin, f.cout, f.kernel, f.stride, f.pad, f.bias);
        ct.set_algo(a);
        ct.reset_parameters(ctx.rng());
        Tensor x = pt::random_tensor(Shape{f.n, f.cin, f.h, f.w}, ctx.rng());
        Tensor y(ct.output_shape(x.shape()));
        EXPECT_EQ(y.shape(2), (f.h - 1) * f.stride - 2 * f.pad + f.kernel);
        ct.forward(ctx, x, y);
        Tensor ref = naive_conv_transpose2d(x, ct.weight(), f.bias ? &ct.bias() : nullptr,
                                            f.stride, f.pad);
        pt::expect_close(y, ref, 1e-5, 1e-5,
                         ct.describe() + " " + conv_algo_name(a) + " at " + x.shape().str());
      }
  }
}

// <conv(u), v> = <u, convT(v)> when Conv2d(Cout->Cin) and ConvTranspose2d(Cin->Cout) share the
// weight (Cin, Cout, k, k) and have no bias.
TEST(ConvTranspose2d, IsTheAdjointOfConv2d) {
  Context ctx(1, 13);
  for (const Cfg& f : kCfgs) {
    ConvTranspose2d ct(f.cin, f.cout, f.kernel, f.stride, f.pad, false);
    Conv2d conv(f.cout, f.cin, f.kernel, f.stride, f.pad, false);
    ct.reset_parameters(ctx.rng());
    std::copy(ct.weight().data(), ct.weight().data() + ct.weight().numel(), conv.weight().data());
    Tensor v = pt::random_tensor(Shape{f.n, f.cin, f.h, f.w}, ctx.rng());
    Tensor ctv(ct.output_shape(v.shape()));
    ct.forward(ctx, v, ctv);
    Tensor u = pt::random_tensor(ctv.shape(), ctx.rng());
    Tensor cu(conv.output_shape(u.shape()));
    ASSERT_EQ(cu.shape(), v.shape()) << ct.describe();
    conv.forward(ctx, u, cu);
    double lhs = 0, rhs = 0;
    for (int64_t i = 0; i < v.numel(); ++i) lhs += static_cast<double>(cu[i]) * v[i];
    for (int64_t i = 0; i < u.numel(); ++i) rhs += static_cast<double>(u[i]) * ctv[i];
    EXPECT_NEAR(lhs, rhs, 1e-5 * (1 + std::fabs(lhs))) << ct.describe();
  }
}

TEST(ConvTranspose2d, GradientsMatchFiniteDifferences) {
  Context ctx(1, 17);
  for (const Cfg& f : kCfgs)
    for (ConvAlgo a : {ConvAlgo::PerImage, ConvAlgo::Batched}) {
      ConvTranspose2d ct(f.cin, f.cout, f.kernel, f.stride, f.pad, f.bias);
      ct.set_algo(a);
      ct.reset_parameters(ctx.rng());
      Tensor x = pt::random_tensor(Shape{f.n, f.cin, f.h, f.w}, ctx.rng());
      SCOPED_TRACE(ct.describe() + " " + conv_algo_name(a));
      pt::check_layer_gradients(ctx, ct, x);
    }
}

TEST(ConvTranspose2d, ShapeErrorsDescribeAndInit) {
  ConvTranspose2d ct(100, 512, 4, 1, 0);
  EXPECT_EQ(ct.describe(), "ConvTranspose2d(100->512, k4 s1 p0)");
  EXPECT_EQ(ct.output_shape(Shape{64, 100, 1, 1}), (Shape{64, 512, 4, 4}));
  EXPECT_EQ(ct.weight().shape(), (Shape{100, 512, 4, 4}));
  EXPECT_DOUBLE_EQ(ct.flops(Shape{2, 100, 1, 1}), 2.0 * 2 * 100 * 512 * 16 + 2 * 512 * 16);
  try {
    ct.output_shape(Shape{2, 3, 1, 1});
    FAIL() << "wrong channel count must throw";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("conv_transpose2d"), std::string::npos) << m;
    EXPECT_NE(m.find("3 channels"), std::string::npos) << m;
    EXPECT_NE(m.find("expects 100"), std::string::npos) << m;
  }
  EXPECT_THROW(ConvTranspose2d(2, 2, 1, 1, 1).output_shape(Shape{1, 2, 1, 1}), Error);  // empty
  // PyTorch's fan_in for a transposed conv: weight dim 1 (Cout) * k * k.
  ConvTranspose2d small(8, 3, 2);
  Rng rng(1);
  small.reset_parameters(rng);
  const float bound = 1.f / std::sqrt(3.f * 4.f);
  float mx = 0.f;
  for (int64_t i = 0; i < small.weight().numel(); ++i)
    mx = std::max(mx, std::fabs(small.weight()[i]));
  EXPECT_LE(mx, bound);
  EXPECT_GT(mx, 0.8f * bound);
}

// The U-Net's 2x2 stride-2 up-sampling on the CPU: for its geometry (the convolution it
// transposes, over the output image) conv_algo_for picks one of the two im2col schemes by the
// image's size; both run in the tests above (the last two kCfgs, forced and through Auto).
TEST(ConvTranspose2d, UpSamplingK2S2TakesTheIm2colSchemes) {
  EXPECT_EQ(conv_algo_for(conv_geom("t", 2, 6, 8, 2, 2, 2, 2, 0, 0), 2, 3, 1), ConvAlgo::Batched);
  EXPECT_EQ(conv_algo_for(conv_geom("t", 3, 16, 18, 2, 2, 2, 2, 0, 0), 1, 2, 2), ConvAlgo::PerImage);
}

TEST(ConvTranspose2d, DeterministicAndThreadCountIndependent) {
  for (ConvAlgo a : {ConvAlgo::PerImage, ConvAlgo::Batched}) {
    Rng rng(23);
    Tensor x = pt::random_tensor(Shape{6, 8, 6, 5}, rng);
    ConvTranspose2d ct(8, 4, 4, 2, 1);
    ct.set_algo(a);
    ct.reset_parameters(rng);
    const Tensor dy = pt::random_tensor(ct.output_shape(x.shape()), rng);
    Tensor out[3][4];  // y, dx, dW, db per run
    const int threads[3] = {1, 2, 2};
    for (int r = 0; r < 3; ++r) {
      Context ctx(threads[r]);
      out[r][0] = Tensor(ct.output_shape(x.shape()));
      out[r][1] = Tensor(x.shape());
      ct.forward(ctx, x, out[r][0]);
      ct.zero_grad();
      ct.backward(ctx, x, out[r][0], dy, &out[r][1]);
      out[r][2] = ct.weight_grad().clone();
      out[r][3] = ct.bias_grad().clone();
    }
    const char* names[4] = {"y", "dx", "dW", "db"};
    for (int j = 0; j < 4; ++j) {
      const std::string what = std::string(conv_algo_name(a)) + " " + names[j];
      pt::expect_close(out[2][j], out[1][j], 0, 0, what + ", two runs at 2 threads");
      pt::expect_close(out[1][j], out[0][j], 1e-6, 1e-5, what + ", 2 vs 1 threads");
    }
  }
}
