// The W6 problem (SPEC.md): initial weights, input weights and the input sequence, drawn from a
// seed so the app, the tests and scripts/twins/hebbian_numpy.py (through scripts/pylib/pdnn_rng.py) start
// from the same numbers. x_0 = 0.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace pdnn {

struct HebbianProblem {
  int64_t n = 0;
  std::vector<float> W;    // (n,n) row-major, U(-1,1)
  std::vector<float> win;  // (n), U(-1,1)
  std::vector<float> u;    // (steps), N(0,1)
};

// Draws, from Rng(seed) in this order: W row by row, then win, then u (Rng::uniform(-1, 1) per
// uniform value, float(Rng::normal()) per normal). The values are float32 numbers, so a float64
// run starts from exactly the same state as a float32 one.
HebbianProblem make_hebbian_problem(int64_t n, int64_t steps, uint64_t seed);

// Distances between runs' states (in long double, so a float64 state can be compared with an
// exact one): max_i |a_i - b_i| and max_i |a_i|.
template <typename A, typename B>
double max_abs_diff(const std::vector<A>& a, const std::vector<B>& b) {
  long double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    m = std::max(m, std::fabs(static_cast<long double>(a[i]) - static_cast<long double>(b[i])));
  return static_cast<double>(m);
}

template <typename A>
double max_abs(const std::vector<A>& a) {
  long double m = 0;
  for (A v : a) m = std::max(m, std::fabs(static_cast<long double>(v)));
  return static_cast<double>(m);
}

}  // namespace pdnn
