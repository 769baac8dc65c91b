#!/usr/bin/python3
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

W5 (the DCGAN, PyTorch's tutorial step: D on the real batch, D on G's fake batch, Adam on D; D
on the fake batch again, G's backward through D, Adam on G) is the DDP twin of pdnn's
`dcgan --distributed`: both G and D wrapped in DDP, each rank drawing its own noise rows on its
device; BatchNorm per rank (plain BatchNorm2d, no SyncBatchNorm, broadcast_buffers=False: pdnn
keeps each rank's statistics in a step, averaging the running ones at each epoch's end, where
DDP's default would broadcast rank 0's before every forward); and, as pdnn, one all-reduce of
each model a step: D's real-batch backward runs under D's no_sync(), so its gradients are
reduced with the fake batch's, and the G step runs D under no_sync() (D's gradients there are
thrown away; pdnn does not compute them). --verify checks that wiring on the CPU (gloo, 2
ranks, small widths): after one step, every rank's reduced gradients of D and G equal one
process's averages over the shards, each shard through its own BatchNorm statistics.
"""
import argparse
import os
import socket
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from results_csv import SCALE_COLUMNS, write_rows, git_rev, utc_now  # noqa: E402
from torch_gpu_bench import WORKLOADS, build, optimizer  # noqa: E402



def gan_setup(torch, args, rows, dev, nz=100, ngf=64, ndf=64, counts=None):
    """W5's models and optimizers (torch_reference.py's twins of pdnn's), the same initial
    weights on every rank, and one DCGAN iteration over DDP-wrapped G and D: step(x, noise,
    record) with record(name) called after D's and after G's reduced backward. counts: a dict
    in which DDP's all-reduces of each model's gradient buckets are counted ("G", "D")."""
    from torch_reference import dcgan_models
    torch.manual_seed(0)
    g, d = dcgan_models(torch, nz, ngf, ndf)
    g.to(dev)
    d.to(dev)
    ids = [dev.index] if dev.type == "cuda" else None
    ddp_g = torch.nn.parallel.DistributedDataParallel(g, device_ids=ids, broadcast_buffers=False)
    ddp_d = torch.nn.parallel.DistributedDataParallel(d, device_ids=ids, broadcast_buffers=False)
    if counts is not None:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        def counting(name):
            def hook(state, bucket):
                counts[name] = counts.get(name, 0) + 1
                return default_hooks.allreduce_hook(state, bucket)
            return hook
        ddp_g.register_comm_hook(None, counting("G"))
        ddp_d.register_comm_hook(None, counting("D"))
    opt_g = torch.optim.Adam(ddp_g.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(ddp_d.parameters(), lr=2e-4, betas=(0.5, 0.999))
    bce = torch.nn.BCELoss()
    ones = torch.ones(rows, device=dev)
    zeros = torch.zeros(rows, device=dev)

    def step(x, noise, record=None):
        d.zero_grad(set_to_none=True)
        with ddp_d.no_sync():  # reduced with the fake batch's below: one all-reduce of D
            bce(ddp_d(x).view(-1), ones).backward()
        fake = ddp_g(noise)
        bce(ddp_d(fake.detach()).view(-1), zeros).backward()
        if record:
            record("D")
        opt_d.step()
        g.zero_grad(set_to_none=True)
        with ddp_d.no_sync():  # G's gradients are reduced (G's hooks); D's are not needed
            bce(ddp_d(fake).view(-1), ones).backward()
        if record:
            record("G")
        opt_g.step()

    return g, d, step


def gan_worker(rank, world, args, dev, rows, global_batch, queue, sync):
    import torch
    if args.verify:
        return gan_verify(torch, rank, world, args, dev, queue)
    g, d, step = gan_setup(torch, args, rows, dev)
    pool = 16
    xs = torch.rand((pool, rows, 3, 64, 64), device=dev) * 2 - 1
    noise = torch.empty((rows, 100, 1, 1), device=dev)
    block, times, i = 10, [], 0
    for b in range(max(1, args.steps // block) + 2):
        sync()
        t0 = time.perf_counter()
        for _ in range(block):
            noise.normal_()
            step(xs[i % pool], noise)
            i += 1
        sync()
        if b >= 2:
            times.append(1e3 * (time.perf_counter() - t0) / block)
    if rank == 0:
        queue.put(("dcgan", global_batch, times))


def gan_verify(torch, rank, world, args, dev, queue):
    """One DDP step at small widths against one process's per-shard averages (the module's
    docstring); rank 0 puts (largest relative difference of D's and of G's gradients, whether
    the ranks' weights agree) on the queue."""
    import torch.distributed as dist
    nz, b = 8, 4
    gen = torch.Generator().manual_seed(11)
    x = torch.rand((world * b, 3, 64, 64), generator=gen) * 2 - 1
    z = torch.randn((world * b, nz, 1, 1), generator=gen)
    counts = {}
    g, d, step = gan_setup(torch, args, b, dev, nz, 4, 4, counts)
    got = {}
    step(x[rank * b:(rank + 1) * b], z[rank * b:(rank + 1) * b],
         lambda m: got.__setitem__(m, [p.grad.clone() for p in (d if m == "D" else g).parameters()]))
    # Every rank holds the same weights after the step.
    flat = torch.cat([p.detach().reshape(-1) for p in list(g.parameters()) + list(d.parameters())])
    all_w = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(all_w, flat)
    same = all(torch.equal(all_w[0], w) for w in all_w)
    if rank != 0:
        return
    # One process: the same start, each shard through its own BatchNorm statistics, the
    # gradients averaged over the shards as DDP's all-reduce averages them.
    from torch_reference import dcgan_models
    torch.manual_seed(0)
    rg, rd = dcgan_models(torch, nz, 4, 4)
    opt_d = torch.optim.Adam(rd.parameters(), lr=2e-4, betas=(0.5, 0.999))
    bce = torch.nn.BCELoss()
    ones, zeros = torch.ones(b), torch.zeros(b)
    shards = [(x[k * b:(k + 1) * b], z[k * b:(k + 1) * b]) for k in range(world)]
    rd.zero_grad()
    fakes = []
    for xk, zk in shards:
        bce(rd(xk).view(-1), ones).backward()
        fk = rg(zk)
        fakes.append(fk)
        bce(rd(fk.detach()).view(-1), zeros).backward()
    ref_d = [p.grad / world for p in rd.parameters()]
    for p, gr in zip(rd.parameters(), ref_d):
        p.grad = gr.clone()
    opt_d.step()
    rg.zero_grad()
    for fk in fakes:
        bce(rd(fk).view(-1), ones).backward()
    ref_g = [p.grad / world for p in rg.parameters()]

    def rel(a, r):
        scale = max(float(t.abs().max()) for t in r)
        return max(float((u - v).abs().max()) for u, v in zip(a, r)) / scale

    queue.put((rel(got["D"], ref_d), rel(got["G"], ref_g), same, counts.get("D", 0),
               counts.get("G", 0)))


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
    def sync():
        if gpu:
            torch.cuda.synchronize()
        dist.barrier()

    if model_name == "dcgan":
        gan_worker(rank, world, args, dev, rows, global_batch, queue, sync)
        dist.destroy_process_group()
        return
    torch.manual_seed(0)
    model = build(torch, model_name).to(dev)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank] if gpu else None)
    opt = optimizer(torch, model_name, ddp.parameters(), False)
    loss_fn = torch.nn.CrossEntropyLoss()
    pool = 4 if model_name == "caltech9" else 16
    xs = torch.rand((pool, rows) + shape, device=dev)
    ys = torch.randint(0, classes, (pool, rows), device=dev)
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
    ap.add_argument("--out", default="runs/scale/dist.csv")
    ap.add_argument("--verify", action="store_true",
                    help="W5 on the CPU: check the DDP twin's gradients against one process "
                         "(2 ranks, gloo, small widths); no timing, no rows")
    args = ap.parse_args()
    import torch
    import torch.multiprocessing as mp
    gpu = args.device == "cuda"
    if args.verify:
        if gpu or args.workload != "W5":
            sys.exit("torch_ddp_bench: --verify checks W5 on the CPU (--workload W5 --device cpu)")
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        a = argparse.Namespace(**vars(args))
        a.threads = a.threads or 1
        a.batch_per_rank = 4
        mp.spawn(worker, args=(2, a, 29500 + os.getpid() % 1000, queue), nprocs=2, join=True)
        rd, rg, same, n_d, n_g = queue.get()
        # Float32 sums in another order (the shards' BatchNorm reductions and the all-reduce):
        # differences of order 1e-6 of the largest gradient; a model left out of the all-reduce,
        # or statistics over the global batch, would be of order 1. The small models' gradients
        # fit one bucket each: one all-reduce per model and step, as pdnn's.
        ok = rd < 1e-4 and rg < 1e-4 and same and n_d == 1 and n_g == 1
        print(f"torch_ddp_bench --verify W5: 2 ranks x 4 rows against one process's per-shard "
              f"averages: D gradients {rd:.2e}, G gradients {rg:.2e} of the largest; ranks' "
              f"weights after the step {'equal' if same else 'DIFFER'}; all-reduces in the step: "
              f"D {n_d}, G {n_g}: {'ok' if ok else 'FAILED'}")
        return 0 if ok else 1
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
    sys.exit(main())
