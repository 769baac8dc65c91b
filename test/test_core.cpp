// Core: shapes, tensors (views, copies, alignment), RNG streams, context threads/workspace.
#include <gtest/gtest.h>
#include <omp.h>

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <set>

#include "core/allocator.h"
#include "core/context.h"
#include "core/error.h"
#include "core/param.h"
#include "core/tensor.h"

using namespace pdnn;

TEST(Shape, AccessorsAndErrors) {
  Shape s{8, 3, 5, 7};
  EXPECT_EQ(s.n(), 8);
  EXPECT_EQ(s.c(), 3);
  EXPECT_EQ(s.h(), 5);
  EXPECT_EQ(s.w(), 7);
  EXPECT_EQ(s.numel(), 8 * 3 * 5 * 7);
  EXPECT_EQ(s.per_sample(), 3 * 5 * 7);
  EXPECT_EQ(s[-1], 7);
  EXPECT_EQ(s.str(), "(8,3,5,7)");
  EXPECT_EQ(s.with_n(2), (Shape{2, 3, 5, 7}));
  EXPECT_THROW(s[4], Error);
  EXPECT_THROW((Shape{4, 10}).h(), Error);
}

// Large host blocks come from the system (core/allocator.cpp): zero on arrival, so zeros() does
// not write them, aligned to huge pages, and freed back whole; smaller ones are written. Under
// AddressSanitizer every block is an aligned_alloc one (it watches those), and zeros() writes.
TEST(Tensor, LargeHostBlocksArriveZeroAndAligned) {
  const std::shared_ptr<Allocator>& host = host_allocator();
  EXPECT_FALSE(host->fresh_is_zero(1 << 20));
  for (int round = 0; round < 3; ++round) {  // freed and mapped again: zero every time
    Tensor t = Tensor::zeros(Shape{(int64_t{9} << 20) / 4 + 3});  // 9 MiB and 12 bytes
#if !defined(__SANITIZE_ADDRESS__)
    EXPECT_TRUE(host->fresh_is_zero(t.nbytes()));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % (uintptr_t{2} << 20), 0u);
#endif
    for (int64_t i = 0; i < t.numel(); i += 4093) ASSERT_EQ(t[i], 0.f) << i;
    ASSERT_EQ(t[t.numel() - 1], 0.f);
    for (int64_t i = 0; i < t.numel(); i += 1021) t.data()[i] = 1.f;  // dirty it for the next round
    t.data()[t.numel() - 1] = 2.f;
  }
  Tensor small = Tensor::zeros(Shape{1000});
  for (int64_t i = 0; i < small.numel(); ++i) ASSERT_EQ(small[i], 0.f) << i;
}

TEST(Tensor, AlignedReshapeIsAViewToCopies) {
  Context ctx(1);
  Tensor t(Shape{2, 3, 4, 5});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 64, 0u);
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<float>(i);
  Tensor v = t.reshape(Shape{2, 60});
  EXPECT_EQ(v.data(), t.data());  // no copy
  v[5] = -1.f;
  EXPECT_EQ(t[5], -1.f);
  Tensor c = t.to(Device::CPU, ctx);
  EXPECT_NE(c.data(), t.data());
  EXPECT_EQ(c[5], -1.f);
  EXPECT_EQ(ctx.bytes_moved(), 0u);  // same device: not a transfer
  try {
    t.reshape(Shape{7, 7});
    FAIL() << "reshape to a wrong size must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(2,3,4,5)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(7,7)"), std::string::npos) << e.what();
  }
}

TEST(Tensor, ResizeReusesStorageWhenItFits) {
  Tensor t(Shape{4, 100});
  const float* p = t.data();
  t.resize(Shape{2, 100});
  EXPECT_EQ(t.data(), p);
  t.resize(Shape{8, 100});
  EXPECT_EQ(t.shape(), (Shape{8, 100}));
}

// bfloat16: two bytes an element in every size the memory plan and the copies count
// (Tensor::nbytes, views, resize), its own typed pointer, and refused where float32 is the
// contract: float element access, and parameters (master weights stay float32; a checkpoint
// saves parameters and optimizer state only, so it never meets a bf16 tensor).
TEST(Tensor, Bfloat16IsTwoBytesWithItsOwnPointerAndRefusedAsFloat) {
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_STREQ(dtype_name(DType::BF16), "bfloat16");
  Context ctx(1);
  Tensor t(Shape{3, 5}, DType::BF16);
  EXPECT_EQ(t.nbytes(), 30u);
  bf16* p = t.data<bf16>();
  for (int i = 0; i < 15; ++i) p[i].bits = static_cast<uint16_t>(0x3f80 + i);
  const Tensor v = t.slice(5, Shape{5});
  EXPECT_EQ(v.data<bf16>()[0].bits, 0x3f85);
  const Tensor c = t.to(Device::CPU, ctx);
  EXPECT_EQ(c.data<bf16>()[14].bits, 0x3f80 + 14);
  t.resize(Shape{2, 5});
  EXPECT_EQ(t.dtype(), DType::BF16);
  EXPECT_EQ(t.data<bf16>(), p);  // reused: 20 bytes fit the 30
  try {
    t.data<float>();
    FAIL() << "float data of a bf16 tensor must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("asked for float32 data, it holds bfloat16"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(t.fill(1.f), Error);
  Tensor w(Shape{4}, DType::BF16), g(Shape{4}, DType::BF16);
  ParamSet ps;
  try {
    ps.build({Param{"conv.weight", &w, &g}});
    FAIL() << "a bf16 parameter must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("conv.weight is bfloat16"), std::string::npos)
        << e.what();
  }
}

TEST(Rng, SeededStreamsAreReproducibleAndDistinct) {
  Rng a(42), b(42), c(43);
  for (int i = 0; i < 100; ++i) {
    uint64_t x = a.next();
    EXPECT_EQ(x, b.next());
    EXPECT_NE(x, c.next());
  }
  // at() is the stream without state: value i of seed s.
  Rng d(7);
  d.next();
  EXPECT_EQ(d.next(), Rng::at(7, 2));
  // uniform in [0,1), mean near 1/2; normal mean near 0, variance near 1.
  Rng r(1);
  double su = 0, sn = 0, sn2 = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    double u = r.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    su += u;
    double z = r.normal();
    sn += z;
    sn2 += z * z;
  }
  EXPECT_NEAR(su / n, 0.5, 0.005);
  EXPECT_NEAR(sn / n, 0.0, 0.01);
  EXPECT_NEAR(sn2 / n, 1.0, 0.02);
  auto p = Rng(3).permutation(1000);
  EXPECT_EQ(std::set<int64_t>(p.begin(), p.end()).size(), 1000u);
  EXPECT_EQ(p, Rng(3).permutation(1000));
}

TEST(Context, ThreadsAndWorkspace) {
  const int process = omp_get_max_threads();
  Context ctx(2);
  EXPECT_EQ(ctx.threads(), 2);
  EXPECT_EQ(ctx.cpu_exec().threads, 2);
  EXPECT_EQ(ctx.rng().threads(), 2);  // its bulk draws (initial weights) on the same threads
  ctx.set_threads(1);
  EXPECT_EQ(ctx.cpu_exec().threads, 1);
  EXPECT_EQ(ctx.rng().threads(), 1);
  // The count is the context's own: the process's OpenMP setting is left alone.
  EXPECT_EQ(omp_get_max_threads(), process);
  float* w = ctx.workspace(1000);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w) % 64, 0u);
  EXPECT_EQ(ctx.workspace(500), w);  // grow-only: a smaller request reuses the buffer
  EXPECT_GE(ctx.workspace_size(), 1000u);
}

// What a timing asks of the workspace (candidates that may not be chosen) is not what the work
// needs: fit_workspace gives the rest back, once, and later requests within it reuse the block.
TEST(Context, WorkspaceFitsWhatTheWorkAskedNotWhatATimingAsked) {
  Context ctx(1, 1);
  ctx.workspace(100);
  {
    WorkspaceTiming timing(ctx);
    ctx.workspace(1000);
    {
      WorkspaceTiming nested(ctx);
      ctx.workspace(2000);
    }
    ctx.workspace(1500);  // still inside the outer timing
  }
  EXPECT_EQ(ctx.workspace_size(Device::CPU), 2000u);
  EXPECT_EQ(ctx.workspace_needed(Device::CPU), 100u);
  ctx.workspace(300);  // outside: needed, and within what is held (no new block)
  EXPECT_EQ(ctx.workspace_needed(Device::CPU), 300u);
  EXPECT_EQ(ctx.fit_workspace(Device::CPU), (2000u - 300u) * sizeof(float));
  EXPECT_EQ(ctx.workspace_size(Device::CPU), 300u);
  float* w = ctx.workspace(300);
  EXPECT_EQ(ctx.workspace(200), w);
  EXPECT_EQ(ctx.fit_workspace(Device::CPU), 0u);  // nothing beyond the need
  EXPECT_EQ(ctx.workspace(Device::CPU, 300), w);
}

// Machines that set OPENBLAS_CORETYPE (and OPENBLAS_L2_SIZE) do so on purpose: older OpenBLAS
// builds compute wrong results or crash on CPUs they misdetect. The Makefile passes both to the
// tests untouched, so when one is set the library must run the kernel set it names.
TEST(Context, OpenBlasCoreFromTheEnvironmentIsRespected) {
  const char* want = std::getenv("OPENBLAS_CORETYPE");
  if (!want || !*want) GTEST_SKIP() << "OPENBLAS_CORETYPE is not set in this environment";
  std::string a = want, b = blas_core_name();
  for (std::string* s : {&a, &b})
    for (char& c : *s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  EXPECT_EQ(b, a) << "OPENBLAS_CORETYPE=" << want << " but OpenBLAS runs " << blas_core_name();
}
