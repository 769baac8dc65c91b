#!/usr/bin/python3
"""PyTorch's training-step time on a GPU for pdnn's workloads, as users write them: eager, and
the whole step (zero_grad, forward, loss, backward, optimizer step) captured once as a CUDA
graph and replayed (torch.cuda.graphs), in fp32 and TF32. The yardstick of `make bench-gpu`.

Timed exactly as pdnn's `--steps` on a GPU: before each step the batch is copied into the
step's fixed input buffers from a pool of batches already on the device (pdnn copies it from
pinned host memory, which costs it more); steps run in blocks of 10, each block ending in
torch.cuda.synchronize(), and a step's time is its block's time / 10; the median over blocks
after 2 warm-up blocks is reported (min and max too). cuDNN's autotuner is on (PyTorch's faster
setting), and fp32 means TF32 off for both matmuls and cuDNN convolutions.

Rows go to --out (runs/bench/gpu.csv) with pdnn's rows from scripts/bench/bench_gpu.sh.

W5 (the DCGAN, batch 64) times one GAN iteration as PyTorch's DCGAN tutorial writes it (D on the
real batch, noise drawn on the device, D on the fake batch, Adam on D, G through the updated D,
Adam on G), eagerly or captured whole as one CUDA graph (capturable Adam, the noise from
torch.randn inside the graph), with the real batch copied into the step's fixed buffer first.

Precision bf16 is what an H100 user runs (issue 32): torch.autocast(bfloat16) around each
forward and loss, the model and its inputs in channels_last, fp32 master weights and optimizer
state, cuDNN's TF32 on (PyTorch's default) for what autocast leaves in fp32. BCELoss refuses
autocast, so W5 computes it on the float32 copy of D's output, as users must. Mode compile wraps
the model(s) in torch.compile (inductor, default mode; the optimizer step stays eager). W4's
AdaGrad has no capturable mode in PyTorch 2.11, so W4 under graph uses the same update written
out with foreach ops (sum += g^2; p -= lr g / (sqrt(sum) + 1e-10): torch.optim.Adagrad's
formula at its defaults). A configuration that fails (torch.compile of W5 with channels_last
hits a stride assertion in 2.11) is printed with its error and left out; the others still run.
"""
import argparse
import os
import socket
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from results_csv import write_rows, git_rev, utc_now  # noqa: E402

COLUMNS = ["app", "workload", "model", "batch", "device", "gpu", "mode", "precision", "steps",
           "median_ms", "min_ms", "max_ms", "versions", "git_rev", "host", "timestamp"]

# name -> (model, batch, input shape per image, classes)
WORKLOADS = {
    "W2b8": ("small", 8, (1, 28, 28), 10),
    "W2b128": ("small", 128, (1, 28, 28), 10),
    "W3": ("keras", 128, (1, 28, 28), 10),
    "W4": ("caltech9", 64, (3, 224, 224), 6),
    "W5": ("dcgan", 64, (3, 64, 64), 0),
}


def build(torch, model):
    nn = torch.nn
    if model == "small":
        return nn.Sequential(nn.Conv2d(1, 10, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(1960, 100), nn.ReLU(), nn.Linear(100, 10))
    if model == "keras":
        return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(),
                             nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(), nn.Linear(9216, 128),
                             nn.ReLU(), nn.Dropout(0.5), nn.Linear(128, 10))
    if model == "caltech9":
        layers, c = [], 3
        for k in (32, 32, "M", 64, 64, "M", 128, 128, "M"):
            if k == "M":
                layers.append(nn.MaxPool2d(2))
            else:
                layers += [nn.Conv2d(c, k, 3, padding=1), nn.ReLU()]
                c = k
        return nn.Sequential(*layers, nn.Flatten(), nn.Linear(128 * 28 * 28, 1024), nn.ReLU(),
                             nn.Dropout(0.5), nn.Linear(1024, 1024), nn.ReLU(), nn.Dropout(0.5),
                             nn.Linear(1024, 6))
    raise ValueError(model)


class CapturableAdagrad:
    """torch.optim.Adagrad's update at its defaults (initial accumulator 0, eps 1e-10, no decay),
    in foreach ops that a CUDA graph can capture (torch's own keeps its step count on the host)."""

    def __init__(self, torch, params, lr):
        self.torch, self.params, self.lr = torch, list(params), lr
        self.sums = [torch.zeros_like(p) for p in self.params]

    def zero_grad(self, set_to_none=False):
        for p in self.params:
            if p.grad is not None:
                p.grad.zero_()

    def step(self):
        torch = self.torch
        grads = [p.grad for p in self.params]
        with torch.no_grad():  # the parameters are leaves that require grad: updated in place
            torch._foreach_addcmul_(self.sums, grads, grads)
            den = torch._foreach_sqrt(self.sums)
            torch._foreach_add_(den, 1e-10)
            torch._foreach_addcdiv_(self.params, grads, den, value=-self.lr)


def set_precision(torch, precision):
    """TF32 switches for fp32 / tf32; bf16 keeps PyTorch's defaults (cuDNN TF32 on)."""
    tf32 = precision in ("tf32", "bf16")
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True


def optimizer(torch, model, params, capturable):
    # SPEC.md: W2 Adam 1e-3; W3 Adadelta (1.0, rho 0.95, eps 1e-6); W4 AdaGrad 0.01.
    kw = {"capturable": True} if capturable else {}
    if model == "small":
        return torch.optim.Adam(params, lr=1e-3, **kw)
    if model == "keras":
        return torch.optim.Adadelta(params, lr=1.0, rho=0.95, eps=1e-6, **kw)
    # Adagrad has no capturable mode in PyTorch 2.11: its step count stays on the host, which
    # graph capture refuses; the same update in capturable foreach ops under a graph.
    if capturable:
        return CapturableAdagrad(torch, params, lr=0.01)
    return torch.optim.Adagrad(params, lr=0.01)


def run_timed(torch, step, feed, graph, steps, sync=None):
    """ms per step of step() (after feed(i) copies batch i into its fixed input buffers), in
    blocks of 10 after 2 warm-up blocks; as one replayed CUDA graph when graph, captured by the
    recipe of PyTorch's CUDA-graph notes (warm up on a side stream, then capture). sync ends a
    block (default torch.cuda.synchronize; a no-op times the CPU)."""
    sync = sync or torch.cuda.synchronize
    run = step
    if graph:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for i in range(3):
                feed(i)
                step()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            step()
        run = g.replay
    block, times, i = 10, [], 0
    for b in range(steps // block + 2):
        sync()
        t0 = time.perf_counter()
        for _ in range(block):
            feed(i)
            run()
            i += 1
        sync()
        if b >= 2:
            times.append(1e3 * (time.perf_counter() - t0) / block)
    return times


def time_gan(torch, mode, precision, steps, dev, batch=64):
    """W5: one DCGAN iteration per step (see the module's docstring)."""
    from torch_reference import dcgan_models
    set_precision(torch, precision)
    torch.manual_seed(0)
    g, d = dcgan_models(torch)
    bf16 = precision == "bf16"
    fmt = torch.channels_last if bf16 else torch.contiguous_format
    g.to(dev, memory_format=fmt)
    d.to(dev, memory_format=fmt)
    graph = mode == "graph"
    gf, df = (torch.compile(g), torch.compile(d)) if mode == "compile" else (g, d)
    kw = {"capturable": True} if graph else {}
    opt_g = torch.optim.Adam(g.parameters(), lr=2e-4, betas=(0.5, 0.999), **kw)
    opt_d = torch.optim.Adam(d.parameters(), lr=2e-4, betas=(0.5, 0.999), **kw)
    bce = torch.nn.BCELoss()
    pool = 16
    xs = torch.rand((pool, batch, 3, 64, 64), device=dev) * 2 - 1
    x = torch.empty((batch, 3, 64, 64), device=dev).to(memory_format=fmt)
    ones = torch.ones(batch, device=dev)
    zeros = torch.zeros(batch, device=dev)
    noise = torch.empty((batch, 100, 1, 1), device=dev)

    def dp(inp):  # D's probabilities as float32 (BCELoss refuses autocast)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            out = df(inp)
        return out.float().view(-1)

    def step():
        d.zero_grad(set_to_none=not graph)
        err_real = bce(dp(x), ones)
        err_real.backward()
        noise.normal_()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            fake = gf(noise)
        err_fake = bce(dp(fake.detach()), zeros)
        err_fake.backward()
        opt_d.step()
        g.zero_grad(set_to_none=not graph)
        err_g = bce(dp(fake), ones)
        err_g.backward()
        opt_g.step()

    def feed(i):
        x.copy_(xs[i % pool])

    times = run_timed(torch, step, feed, graph, steps)
    return "dcgan", batch, times


def time_one(torch, name, mode, precision, steps, dev):
    model_name, batch, shape, classes = WORKLOADS[name]
    if model_name == "dcgan":
        return time_gan(torch, mode, precision, steps, dev, batch)
    set_precision(torch, precision)
    torch.manual_seed(0)
    bf16 = precision == "bf16"
    fmt = torch.channels_last if bf16 else torch.contiguous_format
    model = build(torch, model_name).to(dev, memory_format=fmt)
    graph = mode == "graph"
    opt = optimizer(torch, model_name, model.parameters(), graph)
    fwd = torch.compile(model) if mode == "compile" else model
    loss_fn = torch.nn.CrossEntropyLoss()
    pool = 8 if model_name == "caltech9" else 64
    xs = torch.rand((pool, batch) + shape, device=dev)
    ys = torch.randint(0, classes, (pool, batch), device=dev)
    x = torch.empty((batch,) + shape, device=dev).to(memory_format=fmt)
    y = torch.empty((batch,), dtype=torch.long, device=dev)

    def step():
        opt.zero_grad(set_to_none=not graph)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            loss = loss_fn(fwd(x), y)
        loss.backward()
        opt.step()
        return loss

    def feed(i):
        x.copy_(xs[i % pool])
        y.copy_(ys[i % pool])

    times = run_timed(torch, step, feed, graph, steps)
    return model_name, batch, times


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workloads", default="W2b8,W2b128,W3")
    ap.add_argument("--modes", default="eager,graph",
                    help="eager, graph (the whole step as one CUDA graph), compile (torch.compile)")
    ap.add_argument("--precisions", default="fp32,tf32",
                    help="fp32, tf32, bf16 (autocast bfloat16 + channels_last)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--out", default="runs/bench/gpu.csv")
    args = ap.parse_args()
    import torch
    if not torch.cuda.is_available():
        sys.exit("torch_gpu_bench: torch sees no GPU")
    dev = torch.device("cuda")
    p = torch.cuda.get_device_properties(dev)
    gpu = f"{p.name}, {p.total_memory / 2**30:.1f} GiB, cc {p.major}.{p.minor}"
    versions = f"torch {torch.__version__} cuda {torch.version.cuda} cudnn {torch.backends.cudnn.version()}"
    for m in args.modes.split(","):
        if m not in ("eager", "graph", "compile"):
            sys.exit(f"torch_gpu_bench: --modes: unknown mode {m!r} (eager, graph, compile)")
    for q in args.precisions.split(","):
        if q not in ("fp32", "tf32", "bf16"):
            sys.exit(f"torch_gpu_bench: --precisions: unknown precision {q!r} (fp32, tf32, bf16)")
    rows = []
    for name in args.workloads.split(","):
        for mode in args.modes.split(","):
            for precision in args.precisions.split(","):
                try:
                    model, batch, t = time_one(torch, name, mode, precision, args.steps, dev)
                except Exception as e:  # noqa: BLE001 -- a configuration torch cannot run
                    print(f"torch {name:7s} {mode:5s} {precision}: FAILED: "
                          f"{type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
                    torch.cuda.synchronize()
                    continue
                med = statistics.median(t)
                print(f"torch {name:7s} {mode:5s} {precision}: median {med:.4f} ms/step "
                      f"(min {min(t):.4f}, max {max(t):.4f}, {len(t)} blocks of 10)", flush=True)
                rows.append(["torch", name, model, batch, "cuda", gpu, mode, precision,
                             10 * len(t), f"{med:.4f}", f"{min(t):.4f}", f"{max(t):.4f}",
                             versions, git_rev(), socket.gethostname(), utc_now()])
    write_rows(args.out, COLUMNS, rows)
    print(f"rows appended to {args.out}")


if __name__ == "__main__":
    main()
