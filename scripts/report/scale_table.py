#!/usr/bin/python3
"""The 1-vs-2-GPU table of a data-parallel run (scripts/gpu/runners/dist.sh): from the rows of
results/scale/*.csv (pylib/results_csv.py's SCALE_COLUMNS; pdnn's through scale_rows.py), per
workload, framework and mode, the step time on 1 rank and on N at the same per-rank batch (weak
scaling), the weak-scaling efficiency t(1) / t(N), and the best N-rank pdnn step against
PyTorch DDP's. pdnn's N-rank modes with "+overlap" are paired with the 1-rank mode without it
(graph+overlap with graph). The last row of each (app, workload, mode, ranks) counts; --since
keeps the rows of one run (timestamps are ISO 8601, so they compare as text).

  scripts/report/scale_table.py results/scale/gpu_dist.csv --workloads W5 [--since 2026-11-27T10:00:00Z]
      [--out results/scale/gpu_dist_table.csv]
"""
import argparse
import csv
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from results_csv import write_rows  # noqa: E402

COLUMNS = ["workload", "framework", "mode", "ranks", "per_rank_batch", "ms_1", "ms_n",
           "efficiency", "images_per_s_n", "note"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--workloads", default="", help="comma list (default: all)")
    ap.add_argument("--since", default="", help="only rows with timestamp >= this")
    ap.add_argument("--out", default="", help="also write the table here (replaced)")
    a = ap.parse_args()
    if not os.path.exists(a.csv):
        sys.exit(f"scale_table: {a.csv}: no such file")
    want = {w for w in a.workloads.split(",") if w}
    last = {}
    with open(a.csv, newline="") as f:
        for r in csv.DictReader(f):
            if (want and r["workload"] not in want) or r["timestamp"] < a.since:
                continue
            last[(r["app"], r["workload"], r["mode"], int(r["ranks"]))] = r
    rows = []
    for (app, wl, mode, n), r in sorted(last.items()):
        if n == 1:
            continue
        base = mode.replace("+overlap", "")
        one = last.get((app, wl, base, 1))
        per_rank = int(r["global_batch"]) // n
        if one is None or int(one["global_batch"]) != per_rank:
            continue
        t1, tn = float(one["median_ms"]), float(r["median_ms"])
        rows.append([wl, app, mode, n, per_rank, f"{t1:.3f}", f"{tn:.3f}", f"{t1 / tn:.4f}",
                     r["images_per_s"], ""])
    rows.sort(key=lambda r: (r[0], r[1] != "pdnn", r[2]))
    for wl in sorted({r[0] for r in rows}):
        ours = [r for r in rows if r[0] == wl and r[1] == "pdnn"]
        ddp = [r for r in rows if r[0] == wl and r[1] == "torch-ddp"]
        if ours and ddp:
            best, theirs = min(ours, key=lambda r: float(r[6])), min(ddp, key=lambda r: float(r[6]))
            best[9] = (f"best pdnn {best[3]}-rank step: {float(theirs[6]) / float(best[6]):.2f}x "
                       f"faster than DDP's ({theirs[2]})")
    if not rows:
        sys.exit(f"scale_table: no 1-and-N-rank pairs in {a.csv}" +
                 (f" for {a.workloads}" if want else "") + (f" since {a.since}" if a.since else ""))
    print(f"{'workload':8s} {'framework':10s} {'mode':16s} {'ranks':>5s} {'per rank':>8s} "
          f"{'ms 1':>8s} {'ms N':>8s} {'weak eff.':>9s}  note")
    for r in rows:
        print(f"{r[0]:8s} {r[1]:10s} {r[2]:16s} {r[3]:>5d} {r[4]:>8d} {r[5]:>8s} {r[6]:>8s} "
              f"{100 * float(r[7]):>8.1f}%  {r[9]}")
    if a.out:
        write_rows(a.out, COLUMNS, rows, append=False)
        print(f"table written to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
