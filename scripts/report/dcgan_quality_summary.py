#!/usr/bin/python3
"""The table of the DCGAN quality comparison over seeds (scripts/study/dcgan_quality_photos.sh): from
build/bin/gan_score's rows (one or more quality_<dataset>.csv files), whose sample sets are named
<framework>[-<precision>]-s<seed>-e<epoch> (pdnn-s1-e050, torch-s2-e300, pdnn-bf16-s1-e300, ...;
no precision: fp32), per framework, precision and epoch: the seeds, the mean, standard deviation
(over seeds, n - 1), min and max of the Inception-score and FID analogues, the mean class
entropy and confidence; per epoch pdnn's mean FID over PyTorch's at the same precision (the
target: at most 1.10 at epoch 300, the study's length; a shorter run, such as the CPU's smoke
run of 2 epochs, says it is one and gives no verdict), and for another precision its mean FID
over the same framework's fp32 (issue 32: pdnn bf16 within 10% of fp32, verdict alike); and the
real held-out images (the ceiling; their FID is the training half against the test half). A
set scored twice counts once (its last row). Writes --out (replaced, atomically) and prints
the table.

  scripts/report/dcgan_quality_summary.py runs/dcgan/quality_caltech101-6.csv [more.csv ...] \\
      --out runs/dcgan/quality_caltech101-6_summary.csv
"""
import argparse
import csv
import math
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from results_csv import git_rev, utc_now, write_rows  # noqa: E402

SET = re.compile(r"^(pdnn|torch)(-(?:fp32|tf32|bf16))?-s(\d+)-e(\d+)$")
COLUMNS = ["dataset", "framework", "epoch", "seeds", "is_mean", "is_std", "is_min", "is_max",
           "fid_mean", "fid_std", "fid_min", "fid_max", "entropy_mean", "confidence_mean",
           "fid_ratio_pdnn_torch", "fid_ratio_to_fp32", "judge", "git_rev", "timestamp"]
TARGET = 1.10
TARGET_EPOCH = 300  # the study's length: the target speaks of samples after 300 epochs
TARGET_SEEDS = 3


def spread(values):
    """mean, std (n - 1; 0 for one value), min, max."""
    m = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return m, sd, min(values), max(values)


def verdict_line(epoch, seeds, ratio, what="pdnn's FID analogue is", base="PyTorch's"):
    """The FID ratio at the last epoch, with a verdict only for a run as long as the study's: a
    shorter one (the CPU's smoke run: 2 epochs of 128 images, grey samples) means nothing."""
    head = f"epoch {epoch}: {what} {ratio:.3f}x {base}"
    if epoch < TARGET_EPOCH:
        return (f"{head} (a smoke run, {epoch} epoch(s) of {TARGET_EPOCH}: too short for the "
                f"target <= {TARGET:.2f}, which is for epoch {TARGET_EPOCH}; no verdict)")
    verdict = "met" if ratio <= TARGET else "missed"
    note = "" if seeds >= TARGET_SEEDS else f"; {seeds} seed(s) of the study's {TARGET_SEEDS}"
    return f"{head} (target <= {TARGET:.2f}: {verdict}{note})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("quality", nargs="+", help="gan_score CSV files")
    ap.add_argument("--out", required=True, help="the summary CSV to write")
    a = ap.parse_args()
    runs, ceiling, judge, dataset = {}, None, set(), set()
    for path in a.quality:
        if not os.path.exists(path):
            sys.exit(f"dcgan_quality_summary: {path}: no such file")
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                for k in ("set", "inception_score", "fid", "class_entropy", "mean_confidence",
                          "dataset", "classifier"):
                    if k not in r:
                        sys.exit(f"dcgan_quality_summary: {path}: no column {k} (not gan_score's)")
                dataset.add(r["dataset"])
                judge.add(r["classifier"])
                m = SET.match(r["set"])
                if m:  # the framework's label: pdnn, pdnn-bf16, ... (fp32 unnamed)
                    fw = m.group(1) + ("" if m.group(2) in (None, "-fp32") else m.group(2))
                    runs[(fw, int(m.group(4)), int(m.group(3)))] = r
                elif r["set"] == "real-heldout":
                    ceiling = r
    if len(dataset) > 1 or len(judge) > 1:
        sys.exit(f"dcgan_quality_summary: rows of several data sets or judges: {sorted(dataset)}, "
                 f"{sorted(judge)}")
    if not runs:
        sys.exit("dcgan_quality_summary: no <framework>-s<seed>-e<epoch> rows in " + ", ".join(a.quality))
    ds, jg = dataset.pop(), judge.pop()
    rev, now = git_rev(), utc_now()
    rows, fid_mean = [], {}
    for fw, ep in sorted({(k[0], k[1]) for k in runs}, key=lambda x: (x[1], x[0])):
        rs = [runs[k] for k in sorted(runs) if k[0] == fw and k[1] == ep]
        seeds = " ".join(str(k[2]) for k in sorted(runs) if k[0] == fw and k[1] == ep)
        is_ = spread([float(r["inception_score"]) for r in rs])
        fid = spread([float(r["fid"]) for r in rs])
        fid_mean[(fw, ep)] = fid[0]
        rows.append([ds, fw, ep, seeds] + [f"{v:.4f}" for v in is_ + fid] + [
            f"{statistics.fmean(float(r['class_entropy']) for r in rs):.4f}",
            f"{statistics.fmean(float(r['mean_confidence']) for r in rs):.4f}", "", ""])
    for r in rows:
        fw, prec = (r[1].split("-", 1) + [""])[:2]
        torch = ("torch" + r[1][len(fw):], r[2])  # PyTorch at the same precision and epoch
        if fw == "pdnn" and fid_mean.get(torch, 0) > 0:
            r[14] = f"{fid_mean[(r[1], r[2])] / fid_mean[torch]:.4f}"
        if prec and fid_mean.get((fw, r[2]), 0) > 0:  # against the framework's fp32
            r[15] = f"{fid_mean[(r[1], r[2])] / fid_mean[(fw, r[2])]:.4f}"
    if ceiling:
        rows.append([ds, "real-test", "", "", ceiling["inception_score"], "", "", "",
                     ceiling["fid"], "", "", "", ceiling["class_entropy"],
                     ceiling["mean_confidence"], "", ""])
    for r in rows:
        r += [jg, rev, now]
    write_rows(a.out, COLUMNS, rows, append=False)
    print(f"{'framework':10s} {'epoch':>5s} {'seeds':>7s} {'IS mean +- std':>16s} "
          f"{'FID mean +- std':>17s} {'FID min..max':>15s} {'pdnn/torch':>10s} {'/fp32':>7s}")
    for r in rows:
        is_txt = f"{float(r[4]):.3f} +- {float(r[5]):.3f}" if r[5] else f"{float(r[4]):.3f}"
        fid_txt = f"{float(r[8]):.2f} +- {float(r[9]):.2f}" if r[9] else f"{float(r[8]):.2f}"
        rng = f"{float(r[10]):.2f}..{float(r[11]):.2f}" if r[10] else ""
        print(f"{r[1]:10s} {str(r[2]):>5s} {r[3]:>7s} {is_txt:>16s} {fid_txt:>17s} {rng:>15s} "
              f"{r[14]:>10s} {r[15]:>7s}")
    last = max(k[1] for k in runs)
    for fw in sorted({k[0] for k in runs if k[0].startswith("pdnn")}):
        seeds = len({k[2] for k in runs if k[0] == fw and k[1] == last})
        row = next((r for r in rows if r[1] == fw and r[2] == last), None)
        if row and row[14]:  # the ratio itself, not its rounded cell
            torch = fid_mean[("torch" + fw[4:], last)]
            what = "pdnn's FID analogue is" if fw == "pdnn" else f"{fw}'s FID analogue is"
            print(verdict_line(last, seeds, fid_mean[(fw, last)] / torch, what,
                               f"PyTorch{fw[4:]}'s"))
        if row and row[15]:
            print(verdict_line(last, seeds, fid_mean[(fw, last)] / fid_mean[("pdnn", last)],
                               f"{fw}'s FID analogue is", "pdnn fp32's"))
    print(f"summary written to {a.out}")
    return 0 if all(math.isfinite(float(r[8])) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
