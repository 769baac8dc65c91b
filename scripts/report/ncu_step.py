#!/usr/bin/env python3
"""A training step kernel by kernel, from Nsight Compute's CSV (runners/ncu-step.sh).

ncu --csv --metrics gpu__time_duration.sum over a run of identical steps lists every kernel
launch with its time alone. The step is the sequence that repeats: its length is the smallest
period P whose last P launches name the same kernels in the same order as the launches before
them (CUDA graph replays do; profile 1.5 steps or more). This prints the last whole step's kernels grouped by name (microseconds at ncu's clocks,
launches), or two steps side by side.

  ncu_step.py summary STEP.csv[.gz] [--top N]
  ncu_step.py compare BEFORE.csv[.gz] AFTER.csv[.gz]
"""
import argparse
import collections
import csv
import gzip
import re
import sys


def read_launches(path):
    """[(kernel name, grid, microseconds)] in launch order."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        lines = f.read().splitlines()
    head = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if head is None:
        sys.exit(f"ncu_step: {path}: no ncu CSV table (a line starting with \"ID\")")
    out = []
    for r in csv.DictReader(lines[head:]):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        scale = {"ns": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}.get(
            r.get("Metric Unit", "ns"), None)
        if scale is None:
            sys.exit(f"ncu_step: {path}: unknown unit {r.get('Metric Unit')!r}")
        out.append((r["Kernel Name"], r["Grid Size"], float(r["Metric Value"].replace(",", "")) * scale))
    if not out:
        sys.exit(f"ncu_step: {path}: no gpu__time_duration.sum rows")
    return out


def last_step(launches, min_period=8):
    """The last whole repetition of the launches' period (see the module's docstring): the
    smallest P whose last P launches repeat, in order, the ones before them (all of them, or
    the P before them when there are more; at least P / 2 compared)."""
    names = [k[0] for k in launches]
    n = len(names)
    for p in range(min_period, 2 * n // 3 + 1):
        m = min(p, n - p)
        if m * 2 >= p and names[n - p - m:n - p] == names[n - m:]:
            return launches[n - p:]
    sys.exit(f"ncu_step: no step repeats in the last {n} launches: profile one and a half steps "
             "or more (--launch-count)")


def short(name):
    name = name.replace("void ", "")
    name = re.sub(r"cuda::<unnamed>::|pdnn::|kit::<unnamed>::|\(anonymous namespace\)::", "", name)
    return re.sub(r"[<(].*", "", name)


def by_kernel(step):
    us, count = collections.Counter(), collections.Counter()
    for name, _, t in step:
        us[short(name)] += t
        count[short(name)] += 1
    return us, count


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list").add_argument("csv")
    s = sub.add_parser("summary")
    s.add_argument("csv")
    s.add_argument("--top", type=int, default=40)
    c = sub.add_parser("compare")
    c.add_argument("before")
    c.add_argument("after")
    args = ap.parse_args()
    if args.cmd == "list":
        step = last_step(read_launches(args.csv))
        for name, grid, t in step:
            print(f"{t:9.1f} us  {grid:16s} {name[:96]}")
        print(f"total {sum(t for _, _, t in step):.1f} us over {len(step)} kernels (one step)")
    elif args.cmd == "summary":
        step = last_step(read_launches(args.csv))
        us, count = by_kernel(step)
        print(f"one step: {len(step)} kernels, {sum(us.values()):.1f} us (each timed alone, at "
              "ncu's clocks)")
        for name, t in us.most_common(args.top):
            print(f"{t:9.1f} us {count[name]:4d}  {name}")
    else:
        a, b = (last_step(read_launches(p)) for p in (args.before, args.after))
        ua, ca = by_kernel(a)
        ub, cb = by_kernel(b)
        print(f"one step: {sum(ua.values()):.1f} us ({len(a)} kernels) -> "
              f"{sum(ub.values()):.1f} us ({len(b)})")
        for name in sorted(set(ua) | set(ub), key=lambda x: -(ua[x] + ub[x])):
            print(f"{ua[name]:9.1f} ({ca[name]:3d}) -> {ub[name]:9.1f} ({cb[name]:3d})  {name}")


if __name__ == "__main__":
    main()
