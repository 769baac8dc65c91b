// What the launcher says about this process (read from the environment, no MPI needed) and the
// hash the agreement checks compare; compiled in every build (communicator.h).
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "dist/communicator.h"
#include "core/error.h"

namespace pdnn {

namespace {

// The variable as an int >= 0, or -1 when unset or not a number.
int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return -1;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  return *end == '\0' && x >= 0 && x < (1 << 30) ? static_cast<int>(x) : -1;
}

uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

LaunchEnv launch_env() {
  LaunchEnv e;
  struct Names {
    const char *launcher, *size, *rank, *local_rank, *local_size;
  };
  const Names known[] = {
      {"Open MPI", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
       "OMPI_COMM_WORLD_LOCAL_SIZE"},
      {"MPICH", "PMI_SIZE", "PMI_RANK", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
  };
  for (const Names& n : known) {
    const int size = env_int(n.size), rank = env_int(n.rank);
    if (size < 1 || rank < 0 || rank >= size) continue;
    e.found = true;
    e.launcher = n.launcher;
    e.size = size;
    e.rank = rank;
    const int lr = env_int(n.local_rank), ls = env_int(n.local_size);
    e.local_rank = lr >= 0 ? lr : rank;
    e.local_size = ls >= 1 ? ls : size;
    return e;
  }
  return e;
}

int allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  const int online = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : online;
}

int default_rank_threads(const Communicator& comm) {
  const int online = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  const int mine = allowed_cpus();
  if (mine < online) return std::max(1, mine);  // bound by the launcher: these are ours
  return std::max(1, mine / std::max(1, comm.local_size()));
}

uint64_t hash_bytes(const void* data, size_t n, uint64_t seed) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  // Four independent lanes, so the loop is not one long dependency chain (~GB/s per core).
  uint64_t h[4] = {seed ^ 0x243F6A8885A308D3ull, seed ^ 0x13198A2E03707344ull,
                   seed ^ 0xA4093822299F31D0ull, seed ^ 0x082EFA98EC4E6C89ull};
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; ++k) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * k, 8);
      h[k] = mix(h[k] + w + 0x9E3779B97F4A7C15ull);
    }
  uint64_t tail = 0;
  std::memcpy(&tail, p + i, n - i < 8 ? n - i : 8);
  uint64_t r = mix(h[0] ^ mix(h[1] ^ mix(h[2] ^ mix(h[3] ^ tail))));
  for (i += 8; i < n; i += 8) {
    uint64_t w = 0;
    std::memcpy(&w, p + i, n - i < 8 ? n - i : 8);
    r = mix(r + w);
  }
  return mix(r ^ static_cast<uint64_t>(n));
}

std::string hash_hex(uint64_t h) { return strprintf("%016llx", static_cast<unsigned long long>(h)); }

}  // namespace pdnn
