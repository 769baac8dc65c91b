#!/usr/bin/python3
"""PyTorch's answer to issues 18 and 35: how large an input a model trains at on one GPU, and
at what step time, with PyTorch's own tools for models past the GPU's memory. The yardstick of
`make bench-memory` (scripts/bench/bench_memory.sh runs pdnn beside it) and of the U-Net study
(scripts/gpu/runners/unet-memory.sh).

--model:
  w4    W4 (caltech9, SPEC.md) as pdnn builds it (lib/workloads/classifier/caltech_models.h):
        batch 64 by default, AdaGrad lr 0.01, softmax cross-entropy over 6 classes;
  unet  the U-Net of pdnn's segment app (lib/workloads/segmentation/unet.h), built by the
        twin's own class (torch_segment.unet_class): base 64, depth 4 (--base, --depth), no
        BatchNorm, 2 classes, per-pixel softmax cross-entropy, Adam lr 1e-3, batch 1 by default.
Both on a synthetic batch already on the device (the bench measures the step, not the loader),
torch's own initial weights (the values do not change the time or the memory); --precision
fp32 (TF32 off, pdnn's default), tf32, or bf16 (autocast bfloat16 around forward and loss,
model and input channels_last), cuDNN's autotuner on (torch_gpu_bench.set_precision).

Variants, each at every --sides value:
  plain        the model as written;
  save_on_cpu  forward and loss inside torch.autograd.graph.save_on_cpu(pin_memory=True): every
               tensor saved for backward goes to pinned host memory and comes back for backward
               (PyTorch's swapping: the copies on the compute stream, not overlapped);
  checkpoint   torch.utils.checkpoint (use_reentrant=False) around each block, which then runs
               again in backward: W4's three conv blocks (conv ReLU conv ReLU pool); the U-Net's
               nine two-conv blocks (conv ReLU conv ReLU of enc1..enc4, mid, dec4..dec1:
               torch_segment.py's UNet.checkpoint_blocks). Kept: each block's input, and what
               the layers between the blocks save (the U-Net's max-pools their inputs, which
               are the encoder blocks' outputs, and their argmax; the transposed convolutions
               and the 1x1 head their inputs; the loss its log-softmax; W4's dense head);
  checkpoint+save_on_cpu  both: what checkpoint keeps goes to the host (torch 2.x's
               non-reentrant checkpoint saves the block inputs through autograd's saved-tensor
               hooks, so save_on_cpu moves them too; torch 1.13's held them itself).
Default: all four for unet, the first three for w4 (its memory table's).

Each (variant, side) runs in a fresh process (an out-of-memory error, or the caching
allocator's state after one, must not spill into the next): a child forked from this one after
it has imported torch, before any CUDA call, so that each pays for its own CUDA context,
allocator and autotuner but not for the import (6 s on the 2-core CI machine; the GPU host's not measured). A step's time is timed alone
(synchronised before and after); the median over --steps steps after --warmup (2) untimed ones, with min
and max. Peak memory: torch.cuda.max_memory_allocated() (tensors) and max_memory_reserved()
(what the caching allocator held) over the timed steps, in GiB. A run that does not fit writes
status "oom" and empty times. Memory grows with the side, so once a variant runs out of memory,
fails (status "error", the reason printed: e.g. a tensor past a kernel's 32-bit indexing), is
killed from outside (status "killed", the signal, the child's peak host memory and the host's
printed: SIGKILL is, most likely, the kernel's out-of-memory killer, as for save_on_cpu's host
copies of W4 at 1120 on a 128 GiB host) or runs past its time at one side, its larger sides are
not tried: status "skipped: oom at N".
--timeout bounds each process (cuDNN's autotuner, in the warm-up steps, is the slow part at
large sides; save_on_cpu's copies the other): a run past it is killed, status "timeout", and
the whole table fits one command of a lent GPU (issue 33). --budget bounds the whole command
(a GPU visit's command is killed at 10 minutes, and with it every row not yet packed): a run
still going when it ends is killed, status "budget", and the runs after it are not started,
status "skipped: budget".
--device cpu runs the same on the CPU (no peaks, no pinned memory): the check that the
machinery works, for the tests.

Rows (one per variant and side) are appended to --out, columns:
  app,framework,variant,side,batch,precision,gpu_memory_limit_gib,peak_gib,peak_reserved_gib,
  median_ms,min_ms,max_ms,steps,status,planned_gib,context_gib,plan,gpu,versions,git_rev,host,
  timestamp
and for the U-Net also predicted_ms (pdnn's plan's step, bench_memory.sh APP=segment).
app is caltech9 for W4, the U-Net's model name (unet_b64_d4) for it. gpu_memory_limit_gib,
planned_gib, context_gib, plan and predicted_ms are empty for PyTorch (it has no such cap or
plan).
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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "pylib"))
from results_csv import write_rows, git_rev, utc_now  # noqa: E402

START = time.monotonic()  # --budget counts from here, torch's import included

COLUMNS = ["app", "framework", "variant", "side", "batch", "precision", "gpu_memory_limit_gib",
           "peak_gib", "peak_reserved_gib", "median_ms", "min_ms", "max_ms", "steps", "status",
           "planned_gib", "context_gib", "plan", "gpu", "versions", "git_rev", "host", "timestamp"]
UNET_COLUMNS = COLUMNS + ["predicted_ms"]
VARIANTS = ["plain", "save_on_cpu", "checkpoint", "checkpoint+save_on_cpu"]
MODELS = {"w4": {"batch": 64, "variants": VARIANTS[:3]},
          "unet": {"batch": 1, "variants": VARIANTS}}
GIB = float(1 << 30)


def build_w4(torch, side, dev, classes=6):
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


def build(torch, model, side, dev, base=64, depth=4):
    """(module, forward(x, checkpointed) -> logits, optimizer, classes) of --model, on
    `dev`."""
    if model == "w4":
        import torch.utils.checkpoint as cp
        blocks, head = build_w4(torch, side, dev)

        def forward(x, checkpointed):
            for b in blocks:
                x = cp.checkpoint(b, x, use_reentrant=False) if checkpointed else b(x)
            return head(x)
        module = torch.nn.ModuleList([blocks, head])
        return module, forward, torch.optim.Adagrad(module.parameters(), lr=0.01), 6
    import torch_segment  # the twin's U-Net: the same class the accuracy runs train
    net = torch_segment.unet_class(torch)(3, 2, base, depth, False).to(dev)

    def forward(x, checkpointed):
        net.checkpoint_blocks = checkpointed
        return net(x)
    return net, forward, torch.optim.Adam(net.parameters(), lr=1e-3), 2


def variant_loss(torch, forward, variant, x, y, bf16=False, pin_memory=True):
    """The loss of one forward pass as `variant` runs it (backward left to the caller: the
    saved tensors' hooks are set when they are saved)."""
    import contextlib
    import torch_reference as ref
    swap = (torch.autograd.graph.save_on_cpu(pin_memory=pin_memory)
            if variant.endswith("save_on_cpu") else contextlib.nullcontext())
    with swap, ref.autocast(torch, bf16):
        return torch.nn.functional.cross_entropy(forward(x, variant.startswith("checkpoint")), y)


def autotuner_note(a):
    """How cuDNN picked the algorithms, for the row's versions: a table must say it when it
    is not the autotuner at PyTorch's default limit."""
    if a.device != "cuda":
        return ""
    if a.cudnn_benchmark == "off":
        return ", cudnn.benchmark off"
    return "" if a.benchmark_limit is None else ", cudnn.benchmark_limit %d" % a.benchmark_limit


def run_one(a, variant, side):
    """One (variant, side) in this process: a dict for the row, with the seconds its parts took
    (import, model, warm-up steps, timed steps)."""
    t_start = time.perf_counter()
    import torch
    import torch_gpu_bench
    cuda = a.device == "cuda"
    if cuda:
        torch_gpu_bench.set_precision(torch, a.precision)
        if a.benchmark_limit is not None:  # how many algorithms the autotuner times per shape
            torch.backends.cudnn.benchmark_limit = a.benchmark_limit
        if a.cudnn_benchmark == "off":  # PyTorch's own default: cuDNN's heuristics, no timing
            torch.backends.cudnn.benchmark = False
    dev = torch.device(a.device)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    torch.manual_seed(1)
    out = {"gpu": torch.cuda.get_device_name(0) if cuda else "",
           "versions": "torch %s" % torch.__version__ + (
               ", CUDA %s, cuDNN %s" % (torch.version.cuda, torch.backends.cudnn.version())
               if cuda else "") + autotuner_note(a)}
    parts = {"import_s": time.perf_counter() - t_start}
    out["parts"] = parts
    bf16 = a.precision == "bf16"
    fmt = torch.channels_last if bf16 else torch.contiguous_format
    try:
        t0 = time.perf_counter()
        module, forward, opt, classes = build(torch, a.model, side, dev, a.base, a.depth)
        module.to(memory_format=fmt)
        sync()
        parts["model_s"] = time.perf_counter() - t0
        x = torch.randn(a.batch, 3, side, side, device=dev).contiguous(memory_format=fmt)
        y = torch.randint(0, classes, (a.batch,) if a.model == "w4" else (a.batch, side, side),
                          device=dev)

        def step():
            opt.zero_grad(set_to_none=True)
            variant_loss(torch, forward, variant, x, y, bf16, pin_memory=cuda).backward()
            opt.step()

        t0 = time.perf_counter()
        for _ in range(a.warmup):
            step()
        sync()
        parts["warmup_s"] = time.perf_counter() - t0
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        times = []
        for _ in range(a.steps):
            sync()
            t0 = time.perf_counter()
            step()
            sync()
            times.append((time.perf_counter() - t0) * 1e3)
        parts["steps_s"] = sum(times) / 1e3
        out.update(status="ok", median_ms=statistics.median(times), min_ms=min(times),
                   max_ms=max(times), steps=a.steps)
    except torch.cuda.OutOfMemoryError as e:
        out.update(status="oom", steps=0, error=str(e).splitlines()[0])
    if cuda:
        out.update(peak_gib=torch.cuda.max_memory_allocated() / GIB,
                   peak_reserved_gib=torch.cuda.max_memory_reserved() / GIB)
    return out


def no_row_why(status, usage, secs):
    """Why a child wrote no row, from its wait status and resource usage: a signal not sent by
    the --timeout (SIGKILL from the kernel when the host runs out of memory: save_on_cpu's host
    copies at a large side) with the child's peak host memory beside the host's, else its exit
    code."""
    if not os.WIFSIGNALED(status):
        return "the child exited with status %d and no row" % os.WEXITSTATUS(status)
    sig = os.WTERMSIG(status)
    try:
        name = signal.Signals(sig).name
    except ValueError:
        name = "signal %d" % sig
    host_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB
    why = "killed by %s after %.0f s, its peak host memory %.1f GiB (the host has %.1f GiB)" % (
        name, secs, usage.ru_maxrss * 1024 / GIB, host_gib)
    if sig == signal.SIGKILL:
        why += ": by the kernel's out-of-memory killer, most likely (this script sends it only "
        why += "past --timeout or --budget, which say so)"
    return why


def run_child(a, v, side, timeout):
    """One (variant, side) in a fresh process, within `timeout` s (0: none): the row's dict.
    The child is forked from this process (torch imported, CUDA not yet touched: forking is
    safe then) and sends its dict back through a pipe."""
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: one run, its dict down the pipe, no Python exit handlers
        os.close(rd)
        code = 0
        if os.environ.get("PDNN_TWIN_TEST_SIGKILL_SIDE") == str(side):  # (the tests' external kill)
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            data = json.dumps(run_one(a, v, side))
        except BaseException as e:  # noqa: BLE001 - reported as the row's error
            data = json.dumps({"status": "error", "error": "%s: %s" % (type(e).__name__, e)})
            code = 1
        with os.fdopen(wr, "w") as f:
            f.write(data)
        os._exit(code)
    os.close(wr)
    started = time.monotonic()
    deadline = started + timeout if timeout else None
    chunks = []
    with os.fdopen(rd, "rb") as f:
        while True:
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                print("torch %-22s %4d: past %g s, killed" % (v, side, timeout),
                      file=sys.stderr)
                return {"status": "timeout", "gpu": "", "versions": "", "steps": 0}
            if not select.select([f], [], [], wait)[0]:
                continue
            b = os.read(f.fileno(), 1 << 16)
            if not b:
                break
            chunks.append(b)
    _, status, usage = os.wait4(pid, 0)
    try:
        r = json.loads(b"".join(chunks).decode())
    except ValueError:
        r = {"status": "error", "error": no_row_why(status, usage, time.monotonic() - started)}
        if os.WIFSIGNALED(status):
            r["status"] = "killed"
    if r.get("status") in ("error", "killed"):
        print("torch %-22s %4d: failed: %s" % (v, side, r.get("error", "")), file=sys.stderr)
        r.update(gpu="", versions="", steps=0)
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=sorted(MODELS), default="w4")
    ap.add_argument("--sides", default="224,448,672,896,1120,1344",
                    help="input sides, comma-separated (multiples of 8; the U-Net's of 2^depth)")
    ap.add_argument("--variants", default="",
                    help="comma-separated, of %s (default: the model's)" % ",".join(VARIANTS))
    ap.add_argument("--batch", type=int, default=0, help="default: W4 64, the U-Net 1")
    ap.add_argument("--base", type=int, default=64, help="the U-Net's channels at level 1")
    ap.add_argument("--depth", type=int, default=4, help="the U-Net's poolings")
    ap.add_argument("--precision", choices=["fp32", "tf32", "bf16"], default="fp32",
                    help="fp32 (TF32 off), tf32, bf16 (autocast + channels_last)")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="cpu: the machinery's check (fp32, no peaks)")
    ap.add_argument("--steps", type=int, default=5, help="timed steps after the warm-up ones")
    ap.add_argument("--timeout", type=float, default=0,
                    help="seconds each (variant, side) process may take (0: no limit)")
    ap.add_argument("--budget", type=float, default=0,
                    help="seconds the whole command may take (0: no limit): past them the "
                         "running process is killed and no other started")
    ap.add_argument("--benchmark-limit", type=int, default=None,
                    help="torch.backends.cudnn.benchmark_limit: the algorithms cuDNN's autotuner "
                         "times per shape (default: PyTorch's, 10; 0: all): bounds its time; a "
                         "table made with it says the value")
    ap.add_argument("--cudnn-benchmark", choices=["on", "off"], default="on",
                    help="on: cuDNN's autotuner times the algorithms at each new shape (minutes "
                         "at the U-Net's large sides); off: PyTorch's default, cuDNN's "
                         "heuristics pick them; the row's versions say off")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps before the timed ones")
    ap.add_argument("--out", default="runs/scale/memory_r2.csv")
    a = ap.parse_args()
    me = "torch_memory_bench.py"
    a.batch = a.batch or MODELS[a.model]["batch"]
    unit = 8 if a.model == "w4" else 1 << a.depth
    sides = [int(s) for s in a.sides.split(",") if s]
    variants = [v for v in a.variants.split(",") if v] or MODELS[a.model]["variants"]
    for s in sides:
        if s < unit or s % unit:
            sys.exit("%s: --sides %d: must be a multiple of %d, at least %d" % (me, s, unit, unit))
    for v in variants:
        if v not in VARIANTS:
            sys.exit("%s: --variants %s: not one of %s" % (me, v, ",".join(VARIANTS)))
    if a.device == "cpu" and a.precision != "fp32":
        sys.exit("%s: --precision %s: the CPU runs fp32" % (me, a.precision))
    columns = COLUMNS if a.model == "w4" else UNET_COLUMNS
    import torch  # noqa: F401 - once, here: the children forked below inherit it
    import torch_gpu_bench  # noqa: F401 - and the twins' modules (numpy: a second)
    import torch_segment  # noqa: F401
    app = "caltech9" if a.model == "w4" else "unet_b%d_d%d" % (a.base, a.depth)
    stopped = {}  # variant -> "oom at N" / "error at N" / "timeout at N": its larger sides not tried
    end = START + a.budget if a.budget else None
    for side in sides:
        for v in variants:
            left = end - time.monotonic() if end else None
            if v in stopped or (left is not None and left < 5):
                why = stopped.get(v, "budget")
                r = {"status": "skipped: %s" % why, "gpu": "", "versions": "", "steps": 0}
            else:
                cut = left is not None and (not a.timeout or left < a.timeout)
                r = run_child(a, v, side, left if cut else a.timeout)
                if r["status"] == "timeout" and cut:
                    r["status"] = "budget"
                    end = time.monotonic()  # nothing more starts
                if r["status"] != "ok":
                    stopped[v] = "%s at %d" % (r["status"], side)
            fmt = lambda k, f="%.3f": (f % r[k]) if k in r else ""  # noqa: E731
            parts = ", ".join("%s %.1f s" % (k[:-2], t) for k, t in r.get("parts", {}).items())
            print("torch %-22s %4d: %s, peak %s GiB (reserved %s), median %s ms%s"
                  % (v, side, r["status"], fmt("peak_gib"), fmt("peak_reserved_gib"),
                     fmt("median_ms", "%.1f"), " (%s)" % parts if parts else ""), flush=True)
            # Each row as it ends: a command that ends early keeps the ones done.
            row = [app, "pytorch", v, side, a.batch, a.precision, "", fmt("peak_gib"),
                   fmt("peak_reserved_gib"), fmt("median_ms"), fmt("min_ms"), fmt("max_ms"),
                   r.get("steps", 0), r["status"], "", "", "", r["gpu"], r["versions"], git_rev(),
                   socket.gethostname(), utc_now()]
            write_rows(a.out, columns, [row + [""] * (len(columns) - len(row))])
    print("rows appended to %s" % a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
