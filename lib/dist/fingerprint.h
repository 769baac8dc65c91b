// What data-parallel ranks compare at start-up besides their flags (TrainTask::fingerprint):
// the training data, read back sample by sample.
#pragma once
#include <string>

#include "data/dataset.h"

namespace pdnn {

// A hash of a split's samples (as read for evaluation, no augmentation), labels and class
// names, as "<n> samples <shape> of <k> classes, hash <hex>": every sample is read once (a
// second or so for an image folder's photos, once per data-parallel run).
std::string dataset_hash(const Dataset& d);

}  // namespace pdnn
