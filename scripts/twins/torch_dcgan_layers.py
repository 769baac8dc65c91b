#!/usr/bin/python3
"""PyTorch's per-layer time in W5's training step on the CPU: the yardstick for the rows of
`build/bin/dcgan --profile` (scripts/bench/bench_dcgan.sh puts the two side by side).

The step is scripts/twins/torch_reference.py's (the DCGAN tutorial's): D on a real batch, G on noise,
D on the fake batch, D's Adam step; D again on the fake batch, the gradient through D into G,
G's Adam step; batch 64, random real images in [-1, 1] (the data's cost is not a layer's).
Layers are grouped as pdnn's profile groups them, a BatchNorm or convolution with the
activation after it: D.0 (Conv2d + LeakyReLU), D.2, D.3 (BatchNorm2d + LeakyReLU), ..., G.13
(Tanh). Forward: the time from the group's first module's forward pre-hook to its last one's
forward hook. Backward: the autograd engine runs a CPU backward on the calling thread, group by
group in reverse: a hook on each group's output fires when its gradient is ready, which is when
the group's backward starts; it ends at the next such hook (or when backward() returns). As in
pdnn's profile, rows D.update and G.update hold the Adam steps and "other" the rest of the step
(the losses, zero_grad, the noise). The hooks cost a few microseconds each: time the step
itself with torch_reference.py --steps.

  python3 scripts/twins/torch_dcgan_layers.py --threads 1 --steps 4 --out runs/bench/dcgan_torch_layers.csv
"""
import argparse
import os
import socket
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from results_csv import git_rev, utc_now, write_rows  # noqa: E402
from torch_reference import dcgan_models, torch_module  # noqa: E402

COLUMNS = ["app", "model", "layer", "kind", "fwd_ms", "bwd_ms", "update_ms", "threads", "batch",
           "steps", "step_ms", "config", "torch_version", "git_rev", "host", "cpu_model",
           "timestamp"]


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip().replace(",", " ")
    except OSError:
        pass
    return "unknown"


def groups(model, prefix):
    """pdnn's profile rows: (name, [modules]) with each activation joined to the layer before."""
    acts = ("ReLU", "LeakyReLU")
    out = []
    for i, m in enumerate(model):
        if type(m).__name__ in acts and out:
            out[-1][1].append(m)
        else:
            out.append((f"{prefix}.{i}", [m]))
    return out


class Timeline:
    """Per-group forward times and backward boundaries of one step."""

    def __init__(self, torch, named_groups):
        self.fwd = {name: 0.0 for name, _ in named_groups}
        self.bwd = {name: 0.0 for name, _ in named_groups}
        self.kind = {name: " + ".join(type(m).__name__ for m in ms) for name, ms in named_groups}
        self.open_bwd = None  # (name, start) of the group whose backward runs now
        for name, ms in named_groups:
            ms[0].register_forward_pre_hook(self._fwd_start(name))
            ms[-1].register_forward_hook(self._fwd_end(name))

    def _fwd_start(self, name):
        def hook(module, inputs):
            self.t0 = time.perf_counter()
        return hook

    def _fwd_end(self, name):
        def hook(module, inputs, output):
            self.fwd[name] += time.perf_counter() - self.t0
            if output.requires_grad:
                output.register_hook(self._bwd_mark(name))
        return hook

    def _bwd_mark(self, name):
        def hook(grad):
            self.close_bwd()
            self.open_bwd = (name, time.perf_counter())
        return hook

    def close_bwd(self):
        if self.open_bwd:
            name, t = self.open_bwd
            self.bwd[name] += time.perf_counter() - t
            self.open_bwd = None

    def backward(self, loss):
        loss.backward()
        self.close_bwd()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=4, help="timed steps (after 2 untimed)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--out", default="", help="CSV to append the rows to")
    ap.add_argument("--config", default="default",
                    help="name of the settings it runs under, for the CSV (default, best)")
    ap.add_argument("--rev", default="", help="git revision for the CSV (default: this checkout's)")
    args = ap.parse_args()
    torch = torch_module()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    g, d = dcgan_models(torch)
    tl = Timeline(torch, groups(d, "D") + groups(g, "G"))
    opt_g = torch.optim.Adam(g.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(d.parameters(), lr=2e-4, betas=(0.5, 0.999))
    bce = torch.nn.BCELoss()
    n = args.batch
    ones, zeros = torch.ones(n), torch.zeros(n)
    real = torch.rand(n, 3, 64, 64) * 2 - 1
    step_ms = []
    update = {"D.update": 0.0, "G.update": 0.0}

    def timed_step(name, opt):
        t = time.perf_counter()
        opt.step()
        update[name] += time.perf_counter() - t

    for step in range(2 + args.steps):
        if step == 2:  # the warm-up steps' times are dropped
            tl.fwd = dict.fromkeys(tl.fwd, 0.0)
            tl.bwd = dict.fromkeys(tl.bwd, 0.0)
            update = dict.fromkeys(update, 0.0)
        t0 = time.perf_counter()
        d.zero_grad()
        tl.backward(bce(d(real).view(-1), ones))
        fake = g(torch.randn(n, 100, 1, 1))
        tl.backward(bce(d(fake.detach()).view(-1), zeros))
        timed_step("D.update", opt_d)
        g.zero_grad()
        tl.backward(bce(d(fake).view(-1), ones))
        timed_step("G.update", opt_g)
        if step >= 2:
            step_ms.append(1e3 * (time.perf_counter() - t0))
    med = statistics.median(step_ms)
    rows, now, rev = [], utc_now(), args.rev or git_rev()
    print(f"torch {torch.__version__}, {args.threads} threads, batch {n}: {med:.1f} ms per step "
          f"(median of {args.steps}, with the hooks), per layer (ms per step):")
    print(f"{'layer':9} {'kind':32} {'fwd':>9} {'bwd':>9} {'update':>9}")
    table = [(name, tl.kind[name], 1e3 * tl.fwd[name] / args.steps,
              1e3 * tl.bwd[name] / args.steps, 0.0) for name in tl.fwd]
    table += [(name, "adam", 0.0, 0.0, 1e3 * v / args.steps) for name, v in update.items()]
    rest = statistics.mean(step_ms) - sum(f + b + u for _, _, f, b, u in table)
    table.append(("other", "loss, zero_grad, noise, overhead", rest, 0.0, 0.0))
    for name, kind, f, b, u in table:
        print(f"{name:9} {kind:32} {f:9.3f} {b:9.3f} {u:9.3f}")
        rows.append(["torch", "dcgan", name, kind, f"{f:.3f}", f"{b:.3f}", f"{u:.3f}",
                     args.threads, n, args.steps, f"{med:.1f}", args.config, torch.__version__,
                     rev, socket.gethostname(), cpu_model(), now])
    if args.out:
        write_rows(args.out, COLUMNS, rows)
        print(f"rows appended to {args.out}")


if __name__ == "__main__":
    main()
