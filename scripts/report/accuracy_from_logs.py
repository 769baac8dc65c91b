#!/usr/bin/python3
"""Rebuilds per-epoch accuracy CSVs from the logs of scripts/gpu/runners/caltech.sh's accuracy part
(caltech_{pdnn,torch}_s<seed>.log), for a visit whose CSV files did not come back from the host.
Only what the epoch lines print is kept: epoch, train loss/acc, test loss/acc, seconds (and
pdnn's per-class accuracy); every row says source=log so the files are never mistaken for the
apps' own CSVs.

  scripts/report/accuracy_from_logs.py LOG_DIR OUT_DIR
"""
import csv
import glob
import os
import re
import sys

EPOCH = re.compile(r"^epoch (\d+)/(\d+)  (\S+)  train loss ([\d.]+) acc ([\d.]+)  test loss ([\d.]+) "
                   r"acc ([\d.]+)(.*?)  ([\d.]+) s  (\d+) img/s")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    log_dir, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    logs = sorted(glob.glob(os.path.join(log_dir, "caltech_*_s*.log")))
    if not logs:
        sys.exit(f"accuracy_from_logs: no caltech_*_s*.log in {log_dir}")
    for path in logs:
        app, seed = re.match(r"caltech_(\w+)_s(\d+)\.log", os.path.basename(path)).groups()
        rows, classes = [], []
        for line in open(path):
            m = EPOCH.match(line)
            if not m:
                continue
            per_class = re.findall(r"acc_(\S+) ([\d.]+)", m.group(8))
            classes = [c for c, _ in per_class]
            rows.append([app, "caltech9", m.group(3), "cuda", 64, seed, m.group(1), m.group(4),
                         m.group(5), m.group(6), m.group(7)] + [v for _, v in per_class] +
                        [m.group(9), m.group(10), "log"])
        if not rows:
            sys.exit(f"accuracy_from_logs: {path}: no epoch lines")
        header = ["app", "model", "dataset", "device", "batch", "seed", "epoch", "train_loss",
                  "train_acc", "test_loss", "test_acc"] + [f"acc_{c}" for c in classes] + [
                  "seconds", "images_per_s", "source"]
        out = os.path.join(out_dir, f"{app}-cuda_caltech9_s{seed}.csv")
        tmp = out + ".tmp"
        with open(tmp, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(header)
            w.writerows(rows)
        os.replace(tmp, out)
        print(f"{out}: {len(rows)} epochs, final test acc {rows[-1][10]}")


if __name__ == "__main__":
    main()
