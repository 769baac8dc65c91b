#!/usr/bin/python3
"""Summarises accuracy runs: a final-epoch test score per framework and workload.

  accuracy_summary.py [FOLDER] [--columns test_acc,...]

Reads every CSV in FOLDER (rows per epoch, DESIGN.md columns; one file per framework, workload
and seed, as scripts/study/accuracy_mnist.sh and scripts/gpu/runners/accuracy.sh write them), takes each
file's last epoch, and writes FOLDER/summary.csv with mean and sample std over seeds per
framework and device, the difference pdnn - PyTorch in points (pdnn on PyTorch's device when it
ran there, else on the CPU), and for pdnn trained on both, GPU - CPU. Prints the same as a
table, and each framework's median seconds per epoch. --columns: the scores (fractions, shown in percent) to summarise, each in its own table
and file (default test_acc, into summary.csv; another column C into summary_C.csv: the
segmentation runs' test_dice_person and test_mean_dice, scripts/gpu/runners/segment.sh).
"""
import argparse
import csv
import glob
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from results_csv import write_rows  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", nargs="?", default="runs/mnist/accuracy")
    ap.add_argument("--columns", default="test_acc",
                    help="comma list of the score columns to summarise (default test_acc)")
    args = ap.parse_args()
    for column in args.columns.split(","):
        summarise(args.folder, column)


def summarise(folder, column):
    finals = {}  # (model, dataset, batch, epochs) -> app -> list of (score, device, file)
    seconds = {}  # (app, device) -> every epoch's seconds
    for path in sorted(glob.glob(os.path.join(folder, "*.csv"))):
        if os.path.basename(path).startswith("summary"):
            continue
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        if not rows or column not in rows[0]:
            continue
        last = rows[-1]
        if "seconds" in last:
            seconds.setdefault((last["app"], last["device"]), []).extend(
                float(r["seconds"]) for r in rows)
        key = (last["model"], last["dataset"], last["batch"], last["epoch"])
        finals.setdefault(key, {}).setdefault((last["app"], last["device"]), []).append(
            (float(last[column]), last["device"], os.path.basename(path)))
    if not finals:
        sys.exit(f"accuracy_summary: no run CSV files with a {column} column in {folder}")
    out_rows = []
    for (model, dataset, batch, epochs), apps in sorted(finals.items()):
        means = {}
        for (app, device), runs in sorted(apps.items()):
            accs = [100.0 * a for a, _, _ in runs]
            mean = statistics.mean(accs)
            std = statistics.stdev(accs) if len(accs) > 1 else 0.0
            means[(app, device)] = mean
            note = ""
            if app == "pdnn" and device == "cuda" and ("pdnn", "cpu") in means:
                note = f"gpu-cpu {mean - means[('pdnn', 'cpu')]:+.2f}"
            if app == "torch":  # against pdnn on the same device, else pdnn on the CPU
                pd = means.get(("pdnn", device), means.get(("pdnn", "cpu")))
                if pd is not None:
                    note = f"pdnn-torch {pd - mean:+.2f}"
            out_rows.append([model, dataset, batch, epochs, app, device, len(accs),
                             f"{mean:.2f}", f"{std:.2f}", " ".join(f"{a:.2f}" for a in accs),
                             note])
    header = ["model", "dataset", "batch", "epochs", "app", "device", "seeds",
              f"mean_{column}_pct", "std_pct", "per_seed_pct", "difference_pts"]
    out = os.path.join(folder, "summary.csv" if column == "test_acc" else f"summary_{column}.csv")
    write_rows(out, header, out_rows, append=False)
    fmt = "{:<11} {:<20} {:>5} {:>6} {:<6} {:<6} {:>5} {:>9} {:>6}  {:<22} {:>16}"
    print(f"{column} (final epoch, percent):")
    print(fmt.format("model", "dataset", "batch", "epochs", "app", "device", "seeds", "mean %",
                     "std", "per seed", "diff"))
    for r in out_rows:
        print(fmt.format(*r))
    for (app, device), secs in sorted(seconds.items()):
        print(f"{app} ({device}): {statistics.median(secs):.2f} s per epoch (median over "
              f"{len(secs)} epochs)")
    print(f"summary written to {out}")


if __name__ == "__main__":
    main()
