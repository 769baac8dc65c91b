#!/usr/bin/python3
"""W4's test accuracy per epoch at a larger side under --gpu-memory-limit beside the 224x224
curve (issue 26): each CSV a training run of the caltech101 app (one row per epoch), labelled
with its dataset (its side) and, for runs under a cap, the cap named by --caps; runs of the same
label are averaged (thin lines: each run).

  scripts/report/plot_memory_accuracy.py RUN.csv... [--caps FILE=CAP ...] [--out runs/plots/memory_accuracy.png]

Run with Debian's /usr/bin/python3 (matplotlib), as scripts/report/plot.py.
"""
import argparse
import csv
import os
import statistics
import sys
from collections import OrderedDict


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="training-run CSV files (epoch, test_acc, dataset)")
    ap.add_argument("--caps", nargs="*", default=[], help="FILE=CAP: the run's --gpu-memory-limit")
    ap.add_argument("--out", default="runs/plots/memory_accuracy.png")
    a = ap.parse_args()
    caps = dict(c.split("=", 1) for c in a.caps if "=" in c)
    groups = OrderedDict()
    for path in a.runs:
        try:
            with open(path, newline="") as f:
                rows = [r for r in csv.DictReader(f) if r.get("epoch")]
        except OSError as e:
            sys.exit("plot_memory_accuracy.py: %s: %s" % (path, e.strerror))
        if not rows or "test_acc" not in rows[0]:
            sys.exit("plot_memory_accuracy.py: %s: no epoch rows with test_acc" % path)
        label = "%s, %s" % (rows[0].get("dataset", "?"), rows[0].get("device", "?"))
        if path in caps:
            label += ", --gpu-memory-limit " + caps[path]
        groups.setdefault(label, []).append(rows)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for i, (label, runs) in enumerate(groups.items()):
        color = "C%d" % i
        n = min(len(r) for r in runs)
        for r in runs:
            ax.plot([int(x["epoch"]) for x in r], [100 * float(x["test_acc"]) for x in r], "-",
                    color=color, alpha=0.3, lw=1)
        mean = [100 * statistics.mean(float(r[e]["test_acc"]) for r in runs) for e in range(n)]
        ax.plot(range(1, n + 1), mean, "-o", ms=3, lw=2, color=color,
                label="%s (%d run%s); final %.2f%%" % (label, len(runs), "s" if len(runs) > 1 else "", mean[-1]))
    ax.set(title="W4 (caltech9) test accuracy per epoch", xlabel="epoch", ylabel="test accuracy (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    tmp = a.out + ".tmp.png"
    fig.savefig(tmp, dpi=120, bbox_inches="tight")
    os.replace(tmp, a.out)
    print("wrote %s" % a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
