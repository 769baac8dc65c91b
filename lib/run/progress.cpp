// Progress line (progress.h).
#include "run/progress.h"

#include <unistd.h>

#include <cstdio>

namespace pdnn {

Progress::Progress(int epoch, int epochs, int64_t batches)
    : epoch_(epoch),
      epochs_(epochs),
      batches_(batches),
      tty_(isatty(STDOUT_FILENO)),
      t0_(Clock::now()),
      last_(t0_) {}

bool Progress::due(int64_t done) const {
  const double since = std::chrono::duration<double>(Clock::now() - last_).count();
  return done >= batches_ || since >= (tty_ ? 0.25 : 5.0);
}

void Progress::print(int64_t done, int64_t images, const std::string& metrics) {
  const auto now = Clock::now();
  last_ = now;
  const double el = std::chrono::duration<double>(now - t0_).count();
  const double eta = done > 0 ? el * static_cast<double>(batches_ - done) / done : 0.0;
  std::printf("%sepoch %d/%d  batch %lld/%lld  %s  %.0f img/s  ETA %d:%02d%s", tty_ ? "\r" : "",
              epoch_ + 1, epochs_, static_cast<long long>(done), static_cast<long long>(batches_),
              metrics.c_str(), el > 0 ? images / el : 0.0, static_cast<int>(eta) / 60,
              static_cast<int>(eta) % 60, tty_ ? "\033[K" : "\n");
  std::fflush(stdout);
}

void Progress::finish() {
  if (tty_) std::printf("\r\033[K");
}

}  // namespace pdnn
