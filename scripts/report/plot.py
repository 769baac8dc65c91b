#!/usr/bin/python3
"""PNG figures from pdnn's results CSV files (run with Debian's /usr/bin/python3: matplotlib).

  scripts/report/plot.py [--results runs] [--out runs/plots] [--verbose]

Finds every *.csv under --results and recognises it by its columns:
  training runs  (epoch, train_loss, test_acc, ...)     -> <name>_curves.png: loss and accuracy per
                 epoch; <name>_cpu_vs_gpu.png when rows with device=cuda exist
  segmentation   (epoch, train_loss, test_mean_iou, ...; the segment app) -> <name>_segmentation.png:
                 loss, and IoU and Dice (mean and per class) per epoch
  thread sweeps  (workload, threads, speedup, ...)      -> <name>.png: speedup and efficiency
  pi benchmark   (app=pi, variant, threads, median_ms)  -> <name>.png: time and speedup
  layer profiles (layer, kind, fwd_ms, bwd_ms, ...)     -> <name>_profile.png: time per layer
  W6 Hebbian     (app, n, steps, us_per_step, floor_us_per_step, ...) -> <name>_leak<a>.png: us per
                 step against n per T, pdnn and numpy, with the bandwidth floor (median of rows)
  W6 drift       (steps, max_abs_dx, max_abs_x_ref, ...) -> <name>.png: relative distance to the
                 float64 CPU run against T
  accuracy runs  (a folder named accuracy/ of training-run CSVs, one per framework and seed)
                 -> accuracy_<model>_<dataset>.png: test accuracy per epoch, pdnn vs PyTorch,
                 each precision its own series (<app>-<device>-<precision>_... file names)
  GAN iterations (iteration, d_loss, g_loss, ...)       -> <name>_losses.png: G and D loss per
                 iteration (the DCGAN paper's figure 2), one line per run (pdnn, PyTorch)
  GAN epochs     (epoch, train_d_loss, train_g_loss, ...) -> <name>_gan.png: losses, D(x), D(G(z))
  data-parallel  (app, workload, ranks, threads_per_rank, images_per_s; results/scale/)
                 -> <name>.png: images/s per ranks x threads or per GPU count, pdnn vs DDP
  all-reduce     (backend, bytes, busbw_gbs; bench_allreduce) -> <name>.png: bus bandwidth
<name> is the CSV's path under --results with '/' as '_' (pi/pi.csv: pi). Other CSV files (tables such
as quality scores or per-pass timings) are counted in one line, and named, as is every kind of
figure whose input is missing, with --verbose. runs/ holds your runs (make plots); results/
the published reference results (make plots REFERENCE=1 draws them into runs/plots/reference/).
"""
import argparse
import csv
import os
import statistics
import sys
from collections import OrderedDict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from results_csv import file_precision  # noqa: E402

DPI = 120


VERBOSE = False  # --verbose: also the CSV files and figures passed over, one line each


def note(message):
    if VERBOSE:
        print(message)


def read_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return rows


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def save(fig, out_dir, name):
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, name + ".png")
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    print("plot: wrote %s" % path)
    return path


def where_ran(row):
    """What a run ran on, for a legend: the GPU's name for a GPU run (its thread count only
    feeds the host side), the thread count for a CPU run."""
    device, threads = row.get("device", ""), row.get("threads", "")
    if device and device != "cpu":
        gpu = (row.get("gpu") or "").split(",")[0].strip()
        return gpu or device
    return "cpu, %s thr" % threads if threads else (device or "?")


def last_per_key(rows, key):
    """The last row for each key (files are appended to: the last row is the newest run)."""
    latest = OrderedDict()
    for r in rows:
        latest[key(r)] = r
    return list(latest.values())


# ---- training curves -------------------------------------------------------------------------

def training_runs(rows):
    """Splits rows into runs: one per (model, dataset, device, threads, batch); within it a new
    run starts where the epoch number does not increase. Returns {label: [rows of last run]}."""
    runs = OrderedDict()
    for r in rows:
        key = tuple(r.get(k, "") for k in ("model", "dataset", "device", "threads", "batch"))
        ep = num(r.get("epoch"))
        if ep is None:
            continue
        if key not in runs or ep <= num(runs[key][-1].get("epoch")):
            runs[key] = []
        runs[key].append(r)
    out = OrderedDict()
    for (model, dataset, device, threads, batch), rs in runs.items():
        label = "%s %s, %s, batch %s" % (model, dataset, where_ran(rs[0]), batch)
        out[label] = rs
    return out


def plot_training(rows, out_dir, name):
    runs = training_runs(rows)
    if not runs:
        note("plot: %s: no rows with an epoch: skipped" % name)
        return []
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(11, 4.2))
    for i, (label, rs) in enumerate(runs.items()):
        color = "C%d" % (i % 10)
        ep = [num(r["epoch"]) for r in rs]
        for ax, col, style, what in ((ax_loss, "train_loss", "--", "train"),
                                     (ax_loss, "test_loss", "-", "test"),
                                     (ax_acc, "train_acc", "--", "train"),
                                     (ax_acc, "test_acc", "-", "test")):
            ys = [num(r.get(col)) for r in rs]
            pts = [(x, y) for x, y in zip(ep, ys) if y is not None]
            if not pts:
                continue
            if col.endswith("acc") and max(y for _, y in pts) <= 1.0:
                pts = [(x, 100.0 * y) for x, y in pts]  # fractions shown as percent
            ax.plot(*zip(*pts), style, marker="o", ms=3, color=color,
                    label="%s (%s)" % (label, what))
    ax_loss.set(title="Loss per epoch", xlabel="epoch", ylabel="cross-entropy loss")
    ax_acc.set(title="Accuracy per epoch", xlabel="epoch", ylabel="accuracy (%)")
    for ax in (ax_loss, ax_acc):
        ax.grid(alpha=0.3)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.legend(fontsize=7)
    fig.suptitle("Training: %s" % name)
    made = [save(fig, out_dir, name + "_curves")]
    made += plot_cpu_vs_gpu(rows, out_dir, name)
    return made


def plot_segmentation(rows, out_dir, name):
    """The segment app's rows: loss (train, test) and the test IoU and Dice per epoch, their
    means thick and each class thin (a class without a score, -1 in the CSV, is left out)."""
    runs = training_runs(rows)
    if not runs:
        note("plot: %s: no rows with an epoch: skipped" % name)
        return []
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    classes = [c[len("test_iou_"):] for c in rows[0] if c.startswith("test_iou_")]
    for i, (label, rs) in enumerate(runs.items()):
        color = "C%d" % (i % 10)
        ep = [num(r["epoch"]) for r in rs]
        for ax, col, style, width, what in (
                [(axes[0], "train_loss", "--", 1.5, "train"), (axes[0], "test_loss", "-", 1.5, "test"),
                 (axes[1], "test_mean_iou", "-", 2.5, "mean"), (axes[2], "test_mean_dice", "-", 2.5, "mean")]
                + [(axes[1], "test_iou_" + c, ":", 1, c) for c in classes]
                + [(axes[2], "test_dice_" + c, ":", 1, c) for c in classes]):
            pts = [(x, num(r.get(col))) for x, r in zip(ep, rs)]
            pts = [(x, y) for x, y in pts if y is not None and y >= 0]
            if pts:
                ax.plot(*zip(*pts), style, lw=width, marker="o", ms=3, color=color,
                        label="%s (%s)" % (label, what))
    axes[0].set(title="Loss per epoch", xlabel="epoch", ylabel="per-pixel cross-entropy")
    axes[1].set(title="Test IoU", xlabel="epoch", ylabel="IoU", ylim=(0, 1))
    axes[2].set(title="Test Dice", xlabel="epoch", ylabel="Dice", ylim=(0, 1))
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.legend(fontsize=6)
    fig.suptitle("Segmentation: %s" % name)
    return [save(fig, out_dir, name + "_segmentation")]


def plot_cpu_vs_gpu(rows, out_dir, name):
    if not any(r.get("device", "").startswith("cuda") for r in rows):
        note("plot: %s: no device=cuda rows: CPU vs GPU figure skipped" % name)
        return []
    # Median seconds per epoch for each (model, batch, device); CPU bars at their thread count.
    groups = OrderedDict()
    for r in rows:
        s = num(r.get("seconds"))
        if s is None:
            continue
        dev = r.get("device", "?")
        if dev == "cpu":
            dev = "cpu, %s thr" % r.get("threads", "?")
        groups.setdefault("%s b%s" % (r.get("model", "?"), r.get("batch", "?")), OrderedDict()) \
            .setdefault(dev, []).append(s)
    devices = list(OrderedDict((d, 0) for g in groups.values() for d in g))
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(groups) * len(devices)), 4.2))
    width = 0.8 / len(devices)
    for j, dev in enumerate(devices):
        xs, ys = [], []
        for i, g in enumerate(groups.values()):
            if dev in g:
                xs.append(i + (j - (len(devices) - 1) / 2) * width)
                ys.append(statistics.median(g[dev]))
        bars = ax.bar(xs, ys, width, label=dev, color="C%d" % j)
        ax.bar_label(bars, fmt="%.2f", fontsize=7)
    ax.set_xticks(range(len(groups)), list(groups))
    ax.set(title="CPU vs GPU: %s" % name, ylabel="seconds per epoch (median)")
    tops = [statistics.median(v) for g in groups.values() for v in g.values()]
    if max(tops) > 30 * min(tops):  # GPU bars would vanish on a linear axis
        ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return [save(fig, out_dir, name + "_cpu_vs_gpu")]


# ---- thread scaling --------------------------------------------------------------------------

def speedup_axes(ax_s, ax_e, series, max_t):
    """series: {label: [(threads, speedup)]}; draws speedup with the ideal line, and efficiency."""
    ts = list(range(1, max_t + 1))
    ax_s.plot(ts, ts, ":", color="gray", label="ideal (linear)")
    ax_e.plot(ts, [1.0] * len(ts), ":", color="gray", label="ideal")
    for i, (label, pts) in enumerate(series.items()):
        pts = sorted(pts)
        x = [t for t, _ in pts]
        ax_s.plot(x, [s for _, s in pts], "-o", color="C%d" % i, label=label)
        ax_e.plot(x, [s / t for t, s in pts], "-o", color="C%d" % i, label=label)
    ax_s.set(title="Speedup vs threads", xlabel="threads", ylabel="speedup (x, vs 1 thread)")
    ax_e.set(title="Parallel efficiency", xlabel="threads", ylabel="speedup / threads",
             ylim=(0, 1.15))
    for ax in (ax_s, ax_e):
        ax.set_xticks(ts)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)


def plot_scaling(rows, out_dir, name):
    rows = last_per_key(rows, lambda r: (r["workload"], r["threads"]))
    series = OrderedDict()
    for r in rows:
        t, s = num(r["threads"]), num(r.get("speedup"))
        if t is not None and s is not None:
            series.setdefault(r["workload"], []).append((int(t), s))
    if not series:
        note("plot: %s: no speedup values: skipped" % name)
        return []
    max_t = max(t for pts in series.values() for t, _ in pts)
    fig, (ax_s, ax_e) = plt.subplots(1, 2, figsize=(11, 4.2))
    speedup_axes(ax_s, ax_e, series, max_t)
    host = rows[-1].get("host", "")
    fig.suptitle("Thread scaling (%s, %s)" % (name, host))
    return [save(fig, out_dir, name)]


def plot_pi(rows, out_dir, name):
    rows = last_per_key(rows, lambda r: (r["variant"], r["n"], r["threads"]))
    n = rows[-1]["n"]
    rows = [r for r in rows if r["n"] == n]  # the newest problem size only
    fig, (ax_t, ax_s, ax_e) = plt.subplots(1, 3, figsize=(15, 4.4))
    variants = list(OrderedDict((r["variant"], 0) for r in rows))
    max_t = max(int(num(r["threads"])) for r in rows)
    series = OrderedDict()
    thread_counts = sorted({int(num(r["threads"])) for r in rows})
    width = 0.8 / len(variants)
    for i, v in enumerate(variants):
        rs = sorted((r for r in rows if r["variant"] == v), key=lambda r: num(r["threads"]))
        t = [int(num(r["threads"])) for r in rs]
        med = [num(r["median_ms"]) for r in rs]
        lo = [m - num(r["min_ms"]) for m, r in zip(med, rs)]
        hi = [num(r["max_ms"]) - m for m, r in zip(med, rs)]
        xs = [thread_counts.index(x) + (i - (len(variants) - 1) / 2) * width for x in t]
        bars = ax_t.bar(xs, med, width, yerr=[lo, hi], capsize=3, color="C%d" % i, label=v)
        ax_t.bar_label(bars, fmt="%.3g", fontsize=7, padding=2)
        sp = [(int(num(r["threads"])), num(r["speedup"])) for r in rs
              if num(r.get("speedup")) is not None]
        if v != "serial" and sp:
            series[v] = sp
    ax_t.set(title="Time (median; whiskers min..max)", xlabel="threads", ylabel="ms per run")
    ax_t.set_xticks(range(len(thread_counts)), [str(t) for t in thread_counts])
    ax_t.grid(axis="y", alpha=0.3)
    ax_t.legend(fontsize=8)
    speedup_axes(ax_s, ax_e, series, max_t)
    fig.suptitle("W1 pi, trapezoidal rule, N = {:,} ({}, {})".format(
                 int(num(n)), rows[-1].get("cpu_model", ""), rows[-1].get("host", "")))
    return [save(fig, out_dir, name)]


# ---- per-layer profile -----------------------------------------------------------------------

def plot_profile(rows, out_dir, name):
    rows = [r for r in rows if r.get("layer")]
    if not rows:
        note("plot: %s: no layer rows: skipped" % name)
        return []
    labels = ["%s (%s) %s" % (r["layer"], r.get("kind", ""), r.get("output_shape", "")) for r in rows]
    parts = [("fwd_ms", "forward"), ("bwd_ms", "backward"), ("update_ms", "update")]
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.38 * len(rows)))
    left = [0.0] * len(rows)
    y = list(range(len(rows)))
    for i, (col, what) in enumerate(parts):
        vals = [num(r.get(col)) or 0.0 for r in rows]
        ax.barh(y, vals, left=left, color="C%d" % i, label=what)
        left = [a + b for a, b in zip(left, vals)]
    for yi, total, r in zip(y, left, rows):
        share = num(r.get("share"))
        text = "%.2f ms" % total + ("" if share is None else
                                    " (%.1f%%)" % (100 * share if share <= 1 else share))
        ax.annotate(text, (total, yi), textcoords="offset points", xytext=(4, -3), fontsize=7)
    ax.set_yticks(y, labels, fontsize=8)
    ax.invert_yaxis()  # first layer on top
    ax.set_xlim(0, max(left) * 1.25 if max(left) > 0 else 1)
    ax.set(title="Time per layer: %s" % name, xlabel="ms per step")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return [save(fig, out_dir, name + "_profile")]


# ---- GAN training (dcgan app, scripts/twins/torch_reference.py dcgan) ------------------------------

def gan_runs(rows, key_cols, step_col):
    """Runs of a GAN CSV: one per key; a new run starts where the step does not increase."""
    runs = OrderedDict()
    for r in rows:
        key = tuple(r.get(k, "") for k in key_cols)
        step = num(r.get(step_col))
        if step is None:
            continue
        if key not in runs or step <= num(runs[key][-1].get(step_col)):
            runs[key] = []
        runs[key].append(r)
    return runs


def plot_gan_iterations(rows, out_dir, name):
    """Generator and discriminator loss per iteration, as the DCGAN paper's figure 2 (and
    PyTorch's tutorial) show them, and below them D(x) and D(G(z)): one column per run."""
    runs = gan_runs(rows, ("app", "model", "dataset", "device", "batch"), "iteration")
    if not runs:
        note("plot: %s: no iteration rows: skipped" % name)
        return []
    fig, axes = plt.subplots(2, len(runs), figsize=(6.5 * len(runs), 7.6), squeeze=False,
                             sharex="col")
    for k, ((app, model, dataset, device, batch), rs) in enumerate(runs.items()):
        ax, ax_p = axes[0][k], axes[1][k]
        it = [num(r["iteration"]) for r in rs]
        ax.plot(it, [num(r["g_loss"]) for r in rs], lw=0.9, color="C1", label="G")
        ax.plot(it, [num(r["d_loss"]) for r in rs], lw=0.9, color="C0", label="D")
        if "d_x" in rs[0] and "d_g_z" in rs[0]:
            ax_p.plot(it, [num(r["d_x"]) for r in rs], lw=0.9, color="C2", label="D(x)")
            ax_p.plot(it, [num(r["d_g_z"]) for r in rs], lw=0.9, color="C3", label="D(G(z))")
        per_epoch = {}
        for r in rs:
            per_epoch[num(r["epoch"])] = num(r["iteration"])
        for e, last in sorted(per_epoch.items())[:-1]:
            for a in (ax, ax_p):
                a.axvline(last + 0.5, color="0.8", lw=0.6)
        ax.set(title="%s %s on %s (%s, batch %s)" % (app, model, dataset, device, batch),
               ylabel="loss")
        ax_p.set(xlabel="iteration (grey lines: epoch ends)", ylabel="mean D output",
                 ylim=(0, 1))
        for a in (ax, ax_p):
            a.grid(alpha=0.3)
            a.legend(fontsize=8)
    fig.suptitle("Generator and discriminator during training: %s" % name, fontsize=10)
    return [save(fig, out_dir, name + "_losses")]


def plot_gan_epochs(rows, out_dir, name):
    """Mean losses and discriminator outputs per epoch. G and D (D(x) and D(G(z))) each keep one
    colour in every run; runs differ by line style and marker."""
    runs = gan_runs(rows, ("app", "model", "dataset", "device", "threads", "batch"), "epoch")
    if not runs:
        note("plot: %s: no epoch rows: skipped" % name)
        return []
    fig, (ax_l, ax_p) = plt.subplots(1, 2, figsize=(11, 4.2))
    styles = [("-", "o"), ("--", "s"), (":", "^"), ("-.", "D")]
    for i, (key, rs) in enumerate(runs.items()):
        ls, mk = styles[i % len(styles)]
        label = "%s %s, %s" % (key[0], key[2], where_ran(rs[0]))
        ep = [num(r["epoch"]) for r in rs]
        for ax, col, color, what in ((ax_l, "train_g_loss", "C1", "G"),
                                     (ax_l, "train_d_loss", "C0", "D"),
                                     (ax_p, "train_d_x", "C2", "D(x)"),
                                     (ax_p, "train_d_g_z", "C3", "D(G(z))")):
            ax.plot(ep, [num(r.get(col)) for r in rs], ls, marker=mk, ms=3, color=color,
                    label="%s: %s" % (what, label))
    ax_l.set(title="Mean loss per epoch (G orange, D blue)", xlabel="epoch", ylabel="BCE loss")
    ax_p.set(title="Mean discriminator output (D(x) green, D(G(z)) red)", xlabel="epoch",
             ylabel="probability", ylim=(0, 1))
    for ax in (ax_l, ax_p):
        ax.grid(alpha=0.3)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.legend(fontsize=7)
    fig.suptitle("DCGAN training: %s" % name)
    return [save(fig, out_dir, name + "_gan")]


# ---- W6 Hebbian reservoir -------------------------------------------------------------------

def plot_hebbian(rows, out_dir, name):
    """us per step against n, a panel per T, a figure per leak; medians over all rows of a point
    (repeated runs and A/B rounds append rows); dashed: pdnn's bandwidth floor at that point."""
    groups = OrderedDict()
    for r in rows:
        us = num(r.get("us_per_step"))
        if us is None:
            continue
        series = (r["app"], r.get("device", ""), r.get("dtype", ""), r.get("threads", ""),
                  r.get("variant", ""))
        key = (num(r.get("leak")) or 0.0, int(num(r["steps"])), series, int(num(r["n"])))
        g = groups.setdefault(key, {"us": [], "floor": [], "stopped": False})
        g["us"].append(us)
        if num(r.get("floor_us_per_step")) is not None:
            g["floor"].append(num(r["floor_us_per_step"]))
        g["stopped"] |= (num(r.get("first_nonfinite_step")) or -1) >= 0
    made = []
    for leak in sorted({k[0] for k in groups}):
        steps = sorted({k[1] for k in groups if k[0] == leak})
        fig, axes = plt.subplots(1, len(steps), figsize=(max(9.0, 5.2 * len(steps)), 4.8),
                                 squeeze=False)
        all_series = list(OrderedDict.fromkeys(k[2] for k in groups if k[0] == leak))
        for ax, t in zip(axes[0], steps):
            for i, series in enumerate(all_series):
                pts = sorted((k[3], g) for k, g in groups.items() if k[:3] == (leak, t, series))
                if not pts:
                    continue
                app, dev, dtype, threads, variant = series
                color = "C%d" % (i % 10)
                label = "%s %s %s%s" % (app, dev, dtype, "" if dev == "cuda" else ", %s thr" % threads)
                if variant not in ("", "fused", "eager"):
                    label += " (%s)" % variant
                ns = [n for n, _ in pts]
                ax.plot(ns, [statistics.median(g["us"]) for _, g in pts], "-o", ms=4, color=color,
                        label=label)
                stop = [(n, statistics.median(g["us"])) for n, g in pts if g["stopped"]]
                if stop:
                    ax.plot(*zip(*stop), "x", ms=10, mew=2, color=color)
                fl = [(n, statistics.median(g["floor"])) for n, g in pts if g["floor"]]
                if fl:  # the marker shows a floor of a single n too
                    ax.plot(*zip(*fl), "--", marker="_", ms=14, mew=2, lw=1, color=color, alpha=0.7)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set(title="T = {:,}".format(t), xlabel="reservoir size n",
                   ylabel="us per step (median)")
            ax.grid(alpha=0.3, which="both")
        handles = OrderedDict()  # every series once, whichever panel has it
        for ax in axes[0]:
            for h, lab in zip(*ax.get_legend_handles_labels()):
                handles.setdefault(lab, h)
        axes[0][0].legend(list(handles.values()), list(handles), fontsize=7)
        what = "W6 as written (not leaky)" if leak == 0 else "leaky, a = %g" % leak
        cpu = next((r.get("cpu_model", "") for r in rows if r.get("cpu_model")), "")
        fig.suptitle("W6 Hebbian reservoir, %s: time per step (%s).\nDashed: bandwidth floor "
                     "(in-place scale over n^2); x: run stopped at a non-finite step" % (what, cpu),
                     fontsize=9)
        made.append(save(fig, out_dir, "%s_leak%g" % (name, leak)))
    return made


def plot_drift(rows, out_dir, name):
    """max|x - x_ref| / max|x_ref| (and the same for W) against T, per run, log-log."""
    series = OrderedDict()
    for r in rows:
        t, dx, sx = num(r["steps"]), num(r["max_abs_dx"]), num(r["max_abs_x_ref"])
        dw, sw = num(r.get("max_abs_dW")), num(r.get("max_abs_W_ref"))
        if None in (t, dx, sx) or sx == 0:
            continue
        key = "%s %s, n=%s, leak %s" % (r["device"], r["dtype"], r["n"], r.get("leak", "?"))
        s = series.setdefault(key, OrderedDict())
        s[t] = (dx / sx, dw / sw if dw is not None and sw else None,
                num(r.get("max_abs_dx_vs_cpu_same_dtype")))
    if not series:
        note("plot: %s: no drift rows: skipped" % name)
        return []
    fig, (ax_x, ax_w) = plt.subplots(1, 2, figsize=(11, 4.4))
    for i, (key, pts) in enumerate(series.items()):
        ts = sorted(pts)
        color = "C%d" % (i % 10)
        ax_x.plot(ts, [max(pts[t][0], 1e-300) for t in ts], "-o", color=color, label=key)
        ws = [(t, pts[t][1]) for t in ts if pts[t][1]]
        if ws:
            ax_w.plot(*zip(*ws), "-o", color=color, label=key)
    ax_x.set(title="state x", xlabel="steps T", ylabel="max|x - x_ref| / max|x_ref|")
    ax_w.set(title="weights W", xlabel="steps T", ylabel="max|W - W_ref| / max|W_ref|")
    for ax in (ax_x, ax_w):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    fig.suptitle("W6: distance to the float64 CPU run of the same problem as T grows "
                 "(the recurrence amplifies rounding)", fontsize=9)
    return [save(fig, out_dir, name)]


# ---- driver ----------------------------------------------------------------------------------

def plot_bench(rows, out_dir, name):
    """pdnn vs PyTorch step times (scripts/bench/bench_mnist.sh, bench_caltech.sh): one figure per
    OpenBLAS core, bars per workload and thread count, the newest row of each point."""
    rows = last_per_key(rows, lambda r: (r.get("blas_core", ""), r["app"], r["config"],
                                         r["model"], r["batch"], r["threads"]))
    made = []
    for core in sorted({r.get("blas_core", "") for r in rows}):
        rs = [r for r in rows if r.get("blas_core", "") == core]
        points = list(OrderedDict.fromkeys((r["model"], r["batch"], r["threads"]) for r in rs))
        bars = list(OrderedDict.fromkeys((r["app"], r["config"]) for r in rs))
        fig, axes = plt.subplots(1, len({(m, b) for m, b, _ in points}), figsize=(12, 4.2))
        axes = list(axes) if hasattr(axes, "__len__") else [axes]
        workloads = list(OrderedDict.fromkeys((m, b) for m, b, _ in points))
        for ax, (model, batch) in zip(axes, workloads):
            threads = [t for m, b, t in points if (m, b) == (model, batch)]
            width = 0.8 / len(bars)
            for i, (app, config) in enumerate(bars):
                ys = []
                for t in threads:
                    hit = [r for r in rs if (r["app"], r["config"], r["model"], r["batch"],
                                             r["threads"]) == (app, config, model, batch, t)]
                    ys.append(num(hit[0]["median_ms"]) if hit else 0.0)
                xs = [k + (i - (len(bars) - 1) / 2) * width for k in range(len(threads))]
                label = "pdnn" if app == "pdnn" else "PyTorch %s" % config
                ax.bar(xs, ys, width, label=label, color="C0" if app == "pdnn" else
                       ("C3" if config == "default" else "C1"))
                for x, y in zip(xs, ys):
                    ax.annotate("%.3g" % y, (x, y), ha="center", va="bottom", fontsize=7)
            ax.set_xticks(range(len(threads)))
            ax.set_xticklabels(["%s thr" % t for t in threads])
            names = {"small": "W2 small", "keras": "W3 keras", "caltech9": "W4 caltech9"}
            ax.set(title="%s, batch %s" % (names.get(model, model), batch),
                   ylabel="ms per training step (median)")
            ax.grid(axis="y", alpha=0.3)
        axes[0].legend(fontsize=8)
        fig.suptitle("Step time, pdnn vs PyTorch (%s; OpenBLAS core %s; lower is better)" % (
            rs[-1].get("cpu_model", rs[-1].get("host", "")), core or "?"))
        made.append(save(fig, out_dir, "%s_%s" % (name, core or "unknown")))
    return made


def plot_gpu_bench(rows, out_dir, name):
    """results/bench/gpu.csv (scripts/bench/bench_gpu.sh): ms per step on the GPU per workload, pdnn
    and PyTorch, eager and CUDA graph, one panel per precision; the latest row per point."""
    latest = OrderedDict()
    for r in rows:
        latest[(r["workload"], r["app"], r["mode"], r["precision"])] = r
    workloads = list(OrderedDict.fromkeys(k[0] for k in latest))
    precisions = [p for p in ("fp32", "tf32") if any(k[3] == p for k in latest)]
    if not workloads or not precisions:
        return []
    series = [("pdnn", "eager", "C0", 0.55), ("pdnn", "graph", "C0", 1.0),
              ("torch", "eager", "C3", 0.55), ("torch", "graph", "C3", 1.0)]
    fig, axes = plt.subplots(1, len(precisions), figsize=(6.5 * len(precisions), 4.3), squeeze=False)
    width = 0.8 / len(series)
    for ax, prec in zip(axes[0], precisions):
        for j, (app, mode, color, alpha) in enumerate(series):
            xs, ys = [], []
            for i, w in enumerate(workloads):
                r = latest.get((w, app, mode, prec))
                if r:
                    xs.append(i + (j - (len(series) - 1) / 2) * width)
                    ys.append(num(r["median_ms"]))
            if not xs:
                continue
            ax.bar(xs, ys, width, color=color, alpha=alpha,
                   label="%s %s" % ("pdnn" if app == "pdnn" else "PyTorch", mode))
            for x, y in zip(xs, ys):
                ax.annotate("%.3g" % y, (x, y), ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(workloads)))
        ax.set_xticklabels(workloads)
        ax.set_yscale("log")
        lo, hi = ax.get_ylim()
        ax.set_ylim(lo, hi * 6)  # room above the bars for the legend
        ax.set(title="%s" % ("fp32" if prec == "fp32" else "TF32 tensor cores"),
               ylabel="ms per training step (median, log scale)")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8, loc="upper left", ncol=2)
    gpu = rows[-1].get("gpu", "GPU").split(",")[0]
    fig.suptitle("GPU step time, pdnn vs PyTorch on %s (eager and whole-step CUDA graph; lower "
                 "is better)" % gpu)
    return [save(fig, out_dir, name)]


def plot_scale(rows, out_dir, name):
    """results/scale/*.csv (scripts/gpu/runners/dist.sh, scripts/gpu/runners/host-dist-cpu.sh): images per
    second of data-parallel runs, pdnn (--distributed) beside PyTorch DDP, one panel per
    workload and device. CPU: one bar group per ranks x threads split of the same cores (1xT is
    the single process); GPU: one group per app and mode, 1 GPU beside N GPUs, annotated with
    the weak-scaling efficiency img/s(N) / (N img/s(1)) over 1 GPU of the same app and mode
    (its "+overlap" dropped: one GPU has nothing to overlap). The latest row per point."""
    latest = OrderedDict()
    for r in rows:
        key = (r["workload"], r["device"], r["app"], r["mode"], r["ranks"], r["threads_per_rank"])
        latest[key] = r
    panels = list(OrderedDict.fromkeys((k[0], k[1]) for k in latest))
    if not panels:
        return []
    fig, axes = plt.subplots(1, len(panels), figsize=(7.5 * len(panels), 4.6), squeeze=False)
    label = {"pdnn": "pdnn", "torch-ddp": "PyTorch DDP"}
    for ax, (workload, device) in zip(axes[0], panels):
        pts = [r for k, r in latest.items() if k[:2] == (workload, device)]
        ips = lambda r: num(r["images_per_s"])  # noqa: E731
        if device != "cuda":
            configs = sorted(OrderedDict.fromkeys((int(num(r["ranks"])), int(num(r["threads_per_rank"])))
                                                  for r in pts))
            # One series per app, plus one per other mode (e.g. overlap off); the single
            # process and the plain distributed runs are the same series.
            def series_of(r):
                plain = r["mode"] in ("single", "dist", "dist-unbound", "eager")
                return (r["app"], "" if plain else r["mode"])
            apps = list(OrderedDict.fromkeys(series_of(r) for r in pts))
            width = 0.8 / len(apps)
            for j, app in enumerate(apps):
                xs, ys = [], []
                for i, c in enumerate(configs):
                    r = next((r for r in pts if series_of(r) == app and
                              (int(num(r["ranks"])), int(num(r["threads_per_rank"]))) == c), None)
                    if r:
                        xs.append(i + (j - (len(apps) - 1) / 2) * width)
                        ys.append(ips(r))
                ax.bar(xs, ys, width, color="C0" if app[0] == "pdnn" else "C3",
                       alpha=1.0 if not app[1] else 0.55,
                       label=label.get(app[0], app[0]) + (" " + app[1] if app[1] else ""))
                for x, y in zip(xs, ys):
                    ax.annotate("%.0f" % y, (x, y), ha="center", va="bottom", fontsize=7)
            ax.set_xticks(range(len(configs)))
            ax.set_xticklabels(["%dx%d" % c for c in configs])
            ax.set(title="%s on the CPU: ranks x threads per rank (1xT: one process)" % workload,
                   ylabel="images per second (median step)")
        else:
            groups = list(OrderedDict.fromkeys((r["app"], r["mode"]) for r in pts
                                               if int(num(r["ranks"])) > 1))
            counts = sorted({int(num(r["ranks"])) for r in pts})
            width = 0.8 / len(counts)
            for i, (app, mode) in enumerate(groups):
                base_mode = mode.replace("+overlap", "")
                base = next((r for r in pts if r["app"] == app and int(num(r["ranks"])) == 1
                             and r["mode"] == base_mode), None) or next(
                    (r for r in pts if r["app"] == app and int(num(r["ranks"])) == 1), None)
                for j, n in enumerate(counts):
                    r = base if n == 1 else next((r for r in pts if (r["app"], r["mode"]) == (app, mode)
                                                  and int(num(r["ranks"])) == n), None)
                    if not r:
                        continue
                    x = i + (j - (len(counts) - 1) / 2) * width
                    ax.bar([x], [ips(r)], width, color="C0" if app == "pdnn" else "C3",
                           alpha=0.45 if n == 1 else 1.0,
                           label=("%d GPU%s" % (n, "s" if n > 1 else "")) if i == 0 else None)
                    note = "%.0f" % ips(r)
                    if n > 1 and base:
                        note += "\n%.0f%%" % (100 * ips(r) / (n * ips(base)))
                    ax.annotate(note, (x, ips(r)), ha="center", va="bottom", fontsize=7)
            ax.set_xticks(range(len(groups)))
            ax.set_xticklabels(["%s\n%s" % (label.get(a, a), m) for a, m in groups], fontsize=8)
            ax.set(title="%s on GPUs, weak scaling (%% = efficiency over 1 GPU)" % workload,
                   ylabel="images per second (median step)")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7)
    host = rows[-1].get("gpu") or rows[-1].get("host", "")
    fig.suptitle("Data-parallel training, pdnn --distributed vs PyTorch DDP (%s; higher is "
                 "better)" % host.split(",")[0])
    return [save(fig, out_dir, name)]


def plot_allreduce(rows, out_dir, name):
    """bench_allreduce rows: bus bandwidth against the buffer size, per backend and rank count
    (as nccl-tests' busbw: algbw * 2 (n-1) / n); the latest row per point."""
    latest = OrderedDict()
    for r in rows:
        latest[(r["backend"], r["ranks"], r.get("label", ""), r["bytes"])] = r
    series = list(OrderedDict.fromkeys(k[:3] for k in latest))
    fig, ax = plt.subplots(figsize=(7, 4.3))
    for backend, ranks, label in series:
        pts = sorted((num(r["bytes"]), num(r["busbw_gbs"])) for k, r in latest.items()
                     if k[:3] == (backend, ranks, label))
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "-o", ms=3,
                label="%s, %s ranks%s" % (backend, ranks, (" (%s)" % label) if label else ""))
    ax.set_xscale("log")
    ax.set(title="All-reduce bus bandwidth (algbw x 2(n-1)/n)", xlabel="bytes",
           ylabel="GB/s")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return [save(fig, out_dir, name)]


KINDS = [
    ("scale", {"app", "workload", "ranks", "threads_per_rank", "images_per_s"}, plot_scale),
    ("allreduce", {"backend", "bytes", "busbw_gbs"}, plot_allreduce),
    ("gpu_bench", {"workload", "app", "mode", "precision", "median_ms"}, plot_gpu_bench),
    ("segmentation", {"epoch", "train_loss", "test_mean_iou"}, plot_segmentation),
    ("training", {"epoch", "train_loss", "test_acc"}, plot_training),
    ("bench", {"app", "config", "model", "batch", "threads", "median_ms"}, plot_bench),
    ("scaling", {"workload", "threads", "speedup"}, plot_scaling),
    ("pi", {"app", "variant", "threads", "median_ms", "min_ms", "max_ms"}, plot_pi),
    ("profile", {"layer", "kind", "fwd_ms", "bwd_ms"}, plot_profile),
    ("gan_iterations", {"iteration", "d_loss", "g_loss"}, plot_gan_iterations),
    ("gan_epochs", {"epoch", "train_d_loss", "train_g_loss"}, plot_gan_epochs),
    ("hebbian", {"app", "n", "steps", "us_per_step", "floor_us_per_step"}, plot_hebbian),
    ("drift", {"steps", "max_abs_dx", "max_abs_x_ref"}, plot_drift),
]


def plot_accuracy(runs, out_dir):
    """runs: [(app, precision, rows)] from an accuracy/ folder (the precision from the file's
    name: results_csv.file_precision). One figure per (model, dataset): test accuracy (a
    segmentation's: mean Dice) and loss per epoch, a thin line per seed and a thick one for the
    mean, per app, device and precision."""
    groups = OrderedDict()
    for app, prec, rows in runs:
        if not rows:
            continue
        key = (rows[0].get("model", "?"), rows[0].get("dataset", "?"), rows[0].get("batch", "?"))
        series = (app, rows[0].get("device", "?"), prec)  # pdnn on the CPU and GPU apart
        groups.setdefault(key, OrderedDict()).setdefault(series, []).append(rows)
    made = []
    colors = {("pdnn", "cpu", "fp32"): "C0", ("pdnn", "cuda", "fp32"): "C2",
              ("torch", "cpu", "fp32"): "C3", ("torch", "cuda", "fp32"): "C1",
              ("pdnn", "cuda", "bf16"): "C4", ("torch", "cuda", "bf16"): "C5",
              ("pdnn", "cuda", "tf32"): "C6", ("torch", "cuda", "tf32"): "C7"}
    for (model, dataset, batch), apps in groups.items():
        fig, (ax_acc, ax_loss) = plt.subplots(1, 2, figsize=(11, 4.2))
        score = "test_acc" if "test_acc" in next(iter(apps.values()))[0][0] else "test_mean_dice"
        for (app, device, prec), seeds in sorted(apps.items()):
            color = colors.get((app, device, prec), "C8")
            where = device if prec == "fp32" else f"{device}, {prec}"
            n_ep = min(len(rows) for rows in seeds)
            for col, ax, scale in ((score, ax_acc, 100.0), ("test_loss", ax_loss, 1.0)):
                for rows in seeds:
                    ax.plot([num(r["epoch"]) for r in rows], [scale * num(r[col]) for r in rows],
                            "-", color=color, alpha=0.3, lw=1)
                mean = [scale * statistics.mean(num(rows[e][col]) for rows in seeds)
                        for e in range(n_ep)]
                ax.plot(range(1, n_ep + 1), mean, "-o", ms=3, lw=2, color=color,
                        label="%s (%s), mean of %d seeds; final %.2f" % (
                            "PyTorch" if app == "torch" else app, where, len(seeds), mean[-1]))
        what = "accuracy" if score == "test_acc" else "mean Dice"
        ax_acc.set(title=f"Test {what} per epoch", xlabel="epoch", ylabel=f"test {what} (%)")
        ax_loss.set(title="Test loss per epoch", xlabel="epoch", ylabel="cross-entropy loss")
        for ax in (ax_acc, ax_loss):
            ax.grid(alpha=0.3)
            ax.xaxis.get_major_locator().set_params(integer=True)
            ax.legend(fontsize=8)
        fig.suptitle("%s on %s, batch %s: pdnn vs PyTorch (same init and data order; thin "
                     "lines: single seeds)" % (model, dataset, batch))
        made.append(save(fig, out_dir, "accuracy_%s_%s" % (model, dataset)))
    return made


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="runs", help="folder searched for *.csv")
    ap.add_argument("--out", default="runs/plots", help="folder for the PNG files")
    ap.add_argument("--verbose", action="store_true",
                    help="also name each CSV file and figure passed over")
    args = ap.parse_args()
    global VERBOSE
    VERBOSE = args.verbose
    if not os.path.isdir(args.results):
        sys.exit("plot: %s: no such folder (your runs land in runs/ once a make target has run; "
                 "make plots REFERENCE=1 draws the published results/)" % args.results)
    tables = []
    found = {k: 0 for k, _, _ in KINDS}
    made = []
    for root, dirs, files in os.walk(args.results):
        dirs.sort()
        if os.path.basename(root) == "accuracy":
            runs = []
            for f in sorted(files):
                rows = read_csv(os.path.join(root, f)) if f.endswith(".csv") else []
                if rows and ("test_acc" in rows[0] or "test_mean_dice" in rows[0]):
                    runs.append((rows[0].get("app", "?"), file_precision(f), rows))
            made += plot_accuracy(runs, args.out)
            continue
        for f in sorted(files):
            if not f.endswith(".csv"):
                continue
            path = os.path.join(root, f)
            parts = os.path.splitext(os.path.relpath(path, args.results))[0].split(os.sep)
            if len(parts) >= 2 and parts[-1] == parts[-2]:
                parts.pop()  # pi/pi.csv -> "pi", not "pi_pi"
            name = "_".join(parts)
            rows = read_csv(path)
            cols = set(rows[0]) if rows else set()
            for kind, need, fn in KINDS:
                if need <= cols:
                    found[kind] += 1
                    made += fn(rows, args.out, name)
                    break
            else:
                tables.append(path)
                note("plot: %s: a table without a figure here (or empty)" % path)
    for kind, n in found.items():
        if n == 0:
            note("plot: no %s CSV under %s: those figures skipped" % (kind, args.results))
    if tables and not VERBOSE:
        print("plot: %d CSV file(s) are tables without a figure here (scores, per-pass timings, "
              "summaries; --verbose names them)" % len(tables))
    print("plot: %d PNG file(s) in %s" % (len(made), args.out))


if __name__ == "__main__":
    main()
