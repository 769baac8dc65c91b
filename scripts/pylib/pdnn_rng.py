"""pdnn's random stream in Python (lib/core/rng.h), so scripts reproduce pdnn's draws exactly.

Value i (1-based) of seed s is splitmix64(s + i * 0x9E3779B97F4A7C15); uniform() is the top
53 bits over 2^53; permutation(n) is Fisher-Yates from i = n-1 down to 1 with j = next() % (i+1).
"""
import numpy as np

MASK = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15


def at(seed, i):
    """The i-th value (1-based) of seed's stream, as a Python int (scalar reference version)."""
    z = (seed + i * GAMMA) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def at_many(seed, first, n):
    """Values first .. first+n-1 (1-based) of seed's stream as uint64 (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        i = np.arange(first, first + n, dtype=np.uint64)
        z = np.uint64(seed & MASK) + i * np.uint64(GAMMA)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


class Rng:
    """Mirror of pdnn::Rng: a seed and a counter of values drawn."""

    def __init__(self, seed=0):
        self.seed = seed & MASK
        self.counter = 0

    def next_many(self, n):
        v = at_many(self.seed, self.counter + 1, n)
        self.counter += n
        return v

    def uniform_many(self, n):
        """n doubles in [0,1): (v >> 11) * 2^-53."""
        return (self.next_many(n) >> np.uint64(11)).astype(np.float64) * (2.0 ** -53)

    def uniform_float(self, shape, lo, hi):
        """pdnn's Rng::uniform(lo, hi) per element: lo + (hi - lo) * float(u) in float32, with
        the multiply-add fused into one rounding (std::fmaf in lib/core/rng.h, the same in every
        build). The product of two floats is exact in long double and
        the sum is rounded there first: a double rounding that could differ from a true FMA
        only for a sum lying within 2^-64 relative of a float midpoint."""
        n = int(np.prod(shape))
        lo32, hi32 = np.float32(lo), np.float32(hi)
        d = np.longdouble(hi32 - lo32)
        out = np.empty(n, dtype=np.float32)
        chunk = 1 << 22  # W4's first dense layer has 103 M weights: bounded temporaries
        for b in range(0, n, chunk):
            u = self.uniform_many(min(chunk, n - b)).astype(np.float32)
            out[b:b + len(u)] = (np.longdouble(lo32) + d * u.astype(np.longdouble)).astype(np.float32)
        return out.reshape(shape)

    def permutation(self, n):
        p = list(range(n))
        draws = self.next_many(max(n - 1, 0)).tolist()
        for k, i in enumerate(range(n - 1, 0, -1)):
            j = draws[k] % (i + 1)
            p[i], p[j] = p[j], p[i]
        return np.array(p, dtype=np.int64)


def epoch_rng(seed, epoch):
    """epoch_order_rng (lib/data/dataset_loader.h): epoch e's order comes from Rng(at(seed, e + 1))."""
    return Rng(at(seed, epoch + 1))
