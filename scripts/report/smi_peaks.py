#!/usr/bin/env python3
"""The GPU's memory as nvidia-smi saw it, per process, beside a runner's phases.

Reads `nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader,nounits -lms 100`
samples of the whole device (every process's CUDA context, cuDNN's handle and kernels, what its
allocator holds and any allocation outside it; the timestamps read as UTC, the lent hosts'
clock) and a marks file of "<unix seconds> <phase>" lines, and prints each stretch of samples
above `--idle` MiB (one process, as the runners run them one after another) with the phase it
began in, its span and its largest sample. Used to check that a run under --gpu-memory-limit
stays under it as the device counts it (results/scale/unet-study-h200).

  scripts/report/smi_peaks.py smi_mem.csv marks.txt
"""
import argparse
import datetime
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("samples")
    ap.add_argument("marks")
    ap.add_argument("--idle", type=int, default=100, help="MiB at or under which the GPU is idle")
    a = ap.parse_args()
    rows = []
    with open(a.samples) as f:
        for n, line in enumerate(f, 1):
            parts = [p.strip() for p in line.split(",")]
            if len(parts) != 2:
                continue
            try:
                t = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f")
                rows.append((t.replace(tzinfo=datetime.timezone.utc).timestamp(), int(parts[1])))
            except ValueError:
                sys.exit(f"{a.samples}:{n}: not a 'timestamp, MiB' sample: {line.strip()!r}")
    marks = []
    with open(a.marks) as f:
        for n, line in enumerate(f, 1):
            t, _, name = line.strip().partition(" ")
            try:
                marks.append((float(t), name))
            except ValueError:
                sys.exit(f"{a.marks}:{n}: not '<unix seconds> <phase>': {line.strip()!r}")
    if not rows or not marks:
        sys.exit(f"{a.samples if not rows else a.marks}: no samples")
    t0 = marks[0][0]
    spans, cur = [], None
    for t, mib in rows:
        if mib > a.idle:
            cur = [t, t, mib] if cur is None else [cur[0], t, max(cur[2], mib)]
        elif cur:
            spans.append(cur)
            cur = None
    if cur:
        spans.append(cur)
    print(f"{'phase':24s} {'from s':>8s} {'to s':>8s} {'max MiB':>9s} {'max GiB':>8s}")
    for s in spans:
        phase = ""
        for mt, name in marks:
            if s[0] >= mt:
                phase = name
        print(f"{phase:24s} {s[0] - t0:8.1f} {s[1] - t0:8.1f} {s[2]:9d} {s[2] / 1024:8.3f}")


if __name__ == "__main__":
    main()
