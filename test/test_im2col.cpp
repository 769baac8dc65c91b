// im2col/col2im against naive loops for many geometries, the adjoint identity between them,
// the batched (ld > oh*ow) layout, and geometry errors.
#include <cmath>
#include <vector>

#include "core/error.h"
#include "ops/conv/im2col.h"
#include "testing.h"

using namespace pdnn;

namespace {

struct Case {
  int64_t c, h, w, kh, kw, s, p;
};

// The definition, one element at a time.
float naive_col(const ConvGeom& g, const float* x, int64_t r, int64_t q) {
  const int64_t ci = r / (g.kh * g.kw), ki = (r / g.kw) % g.kh, kj = r % g.kw;
  const int64_t oy = q / g.ow, ox = q % g.ow;
  const int64_t iy = oy * g.sh - g.ph + ki, ix = ox * g.sw - g.pw + kj;
  if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) return 0.f;
  return x[(ci * g.h + iy) * g.w + ix];
}

const std::vector<Case> kCases = {
    {1, 5, 5, 3, 3, 1, 0},  {2, 7, 5, 3, 3, 1, 1},  {3, 7, 5, 3, 3, 2, 1},
    {2, 8, 9, 3, 2, 2, 2},  {2, 6, 6, 1, 1, 1, 0},  {2, 6, 6, 1, 1, 2, 0},
    {3, 4, 5, 4, 5, 1, 0},  {2, 4, 4, 4, 4, 2, 1},  {1, 3, 3, 5, 5, 1, 2},
    {2, 9, 7, 4, 4, 3, 2},  {1, 1, 1, 1, 1, 1, 0},  {4, 11, 13, 5, 3, 2, 2},
};

ConvGeom geom(const Case& k) {
  return conv_geom("test", k.c, k.h, k.w, k.kh, k.kw, k.s, k.s, k.p, k.p);
}

}  // namespace

TEST(Im2col, MatchesNaiveLoops) {
  Rng rng(3);
  for (const Case& k : kCases) {
    const ConvGeom g = geom(k);
    EXPECT_EQ(g.oh, (k.h + 2 * k.p - k.kh) / k.s + 1);
    Tensor x = pdnn::testing::random_tensor(Shape{g.c, g.h, g.w}, rng);
    Tensor cols(Shape{g.col_rows(), g.col_cols()});
    cols.fill(std::nanf(""));  // every entry must be written
    cpu::im2col(g, x.data(), cols.data());
    Tensor ref(cols.shape());
    for (int64_t r = 0; r < g.col_rows(); ++r)
      for (int64_t q = 0; q < g.col_cols(); ++q)
        ref[r * g.col_cols() + q] = naive_col(g, x.data(), r, q);
    pdnn::testing::expect_close(cols, ref, 0, 0, "im2col " + cols.shape().str());
  }
}

TEST(Col2im, MatchesNaiveScatterAndIsTheAdjoint) {
  Rng rng(4);
  for (const Case& k : kCases) {
    const ConvGeom g = geom(k);
    Tensor cols = pdnn::testing::random_tensor(Shape{g.col_rows(), g.col_cols()}, rng);
    Tensor x(Shape{g.c, g.h, g.w});
    x.fill(std::nanf(""));  // written, not accumulated
    cpu::col2im(g, cols.data(), x.data());
    std::vector<double> ref(g.image_size(), 0.0);
    for (int64_t r = 0; r < g.col_rows(); ++r) {
      const int64_t ci = r / (g.kh * g.kw), ki = (r / g.kw) % g.kh, kj = r % g.kw;
      for (int64_t oy = 0; oy < g.oh; ++oy)
        for (int64_t ox = 0; ox < g.ow; ++ox) {
          const int64_t iy = oy * g.sh - g.ph + ki, ix = ox * g.sw - g.pw + kj;
          if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w)
            ref[(ci * g.h + iy) * g.w + ix] += cols[r * g.col_cols() + oy * g.ow + ox];
        }
    }
    Tensor reft(x.shape());
    for (int64_t i = 0; i < x.numel(); ++i) reft[i] = static_cast<float>(ref[i]);
    pdnn::testing::expect_close(x, reft, 1e-6, 1e-5, "col2im " + x.shape().str());

    // <im2col(u), cols> == <u, col2im(cols)>
    Tensor u = pdnn::testing::random_tensor(x.shape(), rng);
    Tensor cu(cols.shape());
    cpu::im2col(g, u.data(), cu.data());
    double lhs = 0, rhs = 0;
    for (int64_t i = 0; i < cols.numel(); ++i) lhs += static_cast<double>(cu[i]) * cols[i];
    for (int64_t i = 0; i < u.numel(); ++i) rhs += static_cast<double>(u[i]) * x[i];
    EXPECT_NEAR(lhs, rhs, 1e-4 * (1 + std::fabs(lhs)));
  }
}

TEST(Im2col, BatchedLayoutPutsImagesSideBySide) {
  Rng rng(5);
  const ConvGeom g = geom({2, 7, 5, 3, 3, 2, 1});
  const int64_t n = 3, p = g.col_cols(), ld = n * p;
  Tensor x = pdnn::testing::random_tensor(Shape{n, g.c, g.h, g.w}, rng);
  Tensor big(Shape{g.col_rows(), ld});
  for (int64_t i = 0; i < n; ++i) cpu::im2col(g, x.data() + i * g.image_size(), big.data() + i * p, ld);
  Tensor back(x.shape());
  for (int64_t i = 0; i < n; ++i) {
    Tensor one(Shape{g.col_rows(), p});
    cpu::im2col(g, x.data() + i * g.image_size(), one.data());
    for (int64_t r = 0; r < g.col_rows(); ++r)
      for (int64_t q = 0; q < p; ++q) ASSERT_EQ(big[r * ld + i * p + q], one[r * p + q]);
    Tensor ref(Shape{g.c, g.h, g.w});
    cpu::col2im(g, one.data(), ref.data());
    cpu::col2im(g, big.data() + i * p, back.data() + i * g.image_size(), ld);
    for (int64_t j = 0; j < g.image_size(); ++j) ASSERT_EQ(back[i * g.image_size() + j], ref[j]);
  }
  // The permutation helpers are inverse to each other.
  Tensor t(x.shape()), u(x.shape());
  cpu::nchw_to_cnhw(n, g.c, g.h * g.w, x.data(), t.data(), CpuExec{1});
  EXPECT_EQ(t[(1 * n + 2) * g.h * g.w + 4], x[(2 * g.c + 1) * g.h * g.w + 4]);
  cpu::cnhw_to_nchw(n, g.c, g.h * g.w, t.data(), u.data(), CpuExec{1});
  pdnn::testing::expect_close(u, x, 0, 0, "cnhw round trip");
}

TEST(ConvGeom, RejectsBadSizes) {
  EXPECT_THROW(conv_geom("t", 1, 2, 2, 3, 3, 1, 1, 0, 0), Error);  // kernel larger than input
  EXPECT_THROW(conv_geom("t", 1, 5, 5, 3, 3, 0, 0, 0, 0), Error);  // stride 0
  EXPECT_THROW(conv_geom("t", 1, 5, 5, 3, 3, 1, 1, -1, 0), Error);
  EXPECT_THROW(conv_geom("t", 0, 5, 5, 3, 3, 1, 1, 0, 0), Error);
  try {
    conv_geom("conv2d", 1, 2, 2, 5, 5, 1, 1, 1, 1);
    FAIL() << "must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("conv2d"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("5x5"), std::string::npos) << e.what();
  }
  const ConvGeom g = conv_geom("t", 1, 2, 2, 4, 4, 1, 1, 1, 1);  // kernel = padded input
  EXPECT_EQ(g.oh, 1);
  EXPECT_EQ(g.ow, 1);
}
