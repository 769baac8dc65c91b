#!/usr/bin/python3
"""Step time against peak device memory, one panel per input side, from `make bench-memory`'s
CSV (scripts/bench/bench_memory.sh, scripts/twins/torch_memory_bench.py): each point one framework and
variant (pdnn uncapped and under each --gpu-memory-limit; PyTorch plain, save_on_cpu,
checkpoint), its cap drawn as a dotted vertical line. Rows that did not run (oom, no-fit) are
listed under the panel instead. The latest row of each (framework, variant,
side, cap) counts.
--vs-side (the U-Net study, scripts/gpu/runners/unet-memory.sh): instead, per (app, batch,
precision) two panels, step time and peak device memory against the side, a line per
configuration as scripts/report/memory_table.py makes its columns (pdnn uncapped, under each
cap or the side's n-th cap, each PyTorch variant), the sides where it trained.

  scripts/report/plot_memory.py [runs/scale/memory.csv ...] [--out runs/scale/memory.png] [--vs-side]

Several CSVs are read in order, as one (memory_table.py's rule).

Run with Debian's /usr/bin/python3 (matplotlib), as scripts/report/plot.py.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import memory_table  # noqa: E402

MARKERS = {("pdnn", "plain"): ("o", "tab:blue"), ("pdnn", "capped"): ("s", "tab:cyan"),
           ("pytorch", "plain"): ("o", "tab:red"), ("pytorch", "save_on_cpu"): ("^", "tab:orange"),
           ("pytorch", "checkpoint"): ("D", "tab:purple"),
           ("pytorch", "checkpoint+save_on_cpu"): ("v", "tab:brown")}


num = memory_table.num


def latest(rows):
    """The last row of each (framework, variant, side, cap)."""
    out = {}
    for r in rows:
        out[(r["framework"], r["variant"], r["side"], r["gpu_memory_limit_gib"])] = r
    return list(out.values())


def plot_vs_side(plt, rows):
    """The --vs-side figure: a row of two panels per (app, batch, precision)."""
    tables = memory_table.tables(rows)
    fig, axes = plt.subplots(len(tables), 2, figsize=(11, 4.2 * len(tables)), squeeze=False)
    for (ax_ms, ax_gib), (key, t) in zip(axes, sorted(tables.items())):
        caps = [c for c in t.cols if c[:2] == ("pdnn", "capped")]
        for c in t.cols:
            done = [(s, t.row(c, s)) for s in t.sides if memory_table.ok(t.row(c, s))]
            if not done:
                continue
            m, color = MARKERS.get(c[:2], ("x", "gray"))
            if c in caps and len(caps) > 1:  # the caps apart by shade
                color = plt.get_cmap("winter")(caps.index(c) / max(len(caps) - 1, 1))
            label = t.title(c) + " (to %d)" % done[-1][0]
            sides = [s for s, _ in done]
            ax_ms.plot(sides, [memory_table.step_ms(r) for _, r in done], marker=m, color=color,
                       label=label)
            ax_gib.plot(sides, [num(r["peak_gib"]) for _, r in done], marker=m, color=color,
                        label=label)
        for ax, what in ((ax_ms, "ms per step"), (ax_gib, "peak device memory (GiB)")):
            ax.set_title("%s, batch %s, %s" % key)
            ax.set_xlabel("side (pixels)")
            ax.set_ylabel(what)
            ax.set_xlim(left=0)
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
        ax_gib.legend(fontsize=7)
    return fig


def plot_by_side(plt, rows):
    """The default figure: a panel per side, step time against peak memory."""
    sides = sorted({int(r["side"]) for r in rows})
    fig, axes = plt.subplots(1, len(sides), figsize=(4.2 * len(sides), 4.2), squeeze=False)
    for ax, side in zip(axes[0], sides):
        missing = []
        for r in (r for r in rows if int(r["side"]) == side):
            cap = num(r["gpu_memory_limit_gib"])
            label = "%s %s" % (r["framework"], r["variant"]) + (" %gG" % cap if cap else "")
            x, y = num(r["peak_gib"]), num(r["median_ms"])
            if not r["status"].startswith("ok") or x is None or y is None:
                missing.append("%s: %s" % (label, r["status"]))
                continue
            m, c = MARKERS.get((r["framework"], r["variant"]), ("x", "gray"))
            ax.scatter([x], [y], marker=m, color=c, s=40, zorder=3)
            ax.annotate(label, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
            if cap:
                ax.axvline(cap, color=c, linestyle=":", linewidth=0.8)
        app = rows[0].get("app", "caltech9")
        ax.set_title("%s at %dx%d, batch %s" % ("W4" if app == "caltech9" else app, side, side,
                                                rows[0].get("batch", 64)))
        ax.set_xlabel("peak device memory (GiB)")
        ax.set_ylabel("ms per step")
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        if missing:
            ax.text(0.02, -0.28, "\n".join(missing), transform=ax.transAxes, fontsize=7, va="top")
    return fig


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="*", default=["runs/scale/memory.csv"])
    ap.add_argument("--out", help="PNG (default: the first CSV's name with .png)")
    ap.add_argument("--vs-side", action="store_true",
                    help="step time and peak against the side, a line per configuration")
    a = ap.parse_args()
    for path in a.csv:
        if not os.path.exists(path):
            sys.exit("plot_memory.py: %s: no such file (run make bench-memory first)" % path)
    rows = [r for path in a.csv for r in memory_table.read_rows(path, "plot_memory.py")]
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig = plot_vs_side(plt, rows) if a.vs_side else plot_by_side(plt, latest(rows))
    fig.tight_layout()
    out = a.out or os.path.splitext(a.csv[0])[0] + ".png"
    tmp = out + ".tmp.%d.png" % os.getpid()
    fig.savefig(tmp, dpi=120, bbox_inches="tight")
    os.replace(tmp, out)
    print("wrote %s" % out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
