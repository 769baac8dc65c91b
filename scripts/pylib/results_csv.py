#!/usr/bin/python3
"""Results CSV files as pdnn's CsvWriter writes them, for the scripts: rows are appended by
rewriting the whole file under a temporary name in the same folder and renaming it (a crash
never leaves a half-written file), after checking that an existing file has the same header.

As a module: write_rows(path, header, rows, append=True), git_rev(), utc_now(),
file_precision(path).
As a command (for shell scripts): results_csv.py append FILE HEADER < rows
  HEADER is the comma-separated header; standard input holds the rows, one per line, already
  comma-separated.
"""
import csv
import datetime
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class HeaderMismatch(Exception):
    pass


# The columns of results/scale/*.csv: PyTorch's rows (twins/torch_ddp_bench.py) and pdnn's
# (report/scale_rows.py) side by side. allreduce_ms / exposed_ms: pdnn on the CPU only (its
# "all-reduce per step" line): the time rank 0 spent in the gradient all-reduce per step, and
# the part of it backward did not hide.
SCALE_COLUMNS = ["app", "workload", "model", "device", "gpu", "ranks", "threads_per_rank",
                 "global_batch", "mode", "steps", "median_ms", "min_ms", "max_ms",
                 "images_per_s", "allreduce_ms", "exposed_ms", "versions", "git_rev", "host",
                 "timestamp"]


def write_rows(path, header, rows, append=True):
    """Writes header + (existing rows when append) + rows to path, atomically."""
    header = list(header)
    old = []
    if append and os.path.exists(path):
        with open(path, newline="") as f:
            existing = list(csv.reader(f))
        if existing and existing[0] != header:
            raise HeaderMismatch("%s has header %s, this run writes %s (move the file away)"
                                 % (path, ",".join(existing[0]), ",".join(header)))
        old = existing[1:]
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".%s." % os.path.basename(path))
    try:
        with os.fdopen(fd, "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(header)
            w.writerows(old)
            w.writerows([[str(v) for v in r] for r in rows])
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


# The arithmetic of a GPU run, as pdnn's --precision and the twins' --precision name it.
PRECISIONS = ("fp32", "tf32", "bf16")


def file_precision(path):
    """The precision a run file's name carries: the last '-' part of the name's first '_' part
    (<app>-<device>-<precision>_..., e.g. pdnn-cuda-bf16_caltech9_s1.csv, as the GPU runners
    name them), "fp32" when it is none of PRECISIONS (pdnn-cuda_caltech9_s1.csv): pdnn's epoch
    rows have no precision column, so the name says it."""
    head = os.path.basename(path).split("_", 1)[0].split("-")[-1]
    return head if head in PRECISIONS else "fp32"


def git_rev():
    try:
        return subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty",
                               "--abbrev=10"], capture_output=True, text=True,
                              check=True).stdout.strip() or "unknown"
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def main():
    if len(sys.argv) != 4 or sys.argv[1] != "append":
        sys.exit("usage: results_csv.py append FILE HEADER < rows")
    rows = list(csv.reader(line for line in sys.stdin if line.strip()))
    try:
        write_rows(sys.argv[2], sys.argv[3].split(","), rows)
    except HeaderMismatch as e:
        sys.exit("results_csv: %s" % e)


if __name__ == "__main__":
    main()
