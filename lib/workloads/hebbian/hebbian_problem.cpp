// The W6 problem's random draws (hebbian.h).
#include "workloads/hebbian/hebbian_problem.h"

#include "core/error.h"
#include "core/rng.h"

namespace pdnn {

HebbianProblem make_hebbian_problem(int64_t n, int64_t steps, uint64_t seed) {
  PDNN_CHECK(n >= 1 && steps >= 0, "hebbian problem: n = %lld, steps = %lld: need n >= 1, steps >= 0",
             static_cast<long long>(n), static_cast<long long>(steps));
  HebbianProblem p;
  p.n = n;
  Rng rng(seed);
  p.W.resize(static_cast<size_t>(n * n));
  for (float& v : p.W) v = rng.uniform(-1.f, 1.f);
  p.win.resize(static_cast<size_t>(n));
  for (float& v : p.win) v = rng.uniform(-1.f, 1.f);
  p.u.resize(static_cast<size_t>(steps));
  for (float& v : p.u) v = static_cast<float>(rng.normal());
  return p;
}

}  // namespace pdnn
