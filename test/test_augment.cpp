// Augmentation (lib/data/augment.h): the resampler against exact expectations (identity copy,
// mirror, integer crop, quarter turn, brightness/contrast against a naive reference), the
// draws within their ranges and a function of the key alone, and the output always of the
// requested shape with nothing written outside it; its kernels (per pixel, vectors with 8- or
// 4-byte gathers) the same bit for bit, and the values those of the per-pixel resampler.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "data/augment.h"

namespace pdnn {
namespace {

// h x w x 3 bytes with every pixel different (so misplaced samples show).
std::vector<uint8_t> pattern(int h, int w, uint64_t seed = 5) {
  std::vector<uint8_t> img(static_cast<size_t>(h) * w * 3);
  Rng rng(seed);
  for (auto& v : img) v = static_cast<uint8_t>(rng.next() & 0xFF);
  return img;
}

Normalization unit() { return Normalization{}; }  // mean 0, std 1: values stay v in [0,1]

std::vector<float> run(const AugmentDraw& d, const Normalization& n, int h, int w,
                       const std::vector<uint8_t>& src, int oh, int ow) {
  std::vector<float> out(static_cast<size_t>(3) * oh * ow);
  augment_image(d, n, h, w, src.data(), oh, ow, out.data());
  return out;
}

float px(const std::vector<uint8_t>& src, int w, int y, int x, int c) {
  return src[(static_cast<size_t>(y) * w + x) * 3 + c] * (1.f / 255.f);
}

TEST(Augment, IdentityCopiesPixelsExactly) {
  const int h = 7, w = 9;
  const auto src = pattern(h, w);
  const auto out = run(identity_draw(h, w), unit(), h, w, src, h, w);
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        ASSERT_EQ(out[(static_cast<size_t>(c) * h + y) * w + x], px(src, w, y, x, c))
            << "c" << c << " y" << y << " x" << x;
}

TEST(Augment, FlipMirrorsExactly) {
  const int h = 6, w = 11;
  const auto src = pattern(h, w);
  AugmentDraw d = identity_draw(h, w);
  d.flip = true;
  const auto out = run(d, unit(), h, w, src, h, w);
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        ASSERT_EQ(out[(static_cast<size_t>(c) * h + y) * w + x], px(src, w, y, w - 1 - x, c));
}

TEST(Augment, IntegerCropAtItsOwnSizeCopiesTheRegion) {
  const int h = 10, w = 12;
  const auto src = pattern(h, w);
  AugmentDraw d;
  d.crop_x = 3, d.crop_y = 2, d.crop_w = 5, d.crop_h = 4;
  const auto out = run(d, unit(), h, w, src, 4, 5);
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 4; ++y)
      for (int x = 0; x < 5; ++x)
        ASSERT_EQ(out[(static_cast<size_t>(c) * 4 + y) * 5 + x], px(src, w, y + 2, x + 3, c));
}

TEST(Augment, QuarterTurnRotatesAboutTheCentre) {
  const int n = 8;
  const auto src = pattern(n, n);
  AugmentDraw d = identity_draw(n, n);
  d.angle_deg = 90;
  const auto out = run(d, unit(), n, n, src, n, n);
  // Output (u,v) samples source x = c + (-(v - c)), y = c + (u - c) about the centre c: the
  // source rotated by -90 degrees as seen in the output (y axis down).
  for (int c = 0; c < 3; ++c)
    for (int v = 0; v < n; ++v)
      for (int u = 0; u < n; ++u)
        ASSERT_NEAR(out[(static_cast<size_t>(c) * n + v) * n + u], px(src, n, u, n - 1 - v, c),
                    1e-5)
            << "u" << u << " v" << v;
}

TEST(Augment, BrightnessContrastAndNormalisationMatchAReference) {
  const int h = 5, w = 4;
  const auto src = pattern(h, w, 9);
  AugmentDraw d = identity_draw(h, w);
  d.brightness = 1.3f;
  d.contrast = 0.7f;
  const Normalization norm = Normalization::imagenet();
  const auto out = run(d, norm, h, w, src, h, w);
  std::vector<double> v(out.size());
  double grey = 0;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      double rgb[3];
      for (int c = 0; c < 3; ++c) rgb[c] = std::min(1.0, px(src, w, y, x, c) * 1.3);
      grey += 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2];
      for (int c = 0; c < 3; ++c) v[(static_cast<size_t>(c) * h + y) * w + x] = rgb[c];
    }
  grey /= h * w;
  for (size_t i = 0; i < v.size(); ++i) {
    const int c = static_cast<int>(i / (static_cast<size_t>(h) * w));
    const double j = std::clamp((v[i] - grey) * 0.7 + grey, 0.0, 1.0);
    ASSERT_NEAR(out[i], (j - norm.mean[c]) / norm.std[c], 1e-5) << i;
  }
}

TEST(Augment, DrawsStayInRangeAndDependOnTheKeyOnly) {
  const AugmentOptions o;  // the defaults the training split uses
  const int h = 40, w = 30;
  int flips = 0;
  std::set<float> angles;
  for (uint64_t k = 0; k < 2000; ++k) {
    const uint64_t key = augment_key(7, 3, static_cast<int64_t>(k));
    const AugmentDraw d = draw_augment(o, key, h, w);
    const AugmentDraw again = draw_augment(o, key, h, w);
    ASSERT_EQ(d.crop_x, again.crop_x);
    ASSERT_EQ(d.angle_deg, again.angle_deg);
    ASSERT_EQ(d.flip, again.flip);
    flips += d.flip;
    angles.insert(d.angle_deg);
    ASSERT_GE(d.crop_x, 0.f);
    ASSERT_GE(d.crop_y, 0.f);
    ASSERT_LE(d.crop_x + d.crop_w, w + 1e-3f);
    ASSERT_LE(d.crop_y + d.crop_h, h + 1e-3f);
    const double area = static_cast<double>(d.crop_w) * d.crop_h / (w * h);
    ASSERT_LE(area, 1.0 + 1e-5);
    ASSERT_GE(area, o.scale_min * std::min(o.ratio_min, 1 / o.ratio_max) - 1e-5);
    ASSERT_LE(std::fabs(d.angle_deg), o.rotate_deg);
    ASSERT_GE(d.brightness, 1 - o.brightness);
    ASSERT_LE(d.brightness, 1 + o.brightness);
    ASSERT_GE(d.contrast, 1 - o.contrast);
    ASSERT_LE(d.contrast, 1 + o.contrast);
  }
  EXPECT_GT(flips, 900);  // 1/2 of 2000; 6 sigma is +-134
  EXPECT_LT(flips, 1100);
  EXPECT_GT(angles.size(), 1990u);
  // Keys differ by seed, epoch and image.
  EXPECT_NE(augment_key(7, 3, 5), augment_key(8, 3, 5));
  EXPECT_NE(augment_key(7, 3, 5), augment_key(7, 4, 5));
  EXPECT_NE(augment_key(7, 3, 5), augment_key(7, 3, 6));
}

TEST(Augment, OptionsOffGiveTheIdentity) {
  const AugmentDraw d = draw_augment(AugmentOptions::none(), 12345, 20, 30);
  EXPECT_FALSE(d.flip);
  EXPECT_EQ(d.crop_x, 0.f);
  EXPECT_EQ(d.crop_y, 0.f);
  EXPECT_EQ(d.crop_w, 30.f);
  EXPECT_EQ(d.crop_h, 20.f);
  EXPECT_EQ(d.angle_deg, 0.f);
  EXPECT_EQ(d.brightness, 1.f);
  EXPECT_EQ(d.contrast, 1.f);
}

TEST(Augment, ShapePreservingAndDeterministicForAnyDraw) {
  const int h = 37, w = 37;
  const auto src = pattern(h, w, 3);
  const AugmentOptions o;
  for (const int out : {1, 5, 32}) {
    const size_t n = static_cast<size_t>(3) * out * out;
    for (uint64_t k = 0; k < 50; ++k) {
      const AugmentDraw d = draw_augment(o, augment_key(1, 0, static_cast<int64_t>(k)), h, w);
      // Sentinels after the output must survive; every output value must be finite.
      std::vector<float> a(n + 64, std::numeric_limits<float>::quiet_NaN());
      std::vector<float> b(n + 64, -7.f);
      augment_image(d, Normalization::imagenet(), h, w, src.data(), out, out, a.data());
      augment_image(d, Normalization::imagenet(), h, w, src.data(), out, out, b.data());
      for (size_t i = 0; i < n; ++i) {
        ASSERT_TRUE(std::isfinite(a[i])) << "out " << out << " key " << k << " i " << i;
        ASSERT_EQ(a[i], b[i]);
      }
      for (size_t i = n; i < a.size(); ++i) {
        ASSERT_TRUE(std::isnan(a[i]));
        ASSERT_EQ(b[i], -7.f);
      }
    }
  }
  // Different keys give different images.
  std::vector<float> a(3 * 16 * 16), b(3 * 16 * 16);
  augment_image(draw_augment(o, 1, h, w), Normalization{}, h, w, src.data(), 16, 16, a.data());
  augment_image(draw_augment(o, 2, h, w), Normalization{}, h, w, src.data(), 16, 16, b.data());
  EXPECT_NE(a, b);
}

TEST(Augment, BadOptionsAreErrors) {
  AugmentOptions o;
  o.scale_min = 0;
  EXPECT_THROW(draw_augment(o, 1, 8, 8), Error);
  o = AugmentOptions{};
  o.brightness = 1.5f;
  EXPECT_THROW(draw_augment(o, 1, 8, 8), Error);
  AugmentDraw d;  // empty crop
  std::vector<uint8_t> src(3);
  std::vector<float> out(3);
  EXPECT_THROW(augment_image(d, Normalization{}, 1, 1, src.data(), 1, 1, out.data()), Error);
}


// ---- The kernels (AugmentKernel) give the same floats bit for bit -------------------------

// Hand-made draws that take every branch of the kernels on an h x w source, then drawn ones
// (W4's options, and wider ones: rotations to 40 degrees, crops down to a tenth).
std::vector<AugmentDraw> kernel_draws(int h, int w) {
  std::vector<AugmentDraw> ds;
  ds.push_back(identity_draw(h, w));
  AugmentDraw d = identity_draw(h, w);
  d.flip = true;
  d.contrast = 1.1f;
  ds.push_back(d);
  d = identity_draw(h, w);  // inside the image with a margin: a row's taps always neighbours
  d.crop_x = 0.3f * w, d.crop_y = 0.25f * h, d.crop_w = 0.5f * w, d.crop_h = 0.45f * h;
  d.brightness = 1.15f;
  ds.push_back(d);
  d.angle_deg = 7.5f;
  d.contrast = 0.85f;
  ds.push_back(d);
  d = identity_draw(h, w);  // corners outside the source: clamped rows and columns
  d.angle_deg = 45;
  d.contrast = 1.2f;
  ds.push_back(d);
  d = identity_draw(h, w);
  d.angle_deg = -180;
  d.flip = true;
  d.brightness = 0.8f;
  ds.push_back(d);
  d = identity_draw(h, w);  // magnified bottom-right corner: taps on the image's last bytes
  d.crop_x = 0.8f * w, d.crop_y = 0.75f * h, d.crop_w = 0.2f * w, d.crop_h = 0.25f * h;
  d.angle_deg = 3;
  d.contrast = 0.9f;
  ds.push_back(d);
  d.contrast = 1;
  ds.push_back(d);
  AugmentOptions wide;
  wide.rotate_deg = 40, wide.scale_min = 0.1f, wide.contrast = 0.5f;
  for (int64_t i = 0; i < 6; ++i) {
    ds.push_back(draw_augment(AugmentOptions{}, augment_key(11, 2, i), h, w));
    ds.push_back(draw_augment(wide, augment_key(12, 0, i), h, w));
  }
  return ds;
}

// FNV-1a over the floats' bytes.
uint64_t hash_floats(const std::vector<float>& v, uint64_t h = 1469598103934665603ull) {
  const auto* b = reinterpret_cast<const unsigned char*>(v.data());
  for (size_t i = 0; i < v.size() * sizeof(float); ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

// The sample of every kernel, with NaN sentinels after it that must survive.
std::vector<float> run_kernel(AugmentKernel k, const AugmentDraw& d, int h, int w,
                              const std::vector<uint8_t>& src, int oh, int ow) {
  const size_t n = static_cast<size_t>(3) * oh * ow;
  std::vector<float> out(n + 40, std::numeric_limits<float>::quiet_NaN());
  augment_image(d, Normalization::imagenet(), h, w, src.data(), oh, ow, out.data(), k);
  for (size_t i = n; i < out.size(); ++i) EXPECT_TRUE(std::isnan(out[i])) << "wrote past the end";
  out.resize(n);
  return out;
}

void expect_kernels_agree(int h, int w, int oh, int ow) {
  const auto src = pattern(h, w, static_cast<uint64_t>(h * 1000 + w));
  const auto draws = kernel_draws(h, w);
  for (size_t i = 0; i < draws.size(); ++i) {
    SCOPED_TRACE("source " + std::to_string(h) + "x" + std::to_string(w) + ", output " +
                 std::to_string(oh) + "x" + std::to_string(ow) + ", draw " + std::to_string(i));
    const auto want = run_kernel(AugmentKernel::PerPixel, draws[i], h, w, src, oh, ow);
    for (const AugmentKernel k : {AugmentKernel::Vector, AugmentKernel::VectorWords,
                                  AugmentKernel::Auto}) {
      const auto got = run_kernel(k, draws[i], h, w, src, oh, ow);
      // memcmp: bits, so that -0 against 0 or one NaN against another would fail too.
      ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
          << "kernel " << static_cast<int>(k);
    }
  }
}

// Sources down to one pixel (the 8- and 4-byte loads' fallbacks at the image's end), outputs of
// widths that leave every remainder of a vector, square and not.
TEST(AugmentKernels, AgreeBitForBitOnEveryDraw) {
  if (augment_vector_lanes() == 0) GTEST_SKIP() << "this build has no vector kernel (-march)";
  for (const auto& [h, w] : std::vector<std::pair<int, int>>{
           {1, 1}, {1, 2}, {2, 1}, {2, 3}, {3, 5}, {37, 41}, {50, 31}})
    for (const auto& [oh, ow] : std::vector<std::pair<int, int>>{
             {1, 1}, {7, 5}, {16, 16}, {13, 17}, {9, 33}})
      expect_kernels_agree(h, w, oh, ow);
}

// W4's shape: 224 x 224 from the 256 x 256 cache, its draws and the plain resize.
TEST(AugmentKernels, AgreeBitForBitAtW4sSize) {
  if (augment_vector_lanes() == 0) GTEST_SKIP() << "this build has no vector kernel (-march)";
  const auto src = pattern(256, 256, 4);
  std::vector<AugmentDraw> draws = {identity_draw(256, 256)};
  for (int64_t i = 0; i < 3; ++i)
    draws.push_back(draw_augment(AugmentOptions{}, augment_key(1, 0, i), 256, 256));
  for (size_t i = 0; i < draws.size(); ++i) {
    SCOPED_TRACE("draw " + std::to_string(i));
    const auto want = run_kernel(AugmentKernel::PerPixel, draws[i], 256, 256, src, 224, 224);
    for (const AugmentKernel k : {AugmentKernel::Vector, AugmentKernel::VectorWords}) {
      const auto got = run_kernel(k, draws[i], 256, 256, src, 224, 224);
      ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
          << "kernel " << static_cast<int>(k);
    }
  }
}

// A copy of some bytes with a page that may not be touched right before or right after them
// (a read outside is a fault, where a sanitizer would not see it: the vector kernels' gathers
// are not instrumented).
class GuardedBytes {
 public:
  GuardedBytes(const std::vector<uint8_t>& bytes, bool guard_after) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t inner = (bytes.size() + page - 1) / page * page;
    size_ = inner + 2 * page;
    void* m = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::runtime_error("mmap failed");
    base_ = static_cast<uint8_t*>(m);
    data_ = base_ + page + (guard_after ? inner - bytes.size() : 0);
    std::memcpy(data_, bytes.data(), bytes.size());
    if (mprotect(base_, page, PROT_NONE) != 0 ||
        mprotect(base_ + page + inner, page, PROT_NONE) != 0) {
      munmap(base_, size_);
      throw std::runtime_error("mprotect failed");
    }
  }
  GuardedBytes(const GuardedBytes&) = delete;
  GuardedBytes& operator=(const GuardedBytes&) = delete;
  ~GuardedBytes() { munmap(base_, size_); }
  const uint8_t* data() const { return data_; }

 private:
  uint8_t* base_ = nullptr;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Every kernel on every draw reads only the source's bytes: its first right after a page that
// faults, its last right before one.
TEST(AugmentKernels, ReadNothingOutsideTheSource) {
  for (const auto& [h, w] :
       std::vector<std::pair<int, int>>{{1, 1}, {1, 2}, {2, 3}, {3, 5}, {37, 41}}) {
    const auto src = pattern(h, w, 6);
    for (const bool guard_after : {false, true}) {
      const GuardedBytes guarded(src, guard_after);
      for (const AugmentDraw& d : kernel_draws(h, w))
        for (const AugmentKernel k : {AugmentKernel::PerPixel, AugmentKernel::Vector,
                                      AugmentKernel::VectorWords}) {
          std::vector<float> out(static_cast<size_t>(3) * 11 * 19);
          augment_image(d, Normalization::imagenet(), h, w, guarded.data(), 11, 19, out.data(), k);
        }
    }
  }
}

// The values themselves: a hash of every kernel's samples for kernel_draws, as the per-pixel
// resampler computed them before there were vector kernels (8c7606f; the same from builds for
// x86-64, x86-64-v3 and native AVX-512). A change here changes what every run trained on.
TEST(AugmentKernels, ValuesAreThoseOfThePerPixelResampler) {
  const int h = 37, w = 45, oh = 29, ow = 35;
  const auto src = pattern(h, w, 8);
  for (const AugmentKernel k : {AugmentKernel::PerPixel, AugmentKernel::Vector,
                                AugmentKernel::VectorWords}) {
    uint64_t all = 1469598103934665603ull;
    for (const AugmentDraw& d : kernel_draws(h, w)) {
      std::vector<float> out(static_cast<size_t>(3) * oh * ow);
      augment_image(d, Normalization::imagenet(), h, w, src.data(), oh, ow, out.data(), k);
      all = (all ^ hash_floats(out)) * 1099511628211ull;
    }
    EXPECT_EQ(all, 0xb232c62d45edd5b3ull) << "kernel " << static_cast<int>(k);
  }
}

}  // namespace
}  // namespace pdnn
