#!/usr/bin/python3
"""W6 (SPEC.md) written the way a numpy user writes it, timed, for comparison with build/bin/hebbian.

  scripts/twins/hebbian_numpy.py [--n 200,1000,2000] [--t 500,5000,44100] [--dtype float32,float64]
                           [--threads 1,2] [--leak 0] [--lr 1e-6] [--seed 1] [--repeat 1]
                           [--max-seconds 20] [--framework numpy|torch] [--device cpu|cuda]
                           [--out runs/hebbian/hebbian.csv]

Per step:  pre = W @ x + win * u[t];  x = x + tanh(pre)  (leaky: (1-a) x + a tanh(pre));
           W += lr * (outer(x, x) - (x * x)[:, None] * W).
The problem is pdnn's: W, win ~ U(-1,1), u ~ N(0,1) drawn from the same seed through
scripts/pylib/pdnn_rng.py (the same float32 numbers as the app), x_0 = 0.

A run stops at the first step whose x or W holds a non-finite value, as the app does: pre is
checked every step (an inf or NaN in W shows there unless it meets an exact zero of x), x too,
W itself when pre is not finite and once at the end. --max-seconds stops a point early once its
steps have taken that long (numpy needs ~3 minutes for n = 2000, T = 44100): the row's steps_run
says how many steps were timed; us_per_step is over those.

Rows go to the app's CSV (same columns) with app=numpy (or torch), variant=eager. Thread counts
are set through OMP_NUM_THREADS / OPENBLAS_NUM_THREADS, which BLAS reads at import: each count
runs in a child process of this script.
--framework torch --device cuda: the same ops in PyTorch on the GPU (CuPy-style eager, one
kernel per op; the non-finite checks stay on the device, read every 256 steps).
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import results_csv  # noqa: E402

HEADER = ["app", "variant", "device", "dtype", "n", "steps", "threads", "leak", "lr", "seed",
          "repeat", "steps_run", "first_nonfinite_step", "seconds", "us_per_step", "us_min",
          "us_max", "w_gbps", "floor_gbps", "floor_us_per_step", "floor_us_min", "copy_gbps", "device_name",
          "cpu_model", "blas_core", "git_rev", "host", "timestamp"]


def int_list(s):
    return [int(v) for v in s.split(",") if v]


def problem(n, steps, seed):
    """W (n,n), win (n), u (steps) as float32, drawn as lib/workloads/hebbian/hebbian_problem.cpp draws them."""
    import numpy as np
    import pdnn_rng
    rng = pdnn_rng.Rng(seed)
    W = rng.uniform_float((n, n), -1.0, 1.0)
    win = rng.uniform_float((n,), -1.0, 1.0)
    d = rng.uniform_many(2 * steps)  # Rng::normal(): u1 = 1 - uniform(), u2 = uniform()
    u = (np.sqrt(-2.0 * np.log(1.0 - d[0::2])) * np.cos(2.0 * np.pi * d[1::2])).astype(np.float32)
    return W, win, u


def run_numpy(W0, win, u, steps, dtype, lr, leak, max_seconds):
    import numpy as np
    W = W0.astype(dtype)
    win = win.astype(dtype)
    u = u.astype(dtype)
    x = np.zeros(W.shape[0], dtype=dtype)
    lr = dtype(lr)
    keep, gain = (dtype(1), dtype(1)) if leak == 0 else (dtype(1 - leak), dtype(leak))
    bad = -1
    t0 = time.perf_counter()
    s = 0
    with np.errstate(over="ignore", invalid="ignore"):
        for s in range(1, steps + 1):
            pre = W @ x + win * u[s - 1]
            if not np.isfinite(pre).all() and not np.isfinite(W).all():
                bad = s - 1  # W_{s-1}
                break
            x = keep * x + gain * np.tanh(pre)
            W += lr * (np.outer(x, x) - (x * x)[:, None] * W)
            if not np.isfinite(x).all():
                bad = s
                break
            if max_seconds and (s & 63) == 0 and time.perf_counter() - t0 > max_seconds:
                break
        else:
            if not np.isfinite(W).all():
                bad = steps
    seconds = time.perf_counter() - t0
    steps_run = bad if bad >= 0 else s
    return seconds, steps_run, bad


def run_torch(W0, win, u, steps, dtype_name, lr, leak, max_seconds, device):
    import torch
    dt = torch.float32 if dtype_name == "float32" else torch.float64
    dev = torch.device(device)
    W = torch.as_tensor(W0, dtype=dt, device=dev).clone()
    win = torch.as_tensor(win, dtype=dt, device=dev)
    u = torch.as_tensor(u, dtype=dt, device=dev)
    x = torch.zeros(W.shape[0], dtype=dt, device=dev)
    keep, gain = (1.0, 1.0) if leak == 0 else (1.0 - leak, leak)
    none = torch.iinfo(torch.int64).max
    bad = torch.full((), none, dtype=torch.int64, device=dev)  # min over flagged steps
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    s, bad_s = 0, -1
    for s in range(1, steps + 1):
        pre = W @ x + win * u[s - 1]
        x = keep * x + gain * torch.tanh(pre)
        W += lr * (torch.outer(x, x) - (x * x)[:, None] * W)
        # on the device, no host sync: a non-finite pre means W_{s-1} (step s-1), x means step s
        flagged = torch.where(torch.isfinite(pre).all(), torch.where(torch.isfinite(x).all(), none, s), s - 1)
        bad = torch.minimum(bad, torch.as_tensor(flagged, device=dev))
        if (s & 255) == 0 or s == steps:
            b = int(bad.item())
            if b != none:
                bad_s = b
                break
            if max_seconds and time.perf_counter() - t0 > max_seconds:
                break
    sync()
    seconds = time.perf_counter() - t0
    steps_run = bad_s if bad_s >= 0 else s
    return seconds, steps_run, bad_s


def worker(a):
    """One thread count, in a process whose BLAS was loaded with it: JSON rows on stdout."""
    import numpy as np
    rows = []
    max_t = max(a.t)
    for n in a.n:
        W0, win, u = problem(n, max_t, a.seed)
        for dname in a.dtype:
            dtype = np.float32 if dname == "float32" else np.float64
            for steps in a.t:
                results = []
                for _ in range(a.repeat):
                    if a.framework == "torch":
                        results.append(run_torch(W0, win, u, steps, dname, a.lr, a.leak, a.max_seconds, a.device))
                    else:
                        results.append(run_numpy(W0, win, u, steps, dtype, a.lr, a.leak, a.max_seconds))
                us = [1e6 * sec / r for sec, r, _ in results if r > 0]
                seconds, steps_run, bad = results[-1]
                med = statistics.median(us) if us else float("nan")
                w_gbps = 2.0 * n * n * np.dtype(dtype).itemsize / (med * 1e-6) / 1e9 if us else float("nan")
                note = "" if bad < 0 else "  non-finite x or W at step %d" % bad
                if bad < 0 and steps_run < steps:
                    note = "  stopped after %d steps (--max-seconds)" % steps_run
                print("%-6s %6d %6d %-8s %4d %10.1f %7.1f%s" % (a.framework, n, steps, dname, a.threads[0], med,
                                                                w_gbps, note), file=sys.stderr, flush=True)
                rows.append({"n": n, "steps": steps, "dtype": dname, "seconds": statistics.median(
                    [r[0] for r in results]), "us": us, "steps_run": steps_run, "bad": bad, "w_gbps": w_gbps})
    print(json.dumps({"rows": rows, "blas_core": blas_core() if a.framework == "numpy" else ""}))


def blas_core():
    try:
        import ctypes
        import numpy  # noqa: F401  (loads libopenblas)
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_corename.restype = ctypes.c_char_p
        return lib.openblas_get_corename().decode()
    except (OSError, AttributeError):
        return ""


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int_list, default=[200, 1000, 2000])
    ap.add_argument("--t", type=int_list, default=[500, 5000, 44100])
    ap.add_argument("--dtype", type=lambda s: s.split(","), default=["float32"])
    ap.add_argument("--threads", type=int_list, default=[1, 2])
    ap.add_argument("--leak", type=float, default=0.0)
    ap.add_argument("--lr", type=float, default=1e-6)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--max-seconds", type=float, default=0.0, help="per run; 0 = no limit")
    ap.add_argument("--framework", choices=["numpy", "torch"], default="numpy")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--out", default="runs/hebbian/hebbian.csv", help="'' = no CSV")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    for d in a.dtype:
        if d not in ("float32", "float64"):
            ap.error("--dtype: %s is not float32 or float64" % d)
    if not (0.0 <= a.leak <= 1.0):
        ap.error("--leak %g: need 0 (not leaky) or a rate in (0, 1]" % a.leak)
    if a.framework == "numpy" and a.device != "cpu":
        ap.error("numpy runs on the CPU: --device cuda needs --framework torch")
    if a.worker:
        worker(a)
        return

    device_name = ""
    if a.device == "cuda":
        try:
            import torch
            device_name = torch.cuda.get_device_name(0)
        except Exception as e:  # noqa: BLE001  (no torch, no GPU: say so and stop)
            sys.exit("hebbian_numpy: --device cuda: %s" % e)
    print("%s W6: %s, lr %g, seed %d | %s" % (a.framework, "not leaky (as written)" if a.leak == 0 else
                                             "leaky, a = %g" % a.leak, a.lr, a.seed, cpu_model()), flush=True)
    print("%-6s %6s %6s %-8s %4s %10s %7s" % ("app", "n", "T", "dtype", "thr", "us/step", "W GB/s"), flush=True)
    rows = []
    for th in (a.threads if a.device == "cpu" else [1]):
        env = dict(os.environ, OMP_NUM_THREADS=str(th), OPENBLAS_NUM_THREADS=str(th))
        # argparse keeps the last of a repeated option: the child's --threads is this one
        args = [sys.executable, os.path.abspath(__file__)] + sys.argv[1:] + ["--worker", "--threads", str(th)]
        out = json.loads(subprocess.run(args, env=env, stdout=subprocess.PIPE, check=True, text=True).stdout)
        core = out["blas_core"]
        for r in out["rows"]:
            us = r["us"]
            fmt = (lambda v: "%.2f" % v)
            rows.append([a.framework, "eager", a.device, r["dtype"], r["n"], r["steps"], th,
                         "%.3f" % a.leak, "%g" % a.lr, a.seed, a.repeat, r["steps_run"], r["bad"],
                         "%.4f" % r["seconds"], fmt(statistics.median(us)) if us else "",
                         fmt(min(us)) if us else "", fmt(max(us)) if us else "",
                         "%.4g" % r["w_gbps"] if us else "", "", "", "", "", device_name, cpu_model(), core,
                         results_csv.git_rev(), platform.node(), results_csv.utc_now()])
    if a.out:
        try:
            results_csv.write_rows(a.out, HEADER, rows)
        except results_csv.HeaderMismatch as e:
            sys.exit("hebbian_numpy: %s" % e)
        print("wrote %s" % a.out)


if __name__ == "__main__":
    main()
