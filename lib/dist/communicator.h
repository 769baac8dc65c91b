// Communicator: this process's place in a data-parallel run (one process per rank, launched by
// `mpirun -np N app ... --distributed`) and the collectives training needs: sums over host
// buffers (MPI_Allreduce), sums over device buffers (ncclAllReduce, NCCL bootstrapped through
// MPI), agreement checks, and a watchdog that turns a dead or hung rank into an exit within a
// bounded time instead of a hang.
//
// No MPI, NCCL or CUDA header is included here: builds without MPI compile the stand-in
// (no_mpi.cpp), whose join() fails in one line. MPI's state is process-wide by definition
// (MPI_Init once per process), so there is at most one Communicator per process.
//
// Failure rules (issue 13):
// - not started by an MPI launcher, or a build without MPI: join() throws, one line;
// - ranks that disagree (flags, data, model): check_same() throws the same message on every
//   rank, naming the first rank that differs from rank 0 and what differs;
// - a rank that dies: mpirun kills the others at once (its default); a rank that hangs, or a
//   launcher that does not kill: every blocking wait is watched, and a rank that has waited
//   longer than the timeout prints one line and exits (status 3), which ends the job;
// - an error on one rank (a file it cannot write): fail_locally() prints it and aborts the job
//   (MPI_Abort), so the others do not wait for a rank that has gone.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

struct CUstream_st;

namespace pdnn {

// What the launcher told this process through its environment, read without MPI: Open MPI's
// OMPI_COMM_WORLD_{SIZE,RANK,LOCAL_RANK,LOCAL_SIZE}, else MPICH/Hydra's PMI_SIZE, PMI_RANK,
// MPI_LOCALRANKID, MPI_LOCALNRANKS.
struct LaunchEnv {
  bool found = false;
  std::string launcher;  // "Open MPI", "MPICH"
  int size = 1, rank = 0, local_rank = 0, local_size = 1;
};
LaunchEnv launch_env();

// How a data-parallel run communicates (the --overlap, --bucket-mb and --dist-timeout flags).
struct DistOptions {
  // All-reduce the gradients in buckets while the backward pass of earlier layers runs
  // (PyTorch DDP's bucketing); off: one all-reduce of the whole gradient after backward.
  bool overlap = true;
  // Bucket size, MB (DDP's bucket_cap_mb); the first bucket (the last layers, whose gradients
  // are ready first) is capped at 1 MB so communication starts early, as in DDP.
  double bucket_mb = 25.0;
  // A rank that waits longer than this for the others (seconds) gives up: see above.
  double timeout_s = 300.0;
};

class Communicator {
 public:
  // Joins the run the launcher started: MPI_Init (threads: serialized), rank and size, the
  // watchdog. Fails in one line when this process was not started by an MPI launcher or pdnn
  // was built without MPI. On ranks other than 0 stdout is sent to /dev/null (rank 0 alone
  // prints; errors still go to stderr on every rank) unless PDNN_DIST_STDOUT=all.
  static std::shared_ptr<Communicator> join(const DistOptions& opts);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int size() const { return size_; }
  int rank() const { return rank_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  bool root() const { return rank_ == 0; }
  const DistOptions& options() const { return opts_; }
  // "MPI (Open MPI v4.1.4)" and, once device() ran, "+ NCCL 2.28.9".
  std::string describe() const;

  // ---- host collectives (blocking, watched) ----
  // v = the sum of v over all ranks, in place (float sums in MPI's order: see grad_sync.h).
  void sum(float* v, int64_t n, const char* what);
  void sum(double* v, int64_t n, const char* what);
  bool any(bool v, const char* what);
  bool all(bool v, const char* what) { return !any(!v, what); }
  void barrier(const char* what);
  // Every rank must hold the same value for each named item (flags, data, model). Compares
  // 64-bit hashes of the values; where they differ, throws on every rank: "--distributed:
  // rank R disagrees with rank 0 on ITEM: ..." with the first differing line of both values.
  void check_same(const std::vector<std::pair<std::string, std::string>>& items);

  // ---- device collectives (NCCL) ----
  // Opens NCCL for the calling process's current GPU (the context's): rank 0 makes the unique
  // id, MPI_Bcast carries it, ncclCommInitRank. libnccl.so.2 is loaded at run time (dlopen),
  // so only distributed GPU runs need it; fails in one line saying where it looked.
  void open_device();
  bool device_open() const;
  // v = sum over ranks, on `stream` (asynchronous; device pointer).
  void device_sum(float* v, int64_t n, CUstream_st* stream);
  // The same on NCCL's own stream, after the work queued on `compute` so far (overlap with
  // the backward pass); device_join makes `compute` wait for all of them (no host wait).
  void device_sum_after(float* v, int64_t n, CUstream_st* compute);
  void device_join(CUstream_st* compute);

  // ---- failure handling ----
  // A blocking wait on the other ranks, for the watchdog: while one is alive for longer than
  // options().timeout_s the process prints "rank R of N: WHAT has waited S s ..." and exits.
  class Watch {
   public:
    Watch(Communicator* c, const char* what);
    ~Watch();
    Watch(const Watch&) = delete;
    Watch& operator=(const Watch&) = delete;

   private:
    Communicator* c_;
    int slot_ = -1;
  };
  // Called by the app guard for an error that only this rank may have seen: prints nothing
  // (the guard did), aborts the whole job (MPI_Abort) unless the error was one every rank
  // threw together (check_same), in which case MPI is finalised and the process exits.
  static void fail_locally(int status);
  // Whether the error in flight is one every rank threw at the same point (check_same, or a
  // caller's set_collective_error() for errors from values reduced over the ranks).
  static bool collective_error_in_flight();
  static void set_collective_error();
  // This process's rank once it joined a run (also after the Communicator is gone), else -1.
  static int process_rank();

  struct Impl;

 private:
  Communicator() = default;
  int size_ = 1, rank_ = 0, local_rank_ = 0, local_size_ = 1;
  DistOptions opts_;
  std::unique_ptr<Impl> impl_;
};

// --threads for a rank when the user gave none: the CPUs this process may run on, divided
// among the ranks of this host unless the launcher already bound each rank to its own CPUs.
int default_rank_threads(const Communicator& comm);
// The CPUs this process may run on (its affinity mask).
int allowed_cpus();

// 64-bit hash of bytes (splitmix64 over 8-byte words, then the tail), for configuration and
// weight agreement checks: fast enough for hundreds of MB per epoch.
uint64_t hash_bytes(const void* data, size_t n, uint64_t seed = 0);
std::string hash_hex(uint64_t h);

}  // namespace pdnn
