#!/usr/bin/python3
"""PyTorch's answer to issue 18's question: how large an input W4 (caltech9, SPEC.md) trains at
on one GPU, and at what step time, with PyTorch's own tools for models past the GPU's memory.
The yardstick of `make bench-memory` (scripts/bench/bench_memory.sh runs pdnn beside it).

Variants, each at every --sides value:
  plain        the model as written;
  save_on_cpu  the step inside torch.autograd.graph.save_on_cpu(pin_memory=True): every tensor
               saved for backward goes to pinned host memory and comes back for backward;
  checkpoint   torch.utils.checkpoint (use_reentrant=False) around each of the three conv blocks
               (conv ReLU conv ReLU pool): only the block inputs are kept, the blocks run again
               in backward.
W4 as pdnn builds it (lib/workloads/classifier/caltech_models.h): batch 64, fp32 (TF32 off),
AdaGrad lr 0.01, softmax cross-entropy, on a synthetic batch already on the device (the bench
measures the step, not the loader). cuDNN's autotuner on.

Each (variant, side) runs in a fresh process (an out-of-memory error, or the caching
allocator's state after one, must not spill into the next): a child forked from this one after
it has imported torch, before any CUDA call, so that each pays for its own CUDA context,
allocator and autotuner but not for the import (6 s on the 2-core CI machine; the GPU host's not measured). A step's time is timed alone
(synchronised before and after); the median over --steps steps after 2 warm-up steps, with min
and max. Peak memory: torch.cuda.max_memory_allocated() (tensors) and max_memory_reserved()
(what the caching allocator held) over the timed steps, in GiB. A run that does not fit writes
status "oom" and empty times. Memory grows with the side, so once a variant runs out of memory
(or past its time) at one side, its larger sides are not tried: status "skipped: oom at N".
--timeout bounds each process (cuDNN's autotuner, in the 2 warm-up steps, is the slow part at
large sides; save_on_cpu's copies the other): a run past it is killed, status "timeout", and
the whole table fits one command of a lent GPU (issue 33).

Rows (one per variant and side) are appended to --out, columns:
  app,framework,variant,side,batch,precision,gpu_memory_limit_gib,peak_gib,peak_reserved_gib,
  median_ms,min_ms,max_ms,steps,status,planned_gib,context_gib,plan,gpu,versions,git_rev,host,
  timestamp
gpu_memory_limit_gib, planned_gib, context_gib and plan are empty for PyTorch (it has no such
cap or plan).
"""
import argparse
import json
import os
import select
import signal
import socket
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from results_csv import write_rows, git_rev, utc_now  # noqa: E402

COLUMNS = ["app", "framework", "variant", "side", "batch", "precision", "gpu_memory_limit_gib",
           "peak_gib", "peak_reserved_gib", "median_ms", "min_ms", "max_ms", "steps", "status",
           "planned_gib", "context_gib", "plan", "gpu", "versions", "git_rev", "host", "timestamp"]
VARIANTS = ["plain", "save_on_cpu", "checkpoint"]
GIB = float(1 << 30)


def build(torch, side, dev, classes=6):
    """W4 as three conv blocks and the dense head (so checkpoint can wrap the blocks), made and
    initialised on `dev`: on the host, the 3.7 G-parameter Dense layer at 1344 took longer to
    initialise than the steps (as pdnn's did before its host draws ran on all cores)."""
    nn = torch.nn
    blocks, c = [], 3
    for k in (32, 64, 128):
        blocks.append(nn.Sequential(nn.Conv2d(c, k, 3, padding=1, device=dev), nn.ReLU(),
                                    nn.Conv2d(k, k, 3, padding=1, device=dev), nn.ReLU(),
                                    nn.MaxPool2d(2)))
        c = k
    f = 128 * (side // 8) * (side // 8)
    head = nn.Sequential(nn.Flatten(), nn.Linear(f, 1024, device=dev), nn.ReLU(), nn.Dropout(0.5),
                         nn.Linear(1024, 1024, device=dev), nn.ReLU(), nn.Dropout(0.5),
                         nn.Linear(1024, classes, device=dev))
    return nn.ModuleList(blocks), head


def run_one(variant, side, batch, steps, benchmark_limit=None):
    """One (variant, side) in this process: a dict for the row, with the seconds its parts took
    (import, model, warm-up steps, timed steps)."""
    t_start = time.perf_counter()
    import torch
    import torch.utils.checkpoint as cp
    torch.backends.cudnn.benchmark = True
    if benchmark_limit is not None:  # how many algorithms the autotuner times per shape
        torch.backends.cudnn.benchmark_limit = benchmark_limit
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    torch.manual_seed(1)
    out = {"gpu": torch.cuda.get_device_name(0),
           "versions": "torch %s, CUDA %s, cuDNN %s" % (torch.__version__, torch.version.cuda,
                                                        torch.backends.cudnn.version())}
    parts = {"import_s": time.perf_counter() - t_start}
    out["parts"] = parts
    try:
        t0 = time.perf_counter()
        blocks, head = build(torch, side, dev)
        torch.cuda.synchronize()
        parts["model_s"] = time.perf_counter() - t0
        params = list(blocks.parameters()) + list(head.parameters())
        opt = torch.optim.Adagrad(params, lr=0.01)
        loss_fn = torch.nn.CrossEntropyLoss()
        x = torch.randn(batch, 3, side, side, device=dev)
        y = torch.randint(0, 6, (batch,), device=dev)

        def forward():
            h = x
            for b in blocks:
                h = cp.checkpoint(b, h, use_reentrant=False) if variant == "checkpoint" else b(h)
            return loss_fn(head(h), y)

        def step():
            opt.zero_grad(set_to_none=True)
            if variant == "save_on_cpu":
                with torch.autograd.graph.save_on_cpu(pin_memory=True):
                    loss = forward()
            else:
                loss = forward()
            loss.backward()
            opt.step()

        t0 = time.perf_counter()
        for _ in range(2):
            step()
        torch.cuda.synchronize()
        parts["warmup_s"] = time.perf_counter() - t0
        torch.cuda.reset_peak_memory_stats()
        times = []
        for _ in range(steps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            step()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
        parts["steps_s"] = sum(times) / 1e3
        out.update(status="ok", peak_gib=torch.cuda.max_memory_allocated() / GIB,
                   peak_reserved_gib=torch.cuda.max_memory_reserved() / GIB,
                   median_ms=statistics.median(times), min_ms=min(times), max_ms=max(times),
                   steps=steps)
    except torch.cuda.OutOfMemoryError as e:
        out.update(status="oom", peak_gib=torch.cuda.max_memory_allocated() / GIB,
                   peak_reserved_gib=torch.cuda.max_memory_reserved() / GIB, steps=0,
                   error=str(e).splitlines()[0])
    return out


def run_child(a, v, side):
    """One (variant, side) in a fresh process, within --timeout: the row's dict. The child is
    forked from this process (torch imported, CUDA not yet touched: forking is safe then) and
    sends its dict back through a pipe."""
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: one run, its dict down the pipe, no Python exit handlers
        os.close(rd)
        code = 0
        try:
            data = json.dumps(run_one(v, side, a.batch, a.steps, a.benchmark_limit))
        except BaseException as e:  # noqa: BLE001 - reported as the row's error
            data = json.dumps({"status": "error", "error": "%s: %s" % (type(e).__name__, e)})
            code = 1
        with os.fdopen(wr, "w") as f:
            f.write(data)
        os._exit(code)
    os.close(wr)
    deadline = time.monotonic() + a.timeout if a.timeout else None
    chunks = []
    with os.fdopen(rd, "rb") as f:
        while True:
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                print("torch %-11s %4d: past --timeout %g s, killed" % (v, side, a.timeout),
                      file=sys.stderr)
                return {"status": "timeout", "gpu": "", "versions": "", "steps": 0}
            if not select.select([f], [], [], wait)[0]:
                continue
            b = os.read(f.fileno(), 1 << 16)
            if not b:
                break
            chunks.append(b)
    _, status = os.waitpid(pid, 0)
    try:
        r = json.loads(b"".join(chunks).decode())
    except ValueError:
        r = {"status": "error", "error": "the child ended with status %d and no row" % status}
    if r.get("status") == "error":
        print("torch %-11s %4d: failed: %s" % (v, side, r.get("error", "")), file=sys.stderr)
        r.update(gpu="", versions="", steps=0)
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sides", default="224,448,672,896,1120,1344",
                    help="input sides, comma-separated (multiples of 8)")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=5, help="timed steps after 2 warm-up ones")
    ap.add_argument("--timeout", type=float, default=0,
                    help="seconds each (variant, side) process may take (0: no limit)")
    ap.add_argument("--benchmark-limit", type=int, default=None,
                    help="torch.backends.cudnn.benchmark_limit: the algorithms cuDNN's autotuner "
                         "times per shape (default: PyTorch's, 10; 0: all): bounds its time; a "
                         "table made with it says the value")
    ap.add_argument("--out", default="runs/scale/memory_r2.csv")
    a = ap.parse_args()
    sides = [int(s) for s in a.sides.split(",") if s]
    variants = [v for v in a.variants.split(",") if v]
    for s in sides:
        if s < 8 or s % 8:
            sys.exit("torch_memory_bench.py: --sides %d: must be a multiple of 8, at least 8" % s)
    for v in variants:
        if v not in VARIANTS:
            sys.exit("torch_memory_bench.py: --variants %s: not one of %s" % (v, ",".join(VARIANTS)))
    import torch  # noqa: F401 - once, here: the children forked below inherit it
    stopped = {}  # variant -> "oom at N" / "timeout at N": its larger sides are not tried
    for side in sides:
        for v in variants:
            if v in stopped:
                r = {"status": "skipped: %s" % stopped[v], "gpu": "", "versions": "", "steps": 0}
            else:
                r = run_child(a, v, side)
                if r["status"] in ("oom", "timeout"):
                    stopped[v] = "%s at %d" % (r["status"], side)
            fmt = lambda k, f="%.3f": (f % r[k]) if k in r else ""  # noqa: E731
            parts = ", ".join("%s %.1f s" % (k[:-2], t) for k, t in r.get("parts", {}).items())
            print("torch %-11s %4d: %s, peak %s GiB (reserved %s), median %s ms%s"
                  % (v, side, r["status"], fmt("peak_gib"), fmt("peak_reserved_gib"),
                     fmt("median_ms", "%.1f"), " (%s)" % parts if parts else ""), flush=True)
            # Each row as it ends: a command that ends early keeps the ones done.
            write_rows(a.out, COLUMNS, [["caltech9", "pytorch", v, side, a.batch, "fp32", "", fmt("peak_gib"),
                         fmt("peak_reserved_gib"), fmt("median_ms"), fmt("min_ms"),
                         fmt("max_ms"), r.get("steps", 0), r["status"], "", "", "", r["gpu"],
                         r["versions"], git_rev(), socket.gethostname(), utc_now()]])
    print("rows appended to %s" % a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
