// build/bin/bench_allreduce: what an all-reduce of a given size costs between the ranks of an
// mpirun, through pdnn's Communicator: MPI_Allreduce over host buffers (--device cpu) or
// ncclAllReduce over device buffers (--device cuda, one GPU per rank), timed as nccl-tests'
// all_reduce_perf times it: --iters back-to-back sums after --warmup, the mean time per sum,
// algorithm bandwidth (bytes / time) and bus bandwidth (algbw * 2 (n-1) / n, what each link
// carries in a ring; comparable across rank counts). Default sizes: the gradient buffers of
// W3 (4.80 MB) and W4 (408 MB) and a sweep around them. Rank 0 prints and appends to --out.
//   mpirun -np 2 build/bin/bench_allreduce --device cuda --out results/scale/allreduce.csv
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "core/cuda_state.h"
#include "dist/communicator.h"
#include "ops/basic.h"
#include "run/csv.h"
#include "run/run_info.h"
#include "run/run_flags.h"
#include "run/timing.h"

namespace {

using namespace pdnn;
using Clock = std::chrono::steady_clock;

int run(int argc, char** argv) {
  CLI::App app{"All-reduce time and bandwidth between the ranks of an mpirun (MPI or NCCL)"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  std::string device = "cpu", out, label;
  std::vector<double> sizes_mb = {0.0625, 0.25, 1, 4.799528, 16, 64, 256, 408.028};
  int iters = 20, warmup = 5;
  app.add_option("--device", device, "cpu (MPI_Allreduce) or cuda (ncclAllReduce)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--sizes-mb", sizes_mb, "buffer sizes, MB (1e6 bytes) of float32, comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--iters", iters, "timed sums per size")->capture_default_str()->check(CLI::Range(1, 100000));
  app.add_option("--warmup", warmup, "untimed sums before them")->capture_default_str()->check(CLI::Range(0, 100000));
  app.add_option("--out", out, "CSV to append rows to (rank 0; '' = none)");
  app.add_option("--label", label, "free text for the CSV's label column (e.g. the machine kind)");
  if (const int status = parse_flags(app, "bench_allreduce", argc, argv); status >= 0) return status;
  std::shared_ptr<Communicator> comm = Communicator::join(DistOptions{});
  const bool gpu = device == "cuda";
  Context ctx(1, 0, gpu ? Device::CUDA : Device::CPU, gpu ? comm->local_rank() : 0);
  if (gpu) comm->open_device();
  const RunInfo info = run_info(ctx);
  std::unique_ptr<CsvWriter> csv;
  if (comm->root() && !out.empty())
    csv = std::make_unique<CsvWriter>(
        out, std::vector<std::string>{"app", "backend", "device", "gpu", "ranks", "bytes", "iters",
                                      "time_us", "algbw_gbs", "busbw_gbs", "label", "git_rev",
                                      "host", "timestamp"});
  const int n = comm->size();
  std::printf("bench_allreduce: %d ranks, %s, %s%s | rev %s\n", n, comm->describe().c_str(),
              gpu ? "device buffers on " : "host buffers", gpu ? info.gpu.c_str() : "",
              info.git_rev.c_str());
  std::printf("%14s %8s %12s %12s %12s\n", "bytes", "iters", "time_us", "algbw_GB/s",
              "busbw_GB/s");
  for (double mb : sizes_mb) {
    const int64_t count = std::max<int64_t>(1, static_cast<int64_t>(mb * 1e6 / 4));
    Tensor buf = Tensor::empty(Shape{count}, DType::F32, ctx.device(), ctx);
    ops::fill(ctx, buf, 1.0f);
    auto once = [&] {
      if (gpu)
        comm->device_sum(buf.data(), count, ctx.cuda().stream());
      else
        comm->sum(buf.data(), count, "bench_allreduce");
    };
    for (int i = 0; i < warmup; ++i) once();
    ctx.synchronize();
    comm->barrier("bench_allreduce");
    const auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) once();
    ctx.synchronize();
    double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters;
    // The slowest rank's time is the collective's time.
    std::vector<double> all(static_cast<size_t>(n), 0.0);
    all[static_cast<size_t>(comm->rank())] = us;
    comm->sum(all.data(), n, "bench_allreduce");
    us = *std::max_element(all.begin(), all.end());
    const double bytes = static_cast<double>(count) * 4.0;
    const double algbw = bytes / us / 1e3;  // GB/s
    const double busbw = algbw * 2.0 * (n - 1) / n;
    std::printf("%14.0f %8d %12.1f %12.2f %12.2f\n", bytes, iters, us, algbw, busbw);
    std::fflush(stdout);
    if (csv)
      csv->row({"pdnn", gpu ? "nccl" : "mpi", device, info.gpu, std::to_string(n),
                fmt(bytes, 0), std::to_string(iters), fmt(us, 2), fmt(algbw, 3), fmt(busbw, 3),
                label, info.git_rev, info.host, iso8601_utc_now()});
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return pdnn::run_app("bench_allreduce", run, argc, argv); }
