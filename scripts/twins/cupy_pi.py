#!/usr/bin/python3
"""W1 pi as a hand-written CUDA kernel from Python (CuPy RawKernel, the CuPy-kernels blog's
way), in fp64: the GPU yardstick for `build/bin/pi --variants cuda-fp64` in bench_gpu.sh.
Same timing as pdnn's pi: kernel + reduction + copy of the result back, median of --repeat
after --warmup."""
import argparse
import statistics
import time

SRC = r"""
extern "C" __global__ void pi_part(long long n, double* out) {
  __shared__ double sh[256];
  double h = 1.0 / (double)n, s = 0.0;
  for (long long i = 1 + blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)blockDim.x * gridDim.x) { double x = (double)i * h; s += 4.0 / (1.0 + x * x); }
  sh[threadIdx.x] = s; __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) { if (threadIdx.x < k) sh[threadIdx.x] += sh[threadIdx.x + k]; __syncthreads(); }
  if (threadIdx.x == 0) atomicAdd(out, sh[0]);
}
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000_000)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    a = ap.parse_args()
    import cupy as cp
    k = cp.RawKernel(SRC, "pi_part")
    blocks = 8 * cp.cuda.Device().attributes["MultiProcessorCount"]
    out = cp.zeros(1, dtype=cp.float64)
    ts, r = [], 0.0
    for i in range(a.warmup + a.repeat):
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        out.fill(0)
        k((blocks,), (256,), (cp.int64(a.n), out))
        r = (float(out.get()[0]) + 3.0) / a.n  # + (f(0) + f(1)) / 2 = 3
        t = 1e3 * (time.perf_counter() - t0)
        if i >= a.warmup:
            ts.append(t)
    import math
    print(f"cupy pi fp64: median {statistics.median(ts):.4f} ms (min {min(ts):.4f}), "
          f"|error| {abs(r - math.pi):.3e}")


if __name__ == "__main__":
    main()
