// The progress line of a training epoch: "epoch 2/5  batch 300/1000  loss 0.21  acc 0.94
// 12345 img/s  ETA 0:42", rewritten in place on a terminal, printed every few seconds otherwise
// (so a log file is not flooded), and always once at the epoch's last batch. The caller asks
// due() first and reads its metrics (maybe from a device) only when a line is due.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace pdnn {

class Progress {
 public:
  // epoch counts from 0; printed as epoch+1 of epochs.
  Progress(int epoch, int epochs, int64_t batches);
  // Whether a line is due after batch `done` (1-based) of the epoch.
  bool due(int64_t done) const;
  // The line after batch `done`: images seen so far and the running metrics, already
  // formatted ("loss 0.2100  acc 0.9400").
  void print(int64_t done, int64_t images, const std::string& metrics);
  // Clears the line on a terminal, so the epoch summary that follows starts clean.
  void finish();

 private:
  using Clock = std::chrono::steady_clock;
  int epoch_, epochs_;
  int64_t batches_;
  bool tty_;
  Clock::time_point t0_, last_;
};

}  // namespace pdnn
