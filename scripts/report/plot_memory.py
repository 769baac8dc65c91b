#!/usr/bin/python3
"""Step time against peak device memory, one panel per input side, from `make bench-memory`'s
CSV (scripts/bench/bench_memory.sh, scripts/twins/torch_memory_bench.py): each point one framework and
variant (pdnn uncapped and under each --gpu-memory-limit; PyTorch plain, save_on_cpu,
checkpoint), its cap drawn as a dotted vertical line. Rows that did not run (oom, no-fit) are
listed under the panel instead. The latest row of each (framework, variant,
side, cap) counts.

  scripts/report/plot_memory.py [runs/scale/memory.csv] [--out runs/scale/memory.png]

Run with Debian's /usr/bin/python3 (matplotlib), as scripts/report/plot.py.
"""
import argparse
import csv
import os
import sys

MARKERS = {("pdnn", "plain"): ("o", "tab:blue"), ("pdnn", "capped"): ("s", "tab:cyan"),
           ("pytorch", "plain"): ("o", "tab:red"), ("pytorch", "save_on_cpu"): ("^", "tab:orange"),
           ("pytorch", "checkpoint"): ("D", "tab:purple")}


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def latest(rows):
    """The last row of each (framework, variant, side, cap)."""
    out = {}
    for r in rows:
        out[(r["framework"], r["variant"], r["side"], r["gpu_memory_limit_gib"])] = r
    return list(out.values())


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="?", default="runs/scale/memory.csv")
    ap.add_argument("--out", help="PNG (default: the CSV's name with .png)")
    a = ap.parse_args()
    if not os.path.exists(a.csv):
        sys.exit("plot_memory.py: %s: no such file (run make bench-memory first)" % a.csv)
    with open(a.csv, newline="") as f:
        rows = list(csv.DictReader(f))
    need = {"framework", "variant", "side", "gpu_memory_limit_gib", "peak_gib", "median_ms",
            "status"}
    if not rows or not need <= set(rows[0]):
        sys.exit("plot_memory.py: %s: not a bench-memory CSV (needs columns %s)"
                 % (a.csv, ",".join(sorted(need))))
    rows = latest(rows)
    sides = sorted({int(r["side"]) for r in rows})
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(sides), figsize=(4.2 * len(sides), 4.2), squeeze=False)
    for ax, side in zip(axes[0], sides):
        missing = []
        for r in (r for r in rows if int(r["side"]) == side):
            cap = num(r["gpu_memory_limit_gib"])
            label = "%s %s" % (r["framework"], r["variant"]) + (" %.0fG" % cap if cap else "")
            x, y = num(r["peak_gib"]), num(r["median_ms"])
            if not r["status"].startswith("ok") or x is None or y is None:
                missing.append("%s: %s" % (label, r["status"]))
                continue
            m, c = MARKERS.get((r["framework"], r["variant"]), ("x", "gray"))
            ax.scatter([x], [y], marker=m, color=c, s=40, zorder=3)
            ax.annotate(label, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
            if cap:
                ax.axvline(cap, color=c, linestyle=":", linewidth=0.8)
        ax.set_title("W4 at %dx%d, batch 64" % (side, side))
        ax.set_xlabel("peak device memory (GiB)")
        ax.set_ylabel("ms per step")
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        if missing:
            ax.text(0.02, -0.28, "\n".join(missing), transform=ax.transAxes, fontsize=7, va="top")
    fig.tight_layout()
    out = a.out or os.path.splitext(a.csv)[0] + ".png"
    tmp = out + ".tmp.%d.png" % os.getpid()
    fig.savefig(tmp, dpi=120, bbox_inches="tight")
    os.replace(tmp, out)
    print("wrote %s" % out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
