// Communicator over MPI (communicator.h): compiled when CMake finds MPI (PDNN_HAVE_MPI).
#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "dist/communicator.h"

#if PDNN_HAVE_CUDA
#include "dist/nccl_comm.h"
#endif

namespace pdnn {

namespace {

using Clock = std::chrono::steady_clock;

// Set when check_same throws: every rank throws the same error at the same point, so the exit
// can be orderly (MPI_Finalize) instead of an abort. Process-wide, like MPI's own state.
std::atomic<bool> g_collective_error{false};
// The one communicator of this process (MPI_Init happens once per process), for the app
// guard's fail_locally(); not owned.
std::atomic<Communicator*> g_joined{nullptr};
std::atomic<int> g_rank{-1};

void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  PDNN_FAIL("MPI: %s failed: %.*s", what, len, msg);
}

// The first line where a and b differ, as "'<a line>' vs '<b line>'".
std::string first_difference(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    const size_t ie = std::min(a.find('\n', i), a.size()), je = std::min(b.find('\n', j), b.size());
    const std::string la = a.substr(i, ie - i), lb = b.substr(j, je - j);
    if (la != lb)
      return "'" + (la.empty() ? std::string("(nothing)") : la) + "' vs '" +
             (lb.empty() ? std::string("(nothing)") : lb) + "'";
    i = ie + 1;
    j = je + 1;
  }
  return "(same text, different hash)";
}

}  // namespace

struct Communicator::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  bool finalize = false;  // we initialised MPI, so we finalise it
  std::string mpi_version;
  // Watchdog: slots of waits in progress (the main thread and grad_sync's thread).
  struct Slot {
    bool used = false;
    Clock::time_point t0;
    const char* what = "";
  };
  std::mutex mu;
  std::condition_variable cv;
  std::array<Slot, 8> slots;
  bool stop = false;
  std::thread watchdog;
#if PDNN_HAVE_CUDA
  std::unique_ptr<NcclComm> nccl;
#endif
};

std::shared_ptr<Communicator> Communicator::join(const DistOptions& opts) {
  const LaunchEnv env = launch_env();
  PDNN_CHECK(env.found,
             "--distributed needs an MPI launcher: run  mpirun -np N <app> ... --distributed  "
             "(no OMPI_COMM_WORLD_SIZE / PMI_SIZE in the environment)");
  PDNN_CHECK(g_joined.load() == nullptr, "--distributed: this process has joined a run already");
  PDNN_CHECK(opts.timeout_s > 0 && opts.bucket_mb > 0,
             "--distributed: timeout %g s and bucket %g MB must be > 0", opts.timeout_s,
             opts.bucket_mb);
  std::shared_ptr<Communicator> c(new Communicator());
  c->impl_ = std::make_unique<Impl>();
  Impl& m = *c->impl_;
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    // SERIALIZED: grad_sync's thread and the main thread both call MPI, never at once.
    int provided = 0;
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided),
              "MPI_Init_thread");
    m.finalize = true;
    PDNN_CHECK(provided >= MPI_THREAD_SERIALIZED,
               "--distributed: this MPI gives thread level %d, pdnn needs MPI_THREAD_SERIALIZED",
               provided);
  }
  // Errors come back as codes (turned into pdnn::Error) instead of MPI's default abort, so
  // the message says what pdnn was doing.
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &m.comm), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(m.comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(m.comm, &c->rank_);
  MPI_Comm_size(m.comm, &c->size_);
  c->local_rank_ = env.local_rank;
  c->local_size_ = env.local_size;
  c->opts_ = opts;
  char ver[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(ver, &len);
  m.mpi_version.assign(ver, static_cast<size_t>(len));
  m.mpi_version = m.mpi_version.substr(0, m.mpi_version.find_first_of(",\n"));
  if (c->rank_ != 0) {
    const char* out = std::getenv("PDNN_DIST_STDOUT");
    if (!out || std::strcmp(out, "all") != 0) {
      std::fflush(stdout);
      const int fd = ::open("/dev/null", O_WRONLY);
      if (fd >= 0) {
        ::dup2(fd, STDOUT_FILENO);
        ::close(fd);
      }
    }
  }
  // The watchdog: wakes every tenth of the timeout (at most 1 s) and looks at the waits.
  Communicator* self = c.get();
  m.watchdog = std::thread([self] {
    Impl& w = *self->impl_;
    const auto limit = std::chrono::duration<double>(self->opts_.timeout_s);
    const auto period = std::chrono::duration_cast<Clock::duration>(
        std::min(std::chrono::duration<double>(1.0), limit / 10));
    std::unique_lock<std::mutex> lock(w.mu);
    while (!w.stop) {
      w.cv.wait_for(lock, period);
      const auto now = Clock::now();
      for (const Impl::Slot& s : w.slots)
        if (s.used && now - s.t0 > limit) {
          std::fprintf(stderr,
                       "pdnn: rank %d of %d: %s has waited %.0f s for the other ranks "
                       "(--dist-timeout %g): one of them died or hangs; exiting\n",
                       self->rank_, self->size_, s.what,
                       std::chrono::duration<double>(now - s.t0).count(), self->opts_.timeout_s);
          std::fflush(stderr);
          std::fflush(stdout);
          // No MPI_Abort from this thread (the main one may be inside MPI): the launcher sees
          // the exit and ends the job; a launcher that does not gets the same from the
          // others' watchdogs.
          std::_Exit(3);
        }
    }
  });
  g_joined = c.get();
  g_rank = c->rank_;
  return c;
}

Communicator::~Communicator() {
  if (!impl_) return;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  if (impl_->watchdog.joinable()) impl_->watchdog.join();
  g_joined = nullptr;
  // Unwinding from an error only this rank saw: leave MPI up, fail_locally() aborts the job
  // after the message is printed (finalising here would wait for ranks that wait for us).
  // NCCL is aborted, not destroyed: destroying waits for the peers.
  if (std::uncaught_exceptions() > 0 && !g_collective_error) {
#if PDNN_HAVE_CUDA
    if (impl_->nccl) impl_->nccl->abort();
#endif
    return;
  }
#if PDNN_HAVE_CUDA
  impl_->nccl.reset();
#endif
  if (impl_->comm != MPI_COMM_NULL) MPI_Comm_free(&impl_->comm);
  int fin = 0;
  MPI_Finalized(&fin);
  if (impl_->finalize && !fin) MPI_Finalize();
}

std::string Communicator::describe() const {
  std::string s = "MPI (" + impl_->mpi_version + ")";
#if PDNN_HAVE_CUDA
  if (impl_->nccl) s += " + " + impl_->nccl->version();
#endif
  return s;
}

Communicator::Watch::Watch(Communicator* c, const char* what) : c_(c) {
  if (!c_) return;
  std::lock_guard<std::mutex> lock(c_->impl_->mu);
  for (size_t i = 0; i < c_->impl_->slots.size(); ++i) {
    Impl::Slot& s = c_->impl_->slots[i];
    if (s.used) continue;
    s = {true, Clock::now(), what};
    slot_ = static_cast<int>(i);
    return;
  }
}

Communicator::Watch::~Watch() {
  if (!c_ || slot_ < 0) return;
  std::lock_guard<std::mutex> lock(c_->impl_->mu);
  c_->impl_->slots[static_cast<size_t>(slot_)].used = false;
}

void Communicator::sum(float* v, int64_t n, const char* what) {
  Watch w(this, what);
  // MPI counts are int: large buffers go in pieces of at most 2^30 elements.
  for (int64_t i = 0; i < n; i += int64_t{1} << 30) {
    const int k = static_cast<int>(std::min<int64_t>(n - i, int64_t{1} << 30));
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, v + i, k, MPI_FLOAT, MPI_SUM, impl_->comm), what);
  }
}

void Communicator::sum(double* v, int64_t n, const char* what) {
  Watch w(this, what);
  PDNN_CHECK(n <= INT_MAX, "MPI: %s: %lld values in one sum", what, static_cast<long long>(n));
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, v, static_cast<int>(n), MPI_DOUBLE, MPI_SUM, impl_->comm),
            what);
}

bool Communicator::any(bool v, const char* what) {
  Watch w(this, what);
  int x = v ? 1 : 0;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_INT, MPI_LOR, impl_->comm), what);
  return x != 0;
}

void Communicator::barrier(const char* what) {
  Watch w(this, what);
  check_mpi(MPI_Barrier(impl_->comm), what);
}

void Communicator::check_same(const std::vector<std::pair<std::string, std::string>>& items) {
  Watch w(this, "the configuration check");
  MPI_Comm comm = impl_->comm;
  // Item 0 is the list of names, so ranks that check different things disagree on it.
  std::vector<std::string> values{""};
  for (const auto& it : items) {
    values[0] += it.first + "\n";
    values.push_back(it.second);
  }
  std::vector<std::string> names{"the items checked"};
  for (const auto& it : items) names.push_back(it.first);
  int64_t count = static_cast<int64_t>(values.size());
  std::vector<int64_t> counts(static_cast<size_t>(size_));
  check_mpi(MPI_Allgather(&count, 1, MPI_INT64_T, counts.data(), 1, MPI_INT64_T, comm),
            "configuration check");
  const int64_t k_all = *std::min_element(counts.begin(), counts.end());
  std::vector<uint64_t> mine(static_cast<size_t>(k_all));
  for (int64_t k = 0; k < k_all; ++k) {
    const std::string& v = values[static_cast<size_t>(k)];
    mine[static_cast<size_t>(k)] = hash_bytes(v.data(), v.size(), 0x9d1);
  }
  // The item count itself differs: compare the names (item 0), which must differ too.
  std::vector<uint64_t> all(static_cast<size_t>(size_ * k_all));
  check_mpi(MPI_Allgather(mine.data(), static_cast<int>(k_all), MPI_UINT64_T, all.data(),
                          static_cast<int>(k_all), MPI_UINT64_T, comm),
            "configuration check");
  int bad_rank = -1;
  int64_t bad_item = -1;
  for (int r = 1; r < size_ && bad_rank < 0; ++r)
    for (int64_t k = 0; k < k_all; ++k)
      if (all[static_cast<size_t>(r * k_all + k)] != all[static_cast<size_t>(k)] ||
          counts[static_cast<size_t>(r)] != counts[0]) {
        bad_rank = r;
        bad_item = all[static_cast<size_t>(r * k_all + k)] != all[static_cast<size_t>(k)] ? k : 0;
        break;
      }
  if (bad_rank < 0) return;
  // Both values of the differing item travel to every rank, so all print the same message.
  auto bcast_text = [&](const std::string& text, int root) {
    int64_t n = static_cast<int64_t>(text.size());
    check_mpi(MPI_Bcast(&n, 1, MPI_INT64_T, root, comm), "configuration check");
    std::string out(static_cast<size_t>(n), '\0');
    if (rank_ == root) out = text;
    check_mpi(MPI_Bcast(&out[0], static_cast<int>(n), MPI_CHAR, root, comm),
              "configuration check");
    return out;
  };
  const std::string& own = values[static_cast<size_t>(bad_item)];
  const std::string v0 = bcast_text(own, 0), vr = bcast_text(own, bad_rank);
  g_collective_error = true;
  PDNN_FAIL("--distributed: rank %d disagrees with rank 0 on %s: %s (rank 0 vs rank %d); every "
            "rank must run the same model, data and flags",
            bad_rank, names[static_cast<size_t>(bad_item)].c_str(),
            first_difference(v0, vr).c_str(), bad_rank);
}

void Communicator::open_device() {
#if PDNN_HAVE_CUDA
  if (impl_->nccl) return;
  Watch w(this, "NCCL's start-up");
  impl_->nccl = std::make_unique<NcclComm>(rank_, size_, [this](void* p, size_t n) {
    check_mpi(MPI_Bcast(p, static_cast<int>(n), MPI_BYTE, 0, impl_->comm), "NCCL id broadcast");
  });
#else
  PDNN_FAIL("--distributed --device cuda: this pdnn was built without CUDA");
#endif
}

bool Communicator::device_open() const {
#if PDNN_HAVE_CUDA
  return impl_->nccl != nullptr;
#else
  return false;
#endif
}

void Communicator::device_sum(float* v, int64_t n, CUstream_st* stream) {
#if PDNN_HAVE_CUDA
  PDNN_CHECK(impl_->nccl, "communicator: device_sum before open_device");
  impl_->nccl->sum(v, n, stream);
#else
  (void)v, (void)n, (void)stream;
  PDNN_FAIL("communicator: no CUDA in this build");
#endif
}

void Communicator::device_sum_after(float* v, int64_t n, CUstream_st* compute) {
#if PDNN_HAVE_CUDA
  PDNN_CHECK(impl_->nccl, "communicator: device_sum_after before open_device");
  impl_->nccl->sum_after(v, n, compute);
#else
  (void)v, (void)n, (void)compute;
  PDNN_FAIL("communicator: no CUDA in this build");
#endif
}

void Communicator::device_join(CUstream_st* compute) {
#if PDNN_HAVE_CUDA
  if (impl_->nccl) impl_->nccl->join(compute);
#else
  (void)compute;
#endif
}

void Communicator::fail_locally(int status) {
  Communicator* c = g_joined.load();
  int inited = 0, fin = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&fin);
  if (!inited || fin) return;
  if (g_collective_error) {
    MPI_Finalize();
    return;
  }
  std::fflush(stdout);
  std::fflush(stderr);
#if PDNN_HAVE_CUDA
  if (c && c->impl_->nccl) c->impl_->nccl->abort();
#else
  (void)c;
#endif
  MPI_Abort(MPI_COMM_WORLD, status);
}

bool Communicator::collective_error_in_flight() { return g_collective_error; }
void Communicator::set_collective_error() { g_collective_error = true; }
int Communicator::process_rank() { return g_rank; }

}  // namespace pdnn
