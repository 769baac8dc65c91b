// Geometry of the 3x3 stride-1 kernels (see conv2d_3x3.h).
#include "ops/conv/conv2d_3x3.h"

#include "core/error.h"

namespace pdnn {

bool conv3x3_applies(const ConvGeom& g) {
  return g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.ph == g.pw && g.ph <= 2;
}

void conv3x3_check(const ConvGeom& g, const char* kernel) {
  PDNN_CHECK(conv3x3_applies(g), "%s: needs a 3x3 stride-1 kernel with equal padding <= 2, got "
             "%lldx%lld stride %lldx%lld padding %lldx%lld", kernel, (long long)g.kh,
             (long long)g.kw, (long long)g.sh, (long long)g.sw, (long long)g.ph, (long long)g.pw);
}

}  // namespace pdnn
