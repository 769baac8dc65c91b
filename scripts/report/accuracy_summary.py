#!/usr/bin/python3
"""Summarises accuracy runs: a final-epoch test score per framework, precision and workload.

  accuracy_summary.py [FOLDER ...] [--columns test_acc,...] [--out-dir DIR]

Reads every CSV in each FOLDER (rows per epoch, DESIGN.md columns; one file per framework,
workload and seed, as scripts/study/accuracy_mnist.sh and the GPU runners write them), takes each
file's last epoch, and writes DIR (default the first FOLDER)/summary.csv with mean and sample std
over seeds per framework, device and precision, and the differences in points: pdnn - PyTorch
(pdnn on PyTorch's device and precision when it ran there, else pdnn fp32 on the CPU), for pdnn
trained on both GPU - CPU, and for a precision other than fp32 its difference to the same
framework's fp32 on the same device. Prints the same as a table, each framework's median seconds
per epoch, and for each precision other than fp32 the differences issue 32 asks for (pdnn P -
pdnn fp32, pdnn P - PyTorch P): of the means, and paired over the seeds both have (a seed is the
same initial weights in both), with their std. --columns: the scores (fractions, shown in
percent) to summarise, each in its own table and file (default test_acc, into summary.csv;
another column C into summary_C.csv: the segmentation runs' test_dice_person and test_mean_dice,
scripts/gpu/runners/segment.sh).

The precision is in the file's name (pdnn's rows have no precision column): <app>-<device>-
<precision>_..., e.g. pdnn-cuda-bf16_caltech9_s1.csv; a name without one is fp32. The seed is the
name's _s<seed>.csv (or a seed column). Several FOLDERs let a new run be summarised beside an
older one (e.g. a bf16 visit beside results/caltech101/accuracy-own-kernels/, fp32); a run of the
same framework, device, precision and seed in two files is refused.
"""
import argparse
import csv
import glob
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from results_csv import PRECISIONS, file_precision, write_rows  # noqa: E402

SEED = re.compile(r"_s(\d+)\.csv$")
TARGET_PTS = 1.0  # issue 32: bf16 within 1 point of fp32 and of PyTorch autocast


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folders", nargs="*", default=["runs/mnist/accuracy"], metavar="FOLDER")
    ap.add_argument("--columns", default="test_acc",
                    help="comma list of the score columns to summarise (default test_acc)")
    ap.add_argument("--out-dir", default="",
                    help="where the summary files go (default the first FOLDER)")
    args = ap.parse_args()
    for f in args.folders:
        if not os.path.isdir(f):
            sys.exit(f"accuracy_summary: {f}: no such folder")
    out_dir = args.out_dir or args.folders[0]
    for column in args.columns.split(","):
        summarise(args.folders, out_dir, column)


def twin_precision(row):
    """The precision a PyTorch twin wrote after '|' in its gpu column ("" if none)."""
    m = re.search(r"\| (" + "|".join(PRECISIONS) + r")\b", row.get("gpu") or "")
    return m.group(1) if m else ""


def read_runs(folders, column):
    """finals: (model, dataset, batch, epochs) -> (app, device, precision) -> {seed: score};
    seconds: (app, device, precision) -> every epoch's seconds; old_twins: files of PyTorch on
    a GPU that do not say their precision (PyTorch's default: cuDNN convolutions in TF32)."""
    finals, seconds, where, old_twins = {}, {}, {}, []
    for folder in folders:
        for path in sorted(glob.glob(os.path.join(folder, "*.csv"))):
            if os.path.basename(path).startswith("summary"):
                continue
            with open(path, newline="") as f:
                rows = list(csv.DictReader(f))
            if not rows or column not in rows[0]:
                continue
            last = rows[-1]
            prec = file_precision(path)
            said = twin_precision(last)
            if said and said != prec:
                sys.exit(f"accuracy_summary: {path}: its name says {prec}, its gpu column "
                         f"{said}: rename the file (<app>-<device>-{said}_...)")
            if last["app"] == "torch" and last["device"] == "cuda" and not said:
                old_twins.append(path)
            series = (last["app"], last["device"], prec)
            if "seconds" in last:
                seconds.setdefault(series, []).extend(float(r["seconds"]) for r in rows)
            m = SEED.search(path)
            seed = m.group(1) if m else last.get("seed") or os.path.basename(path)
            key = (last["model"], last["dataset"], last["batch"], last["epoch"])
            runs = finals.setdefault(key, {}).setdefault(series, {})
            if seed in runs:
                sys.exit(f"accuracy_summary: {' '.join(series)} seed {seed} twice: "
                         f"{where[key + series + (seed,)]} and {path} (summarise one of them)")
            runs[seed] = 100.0 * float(last[column])
            where[key + series + (seed,)] = path
    return finals, seconds, old_twins


def mean_std(values):
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def seed_order(seeds):
    return sorted(seeds, key=lambda s: (0, int(s)) if s.isdigit() else (1, s))


def notes(app, device, prec, means):
    """The difference_pts cell of one series: its differences to the others, in points."""
    out = []
    mean = means[(app, device, prec)]
    if app == "pdnn" and device == "cuda" and prec == "fp32" and ("pdnn", "cpu", "fp32") in means:
        out.append(f"gpu-cpu {mean - means[('pdnn', 'cpu', 'fp32')]:+.2f}")
    if app == "torch":  # against pdnn on the same device and precision, else pdnn fp32 on the CPU
        pd = means.get(("pdnn", device, prec))
        if pd is None and prec == "fp32":
            pd = means.get(("pdnn", "cpu", "fp32"))
        if pd is not None:
            out.append(f"pdnn-torch {pd - mean:+.2f}")
    if prec != "fp32" and (app, device, "fp32") in means:
        out.append(f"{prec}-fp32 {mean - means[(app, device, 'fp32')]:+.2f}")
    return "; ".join(out)


def difference_line(label, a, b):
    """'label: ...' for two series' {seed: score}: difference of the means, and paired over the
    seeds both have, with the verdict against issue 32's 1 point."""
    ma, sa = mean_std(list(a.values()))
    mb, sb = mean_std(list(b.values()))
    d = ma - mb
    text = (f"{label}: {d:+.2f} points (means {ma:.2f} +- {sa:.2f} over seeds "
            f"{' '.join(seed_order(a))}, {mb:.2f} +- {sb:.2f} over {' '.join(seed_order(b))})")
    both = [s for s in seed_order(a) if s in b]
    if both:
        per = [a[s] - b[s] for s in both]
        pm, ps = mean_std(per)
        text += (f"; paired over seeds {' '.join(both)}: {pm:+.2f} +- {ps:.2f} (" +
                 " ".join(f"{v:+.2f}" for v in per) + ")")
    verdict = "met" if abs(d) <= TARGET_PTS else "missed"
    return text + f"; target |difference| <= {TARGET_PTS:.0f}: {verdict}"


def summarise(folders, out_dir, column):
    finals, seconds, old_twins = read_runs(folders, column)
    if not finals:
        sys.exit(f"accuracy_summary: no run CSV files with a {column} column in "
                 f"{', '.join(folders)}")
    out_rows, lines = [], []
    for (model, dataset, batch, epochs), apps in sorted(finals.items()):
        means = {s: mean_std(list(runs.values()))[0] for s, runs in apps.items()}
        for (app, device, prec), runs in sorted(apps.items()):
            mean, std = mean_std(list(runs.values()))
            order = seed_order(runs)
            out_rows.append([model, dataset, batch, epochs, app, device, prec, len(runs),
                             f"{mean:.2f}", f"{std:.2f}", " ".join(f"{runs[s]:.2f}" for s in order),
                             notes(app, device, prec, means)])
        for (app, device, prec), runs in sorted(apps.items()):
            if app != "pdnn" or prec == "fp32":
                continue
            head = f"{model} on {dataset}, {epochs} epochs, {device}: pdnn {prec}"
            if (app, device, "fp32") in apps:
                lines.append(difference_line(f"{head} - pdnn fp32", runs,
                                             apps[(app, device, "fp32")]))
            if ("torch", device, prec) in apps:
                lines.append(difference_line(f"{head} - PyTorch {prec}", runs,
                                             apps[("torch", device, prec)]))
    header = ["model", "dataset", "batch", "epochs", "app", "device", "precision", "seeds",
              f"mean_{column}_pct", "std_pct", "per_seed_pct", "difference_pts"]
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, "summary.csv" if column == "test_acc" else f"summary_{column}.csv")
    write_rows(out, header, out_rows, append=False)
    fmt = "{:<11} {:<20} {:>5} {:>6} {:<6} {:<6} {:<5} {:>5} {:>9} {:>6}  {:<22} {}"
    print(f"{column} (final epoch, percent):")
    print(fmt.format("model", "dataset", "batch", "epochs", "app", "device", "prec", "seeds",
                     "mean %", "std", "per seed", "diff"))
    for r in out_rows:
        print(fmt.format(*r))
    for line in lines:
        print(line)
    if old_twins:
        print(f"note: PyTorch on the GPU without a precision in its gpu column (the twin's mnist "
              f"mode, or caltech before its --precision) ran PyTorch's default, cuDNN "
              f"convolutions in TF32 and matmuls in fp32, not fp32: {', '.join(old_twins)}")
    for (app, device, prec), secs in sorted(seconds.items()):
        print(f"{app} ({device}, {prec}): {statistics.median(secs):.2f} s per epoch (median "
              f"over {len(secs)} epochs)")
    print(f"summary written to {out}")


if __name__ == "__main__":
    main()
