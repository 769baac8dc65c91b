// The sample-quality statistics (lib/workloads/dcgan/gan_quality.h): the symmetric
// eigen-decomposition (LAPACK dsyevd) against its definition and closed-form spectra, the PSD
// square root against its definition, the Fréchet distance against closed forms
// (identical sets, shifted means, commuting and 2x2 non-commuting covariances), the Gaussian fit
// against numpy's np.mean/np.cov, the class statistics at their extremes, the sample path of
// real images, and gan_score end to end on generated data.
#include <cmath>
#include <string>
#include <vector>

#include "core/rng.h"
#include "data/idx.h"
#include "testing.h"
#include "workloads/dcgan/gan_quality.h"

namespace pdnn {
namespace {

std::vector<double> random_symmetric(int64_t n, Rng& r, bool psd) {
  std::vector<double> b(static_cast<size_t>(n * n)), a(static_cast<size_t>(n * n), 0.0);
  for (double& v : b) v = 2 * r.uniform() - 1;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t k = 0; k < n; ++k)
        a[static_cast<size_t>(i * n + j)] += psd ? b[static_cast<size_t>(i * n + k)] * b[static_cast<size_t>(j * n + k)]
                                              : (k == 0 ? b[static_cast<size_t>(i * n + j)] + b[static_cast<size_t>(j * n + i)] : 0.0);
  return a;
}

std::vector<double> matmul(const std::vector<double>& a, const std::vector<double>& b, int64_t n) {
  std::vector<double> c(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < n; ++k)
      for (int64_t j = 0; j < n; ++j)
        c[static_cast<size_t>(i * n + j)] += a[static_cast<size_t>(i * n + k)] * b[static_cast<size_t>(k * n + j)];
  return c;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

}  // namespace

TEST(GanQuality, SymmetricEigenAndSquareRoot) {
  Rng r(3);
  for (int64_t n : {1, 2, 7, 40}) {
    SCOPED_TRACE(n);
    const std::vector<double> a = random_symmetric(n, r, false);
    std::vector<double> w, v;
    symmetric_eigen(a, n, &w, &v);
    // A = V diag(w) V^T and V^T V = I.
    std::vector<double> vd(v), vt(static_cast<size_t>(n * n));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < n; ++k) {
        vd[static_cast<size_t>(i * n + k)] *= w[static_cast<size_t>(k)];
        vt[static_cast<size_t>(k * n + i)] = v[static_cast<size_t>(i * n + k)];
      }
    EXPECT_LT(max_abs_diff(matmul(vd, vt, n), a), 1e-12 * n);
    std::vector<double> eye(static_cast<size_t>(n * n), 0.0);
    for (int64_t i = 0; i < n; ++i) eye[static_cast<size_t>(i * n + i)] = 1;
    EXPECT_LT(max_abs_diff(matmul(vt, v, n), eye), 1e-12 * n);
    for (size_t k = 1; k < w.size(); ++k) EXPECT_LE(w[k - 1], w[k]);  // ascending
    // The PSD square root squares back and is symmetric.
    const std::vector<double> s = random_symmetric(n, r, true);
    const std::vector<double> root = sqrt_psd(s, n);
    EXPECT_LT(max_abs_diff(matmul(root, root, n), s), 1e-11 * n);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        EXPECT_NEAR(root[static_cast<size_t>(i * n + j)], root[static_cast<size_t>(j * n + i)], 1e-12);
  }
  // Closed forms: [[2,1],[1,2]] has eigenvalues 1 and 3 with vectors (1,-1)/sqrt2, (1,1)/sqrt2;
  // the n x n tridiagonal (2 on the diagonal, -1 beside it) has 2 - 2 cos(k pi / (n + 1)),
  // k = 1..n, ascending. Bounds: a backward-stable solver is within a few ulps of |A| <= 4.
  {
    std::vector<double> w, v;
    symmetric_eigen({2, 1, 1, 2}, 2, &w, &v);
    EXPECT_NEAR(w[0], 1.0, 1e-14);
    EXPECT_NEAR(w[1], 3.0, 1e-14);
    const double h = 1 / std::sqrt(2.0);
    EXPECT_NEAR(std::fabs(v[0]), h, 1e-14);
    EXPECT_NEAR(v[0] * v[2], -0.5, 1e-14);  // column 0: (1,-1)/sqrt2 up to sign
    EXPECT_NEAR(v[1] * v[3], 0.5, 1e-14);   // column 1: (1,1)/sqrt2 up to sign
    const int64_t n = 50;
    std::vector<double> t(static_cast<size_t>(n * n), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      t[static_cast<size_t>(i * n + i)] = 2;
      if (i + 1 < n)
        t[static_cast<size_t>(i * n + i + 1)] = t[static_cast<size_t>((i + 1) * n + i)] = -1;
    }
    symmetric_eigen(t, n, &w, &v);
    for (int64_t k = 0; k < n; ++k)
      EXPECT_NEAR(w[static_cast<size_t>(k)], 2 - 2 * std::cos(M_PI * (k + 1) / (n + 1)), 1e-13)
          << "eigenvalue " << k;
  }
  // A singular PSD matrix (rank 1): its root is v v^T / |v|.
  const std::vector<double> rank1 = {1, 2, 2, 4};
  const std::vector<double> root = sqrt_psd(rank1, 2);
  const double k = 1 / std::sqrt(5.0);
  EXPECT_LT(max_abs_diff(root, {k, 2 * k, 2 * k, 4 * k}), 1e-7);
  testing::expect_error_mentions([] {
    std::vector<double> w, v;
    symmetric_eigen({1, 2, 3, 4}, 2, &w, &v);
  }, {"not symmetric"});
}

TEST(GanQuality, FrechetDistanceClosedForms) {
  Gaussian a, b;
  a.dim = b.dim = 2;
  a.mean = {1, 2};
  b.mean = {1, 2};
  a.cov = {2, 0.5, 0.5, 1};
  b.cov = a.cov;
  EXPECT_NEAR(frechet_distance(a, b), 0.0, 1e-12);
  b.mean = {4, -2};  // shift only: |dmu|^2 = 25
  EXPECT_NEAR(frechet_distance(a, b), 25.0, 1e-10);
  // Commuting (diagonal) covariances: sum (sqrt(s1) - sqrt(s2))^2.
  a.mean = b.mean = {0, 0};
  a.cov = {4, 0, 0, 9};
  b.cov = {1, 0, 0, 16};
  EXPECT_NEAR(frechet_distance(a, b), 1.0 + 1.0, 1e-12);
  // 2x2, not commuting: tr sqrt(M) = sqrt(tr M + 2 sqrt(det M)) for M = S1^1/2 S2 S1^1/2, with
  // tr M = tr(S1 S2) and det M = det S1 det S2.
  a.cov = {2, 0.7, 0.7, 1};
  b.cov = {1, -0.3, -0.3, 3};
  const double tr12 = 2 * 1 + 0.7 * -0.3 + 0.7 * -0.3 + 1 * 3;
  const double det = (2 * 1 - 0.7 * 0.7) * (1 * 3 - 0.3 * 0.3);
  const double expect = 3 + 4 - 2 * std::sqrt(tr12 + 2 * std::sqrt(det));
  EXPECT_NEAR(frechet_distance(a, b), expect, 1e-12);
  EXPECT_NEAR(frechet_distance(b, a), expect, 1e-12);  // symmetric
}

TEST(GanQuality, GaussianFitIsNumpys) {
  // np.mean(f, 0) = [2, 4/3]; np.cov(f.T) = [[1, -1], [-1, 4/3]].
  const std::vector<float> f = {1, 2, 2, 2, 3, 0};
  const Gaussian g = fit_gaussian(f, 3, 2);
  EXPECT_NEAR(g.mean[0], 2.0, 1e-12);
  EXPECT_NEAR(g.mean[1], 4.0 / 3, 1e-12);
  EXPECT_NEAR(g.cov[0], 1.0, 1e-12);
  EXPECT_NEAR(g.cov[1], -1.0, 1e-12);
  EXPECT_NEAR(g.cov[2], -1.0, 1e-12);
  EXPECT_NEAR(g.cov[3], 4.0 / 3, 1e-12);
  // Two samples of one large random set: the distance between them is small against the
  // distance to a shifted copy.
  Rng r(5);
  const int64_t n = 4000, d = 16;
  std::vector<float> x(static_cast<size_t>(n * d)), y(x.size()), z(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>(r.normal());
    y[i] = static_cast<float>(r.normal());
    z[i] = static_cast<float>(r.normal() + 0.5);
  }
  const double same = frechet_distance(fit_gaussian(x, n, d), fit_gaussian(y, n, d));
  const double shifted = frechet_distance(fit_gaussian(x, n, d), fit_gaussian(z, n, d));
  EXPECT_LT(same, 0.1);
  EXPECT_NEAR(shifted, d * 0.25, 0.3);
}

TEST(GanQuality, ClassScoresAtTheExtremes) {
  const int64_t k = 10, n = 1000;
  std::vector<float> sure(static_cast<size_t>(n * k), 0.f), same(sure), flat(sure);
  for (int64_t i = 0; i < n; ++i) {
    sure[static_cast<size_t>(i * k + i % k)] = 1.f;  // every class, each certain
    same[static_cast<size_t>(i * k + 3)] = 1.f;      // one class only
    for (int64_t j = 0; j < k; ++j) flat[static_cast<size_t>(i * k + j)] = 0.1f;
  }
  ClassScores s = class_scores(sure, n, k);
  EXPECT_NEAR(s.class_entropy, std::log(10.0), 1e-12);
  EXPECT_NEAR(s.mean_confidence, 1.0, 1e-12);
  EXPECT_NEAR(s.inception_score, 10.0, 1e-9);
  EXPECT_NEAR(s.min_class_fraction, 0.1, 1e-12);
  s = class_scores(same, n, k);
  EXPECT_NEAR(s.class_entropy, 0.0, 1e-12);
  EXPECT_NEAR(s.inception_score, 1.0, 1e-9);
  EXPECT_EQ(s.min_class_fraction, 0.0);
  EXPECT_NEAR(s.fractions[3], 1.0, 1e-12);
  s = class_scores(flat, n, k);
  EXPECT_NEAR(s.inception_score, 1.0, 1e-6);
  EXPECT_NEAR(s.mean_confidence, 0.1, 1e-6);
}

// Real images through the samples' path: a constant image stays constant, byte-rounded; a
// 64x64 sample file comes back at 28x28 as the mean of each output pixel's area.
TEST(GanQuality, SamplePathOfRealAndGeneratedImages) {
  Tensor img(Shape{2, 1, 28, 28});
  for (int64_t i = 0; i < img.numel(); ++i) img[i] = i < 784 ? 0.5f : 1.0f;
  const Tensor t = real_through_sample_path(img, 64, 28);
  EXPECT_EQ(t.shape(), (Shape{2, 1, 28, 28}));
  EXPECT_NEAR(t[0], 128.f / 255.f, 1e-7);
  EXPECT_NEAR(t[784 + 300], 1.f, 1e-7);
  IdxImages im;
  im.n = 1;
  im.rows = im.cols = 4;
  im.pixels = {0, 255, 0, 0, 255, 0, 0, 0, 0, 0, 51, 51, 0, 0, 51, 51};
  const Tensor d = classifier_input(im, 2);
  EXPECT_NEAR(d[0], 0.5f, 1e-7);   // mean of 0, 255, 255, 0
  EXPECT_NEAR(d[1], 0.f, 1e-7);
  EXPECT_NEAR(d[3], 0.2f, 1e-7);   // 51 / 255
}

}  // namespace pdnn
