#!/usr/bin/python3
"""One row of results/scale/*.csv (the columns of pylib/results_csv.py's SCALE_COLUMNS) from the
last row of a pdnn --bench-csv file, for the data-parallel scripts (scripts/gpu/runners/dist.sh,
host-dist-cpu.sh):

  scale_rows.py BENCH_CSV --workload W3 --ranks 2 --threads 8 --global-batch 256 \
      --mode graph+overlap --out results/scale/gpu_dist.csv

images_per_s = global batch / median step time. pdnn's step time on a GPU is a block of 10
steps ending in a synchronisation, divided by 10 (run_loop.h), as torch_ddp_bench.py times.
--log APP_OUTPUT: the run's printed output, for its "all-reduce per step" line (CPU runs).
"""
import argparse
import csv
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from results_csv import SCALE_COLUMNS, write_rows  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bench_csv")
    ap.add_argument("--workload", required=True)
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--global-batch", type=int, required=True)
    ap.add_argument("--mode", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--log", default="")
    a = ap.parse_args()
    comm = exposed = ""
    if a.log:
        m = re.search(r"all-reduce per step \(rank 0\): [0-9.]+ MB in ([0-9.]+) ms, ([0-9.]+) ms",
                      open(a.log, errors="replace").read())
        if m:
            comm, exposed = m.group(1), m.group(2)
    with open(a.bench_csv, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit("scale_rows: %s has no row" % a.bench_csv)
    r = rows[-1]
    med = float(r["median_ms"])
    ips = a.global_batch / (med / 1e3)
    write_rows(a.out, SCALE_COLUMNS, [[
        "pdnn", a.workload, r["model"], r["device"], r["gpu"], a.ranks, a.threads,
        a.global_batch, a.mode, r["steps"], r["median_ms"], r["min_ms"], r["max_ms"],
        "%.1f" % ips, comm, exposed, "blas " + r.get("blas_core", ""), r["git_rev"], r["host"],
        r["timestamp"]]])
    print("pdnn %s %s %d ranks x %d threads, global batch %d, %s: median %.3f ms/step, %.0f img/s%s"
          % (a.workload, r["device"], a.ranks, a.threads, a.global_batch, a.mode, med, ips,
             (", all-reduce %s ms, %s ms not hidden" % (comm, exposed)) if comm else ""))


if __name__ == "__main__":
    main()
