#!/usr/bin/env python3
"""PyTorch DistributedDataParallel's training-step time for pdnn's workloads, the yardstick of
pdnn's --distributed (scripts/gpu/runners/dist.sh, scripts/gpu/runners/host-dist-cpu.sh): N processes started
with torch.multiprocessing (no torchrun), gloo on the CPU, NCCL on GPUs (one per rank).

As users write DDP: the model wrapped in DistributedDataParallel (default buckets, 25 MB),
eager steps (zero_grad, forward, loss, backward with DDP's overlapped all-reduce, optimizer
step). Shards: --global-batch B splits B over the ranks as pdnn does (rank r takes rows
r*B/N..(r+1)*B/N: strong scaling, the CPU sweeps), --batch-per-rank b gives every rank b rows
(weak scaling, the GPU runs). Inputs are random tensors already in place (a pool of batches),
so the data pipeline is not timed, as in torch_gpu_bench.py. Steps run in blocks of 10 ending
in a synchronisation (and a barrier, so every rank's block ends together); rank 0's median
block time / 10 after 2 warm-up blocks is the step time.

Rows (one per workload and rank count) are appended to --out, header SCALE_COLUMNS, the same
file pdnn's rows go to.
"""
import argparse
import os
import socket
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_csv import write_rows, git_rev, utc_now  # noqa: E402
from torch_gpu_bench import WORKLOADS, build, optimizer  # noqa: E402

# allreduce_ms / exposed_ms: pdnn on the CPU only (its "all-reduce per step" line): the time
# rank 0 spent in the gradient all-reduce per step, and the part of it backward did not hide.
SCALE_COLUMNS = ["app", "workload", "model", "device", "gpu", "ranks", "threads_per_rank",
                 "global_batch", "mode", "steps", "median_ms", "min_ms", "max_ms",
                 "images_per_s", "allreduce_ms", "exposed_ms", "versions", "git_rev", "host",
                 "timestamp"]


def worker(rank, world, args, port, queue):
    import torch
    import torch.distributed as dist
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    gpu = args.device == "cuda"
    if gpu:
        torch.cuda.set_device(rank)
        dev = torch.device("cuda", rank)
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    else:
        dev = torch.device("cpu")
        torch.set_num_threads(args.threads)
    dist.init_process_group("nccl" if gpu else "gloo", rank=rank, world_size=world)
    model_name, default_batch, shape, classes = WORKLOADS[args.workload]
    if args.batch_per_rank:
        rows, global_batch = args.batch_per_rank, args.batch_per_rank * world
    else:
        global_batch = args.global_batch or default_batch
        rows = global_batch * (rank + 1) // world - global_batch * rank // world
    torch.manual_seed(0)
    model = build(torch, model_name).to(dev)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank] if gpu else None)
    opt = optimizer(torch, model_name, ddp.parameters(), False)
    loss_fn = torch.nn.CrossEntropyLoss()
    pool = 4 if model_name == "caltech9" else 16
    xs = torch.rand((pool, rows) + shape, device=dev)
    ys = torch.randint(0, classes, (pool, rows), device=dev)

    def sync():
        if gpu:
            torch.cuda.synchronize()
        dist.barrier()

    block, times, i = 10, [], 0
    for b in range(max(1, args.steps // block) + 2):
        sync()
        t0 = time.perf_counter()
        for _ in range(block):
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(ddp(xs[i % pool]), ys[i % pool])
            loss.backward()
            opt.step()
            i += 1
        sync()
        if b >= 2:
            times.append(1e3 * (time.perf_counter() - t0) / block)
    if rank == 0:
        queue.put((model_name, global_batch, times))
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--workload", default="W3", choices=sorted(WORKLOADS))
    ap.add_argument("--ranks", default="1,2", help="comma-separated rank counts")
    ap.add_argument("--threads", type=int, default=0,
                    help="CPU: intra-op threads per rank (0: the cores / ranks)")
    ap.add_argument("--global-batch", type=int, default=0, help="split over the ranks")
    ap.add_argument("--batch-per-rank", type=int, default=0, help="weak scaling: per rank")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--label", default="", help="appended to the mode column")
    ap.add_argument("--out", default="results/scale/dist.csv")
    args = ap.parse_args()
    import torch
    import torch.multiprocessing as mp
    gpu = args.device == "cuda"
    gpu_name = ""
    if gpu:
        if not torch.cuda.is_available():
            sys.exit("torch_ddp_bench: torch sees no GPU")
        p = torch.cuda.get_device_properties(0)
        gpu_name = f"{p.name}, {p.total_memory / 2**30:.1f} GiB, cc {p.major}.{p.minor}"
    versions = f"torch {torch.__version__}" + (
        f" cuda {torch.version.cuda} nccl {'.'.join(map(str, torch.cuda.nccl.version()))}"
        if gpu else "")
    rows = []
    for world in [int(r) for r in args.ranks.split(",")]:
        if gpu and world > torch.cuda.device_count():
            print(f"torch_ddp_bench: SKIP {world} ranks: {torch.cuda.device_count()} GPU(s)")
            continue
        a = argparse.Namespace(**vars(args))
        if not gpu and a.threads == 0:
            a.threads = max(1, os.cpu_count() // world)
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        port = 29500 + (os.getpid() % 1000) + world
        t0 = time.time()
        mp.spawn(worker, args=(world, a, port, queue), nprocs=world, join=True)
        model, global_batch, t = queue.get()
        med = statistics.median(t)
        ips = global_batch / (med / 1e3)
        thr = a.threads if not gpu else 0
        print(f"torch ddp {args.workload} {args.device} {world} ranks x {thr} threads, "
              f"global batch {global_batch}: median {med:.3f} ms/step (min {min(t):.3f}, max "
              f"{max(t):.3f}), {ips:.0f} img/s  [{time.time() - t0:.0f} s]", flush=True)
        rows.append(["torch-ddp", args.workload, model, args.device, gpu_name, world, thr,
                     global_batch, "eager" + args.label, 10 * len(t), f"{med:.4f}",
                     f"{min(t):.4f}", f"{max(t):.4f}", f"{ips:.1f}", "", "", versions, git_rev(),
                     socket.gethostname(), utc_now()])
    write_rows(args.out, SCALE_COLUMNS, rows)
    print(f"rows appended to {args.out}")


if __name__ == "__main__":
    main()
