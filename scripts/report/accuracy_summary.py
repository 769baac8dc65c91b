#!/usr/bin/python3
"""Summarises accuracy runs: final-epoch test accuracy per framework and workload.

Reads every CSV in FOLDER (rows per epoch, DESIGN.md columns; one file per framework, workload
and seed, as scripts/study/accuracy_mnist.sh and scripts/gpu/runners/accuracy.sh write them), takes each
file's last epoch, and writes FOLDER/summary.csv with mean and sample std over seeds per
framework and device, the difference pdnn - PyTorch in points (pdnn on PyTorch's device when it
ran there, else on the CPU), and for pdnn trained on both, GPU - CPU. Prints the same as a
table.
"""
import csv
import glob
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from results_csv import write_rows  # noqa: E402


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else "runs/mnist/accuracy"
    finals = {}  # (model, dataset, batch, epochs) -> app -> list of (test_acc, device, file)
    for path in sorted(glob.glob(os.path.join(folder, "*.csv"))):
        if os.path.basename(path) == "summary.csv":
            continue
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        if not rows or "test_acc" not in rows[0]:
            continue
        last = rows[-1]
        key = (last["model"], last["dataset"], last["batch"], last["epoch"])
        finals.setdefault(key, {}).setdefault((last["app"], last["device"]), []).append(
            (float(last["test_acc"]), last["device"], os.path.basename(path)))
    if not finals:
        sys.exit(f"accuracy_summary: no run CSV files in {folder}")
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
              "mean_test_acc_pct", "std_pct", "per_seed_pct", "difference_pts"]
    write_rows(os.path.join(folder, "summary.csv"), header, out_rows, append=False)
    fmt = "{:<6} {:<14} {:>5} {:>6} {:<6} {:<6} {:>5} {:>9} {:>6}  {:<22} {:>16}"
    print(fmt.format("model", "dataset", "batch", "epochs", "app", "device", "seeds", "mean %",
                     "std", "per seed", "diff"))
    for r in out_rows:
        print(fmt.format(*r))
    print(f"summary written to {os.path.join(folder, 'summary.csv')}")


if __name__ == "__main__":
    main()
