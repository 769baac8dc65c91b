#!/usr/bin/env python3
"""PyTorch's time for every convolution of W3, W4 and W5, each pass alone, on the GPU.

The yardstick beside `bench_conv_gpu` (apps/bench_conv_gpu): the same layers, the same names
(W4 conv1..conv6, W5 D.conv1..D.conv5 and G.convT1..G.convT5), the same passes (forward,
backward-data, backward-weights) and the same CSV columns, so one plot reads both files.
Each pass is timed alone with CUDA events (3 warm-up calls, median of --repeat): the forward
as F.conv2d / F.conv_transpose2d, the backward passes as torch.autograd.grad with only the
input (backward-data) or only the weight and bias (backward-weights) asked for, so cuDNN runs
only that kernel. The convolution alone: pdnn fuses bias and activation into its kernels,
PyTorch runs them as separate kernels, which are not counted here (the step benchmarks count
everything). fp32 has TF32 off for cuDNN and matmul; tf32 has it on (PyTorch's default for
convolutions). gflop = 2 x the multiply-adds a direct convolution performs (for a transposed
convolution: n*cin*h_in*w_in*cout*k*k).

    python3 scripts/torch_conv_layers.py --out results/bench/conv_gpu_torch.csv
"""
import argparse
import csv
import datetime
import os
import socket
import statistics

# workload, layer, n, cin, h, w, cout, k, stride, pad, transposed, bias, need_dx (as bench_conv_gpu)
LAYERS = [
    ("W3", "conv1", 128, 1, 28, 28, 32, 3, 1, 0, False, True, False),
    ("W3", "conv2", 128, 32, 26, 26, 64, 3, 1, 0, False, True, True),
    ("W4", "conv1", 64, 3, 224, 224, 32, 3, 1, 1, False, True, False),
    ("W4", "conv2", 64, 32, 224, 224, 32, 3, 1, 1, False, True, True),
    ("W4", "conv3", 64, 32, 112, 112, 64, 3, 1, 1, False, True, True),
    ("W4", "conv4", 64, 64, 112, 112, 64, 3, 1, 1, False, True, True),
    ("W4", "conv5", 64, 64, 56, 56, 128, 3, 1, 1, False, True, True),
    ("W4", "conv6", 64, 128, 56, 56, 128, 3, 1, 1, False, True, True),
    ("W5", "D.conv1", 64, 3, 64, 64, 64, 4, 2, 1, False, False, True),
    ("W5", "D.conv2", 64, 64, 32, 32, 128, 4, 2, 1, False, False, True),
    ("W5", "D.conv3", 64, 128, 16, 16, 256, 4, 2, 1, False, False, True),
    ("W5", "D.conv4", 64, 256, 8, 8, 512, 4, 2, 1, False, False, True),
    ("W5", "D.conv5", 64, 512, 4, 4, 1, 4, 1, 0, False, False, True),
    ("W5", "G.convT1", 64, 100, 1, 1, 512, 4, 1, 0, True, False, False),
    ("W5", "G.convT2", 64, 512, 4, 4, 256, 4, 2, 1, True, False, True),
    ("W5", "G.convT3", 64, 256, 8, 8, 128, 4, 2, 1, True, False, True),
    ("W5", "G.convT4", 64, 128, 16, 16, 64, 4, 2, 1, True, False, True),
    ("W5", "G.convT5", 64, 64, 32, 32, 3, 4, 2, 1, True, False, True),
]

COLUMNS = ["workload", "layer", "pass", "precision", "framework", "algo", "n", "c", "h", "w",
           "k", "r", "s", "stride", "pad", "transposed", "ms", "gflop", "tflops", "gpu",
           "versions", "timestamp"]


def time_ms(torch, f, repeat):
    for _ in range(3):
        f()
    ms = []
    for _ in range(repeat):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        f()
        b.record()
        b.synchronize()
        ms.append(a.elapsed_time(b))
    return statistics.median(ms)


def layer_passes(torch, L):
    F = torch.nn.functional
    wl, name, n, cin, h, w, cout, k, stride, pad, transposed, bias, need_dx = L
    dev = "cuda"
    x = torch.randn(n, cin, h, w, device=dev, requires_grad=True)
    wshape = (cin, cout, k, k) if transposed else (cout, cin, k, k)
    weight = (torch.randn(*wshape, device=dev) * 0.05).requires_grad_()
    b = torch.randn(cout, device=dev, requires_grad=True) if bias else None
    conv = F.conv_transpose2d if transposed else F.conv2d
    run = lambda: conv(x, weight, b, stride=stride, padding=pad)
    y = run()
    dy = torch.randn_like(y)
    oh, ow = y.shape[2], y.shape[3]
    if transposed:
        gflop = 2.0 * n * cin * h * w * cout * k * k * 1e-9
    else:
        gflop = 2.0 * n * cout * cin * k * k * oh * ow * 1e-9
    passes = [("forward", lambda: run())]
    if need_dx:
        passes.append(("backward-data",
                       lambda: torch.autograd.grad(y, [x], dy, retain_graph=True)))
    wb = [weight] + ([b] if b is not None else [])
    passes.append(("backward-weights", lambda: torch.autograd.grad(y, wb, dy, retain_graph=True)))
    return passes, gflop


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="results/bench/conv_gpu_torch.csv")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--precisions", default="fp32,tf32")
    ap.add_argument("--filter", default="", help="only 'workload layer' containing this")
    args = ap.parse_args()
    import torch
    if not torch.cuda.is_available():
        raise SystemExit("torch_conv_layers: no CUDA device")
    torch.backends.cudnn.benchmark = True
    gpu = torch.cuda.get_device_name(0)
    versions = f"torch {torch.__version__} cudnn {torch.backends.cudnn.version()}"
    new = not os.path.exists(args.out) or os.path.getsize(args.out) == 0
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "a", newline="") as fh:
        out = csv.writer(fh)
        if new:
            out.writerow(COLUMNS)
        for prec in args.precisions.split(","):
            tf32 = prec == "tf32"
            torch.backends.cudnn.allow_tf32 = tf32
            torch.backends.cuda.matmul.allow_tf32 = tf32
            for L in LAYERS:
                if args.filter and args.filter not in f"{L[0]} {L[1]}":
                    continue
                passes, gflop = layer_passes(torch, L)
                for pname, f in passes:
                    ms = time_ms(torch, f, args.repeat)
                    wl, name, n, cin, h, w, cout, k, stride, pad, tr = L[:11]
                    out.writerow([wl, name, pname, prec, "pytorch", "cudnn", n, cin, h, w, cout,
                                  k, k, stride, pad, int(tr), f"{ms:.4f}", f"{gflop:.3f}",
                                  f"{gflop / ms:.2f}", gpu, versions,
                                  datetime.datetime.now(datetime.timezone.utc).isoformat(
                                      timespec="seconds")])
                    print(f"{wl} {name:9s} {pname:17s} {prec} {ms:8.3f} ms "
                          f"{gflop / ms:6.1f} TFLOP/s", flush=True)
    print(f"rows appended to {args.out} ({socket.gethostname()})")


if __name__ == "__main__":
    main()
