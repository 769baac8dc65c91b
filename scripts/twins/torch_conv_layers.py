#!/usr/bin/python3
"""PyTorch's (cuDNN's) time for every convolution of W3, W4 and W5, pass by pass, on the GPU:
the yardstick for build/bin/bench_conv_gpu (the runners conv.sh and torch-conv.sh of
scripts/gpu/ run both in one visit).

Layers (SPEC.md, each at its workload's batch): W3 conv1..conv2, W4 conv1..conv6, W5
D.conv1..D.conv5 (the discriminator's Conv2d) and G.convT1..G.convT5 (the generator's
ConvTranspose2d). Passes, each timed on its own: forward; backward-data (the gradient of the
input: autograd.grad with inputs=(x,)); backward-weights (of the weight, and the bias where the
layer has one: inputs=(w, b)). Precisions: fp32 (TF32 off for cuDNN and matmul), tf32 and bf16.
Each time is the median of --repeat (20) CUDA-event timings after --warmup calls (the first
ones also let cudnn.benchmark pick its algorithm). bf16: the layer, x and dy in bfloat16 and
channels_last (what autocast with channels_last runs for a convolution; cuDNN sums in fp32).

gflop counts the multiply-adds actually performed, twice: n*k*c*r*s*oh*ow for a convolution,
n*cin*h_in*w_in*cout*r*s for a transposed one (the same for all three passes); tflops is gflop
over the median time.

  python3 scripts/twins/torch_conv_layers.py --out runs/bench/conv_gpu_torch.csv [--filter W4]

--device cpu checks the script without a GPU (wall-clock timing, algo "cpu"; not a yardstick).
"""
import argparse
import datetime
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from results_csv import write_rows  # noqa: E402

COLUMNS = ("workload,layer,pass,precision,framework,algo,n,c,h,w,k,r,s,stride,pad,transposed,"
           "ms,gflop,tflops,gpu,versions,timestamp").split(",")
PASSES = ("forward", "backward-data", "backward-weights")

# (workload, layer, n, c_in, h, w, c_out, kernel, stride, pad, transposed, bias)
LAYERS = [
    ("W3", "conv1", 128, 1, 28, 28, 32, 3, 1, 0, False, True),
    ("W3", "conv2", 128, 32, 26, 26, 64, 3, 1, 0, False, True),
    ("W4", "conv1", 64, 3, 224, 224, 32, 3, 1, 1, False, True),
    ("W4", "conv2", 64, 32, 224, 224, 32, 3, 1, 1, False, True),
    ("W4", "conv3", 64, 32, 112, 112, 64, 3, 1, 1, False, True),
    ("W4", "conv4", 64, 64, 112, 112, 64, 3, 1, 1, False, True),
    ("W4", "conv5", 64, 64, 56, 56, 128, 3, 1, 1, False, True),
    ("W4", "conv6", 64, 128, 56, 56, 128, 3, 1, 1, False, True),
    ("W5", "D.conv1", 64, 3, 64, 64, 64, 4, 2, 1, False, False),
    ("W5", "D.conv2", 64, 64, 32, 32, 128, 4, 2, 1, False, False),
    ("W5", "D.conv3", 64, 128, 16, 16, 256, 4, 2, 1, False, False),
    ("W5", "D.conv4", 64, 256, 8, 8, 512, 4, 2, 1, False, False),
    ("W5", "D.conv5", 64, 512, 4, 4, 1, 4, 1, 0, False, False),
    ("W5", "G.convT1", 64, 100, 1, 1, 512, 4, 1, 0, True, False),
    ("W5", "G.convT2", 64, 512, 4, 4, 256, 4, 2, 1, True, False),
    ("W5", "G.convT3", 64, 256, 8, 8, 128, 4, 2, 1, True, False),
    ("W5", "G.convT4", 64, 128, 16, 16, 64, 4, 2, 1, True, False),
    ("W5", "G.convT5", 64, 64, 32, 32, 3, 4, 2, 1, True, False),
]
# The U-Net's (512 x 512, batch 4) every convolution, in the model's order: run only when
# --filter names them (as bench_conv_gpu's).
ON_REQUEST = [
    ("UNet", "enc1.conv1", 4, 3, 512, 512, 64, 3, 1, 1, False, True),
    ("UNet", "enc1.conv2", 4, 64, 512, 512, 64, 3, 1, 1, False, True),
    ("UNet", "enc2.conv1", 4, 64, 256, 256, 128, 3, 1, 1, False, True),
    ("UNet", "enc2.conv2", 4, 128, 256, 256, 128, 3, 1, 1, False, True),
    ("UNet", "enc3.conv1", 4, 128, 128, 128, 256, 3, 1, 1, False, True),
    ("UNet", "enc3.conv2", 4, 256, 128, 128, 256, 3, 1, 1, False, True),
    ("UNet", "enc4.conv1", 4, 256, 64, 64, 512, 3, 1, 1, False, True),
    ("UNet", "enc4.conv2", 4, 512, 64, 64, 512, 3, 1, 1, False, True),
    ("UNet", "mid.conv1", 4, 512, 32, 32, 1024, 3, 1, 1, False, True),
    ("UNet", "mid.conv2", 4, 1024, 32, 32, 1024, 3, 1, 1, False, True),
    ("UNet", "up4", 4, 1024, 32, 32, 512, 2, 2, 0, True, True),
    ("UNet", "dec4.conv1", 4, 1024, 64, 64, 512, 3, 1, 1, False, True),
    ("UNet", "dec4.conv2", 4, 512, 64, 64, 512, 3, 1, 1, False, True),
    ("UNet", "up3", 4, 512, 64, 64, 256, 2, 2, 0, True, True),
    ("UNet", "dec3.conv1", 4, 512, 128, 128, 256, 3, 1, 1, False, True),
    ("UNet", "dec3.conv2", 4, 256, 128, 128, 256, 3, 1, 1, False, True),
    ("UNet", "up2", 4, 256, 128, 128, 128, 2, 2, 0, True, True),
    ("UNet", "dec2.conv1", 4, 256, 256, 256, 128, 3, 1, 1, False, True),
    ("UNet", "dec2.conv2", 4, 128, 256, 256, 128, 3, 1, 1, False, True),
    ("UNet", "up1", 4, 128, 256, 256, 64, 2, 2, 0, True, True),
    ("UNet", "dec1.conv1", 4, 128, 512, 512, 64, 3, 1, 1, False, True),
    ("UNet", "dec1.conv2", 4, 64, 512, 512, 64, 3, 1, 1, False, True),
    ("UNet", "head", 4, 64, 512, 512, 2, 1, 1, 0, False, True),
]


def out_side(h, k, stride, pad, transposed):
    return (h - 1) * stride - 2 * pad + k if transposed else (h + 2 * pad - k) // stride + 1


def multiply_adds(n, c, h, w, k, r, stride, pad, transposed):
    if transposed:  # every input pixel scatters into r*s outputs of every output channel
        return n * c * h * w * k * r * r
    oh, ow = out_side(h, r, stride, pad, False), out_side(w, r, stride, pad, False)
    return n * k * c * r * r * oh * ow


def time_ms(torch, fn, warmup, repeat, device):
    for _ in range(warmup):
        fn()
    times = []
    if device == "cpu":
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)
    torch.cuda.synchronize()
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def set_precision(torch, precision):
    tf32 = precision == "tf32"
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32


def layer_rows(torch, layer, precision, args, common):
    wl, name, n, c, h, w, k, r, stride, pad, transposed, bias = layer
    dev = args.device
    gen = torch.Generator(device=dev).manual_seed(3)
    cls = torch.nn.ConvTranspose2d if transposed else torch.nn.Conv2d
    conv = cls(c, k, r, stride=stride, padding=pad, bias=bias).to(dev)
    x = torch.empty(n, c, h, w, device=dev).uniform_(-1, 1, generator=gen)
    if precision == "bf16":
        conv = conv.to(dtype=torch.bfloat16, memory_format=torch.channels_last)
        x = x.to(dtype=torch.bfloat16, memory_format=torch.channels_last)
    x.requires_grad_(True)
    set_precision(torch, precision)
    with torch.no_grad():
        y_shape = conv(x).shape
    oh = out_side(h, r, stride, pad, transposed)
    assert tuple(y_shape) == (n, k, oh, out_side(w, r, stride, pad, transposed)), y_shape
    dy = torch.empty(y_shape, device=dev).uniform_(-1, 1, generator=gen)
    if precision == "bf16":
        dy = dy.to(dtype=torch.bfloat16, memory_format=torch.channels_last)
    y = conv(x)  # one graph, differentiated again and again below
    weights = (conv.weight, conv.bias) if bias else (conv.weight,)

    def forward():
        with torch.no_grad():
            conv(x)

    runs = {
        "forward": forward,
        "backward-data": lambda: torch.autograd.grad(y, inputs=(x,), grad_outputs=dy,
                                                     retain_graph=True),
        "backward-weights": lambda: torch.autograd.grad(y, inputs=weights, grad_outputs=dy,
                                                        retain_graph=True),
    }
    gflop = 2.0 * multiply_adds(n, c, h, w, k, r, stride, pad, transposed) * 1e-9
    rows = []
    for p in PASSES:
        ms = time_ms(torch, runs[p], args.warmup, args.repeat, dev)
        algo = "cudnn" if dev == "cuda" else "cpu"
        rows.append([wl, name, p, precision, "pytorch", algo, n, c, h, w, k, r, r, stride, pad,
                     int(transposed), "%.5f" % ms, "%.4f" % gflop,
                     "%.3f" % (gflop / ms if ms > 0 else 0.0)] + common)
        print("%-3s %-9s %-16s %-5s %9.4f ms %8.2f TFLOP/s"
              % (wl, name, p, precision, ms, gflop / ms if ms > 0 else 0.0), flush=True)
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="runs/bench/conv_gpu_torch.csv", help="CSV to append to")
    p.add_argument("--filter", default="", help="only layers whose 'workload layer' has this")
    p.add_argument("--precisions", default="fp32,tf32", help="comma list of fp32, tf32, bf16")
    p.add_argument("--repeat", type=int, default=20, help="timed calls per pass (median)")
    p.add_argument("--warmup", type=int, default=5, help="untimed calls first")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                   help="cpu: check the script without a GPU (wall clock, not a yardstick)")
    p.add_argument("--benchmark", choices=("on", "off"), default="on",
                   help="torch.backends.cudnn.benchmark (on: cuDNN times its algorithms)")
    args = p.parse_args()
    precisions = args.precisions.split(",")
    for prec in precisions:
        if prec not in ("fp32", "tf32", "bf16"):
            p.error("--precisions: '%s' is not fp32, tf32 or bf16" % prec)
    if args.repeat < 1 or args.warmup < 0:
        p.error("--repeat must be >= 1 and --warmup >= 0")
    layers = [L for L in LAYERS if args.filter in "%s %s" % (L[0], L[1])]
    if args.filter:
        layers += [L for L in ON_REQUEST if args.filter in "%s %s" % (L[0], L[1])]
    if not layers:
        p.error("--filter %s: no layer matches" % args.filter)
    try:
        import torch
    except ImportError:
        sys.exit("torch_conv_layers: no PyTorch for %s" % sys.executable)
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("torch_conv_layers: PyTorch sees no GPU (--device cpu checks the script)")
    torch.backends.cudnn.benchmark = args.benchmark == "on"
    gpu = torch.cuda.get_device_name() if args.device == "cuda" else "none (cpu)"
    versions = "torch %s cuda %s cudnn %s" % (torch.__version__, torch.version.cuda,
                                              torch.backends.cudnn.version())
    print("torch_conv_layers: %s | %s | cudnn.benchmark %s" % (gpu, versions, args.benchmark))
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    rows = []
    for prec in precisions:
        for layer in layers:
            rows += layer_rows(torch, layer, prec, args, [gpu, versions, stamp])
    write_rows(args.out, COLUMNS, rows)  # all or nothing: one atomic rewrite at the end
    print("torch_conv_layers: %d rows appended to %s" % (len(rows), args.out))


if __name__ == "__main__":
    main()
