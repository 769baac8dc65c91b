#!/usr/bin/python3
"""Per-layer GPU convolution times, pdnn's algorithms beside PyTorch's cuDNN.

Reads bench_conv_gpu's CSV (pdnn: im2col, implicit, direct, cudnn called by pdnn) and
torch_conv_layers.py's CSV (PyTorch with cudnn.benchmark) of one GPU visit and draws, per
precision, one group of bars per layer and pass of the chosen workload (ms, lower is better),
with the layer's floor (FLOPs at the measured sgemm rate or bytes at the measured copy rate)
as a tick.

    python3 scripts/report/plot_conv_gpu.py --pdnn runs/bench/conv_gpu.csv \
        --torch runs/bench/conv_gpu_torch.csv --workload W4 --out runs/plots/conv_gpu_W4.png
"""
import argparse
import csv
import os


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pdnn", required=True)
    ap.add_argument("--torch", required=True)
    ap.add_argument("--workload", default="W4")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # the convolutions (the CSV also holds the rest of W4's step: dense1, adagrad)
    p = [r for r in rows(args.pdnn) if r["workload"] == args.workload and r["algo"] in
         ("im2col", "implicit", "direct", "cudnn")]
    t = [r for r in rows(args.torch) if r["workload"] == args.workload]
    if not p or not t:
        raise SystemExit(f"plot_conv_gpu: no {args.workload} rows in {args.pdnn} or {args.torch}")
    gpu = p[0]["gpu"].split(",")[0]
    algos = [a for a in ["im2col", "implicit", "direct", "cudnn"] if any(r["algo"] == a for r in p)]
    fig, axes = plt.subplots(2, 1, figsize=(12, 8), sharex=True)
    for ax, prec in zip(axes, ["fp32", "tf32"]):
        keys = []
        for r in p:
            k = (r["layer"], r["pass"])
            if r["precision"] == prec and k not in keys:
                keys.append(k)
        bars = len(algos) + 1
        width = 0.8 / bars
        def at(i):
            return [j + (i - (bars - 1) / 2) * width for j in range(len(keys))]
        for i, algo in enumerate(algos):
            ms = {(r["layer"], r["pass"]): float(r["median_ms"]) for r in p
                  if r["precision"] == prec and r["algo"] == algo}
            ax.bar(at(i), [ms.get(k, 0) for k in keys], width, label=f"pdnn {algo}")
        tm = {(r["layer"], r["pass"]): float(r["ms"]) for r in t if r["precision"] == prec}
        ax.bar(at(len(algos)), [tm.get(k, 0) for k in keys], width, label="PyTorch (cuDNN)",
               color="black")
        ax.set_ylabel(f"{prec}: ms")
        ax.set_title(f"{args.workload} convolutions on {gpu}, {prec} (lower is better)")
        ax.legend(fontsize=8, ncol=bars)
        ax.grid(axis="y", alpha=0.3)
        ax.set_xticks(range(len(keys)))
        ax.set_xticklabels([f"{l}\n{ps.replace('backward-', 'bwd-')}" for l, ps in keys],
                           fontsize=7)
    fig.tight_layout()
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    tmp = args.out + ".tmp.png"
    fig.savefig(tmp, dpi=110)
    os.replace(tmp, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
