// Communicator stand-in for builds without MPI (communicator.h): join() fails in one line, so
// no Communicator ever exists and the other members are never reached.
#include "core/error.h"
#include "dist/communicator.h"

namespace pdnn {

struct Communicator::Impl {};

namespace {
[[noreturn]] void no_mpi() {
  PDNN_FAIL("--distributed: this pdnn was built without MPI (scripts/tools/install_deps.sh installs "
            "libopenmpi-dev; then reconfigure and rebuild)");
}
}  // namespace

std::shared_ptr<Communicator> Communicator::join(const DistOptions&) {
  PDNN_CHECK(launch_env().found,
             "--distributed needs an MPI launcher: run  mpirun -np N <app> ... --distributed  "
             "(no OMPI_COMM_WORLD_SIZE / PMI_SIZE in the environment)");
  no_mpi();
}
Communicator::~Communicator() = default;
std::string Communicator::describe() const { no_mpi(); }
Communicator::Watch::Watch(Communicator* c, const char*) : c_(c) {}
Communicator::Watch::~Watch() = default;
void Communicator::sum(float*, int64_t, const char*) { no_mpi(); }
void Communicator::sum(double*, int64_t, const char*) { no_mpi(); }
bool Communicator::any(bool, const char*) { no_mpi(); }
void Communicator::barrier(const char*) { no_mpi(); }
void Communicator::check_same(const std::vector<std::pair<std::string, std::string>>&) {
  no_mpi();
}
void Communicator::open_device() { no_mpi(); }
bool Communicator::device_open() const { return false; }
void Communicator::device_sum(float*, int64_t, CUstream_st*) { no_mpi(); }
void Communicator::device_sum_after(float*, int64_t, CUstream_st*) { no_mpi(); }
void Communicator::device_join(CUstream_st*) { no_mpi(); }
void Communicator::fail_locally(int) {}
bool Communicator::collective_error_in_flight() { return false; }
void Communicator::set_collective_error() {}
int Communicator::process_rank() { return -1; }

}  // namespace pdnn
