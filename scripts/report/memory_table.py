#!/usr/bin/python3
"""The table of `make bench-memory` (scripts/bench/bench_memory.sh): W4's input sides down the rows,
across them pdnn uncapped and under each --gpu-memory-limit, and PyTorch plain, save_on_cpu and
checkpoint, each cell the peak device memory (GiB, the allocator's tensors: pdnn's in use,
PyTorch's max_memory_allocated; the CUDA context is in neither), the step time (pdnn: its faster
timed block, the other holding the algorithm timing; PyTorch: the median step) and, for
pdnn under a cap, what the plan did; then the largest side that trained for each, and pdnn's
steps against the uncapped step and PyTorch's checkpoint step at the same side. The latest row
of each (framework, variant, side, cap) counts.

  scripts/report/memory_table.py [runs/scale/memory_r2.csv] [--out runs/scale/memory_table.md]
"""
import argparse
import csv
import os
import sys


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="?", default="runs/scale/memory_r2.csv")
    ap.add_argument("--out", default=None, help="markdown file (default: beside the CSV)")
    a = ap.parse_args()
    try:
        with open(a.csv, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        sys.exit("memory_table.py: %s: %s" % (a.csv, e.strerror))
    need = {"framework", "variant", "side", "gpu_memory_limit_gib", "peak_gib", "median_ms", "status"}
    if rows and not need <= set(rows[0]):
        sys.exit("memory_table.py: %s: not a bench-memory CSV (columns %s missing)"
                 % (a.csv, ", ".join(sorted(need - set(rows[0])))))
    latest = {}
    for r in rows:
        latest[(r["framework"], r["variant"], int(r["side"]), r["gpu_memory_limit_gib"])] = r
    sides = sorted({k[2] for k in latest})
    caps = sorted({k[3] for k in latest if k[0] == "pdnn" and k[1] == "capped"}, key=num)
    # One cap a side (the one-command table, runners/memory.sh PARTS=table): one column, the
    # cap in each cell; several caps a side: a column per cap.
    one_cap = all(len({k[3] for k in latest if k[0] == "pdnn" and k[1] == "capped" and k[2] == s}) <= 1
                  for s in sides)
    if one_cap and caps:
        for k in [k for k in latest if k[0] == "pdnn" and k[1] == "capped"]:
            latest[(k[0], k[1], k[2], "any")] = latest[k]
        pdnn_caps = ["any"]
    else:
        pdnn_caps = caps
    cols = [("pdnn", "plain", "")] + [("pdnn", "capped", c) for c in pdnn_caps] + \
           [("pytorch", v, "") for v in ("plain", "save_on_cpu", "checkpoint")]

    def title(c):
        if c[0] == "pdnn":
            if c[1] == "plain":
                return "pdnn uncapped"
            return "pdnn under the side's cap" if c[2] == "any" else "pdnn %.0fG" % num(c[2])
        return "PyTorch " + c[1]

    # Steady-state steps. pdnn: the median of its blocks of 10 after the first (which times the
    # convolution algorithms and captures the graph); rows of runs before the app left that
    # block out by itself have steps=2, and their faster block is the steady one. PyTorch: the
    # median step after its 2 warm-up steps (cuDNN's autotuner).
    def step_ms(r):
        if r["framework"] == "pdnn" and r.get("steps") == "2" and num(r.get("min_ms")):
            return num(r["min_ms"])
        return num(r["median_ms"])

    def cell(r):
        if r is None:
            return "-"
        if not r["status"].startswith("ok"):
            return r["status"]
        s = "%.2f GiB, %.0f ms" % (num(r["peak_gib"]) or 0, step_ms(r) or 0)
        if r["variant"] == "capped" and num(r.get("gpu_memory_limit_gib")):
            s = "under %.0fG: " % num(r["gpu_memory_limit_gib"]) + s
        if r.get("plan"):
            s += " (%s)" % r["plan"]
        return s

    out = ["| side | " + " | ".join(title(c) for c in cols) + " |",
           "|---|" + "---|" * len(cols)]
    for side in sides:
        out.append("| %d | " % side + " | ".join(cell(latest.get((c[0], c[1], side, c[2]))) for c in cols) + " |")
    out.append("")
    out.append("Largest side that trained:")
    out.append("")
    for c in cols:
        ok = [s for s in sides if (r := latest.get((c[0], c[1], s, c[2]))) and r["status"].startswith("ok")]
        out.append("- %s: %s" % (title(c), ("%d" % max(ok)) if ok else "none"))
    out.append("")
    out.append("pdnn's step against its uncapped step and PyTorch's checkpoint step, same side:")
    out.append("")
    for side in sides:
        base = latest.get(("pdnn", "plain", side, ""))
        ck = latest.get(("pytorch", "checkpoint", side, ""))
        for cap in [c for c in caps if c != "any"]:
            r = latest.get(("pdnn", "capped", side, cap))
            if not r or not r["status"].startswith("ok"):
                continue
            t = step_ms(r)
            parts = []
            if base and base["status"].startswith("ok") and step_ms(base):
                parts.append("%.2fx uncapped" % (t / step_ms(base)))
            if ck and ck["status"].startswith("ok") and step_ms(ck):
                parts.append("%.2fx PyTorch checkpoint" % (t / step_ms(ck)))
            out.append("- %d under %.0fG: %.0f ms%s" % (side, num(cap), t,
                                                        (": " + ", ".join(parts)) if parts else ""))
    text = "\n".join(out) + "\n"
    dest = a.out or os.path.join(os.path.dirname(a.csv) or ".", "memory_table.md")
    tmp = dest + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, dest)
    print(text, end="")
    print("written to %s" % dest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
