// Sample-quality statistics: symmetric eigen-decomposition (LAPACK), Gaussian fits, Fréchet
// distance, class statistics (gan_quality.h).
#include "workloads/dcgan/gan_quality.h"

#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/error.h"
#include "data/resize.h"

namespace pdnn {

void symmetric_eigen(const std::vector<double>& a_in, int64_t n, std::vector<double>* values,
                     std::vector<double>* vectors) {
  PDNN_CHECK(n >= 1 && static_cast<int64_t>(a_in.size()) == n * n,
             "symmetric_eigen: %zu values for a %lld x %lld matrix", a_in.size(),
             static_cast<long long>(n), static_cast<long long>(n));
  std::vector<double> a = a_in;
  auto A = [&](int64_t i, int64_t j) -> double& { return a[static_cast<size_t>(i * n + j)]; };
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < i; ++j)
      PDNN_CHECK(std::fabs(A(i, j) - A(j, i)) <= 1e-9 * (std::fabs(A(i, j)) + std::fabs(A(j, i))) + 1e-300,
                 "symmetric_eigen: the matrix is not symmetric at (%lld, %lld): %g vs %g",
                 static_cast<long long>(i), static_cast<long long>(j), A(i, j), A(j, i));
  // LAPACK's divide and conquer (OpenBLAS's dsyevd through LAPACKE): ascending eigenvalues,
  // orthonormal eigenvectors overwriting a (row-major: column k is vector k).
  std::vector<double>& w = *values;
  w.assign(static_cast<size_t>(n), 0.0);
  const lapack_int info = LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'U', static_cast<lapack_int>(n),
                                         a.data(), static_cast<lapack_int>(n), w.data());
  PDNN_CHECK(info == 0, "symmetric_eigen: LAPACK dsyevd failed on a %lld x %lld matrix (info %d)",
             static_cast<long long>(n), static_cast<long long>(n), static_cast<int>(info));
  *vectors = std::move(a);
}

std::vector<double> sqrt_psd(const std::vector<double>& a, int64_t n) {
  std::vector<double> w, v;
  symmetric_eigen(a, n, &w, &v);
  std::vector<double> out(static_cast<size_t>(n * n), 0.0);
  for (int64_t k = 0; k < n; ++k) {
    const double r = std::sqrt(std::max(w[static_cast<size_t>(k)], 0.0));
    if (r == 0.0) continue;
    for (int64_t i = 0; i < n; ++i) {
      const double vi = v[static_cast<size_t>(i * n + k)] * r;
      for (int64_t j = 0; j < n; ++j) out[static_cast<size_t>(i * n + j)] += vi * v[static_cast<size_t>(j * n + k)];
    }
  }
  return out;
}

Gaussian fit_gaussian(const std::vector<float>& f, int64_t count, int64_t dim) {
  PDNN_CHECK(count >= 2 && dim >= 1 && static_cast<int64_t>(f.size()) == count * dim,
             "fit_gaussian: %zu values for %lld samples of %lld features (at least 2 samples)",
             f.size(), static_cast<long long>(count), static_cast<long long>(dim));
  Gaussian g;
  g.dim = dim;
  g.count = count;
  g.mean.assign(static_cast<size_t>(dim), 0.0);
  for (int64_t s = 0; s < count; ++s)
    for (int64_t i = 0; i < dim; ++i) g.mean[static_cast<size_t>(i)] += f[static_cast<size_t>(s * dim + i)];
  for (double& m : g.mean) m /= static_cast<double>(count);
  g.cov.assign(static_cast<size_t>(dim * dim), 0.0);
  std::vector<double> d(static_cast<size_t>(dim));
  for (int64_t s = 0; s < count; ++s) {
    for (int64_t i = 0; i < dim; ++i)
      d[static_cast<size_t>(i)] = f[static_cast<size_t>(s * dim + i)] - g.mean[static_cast<size_t>(i)];
    for (int64_t i = 0; i < dim; ++i)
      for (int64_t j = i; j < dim; ++j)
        g.cov[static_cast<size_t>(i * dim + j)] += d[static_cast<size_t>(i)] * d[static_cast<size_t>(j)];
  }
  for (int64_t i = 0; i < dim; ++i)
    for (int64_t j = i; j < dim; ++j) {
      double& c = g.cov[static_cast<size_t>(i * dim + j)];
      c /= static_cast<double>(count - 1);
      g.cov[static_cast<size_t>(j * dim + i)] = c;
    }
  return g;
}

double frechet_distance(const Gaussian& a, const Gaussian& b) {
  PDNN_CHECK(a.dim == b.dim && a.dim >= 1, "frechet_distance: %lld vs %lld features",
             static_cast<long long>(a.dim), static_cast<long long>(b.dim));
  const int64_t n = a.dim;
  double d2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = a.mean[static_cast<size_t>(i)] - b.mean[static_cast<size_t>(i)];
    d2 += d * d;
  }
  // tr sqrt(S1 S2) = tr sqrt(S1^1/2 S2 S1^1/2), the latter symmetric PSD.
  const std::vector<double> r = sqrt_psd(a.cov, n);
  std::vector<double> t(static_cast<size_t>(n * n), 0.0), m(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < n; ++k) {
      const double rik = r[static_cast<size_t>(i * n + k)];
      for (int64_t j = 0; j < n; ++j) t[static_cast<size_t>(i * n + j)] += rik * b.cov[static_cast<size_t>(k * n + j)];
    }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < n; ++k) {
      const double tik = t[static_cast<size_t>(i * n + k)];
      for (int64_t j = 0; j < n; ++j) m[static_cast<size_t>(i * n + j)] += tik * r[static_cast<size_t>(k * n + j)];
    }
  for (int64_t i = 0; i < n; ++i)  // symmetric up to rounding: make it exactly so
    for (int64_t j = 0; j < i; ++j) {
      const double s = 0.5 * (m[static_cast<size_t>(i * n + j)] + m[static_cast<size_t>(j * n + i)]);
      m[static_cast<size_t>(i * n + j)] = m[static_cast<size_t>(j * n + i)] = s;
    }
  std::vector<double> w, v;
  symmetric_eigen(m, n, &w, &v);
  double tr_sqrt = 0, tr = 0;
  for (double e : w) tr_sqrt += std::sqrt(std::max(e, 0.0));
  for (int64_t i = 0; i < n; ++i)
    tr += a.cov[static_cast<size_t>(i * n + i)] + b.cov[static_cast<size_t>(i * n + i)];
  return std::max(0.0, d2 + tr - 2.0 * tr_sqrt);
}

ClassScores class_scores(const std::vector<float>& probs, int64_t count, int64_t classes) {
  PDNN_CHECK(count >= 1 && classes >= 2 && static_cast<int64_t>(probs.size()) == count * classes,
             "class_scores: %zu values for %lld samples of %lld classes", probs.size(),
             static_cast<long long>(count), static_cast<long long>(classes));
  ClassScores s;
  std::vector<double> marginal(static_cast<size_t>(classes), 0.0);
  std::vector<int64_t> hist(static_cast<size_t>(classes), 0);
  double conf = 0;
  for (int64_t i = 0; i < count; ++i) {
    const float* p = probs.data() + i * classes;
    int64_t best = 0;
    for (int64_t k = 0; k < classes; ++k) {
      marginal[static_cast<size_t>(k)] += p[k];
      if (p[k] > p[best]) best = k;
    }
    ++hist[static_cast<size_t>(best)];
    conf += p[best];
  }
  for (double& m : marginal) m /= static_cast<double>(count);
  double kl = 0;
  for (int64_t i = 0; i < count; ++i) {
    const float* p = probs.data() + i * classes;
    for (int64_t k = 0; k < classes; ++k)
      if (p[k] > 0) kl += p[k] * (std::log(static_cast<double>(p[k])) - std::log(marginal[static_cast<size_t>(k)]));
  }
  s.inception_score = std::exp(kl / static_cast<double>(count));
  s.mean_confidence = conf / static_cast<double>(count);
  s.min_class_fraction = 1.0;
  for (int64_t k = 0; k < classes; ++k) {
    const double f = static_cast<double>(hist[static_cast<size_t>(k)]) / static_cast<double>(count);
    s.fractions.push_back(f);
    if (f > 0) s.class_entropy -= f * std::log(f);
    s.min_class_fraction = std::min(s.min_class_fraction, f);
  }
  return s;
}

Classified classify(Context& ctx, Model& model, size_t feature_layer, const Tensor& images,
                    int64_t batch) {
  PDNN_CHECK(images.rank() == 4 && images.shape(0) >= 1 && images.device() == Device::CPU,
             "classify: images %s must be host (N,C,H,W)", images.shape().str().c_str());
  PDNN_CHECK(feature_layer < model.size(), "classify: feature layer %zu of %zu", feature_layer,
             model.size());
  const Shape& s = images.shape();
  const int64_t n = s.n(), per = s.numel() / n;
  Classified out;
  out.count = n;
  model.train(false);
  const Device dev = model.device();
  for (int64_t b0 = 0; b0 < n; b0 += batch) {
    const int64_t nb = std::min(batch, n - b0);
    Tensor x(s.with_n(nb));
    std::copy(images.data() + b0 * per, images.data() + (b0 + nb) * per, x.data());
    const Tensor xd = dev == Device::CPU ? x : x.to(dev, ctx);
    const Tensor& logits = model.forward(ctx, xd);
    const Tensor lh = logits.device() == Device::CPU ? logits : logits.to(Device::CPU, ctx);
    const Tensor& f = model.activation(feature_layer);
    const Tensor fh = f.device() == Device::CPU ? f : f.to(Device::CPU, ctx);
    const int64_t k = lh.numel() / nb, dim = fh.numel() / nb;
    if (b0 == 0) {
      out.classes = k;
      out.dim = dim;
      out.probs.reserve(static_cast<size_t>(n * k));
      out.features.reserve(static_cast<size_t>(n * dim));
    }
    for (int64_t i = 0; i < nb; ++i) {  // softmax in double
      const float* z = lh.data() + i * k;
      const float m = *std::max_element(z, z + k);
      double sum = 0;
      for (int64_t j = 0; j < k; ++j) sum += std::exp(static_cast<double>(z[j] - m));
      for (int64_t j = 0; j < k; ++j)
        out.probs.push_back(static_cast<float>(std::exp(static_cast<double>(z[j] - m)) / sum));
    }
    out.features.insert(out.features.end(), fh.data(), fh.data() + nb * dim);
  }
  model.train(true);
  return out;
}

Tensor classifier_input(const IdxImages& im, int side) {
  PDNN_CHECK(im.n >= 1 && side >= 1, "classifier_input: %lld images to %dx%d",
             static_cast<long long>(im.n), side, side);
  const int64_t hw = im.rows * im.cols;
  Tensor out(Shape{im.n, 1, side, side});
  std::vector<float> src(static_cast<size_t>(hw));
  for (int64_t i = 0; i < im.n; ++i) {
    for (int64_t j = 0; j < hw; ++j)
      src[static_cast<size_t>(j)] = static_cast<float>(im.pixels[static_cast<size_t>(i * hw + j)]) / 255.f;
    resize_area(1, static_cast<int>(im.rows), static_cast<int>(im.cols), src.data(), side, side,
                out.data() + i * side * side);
  }
  return out;
}

Tensor photo_input(const IdxImages& im, const std::string& what) {
  PDNN_CHECK(im.channels == 3 && im.n >= 1,
             "%s: %lld images of %lld channel(s): the photo judge scores colour images (3 "
             "channels: the dcgan app's samples of photos)",
             what.c_str(), static_cast<long long>(im.n), static_cast<long long>(im.channels));
  Tensor out(Shape{im.n, 3, im.rows, im.cols});
  float* p = out.data();
  // The image folder's arithmetic (augment_image without augmentation, mean = std = 0.5): the
  // dcgan app trains on these very values.
  const float scale = 1.f / 255.f, inv_std = 1.f / 0.5f, shift = -0.5f * inv_std;
  for (size_t i = 0; i < im.pixels.size(); ++i)
    p[i] = (static_cast<float>(im.pixels[i]) * scale) * inv_std + shift;
  return out;
}

Tensor real_through_sample_path(const Tensor& images, int up, int side) {
  const Shape& s = images.shape();
  PDNN_CHECK(s.rank() == 4 && s.c() == 1, "real_through_sample_path: images %s must be (N,1,H,W)",
             s.str().c_str());
  IdxImages im;
  im.n = s.n();
  im.rows = im.cols = up;
  im.pixels.resize(static_cast<size_t>(im.n * up * up));
  std::vector<float> big(static_cast<size_t>(up * up));
  for (int64_t i = 0; i < s.n(); ++i) {
    resize_bilinear(1, static_cast<int>(s.h()), static_cast<int>(s.w()),
                    images.data() + i * s.h() * s.w(), up, up, big.data());
    for (int64_t j = 0; j < up * up; ++j) {
      const float v = std::round(255.f * big[static_cast<size_t>(j)]);
      im.pixels[static_cast<size_t>(i * up * up + j)] =
          static_cast<uint8_t>(std::min(255.f, std::max(0.f, v)));
    }
  }
  return classifier_input(im, side);
}

}  // namespace pdnn
