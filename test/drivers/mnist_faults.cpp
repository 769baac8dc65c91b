// build/bin/mnist_faults (tests only): the mnist app's own run (apps/mnist/mnist_app.h) with a
// fault hook installed, for the tests that need a process to die, hang or go wrong at an exact
// point (test_crash_consistency, test_distributed). Production code reads no environment
// variable for this; it announces its points to the Context's hook (core/fault_hook.h).
//
//   mnist_faults --fault ACTION:POINT:COUNT[:RANK] <mnist flags>
// ACTION kill (SIGKILL, no cleanup), hang (sleeps until killed) or perturb (the point corrupts
// its state: "train_step" overwrites one weight); POINT and COUNT as FaultHook::reached says;
// RANK: only that data-parallel rank (default: any process).
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/fault_hook.h"
#include "dist/communicator.h"
#include "mnist_app.h"
#include "run/timing.h"

namespace {

using namespace pdnn;

class DriverFaults : public FaultHook {
 public:
  // False when spec is not ACTION:POINT:COUNT[:RANK].
  bool parse(const std::string& spec) {
    char action[16] = {0}, point[32] = {0};
    long long count = -1;
    int rank = -1;
    const int n = std::sscanf(spec.c_str(), "%15[a-z]:%31[a-z_]:%lld:%d", action, point, &count,
                              &rank);
    if (n < 3 || count < 1) return false;
    action_ = action;
    point_ = point;
    count_ = count;
    rank_ = n == 4 ? rank : -1;
    return action_ == "kill" || action_ == "hang" || action_ == "perturb";
  }

  bool reached(const char* point, int64_t count) override {
    if (point_ != point || count_ != count) return false;
    if (rank_ >= 0 && Communicator::process_rank() != rank_) return false;
    std::fflush(stdout);
    if (action_ == "kill") ::raise(SIGKILL);
    if (action_ == "hang")
      for (;;) ::pause();
    return true;  // perturb
  }

 private:
  std::string action_, point_;
  int64_t count_ = -1;
  int rank_ = -1;
};

DriverFaults g_faults;

int run_with_faults(int argc, char** argv) { return mnist_app(argc, argv, &g_faults); }

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest = {argv[0]};
  bool have = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--fault") == 0 && i + 1 < argc) {
      if (!g_faults.parse(argv[++i])) {
        std::fprintf(stderr, "mnist_faults: --fault '%s': expected ACTION:POINT:COUNT[:RANK] "
                     "with ACTION kill, hang or perturb\n", argv[i]);
        return 2;
      }
      have = true;
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (!have) {
    std::fprintf(stderr, "mnist_faults: --fault ACTION:POINT:COUNT[:RANK] is required\n");
    return 2;
  }
  rest.push_back(nullptr);
  return pdnn::run_app("mnist", run_with_faults, static_cast<int>(rest.size()) - 1, rest.data());
}
