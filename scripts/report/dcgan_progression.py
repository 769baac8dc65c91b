#!/usr/bin/python3
"""One PNG of a DCGAN run's progress: its fixed-noise sample grids (epoch_NNN.png, written by
build/bin/dcgan and scripts/twins/torch_reference.py dcgan) at chosen epochs side by side, one row per
run, so pdnn and its PyTorch twin (same weights, data order and noise) sit one above the other.

  scripts/report/dcgan_progression.py --run pdnn=runs/dcgan/samples/caltech101-6 \\
      [--run torch=runs/dcgan/samples/torch_caltech101-6] [--epochs 1,10,50,150,300] \\
      --out runs/dcgan/progression_caltech101-6.png [--title TEXT]

Of the chosen epochs, those a run has a grid for are drawn, and the run's last grid is always
added (a short run shows how far it got). The file is written atomically (temporary name, then
renamed); an --out this script did not write before (not a PNG) is refused.
"""
import argparse
import os
import re
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.image as mpimg  # noqa: E402  (after the backend is chosen)
import matplotlib.pyplot as plt  # noqa: E402

GRID = re.compile(r"^epoch_(\d+)\.png$")


def grids(folder):
    """{epoch: path} of the epoch_NNN.png files in folder."""
    out = {}
    for f in os.listdir(folder):
        m = GRID.match(f)
        if m:
            out[int(m.group(1))] = os.path.join(folder, f)
    return out


def write_png(fig, path, dpi):
    """fig laid out and written to path atomically (a temporary name, then renamed), closed."""
    fig.tight_layout()
    if os.path.dirname(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=dpi)
    plt.close(fig)
    os.replace(tmp, path)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="append", required=True, metavar="LABEL=FOLDER",
                    help="a folder of epoch_NNN.png grids and its row label (repeatable)")
    ap.add_argument("--epochs", default="1,10,50,150,300",
                    help="comma list of epochs to show (default 1,10,50,150,300)")
    ap.add_argument("--out", required=True, help="the PNG to write")
    ap.add_argument("--title", default="", help="figure title")
    a = ap.parse_args()
    try:
        a.epochs = sorted({int(e) for e in a.epochs.split(",") if e.strip()})
    except ValueError:
        sys.exit("dcgan_progression: --epochs %s: not a comma list of whole numbers" % a.epochs)
    if not a.epochs or a.epochs[0] < 1:
        sys.exit("dcgan_progression: --epochs %s: epochs count from 1" % ",".join(map(str, a.epochs)))
    runs = []
    for r in a.run:
        label, sep, folder = r.partition("=")
        if not sep or not label or not folder:
            sys.exit("dcgan_progression: --run %s: expected LABEL=FOLDER" % r)
        if not os.path.isdir(folder):
            sys.exit("dcgan_progression: --run %s: no folder %s" % (r, folder))
        g = grids(folder)
        if not g:
            sys.exit("dcgan_progression: --run %s: no epoch_NNN.png in %s" % (r, folder))
        runs.append((label, g))
    if os.path.exists(a.out) and not a.out.lower().endswith(".png"):
        sys.exit("dcgan_progression: --out %s exists and is not a PNG: not overwritten" % a.out)
    a.runs = runs
    return a


def main():
    a = parse_args()
    rows = []
    for label, g in a.runs:
        shown = [e for e in a.epochs if e in g]
        if max(g) not in shown:
            shown.append(max(g))
        rows.append((label, [(e, g[e]) for e in shown]))
    cols = max(len(r[1]) for r in rows)
    fig, axes = plt.subplots(len(rows), cols, figsize=(2.6 * cols, 2.8 * len(rows) + 0.4),
                             squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for i, (label, shown) in enumerate(rows):
        for j, (epoch, path) in enumerate(shown):
            ax = axes[i][j]
            ax.imshow(mpimg.imread(path), interpolation="nearest")
            ax.set_title("%s, epoch %d" % (label, epoch), fontsize=9)
    if a.title:
        # Wrapped to the figure's width (about 30 characters per column at this size).
        fig.suptitle(textwrap.fill(a.title, max(30, 30 * cols)), fontsize=10)
    write_png(fig, a.out, 150)
    print("dcgan_progression: wrote %s (%s)" % (a.out, "; ".join(
        "%s epochs %s" % (label, ",".join(str(e) for e, _ in shown)) for label, shown in rows)))


if __name__ == "__main__":
    main()
