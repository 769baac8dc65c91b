#!/usr/bin/python3
"""One PNG of DCGAN training curves over seeds, one colour per run label: the per-epoch mean G
and D losses and D(x), D(G(z)) of the runs' epoch CSVs (build/bin/dcgan --out and
scripts/twins/torch_reference.py dcgan --out), the mean over a label's seeds as a line and their
min..max as a band, so that e.g. pdnn's bf16 runs sit beside its fp32 ones (issue 32).

  scripts/report/dcgan_curves.py --run "pdnn fp32=a_s1.csv,a_s2.csv,a_s3.csv" \\
      --run "pdnn bf16=b_s1.csv,b_s2.csv,b_s3.csv" --out curves.png [--title TEXT]

A label's seeds are drawn up to the last epoch all of them reached. The file is written
atomically (temporary name, then renamed); an --out that exists and is not a PNG is refused.
"""
import argparse
import csv
import os
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

from dcgan_progression import write_png  # noqa: E402  (this folder's)

PANELS = (("train_g_loss", "G loss (BCE)"), ("train_d_loss", "D loss (BCE, real + fake)"),
          ("train_d_x", "D(x), real photos"), ("train_d_g_z", "D(G(z)), generated"))


def read_run(label, path):
    """{epoch: {column: value}} of one run's epoch CSV (a resumed run's later row wins)."""
    if not os.path.isfile(path):
        sys.exit(f"dcgan_curves: --run {label}: no file {path}")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    need = ["epoch"] + [c for c, _ in PANELS]
    if not rows or any(c not in rows[0] for c in need):
        sys.exit(f"dcgan_curves: --run {label}: {path} has no rows with the columns "
                 f"{', '.join(need)} (not a DCGAN epoch CSV)")
    return {int(r["epoch"]): {c: float(r[c]) for c, _ in PANELS} for r in rows}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="append", required=True, metavar="LABEL=CSV[,CSV...]",
                    help="a label and its runs' epoch CSVs, one per seed (repeatable)")
    ap.add_argument("--out", required=True, help="the PNG to write")
    ap.add_argument("--title", default="", help="figure title")
    a = ap.parse_args()
    a.runs = []
    for r in a.run:
        label, sep, files = r.partition("=")
        paths = [p for p in files.split(",") if p]
        if not sep or not label or not paths:
            sys.exit(f"dcgan_curves: --run {r}: expected LABEL=CSV[,CSV...]")
        a.runs.append((label, [read_run(label, p) for p in paths]))
    if os.path.exists(a.out) and not a.out.lower().endswith(".png"):
        sys.exit(f"dcgan_curves: --out {a.out} exists and is not a PNG: not overwritten")
    return a


def main():
    a = parse_args()
    fig, axes = plt.subplots(2, 2, figsize=(12, 7.5), sharex=True)
    notes = []
    for k, (label, seeds) in enumerate(a.runs):
        last = min(max(s) for s in seeds)
        epochs = [e for e in range(1, last + 1) if all(e in s for s in seeds)]
        for ax, (col, what) in zip(axes.flat, PANELS):
            v = [[s[e][col] for s in seeds] for e in epochs]
            ax.plot(epochs, [sum(x) / len(x) for x in v], lw=1.2, color=f"C{k}",
                    label=f"{label} (mean of {len(seeds)})")
            if len(seeds) > 1:
                ax.fill_between(epochs, [min(x) for x in v], [max(x) for x in v],
                                color=f"C{k}", alpha=0.2, lw=0)
            ax.set_title(what, fontsize=10)
        notes.append(f"{label}: {len(seeds)} run(s), epochs 1..{last}")
    for ax in axes.flat:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    for ax in axes[1]:
        ax.set_xlabel("epoch (mean over the epoch's iterations; band: min..max over seeds)")
    for ax in axes[1]:  # the probabilities
        ax.set_ylim(0, 1)
    if a.title:
        fig.suptitle(textwrap.fill(a.title, 120), fontsize=10)
    write_png(fig, a.out, 120)
    print(f"dcgan_curves: wrote {a.out} ({'; '.join(notes)})")


if __name__ == "__main__":
    main()
