// Shared test helpers (see testing.h).
#include "testing.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/cuda_state.h"
#include "core/error.h"
#include "core/tuning.h"
#include "data/idx.h"
#include "layers/maxpool2d.h"
#include "model/checkpoint.h"

namespace pdnn {
namespace testing {

void share_conv_choices(Context& ctx) {
  static const std::string path =
      ::testing::TempDir() + "pdnn_conv_choices_" + std::to_string(getpid()) + ".tsv";
  ctx.tuning().set_cache_file(path, ctx.cuda().info().name);
}

Tensor labels_tensor(const std::vector<int32_t>& labels) {
  Tensor t(Shape{static_cast<int64_t>(labels.size())}, DType::I32);
  for (size_t i = 0; i < labels.size(); ++i) t.data<int32_t>()[i] = labels[i];
  return t;
}

Tensor random_tensor(const Shape& s, Rng& rng, float lo, float hi) {
  Tensor t(s);
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = rng.uniform(lo, hi);
  return t;
}

double rel_error(const Tensor& a, const Tensor& ref) {
  PDNN_CHECK(a.numel() == ref.numel(), "rel_error: %lld vs %lld elements",
             static_cast<long long>(a.numel()), static_cast<long long>(ref.numel()));
  double d = 0, n = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double e = double(a[i]) - double(ref[i]);
    d += e * e;
    n += double(ref[i]) * double(ref[i]);
  }
  return std::sqrt(d / n);
}

double max_checkpoint_difference(const std::string& pa, Model& a, const std::string& pb, Model& b) {
  load_checkpoint(pa, a);
  load_checkpoint(pb, b);
  const Tensor va = a.parameters().values(), vb = b.parameters().values();
  EXPECT_EQ(va.numel(), vb.numel());
  double worst = 0;
  for (int64_t i = 0; i < std::min(va.numel(), vb.numel()); ++i)
    worst = std::max(worst, std::fabs(double(va[i]) - double(vb[i])));
  return worst;
}

void expect_close(const Tensor& a, const Tensor& ref, double atol, double rtol,
                  const std::string& what) {
  ASSERT_EQ(a.shape(), ref.shape()) << what << ": shape " << a.shape().str() << " vs "
                                    << ref.shape().str();
  int64_t bad = 0, first = -1;
  double worst = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - ref[i]);
    const double tol = atol + rtol * std::fabs(static_cast<double>(ref[i]));
    if (!(d <= tol)) {  // also catches NaN
      if (first < 0) first = i;
      ++bad;
      worst = std::max(worst, d);
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << a.numel()
                    << " elements out of tolerance; first at " << first << ": got "
                    << (first >= 0 ? a[first] : 0.f) << ", want " << (first >= 0 ? ref[first] : 0.f)
                    << " (worst |diff| " << worst << ", atol " << atol << ", rtol " << rtol << ")";
}

namespace {

std::vector<int64_t> pick_indices(int64_t n, int max_checks, Rng& rng) {
  std::vector<int64_t> idx;
  if (n <= max_checks) {
    for (int64_t i = 0; i < n; ++i) idx.push_back(i);
  } else {
    for (int k = 0; k < max_checks; ++k) idx.push_back(static_cast<int64_t>(rng.next() % n));
  }
  return idx;
}

double dot_double(const Tensor& y, const Tensor& g) {
  double s = 0.0;
  for (int64_t i = 0; i < y.numel(); ++i) s += static_cast<double>(y[i]) * g[i];
  return s;
}

// Compares analytic gradient entries with central differences of f at the picked indices.
// kink (optional): whether the last f() crossed a kink of f (the element is then skipped,
// counted in *skipped).
void compare_fd(const std::function<double()>& f, Tensor& v, const Tensor& grad,
                const GradCheckOptions& opt, Rng& rng, const std::string& what,
                const std::function<bool()>& kink = {}, int64_t* skipped = nullptr) {
  ASSERT_EQ(v.shape(), grad.shape()) << what;
  int64_t bad = 0, first = -1;
  double got_first = 0, want_first = 0;
  for (int64_t i : pick_indices(v.numel(), opt.max_checks, rng)) {
    const float orig = v[i];
    v[i] = static_cast<float>(orig + opt.eps);
    const double lp = f();
    bool crossed = kink && kink();
    v[i] = static_cast<float>(orig - opt.eps);
    const double lm = f();
    crossed = crossed || (kink && kink());
    v[i] = orig;
    if (crossed) {
      ++*skipped;
      continue;
    }
    // The step actually taken in float, not the nominal eps.
    const double h = static_cast<double>(static_cast<float>(orig + opt.eps)) -
                     static_cast<double>(static_cast<float>(orig - opt.eps));
    const double fd = (lp - lm) / h;
    const double d = std::fabs(fd - grad[i]);
    if (!(d <= opt.atol + opt.rtol * std::fabs(fd))) {
      if (first < 0) { first = i; got_first = grad[i]; want_first = fd; }
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " gradient entries disagree with finite differences;"
                    << " first at " << first << ": analytic " << got_first << ", numeric "
                    << want_first;
}

}  // namespace

void check_layer_gradients(Context& ctx, Layer& layer, const Tensor& x_in,
                           const GradCheckOptions& opt) {
  Rng rng(opt.seed);
  Tensor x = x_in.clone();
  Tensor y(layer.output_shape(x.shape()));
  layer.forward(ctx, x, y);
  Tensor g = random_tensor(y.shape(), rng);

  layer.zero_grad();
  Tensor dx(x.shape());
  dx.fill(std::nanf(""));  // poison: every element must be written
  layer.backward(ctx, x, y, g, &dx);
  // Gradients are copied before any further forward can disturb layer state.
  std::vector<Param> ps = layer.params();
  std::vector<Tensor> pgrads;
  for (auto& p : ps) pgrads.push_back(p.grad->clone());

  Tensor yy(y.shape());
  auto loss = [&]() {
    layer.forward(ctx, x, yy);
    return dot_double(yy, g);
  };
  compare_fd(loss, x, dx, opt, rng, layer.describe() + " dL/dx at " + x.shape().str());
  for (size_t k = 0; k < ps.size(); ++k)
    compare_fd(loss, *ps[k].value, pgrads[k], opt, rng,
               layer.describe() + " dL/d" + ps[k].name + " at " + x.shape().str());
}

std::string model_kinks(const Model& model) {
  std::string s;
  for (size_t i = 0; i < model.size(); ++i) {
    const Layer& l = model.layer(i);
    const Tensor& y = model.activation(i);
    if (l.kind() == "ReLU") {
      for (int64_t k = 0; k < y.numel(); ++k) s += y[k] > 0.f ? '1' : '0';
    } else if (const auto* pool = dynamic_cast<const MaxPool2d*>(&l)) {
      const int p = model.node_inputs(i)[0];
      if (p < 0) continue;
      const Tensor& x = model.activation(static_cast<size_t>(p));
      const int64_t planes = x.shape(0) * x.shape(1), h = x.shape(2), w = x.shape(3);
      const int64_t oh = y.shape(2), ow = y.shape(3), kk = pool->kernel(), st = pool->stride();
      for (int64_t c = 0; c < planes; ++c)
        for (int64_t r = 0; r < oh; ++r)
          for (int64_t q = 0; q < ow; ++q) {
            int64_t best = 0;
            for (int64_t t = 1; t < kk * kk; ++t)
              if (x[(c * h + r * st + t / kk) * w + q * st + t % kk] >
                  x[(c * h + r * st + best / kk) * w + q * st + best % kk])
                best = t;
            s += static_cast<char>('a' + best);
          }
    }
  }
  return s;
}

void check_model_gradients(Context& ctx, Model& model, const Tensor& x_in,
                           const GradCheckOptions& opt, double max_skipped_share) {
  Rng rng(opt.seed);
  Tensor x = x_in.clone();
  const Shape ys = model.forward(ctx, x).shape();
  const std::string kinks = model_kinks(model);
  const Tensor g = random_tensor(ys, rng);
  model.zero_grad(ctx);
  model.backward(ctx, g, /*want_input_grad=*/true);
  const Tensor dx = model.input_grad().clone();
  std::vector<Param> ps = model.params();
  std::vector<Tensor> pgrads;
  for (auto& p : ps) pgrads.push_back(p.grad->clone());
  auto loss = [&]() {
    const double l = dot_double(model.forward(ctx, x), g);
    model.forget_forward();
    return l;
  };
  auto crossed = [&]() { return model_kinks(model) != kinks; };
  int64_t skipped = 0, checked = 0;
  auto check = [&](Tensor& v, const Tensor& grad, const std::string& name) {
    compare_fd(loss, v, grad, opt, rng, "model dL/d" + name + " at " + x.shape().str(), crossed,
               &skipped);
    checked += std::min<int64_t>(v.numel(), opt.max_checks);
  };
  check(x, dx, "x");
  for (size_t k = 0; k < ps.size(); ++k) check(*ps[k].value, pgrads[k], ps[k].name);
  EXPECT_LE(static_cast<double>(skipped), max_skipped_share * static_cast<double>(checked))
      << skipped << " of " << checked << " checked elements sat at a kink";
}

void expect_same_at_one_and_two_threads(Layer& layer, const Tensor& x, double atol,
                                        double rtol) {
  Rng rng(99);
  const Shape ys = layer.output_shape(x.shape());
  Tensor dy = random_tensor(ys, rng);
  Tensor y[2] = {Tensor(ys), Tensor(ys)};
  Tensor dx[2] = {Tensor(x.shape()), Tensor(x.shape())};
  std::vector<Tensor> grads[2];
  for (int t = 0; t < 2; ++t) {
    Context ctx(t + 1);
    layer.zero_grad();
    layer.forward(ctx, x, y[t]);
    layer.backward(ctx, x, y[t], dy, &dx[t]);
    for (auto& p : layer.params()) grads[t].push_back(p.grad->clone());
  }
  const std::string what = layer.describe() + " at " + x.shape().str() + ", 2 vs 1 threads: ";
  expect_close(y[1], y[0], atol, rtol, what + "y");
  expect_close(dx[1], dx[0], atol, rtol, what + "dx");
  const std::vector<Param> ps = layer.params();
  for (size_t k = 0; k < ps.size(); ++k)
    expect_close(grads[1][k], grads[0][k], atol, rtol, what + "d" + ps[k].name);
}

std::string error_text(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a pdnn::Error";
  return "";
}

void expect_error_mentions(const std::function<void()>& f, const std::vector<std::string>& parts) {
  const std::string m = error_text(f);
  for (const std::string& part : parts)
    EXPECT_NE(m.find(part), std::string::npos) << "\"" << part << "\" not in: " << m;
}

void check_function_gradient(const std::function<double(const Tensor&)>& f, Tensor x,
                             const Tensor& grad, const GradCheckOptions& opt,
                             const std::string& what) {
  Rng rng(opt.seed);
  Tensor v = x.clone();
  compare_fd([&]() { return f(v); }, v, grad, opt, rng, what);
}

void write_idx_squares(const std::string& dir, const std::string& prefix, int64_t n,
                       int64_t side, uint64_t seed) {
  Rng rng(seed);
  IdxImages im;
  im.n = n, im.rows = side, im.cols = side;
  im.pixels.resize(static_cast<size_t>(n * side * side));
  std::vector<uint8_t> labels(static_cast<size_t>(n));
  const int64_t half = side / 2, sq = side / 4;
  for (int64_t i = 0; i < n; ++i) {
    const int c = static_cast<int>(i % 4);
    labels[static_cast<size_t>(i)] = static_cast<uint8_t>(c);
    uint8_t* img = &im.pixels[static_cast<size_t>(i * side * side)];
    for (int64_t k = 0; k < side * side; ++k) img[k] = static_cast<uint8_t>(rng.next() % 40);
    const int64_t r0 = (c / 2) * half + static_cast<int64_t>(rng.next() % (half - sq + 1));
    const int64_t c0 = (c % 2) * half + static_cast<int64_t>(rng.next() % (half - sq + 1));
    for (int64_t r = r0; r < r0 + sq; ++r)
      for (int64_t q = c0; q < c0 + sq; ++q) img[r * side + q] = 230;
  }
  write_idx_images(dir + "/" + prefix + "-images-idx3-ubyte.gz", im);
  write_idx_labels(dir + "/" + prefix + "-labels-idx1-ubyte", labels);
}

CommandResult run_command(const std::string& cmd) {
  const auto t0 = std::chrono::steady_clock::now();
  std::FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return {-1, "popen failed"};
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int st = pclose(p);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out, s};
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void TempDirTest::SetUp() {
  char tmpl[] = "/tmp/pdnn_test_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  dir_ = tmpl;
}

void TempDirTest::TearDown() {
  if (!dir_.empty()) std::system(("rm -rf '" + dir_ + "'").c_str());
}

void TempDirTest::mkdir(const std::string& rel) const {
  ASSERT_EQ(std::system(("mkdir -p '" + path(rel) + "'").c_str()), 0) << rel;
}

void TempDirTest::spit(const std::string& rel, const std::string& bytes) const {
  std::ofstream out(path(rel), std::ios::binary);
  out << bytes;
  ASSERT_TRUE(out.good()) << rel;
}

std::vector<std::vector<std::string>> read_csv(const std::string& path) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(slurp(path));
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ls(line);
    std::string cell;
    while (std::getline(ls, cell, ',')) f.push_back(cell);
    rows.push_back(f);
  }
  return rows;
}

}  // namespace testing
}  // namespace pdnn
