#!/usr/bin/python3
"""ncu_summary.py CSV STEPS: the kernels of the last of STEPS training steps from an Nsight Compute
CSV (ncu --csv --metrics gpu__time_duration.sum --log-file CSV), in launch order with their
durations, and the total. For finding which kernel a GPU step spends its time in."""
import csv
import sys


def main():
    path, steps = sys.argv[1], int(sys.argv[2])
    rows = [r for r in csv.reader(open(path)) if len(r) > 10]
    head, rows = rows[0], rows[1:]
    k, v, u = head.index("Kernel Name"), head.index("Metric Value"), head.index("Metric Unit")
    scale = {"ns": 1e-3, "us": 1.0, "usecond": 1.0, "nsecond": 1e-3, "ms": 1e3, "msecond": 1e3}
    per = len(rows) // steps
    total = 0.0
    for r in rows[-per:]:
        us = float(r[v].replace(",", "")) * scale[r[u]]
        total += us
        print(f"{us:8.1f} us  {r[k][:96]}")
    print(f"total {total:.1f} us over {per} kernels (one step)")


if __name__ == "__main__":
    main()
