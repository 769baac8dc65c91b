// Defaults that depend on the data an app is given: an epoch's length and a batch that does not
// fit the data set. A new user's small folder gets a run that fits it, and the run says what it
// chose, instead of an error about a number they never gave.
#pragma once
#include <cstdint>
#include <string>

#include "core/error.h"

namespace pdnn {

// An epoch's images when --images-per-epoch was not given: the workload's count (`workload`,
// e.g. "W4's") when the set has that many, else the whole set (0). `note` is for the run
// header: which of the two it is.
inline int64_t default_epoch_images(int64_t workload_count, const std::string& workload,
                                    int64_t set_size, std::string* note) {
  if (set_size >= workload_count) {
    *note = workload + " epoch";
    return workload_count;
  }
  *note = strprintf("all of them: the set has fewer than %s %lld", workload.c_str(),
                    static_cast<long long>(workload_count));
  return 0;
}

// A batch larger than the images it draws from is one batch of all of them (as PyTorch's
// DataLoader does), not an allocation of the nominal size: returns the batch to use and, when
// it changed, a note saying so ("" otherwise).
inline int64_t fit_batch(int64_t batch, int64_t images, const std::string& what,
                         std::string* note) {
  note->clear();
  if (batch <= images || images <= 0) return batch;
  *note = strprintf("note: batch %lld is larger than %s (%lld images): each step takes one "
                    "batch of all %lld",
                    static_cast<long long>(batch), what.c_str(), static_cast<long long>(images),
                    static_cast<long long>(images));
  return images;
}

}  // namespace pdnn
