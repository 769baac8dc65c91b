// dataset_hash (fingerprint.h).
#include "dist/fingerprint.h"

#include <cstdint>
#include <optional>
#include <vector>

#include "core/error.h"
#include "dist/communicator.h"

namespace pdnn {

std::string dataset_hash(const Dataset& d) {
  const Shape s = d.sample_shape();
  std::vector<float> buf(static_cast<size_t>(s.numel()));
  uint64_t h = 0;
  for (int k = 0; k < d.num_classes(); ++k) {
    const std::string name = d.class_name(k);
    h = hash_bytes(name.data(), name.size(), h);
  }
  for (int64_t i = 0; i < d.size(); ++i) {
    const int32_t label = d.label(i);
    d.read(i, buf.data(), std::nullopt);
    h = hash_bytes(&label, sizeof(label), h);
    h = hash_bytes(buf.data(), buf.size() * sizeof(float), h);
  }
  return strprintf("%lld samples %s of %d classes, hash %s", static_cast<long long>(d.size()),
                   s.str().c_str(), d.num_classes(), hash_hex(h).c_str());
}

}  // namespace pdnn
