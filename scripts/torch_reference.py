#!/usr/bin/python3
"""PyTorch twins of pdnn's experiments: the same nets, initial weights, data order, dropout
masks and optimizer as pdnn for a given seed, so the two can be compared run for run.

Run with Debian's python3 (torch 1.13 from python3-torch: scripts/install_deps.sh torch).
One mode per experiment; each takes the flags of the pdnn app it mirrors:

  torch_reference.py mnist [--model small|keras] [--dataset ...] [--data DIR] [--epochs N]
                           [--batch B] [--optimizer NAME] [--lr X] [--threads T] [--seed S]
                           [--out CSV] [--steps N] [--init-checkpoint F] [--compare-checkpoint F]
  torch_reference.py dcgan [--dataset fashion-mnist|mnist] [--data DIR] [--epochs N] [--batch B]
                           [--images-per-epoch N] [--threads T] [--seed S] [--device cpu|cuda]
                           [--out CSV] [--iterations-out CSV] [--samples-dir DIR] [--samples N]
                           [--samples-out F] [--steps N] [--init-checkpoint F]

How pdnn's choices are reproduced (scripts/pdnn_rng.py holds the random stream):
  * initial weights: Sequential::reset_parameters draws, layer by layer, weight then bias,
    each element lo + (hi - lo) * float(u) in row-major order, with bound 1/sqrt(fan_in);
  * data order: epoch e is Rng(at(at(seed, 0), e + 1)).permutation(N) (BatchLoader::epoch_rng);
  * dropout: each training forward reserves numel values of the run's stream; element i is kept
    iff to_unit(at(seed, base + i + 1)) >= p and then scaled by 1/(1 - p);
  * the last batch of an epoch keeps the N % B remaining images; loss = mean cross-entropy.
--init-checkpoint compares the regenerated initial weights with a pdnn checkpoint written by
`build/bin/mnist --save-init F`; --compare-checkpoint compares the final weights with pdnn's
(F from `build/bin/mnist --checkpoint F`), so a run can be checked against pdnn's in one line.

The dcgan mode is W5 as PyTorch's DCGAN tutorial writes it, with pdnn's choices (lib/train/
dcgan_task.h): DCGAN's initialisation drawn from pdnn's stream (G then D, layer by layer,
N(0, 0.02) convolution weights and N(1, 0.02) BatchNorm gammas by Box-Muller, two draws per
value, rounded as init::normal's fmaf); every iteration's noise z from the same stream (2 x batch
x 100 values); epoch e's images the first images_per_epoch of Rng(at(at(seed, 0), e + 1))'s
permutation; the 28x28 images upscaled to 64x64 by bilinear interpolation (align_corners=False),
mapped to [-1, 1] and repeated as RGB; the grids' fixed noise from Rng(at(at(seed, 0), 0)) and
the scored samples' noise from Rng(at(at(seed, 0), 2^62)); samples written as pdnn writes them
(64x64 grey IDX: the mean of the three channels, round(255 (v + 1) / 2)).
"""
import argparse
import gzip
import math
import os
import socket
import struct
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pdnn_rng  # noqa: E402
from results_csv import HeaderMismatch, git_rev, utc_now, write_rows  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULT_COLUMNS = ["app", "model", "dataset", "device", "gpu", "threads", "batch", "epoch", "train_loss",
                  "train_acc", "test_loss", "test_acc", "seconds", "images_per_s", "git_rev",
                  "host", "timestamp"]


def gpu_name(torch, dev):
    """The GPU's name, memory and compute capability for the results row ("" on the CPU)."""
    if dev.type != "cuda":
        return ""
    p = torch.cuda.get_device_properties(dev)
    return f"{p.name}, {p.total_memory / 2**30:.1f} GiB, cc {p.major}.{p.minor}"


def torch_module():
    try:
        import torch
    except ImportError:
        sys.exit("torch_reference: no torch for %s: run scripts/install_deps.sh torch "
                 "(Debian's python3-torch) and use /usr/bin/python3" % sys.executable)
    return torch


# ---- shared: data, results, pdnn checkpoints ------------------------------------------------

def read_idx(path, magic):
    """An IDX file (raw or gzip, by content) as a uint8 array, validated like lib/data/idx.cpp."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    if len(data) < 4 or struct.unpack(">I", data[:4])[0] != magic:
        sys.exit(f"torch_reference: {path}: not an IDX file with magic 0x{magic:08x}")
    ndim = magic & 0xFF
    head = 4 + 4 * ndim
    if len(data) < head:
        sys.exit(f"torch_reference: {path}: truncated header")
    dims = struct.unpack(">" + "I" * ndim, data[4:head])
    if len(data) - head != int(np.prod(dims)):
        sys.exit(f"torch_reference: {path}: header says {dims} ({int(np.prod(dims))} bytes), "
                 f"file has {len(data) - head}")
    return np.frombuffer(data, dtype=np.uint8, offset=head).reshape(dims)


def find_idx(folder, base):
    for name in (base, base + ".gz", base.replace("-idx", ".idx"),
                 base.replace("-idx", ".idx") + ".gz"):
        p = os.path.join(folder, name)
        if os.path.isfile(p):
            return p
    sys.exit(f"torch_reference: {folder}: no {base} or {base}.gz")


def load_dataset(args):
    """(name, folder, (train_x, train_y), (test_x, test_y)), images float32 (N,1,H,W)."""
    folder = args.data
    if not folder:
        cands = (["datasets/fashion-mnist"] if args.dataset == "fashion-mnist"
                 else ["datasets/mnist", "datasets/mnist-npm10k"])
        folder = next((c for c in cands if os.path.isdir(os.path.join(ROOT, c))), None)
        if folder is None:
            sys.exit(f"torch_reference: no data in {' or '.join(cands)}: run datasets/get_*.sh")
        folder = os.path.join(ROOT, folder)
    name = args.dataset
    try:
        with open(os.path.join(folder, "NAME")) as f:
            name = f.readline().strip() or name
    except OSError:
        pass
    splits = []
    for prefix in ("train", "t10k"):
        x = read_idx(find_idx(folder, f"{prefix}-images-idx3-ubyte"), 0x803)
        y = read_idx(find_idx(folder, f"{prefix}-labels-idx1-ubyte"), 0x801)
        if x.shape[0] != y.shape[0]:
            sys.exit(f"torch_reference: {folder}: {prefix}: {x.shape[0]} images, "
                     f"{y.shape[0]} labels")
        # pixel / 255 in float32, as idx_to_tensor divides.
        xf = (x.astype(np.float32) / np.float32(255.0)).reshape(x.shape[0], 1, x.shape[1],
                                                                 x.shape[2])
        splits.append((xf, y.astype(np.int64)))
    return name, folder, splits[0], splits[1]


def read_pdnn_checkpoint(path):
    """{name: ndarray} of a pdnn checkpoint's tensors (format in lib/model/checkpoint.h)."""
    with open(path, "rb") as f:
        b = f.read()
    if b[:8] != b"PDNNCKPT":
        sys.exit(f"torch_reference: {path}: not a pdnn checkpoint")
    off = 8
    version, n_values = struct.unpack_from("<II", b, off)
    off += 8
    if version not in (1, 2):
        sys.exit(f"torch_reference: {path}: checkpoint format version {version} (1 or 2 known)")

    def string():
        nonlocal off
        (n,) = struct.unpack_from("<I", b, off)
        off += 4
        s = b[off:off + n].decode()
        off += n
        return s

    for _ in range(n_values):
        string()
        off += 8
    if version == 1:
        string()  # optimizer kind
    else:  # models: name, optimizer kind
        (n_models,) = struct.unpack_from("<I", b, off)
        off += 4
        for _ in range(2 * n_models):
            string()
    (n_tensors,) = struct.unpack_from("<I", b, off)
    off += 4
    out = {}
    for _ in range(n_tensors):
        name = string()
        (rank,) = struct.unpack_from("<I", b, off)
        off += 4
        dims = struct.unpack_from("<" + "q" * rank, b, off)
        off += 8 * rank
        n = int(np.prod(dims)) if rank else 0
        out[name] = np.frombuffer(b, dtype="<f4", count=n, offset=off).reshape(dims)
        off += 4 * n
    return out


# ---- mnist (W2, W3) -------------------------------------------------------------------------

def pdnn_dropout_class(torch):
    class PdnnDropout(torch.nn.Module):
        """Dropout with pdnn's mask: counter-based draws from the run's stream."""

        def __init__(self, p, rng):
            super().__init__()
            self.p, self.rng = p, rng

        def forward(self, x):
            if not self.training:
                return x
            n = x.numel()
            u = self.rng.uniform_many(n)
            keep = (u >= self.p).astype(np.float32) * np.float32(1.0 / (1.0 - self.p))
            return x * torch.from_numpy(keep.reshape(tuple(x.shape))).to(x.device)

    return PdnnDropout


def mnist_model(torch, name, side, classes, rng):
    nn = torch.nn
    if name == "small":
        return nn.Sequential(nn.Conv2d(1, 10, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(10 * (side // 2) ** 2, 100), nn.ReLU(),
                             nn.Linear(100, classes))
    drop = pdnn_dropout_class(torch)
    return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(),
                         nn.MaxPool2d(2), drop(0.25, rng), nn.Flatten(),
                         nn.Linear(64 * ((side - 4) // 2) ** 2, 128), nn.ReLU(), drop(0.5, rng),
                         nn.Linear(128, classes))


def pdnn_init(torch, model, rng):
    """init::torch_default per layer in order: weight then bias, U(+-1/sqrt(fan_in))."""
    with torch.no_grad():
        for m in model:
            if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
                w = m.weight
                fan_in = int(np.prod(w.shape[1:]))
                bound = np.float32(1.0 / math.sqrt(fan_in))
                w.copy_(torch.from_numpy(rng.uniform_float(tuple(w.shape), -bound, bound)))
                if m.bias is not None:
                    m.bias.copy_(torch.from_numpy(
                        rng.uniform_float(tuple(m.bias.shape), -bound, bound)))


def pdnn_param_names(torch, model):
    """pdnn's checkpoint names ("param:<layer>.weight") for the torch parameters, in order."""
    names = []
    for i, m in enumerate(model):
        if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
            names.append((f"param:{i}.weight", m.weight))
            if m.bias is not None:
                names.append((f"param:{i}.bias", m.bias))
    return names


def compare_with_checkpoint(torch, model, path, what):
    ck = read_pdnn_checkpoint(path)
    worst = 0.0
    for name, p in pdnn_param_names(torch, model):
        if name not in ck:
            sys.exit(f"torch_reference: {path}: no tensor {name}")
        a = p.detach().cpu().numpy()
        if ck[name].shape != a.shape:
            sys.exit(f"torch_reference: {path}: {name} is {ck[name].shape}, torch has {a.shape}")
        worst = max(worst, float(np.max(np.abs(ck[name] - a))))
    print(f"{what}: max |torch - pdnn| over all parameters = {worst:.3e} ({path})")
    return worst


def make_optimizer(torch, args, params):
    name = args.optimizer or ("adadelta" if args.model == "keras" else "adam")
    lr = args.lr
    if name == "adam":
        return name, torch.optim.Adam(params, lr=lr if lr > 0 else 1e-3)
    if name == "adadelta":
        rho = 0.95 if args.model == "keras" else 0.9
        return name, torch.optim.Adadelta(params, lr=lr if lr > 0 else 1.0, rho=rho, eps=1e-6)
    if name == "adagrad":
        return name, torch.optim.Adagrad(params, lr=lr if lr > 0 else 0.01)
    if lr <= 0:
        sys.exit("torch_reference: sgd needs --lr")
    return name, torch.optim.SGD(params, lr=lr)


def mode_mnist(args):
    torch = torch_module()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()
    dev = torch.device(args.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        sys.exit("torch_reference: --device cuda, but torch sees no GPU")
    batch = args.batch or (128 if args.model == "keras" else 8)
    name, folder, (xtr, ytr), (xte, yte) = load_dataset(args)
    side = xtr.shape[2]
    rng = pdnn_rng.Rng(args.seed)
    model = mnist_model(torch, args.model, side, 10, rng)
    pdnn_init(torch, model, rng)
    model.to(dev)
    if args.init_checkpoint:
        worst = compare_with_checkpoint(torch, model, args.init_checkpoint, "initial weights")
        if worst != 0.0:
            sys.exit("torch_reference: the regenerated initial weights differ from pdnn's")
    opt_name, opt = make_optimizer(torch, args, model.parameters())
    loss_fn = torch.nn.CrossEntropyLoss()
    data_seed = pdnn_rng.at(args.seed, 0)
    print(f"torch mnist: model {args.model}, dataset {name} ({folder}: {len(ytr)} train / "
          f"{len(yte)} test), batch {batch}, {opt_name}, {threads} threads, seed {args.seed}, "
          f"torch {torch.__version__}, device {dev}", flush=True)
    xtr_t, ytr_t = torch.from_numpy(xtr).to(dev), torch.from_numpy(ytr).to(dev)
    out = args.out or os.path.join(ROOT, "results", "mnist", f"{args.model}_{name}.csv")
    rev, host = git_rev(), socket.gethostname()
    steps, step_ms = 0, []
    for epoch in range(args.epochs):
        order = torch.from_numpy(pdnn_rng.epoch_rng(data_seed, epoch).permutation(len(ytr))).to(dev)
        model.train()
        loss_sum, correct, seen = 0.0, 0, 0
        t0 = time.perf_counter()
        for b0 in range(0, len(ytr), batch):
            ts = time.perf_counter()
            idx = order[b0:b0 + batch]
            x, y = xtr_t[idx], ytr_t[idx]
            opt.zero_grad()
            logits = model(x)
            loss = loss_fn(logits, y)
            loss.backward()
            opt.step()
            if dev.type == "cuda":
                torch.cuda.synchronize()
            step_ms.append(1e3 * (time.perf_counter() - ts))
            nb = len(idx)
            loss_sum += float(loss) * nb
            correct += int((logits.argmax(1) == y).sum())
            seen += nb
            steps += 1
            if args.steps and steps >= args.steps:
                break
        secs = time.perf_counter() - t0
        if args.steps:  # a timing run, like the app's --steps: no evaluation, no CSV row
            if steps >= args.steps:
                break
            continue
        test_loss, test_acc = evaluate(torch, model, xte, yte, max(batch, 128), loss_fn, dev)
        train_loss, train_acc = loss_sum / seen, correct / seen
        print(f"epoch {epoch + 1}/{args.epochs}  {name}  train loss {train_loss:.4f} acc "
              f"{train_acc:.4f}  test loss {test_loss:.4f} acc {test_acc:.4f}  {secs:.1f} s  "
              f"{seen / secs:.0f} img/s", flush=True)
        write_rows(out, RESULT_COLUMNS, [
                       ["torch", args.model, name, dev.type, gpu_name(torch, dev), threads, batch,
                        epoch + 1,
                        f"{train_loss:.6f}", f"{train_acc:.6f}", f"{test_loss:.6f}",
                        f"{test_acc:.6f}", f"{secs:.3f}", f"{seen / secs:.1f}", rev, host,
                        utc_now()]])
    if args.steps:
        skip = 2 if len(step_ms) > 4 else 0
        t = sorted(step_ms[skip:])
        med = t[len(t) // 2] if len(t) % 2 else 0.5 * (t[len(t) // 2 - 1] + t[len(t) // 2])
        print(f"step_ms model={args.model} batch={batch} threads={threads} steps={len(t)} "
              f"median={med:.4f} min={t[0]:.4f} max={t[-1]:.4f}")
    else:
        print(f"results in {out}")
    if args.compare_checkpoint:
        compare_with_checkpoint(torch, model, args.compare_checkpoint, "final weights")


def evaluate(torch, model, x, y, batch, loss_fn, dev):
    model.eval()
    loss, correct = 0.0, 0
    with torch.no_grad():
        for b0 in range(0, len(y), batch):
            xb = torch.from_numpy(x[b0:b0 + batch]).to(dev)
            yb = torch.from_numpy(y[b0:b0 + batch]).to(dev)
            logits = model(xb)
            loss += float(loss_fn(logits, yb)) * len(yb)
            correct += int((logits.argmax(1) == yb).sum())
    model.train()
    return loss / len(y), correct / len(y)


def add_mnist_args(p):
    p.add_argument("--model", choices=["small", "keras"], default="small")
    p.add_argument("--dataset", choices=["mnist", "fashion-mnist"], default="mnist")
    p.add_argument("--data", default="", help="IDX folder (default as build/bin/mnist)")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch", type=int, default=0, help="default 8 small, 128 keras")
    p.add_argument("--optimizer", choices=["adam", "adadelta", "adagrad", "sgd"], default="")
    p.add_argument("--lr", type=float, default=-1.0)
    p.add_argument("--threads", type=int, default=0, help="0: torch's default")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", default="cpu", help="cpu or cuda (accuracy runs on a GPU host)")
    p.add_argument("--out", default="", help="CSV (default results/mnist/<model>_<dataset>.csv)")
    p.add_argument("--steps", type=int, default=0, help="stop after N steps, print step times")
    p.add_argument("--init-checkpoint", default="",
                   help="pdnn checkpoint of the initial weights (mnist --save-init) to verify")
    p.add_argument("--compare-checkpoint", default="",
                   help="pdnn checkpoint to compare the final weights with")


# ---- dcgan (W5) -----------------------------------------------------------------------------

DCGAN_COLUMNS = ["app", "model", "dataset", "device", "gpu", "threads", "batch", "epoch",
                 "train_d_loss", "train_g_loss", "train_d_x", "train_d_g_z", "train_s_per_iter",
                 "status", "seconds", "images_per_s", "git_rev", "host", "timestamp"]
ITERATION_COLUMNS = ["app", "model", "dataset", "device", "batch", "epoch", "iteration",
                     "d_loss", "g_loss", "d_x", "d_g_z", "git_rev", "timestamp"]
SAMPLE_NOISE_INDEX = 1 << 62


def pdnn_normals(rng, n):
    """n values of pdnn's Rng::normal() as float32 (Box-Muller, u1 = 1 - u, two draws each)."""
    u = rng.uniform_many(2 * n)
    u1, u2 = 1.0 - u[0::2], u[1::2]
    return (np.sqrt(-2.0 * np.log(u1)) * np.cos((2.0 * np.pi) * u2)).astype(np.float32)


def pdnn_normal_tensor(rng, shape, mean, std):
    """init::normal: fmaf(std, float(normal), mean) per value (the product is exact in double,
    the sum rounded once in long double, then to float)."""
    z = pdnn_normals(rng, int(np.prod(shape))).astype(np.longdouble)
    return (np.longdouble(np.float32(mean)) + np.longdouble(np.float32(std)) * z).astype(
        np.float32).reshape(shape)


def dcgan_models(torch, nz=100, ngf=64, ndf=64, nc=3):
    nn = torch.nn
    g = nn.Sequential(
        nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 8), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(True),
        nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False), nn.Tanh())
    d = nn.Sequential(
        nn.Conv2d(nc, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 4), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf * 4, ndf * 8, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 8), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf * 8, 1, 4, 1, 0, bias=False), nn.Sigmoid())
    return g, d


def dcgan_init(torch, model, rng):
    """dcgan_init (lib/model/dcgan_models.cpp): the tutorial's weights_init from pdnn's stream."""
    with torch.no_grad():
        for m in model:
            if isinstance(m, (torch.nn.Conv2d, torch.nn.ConvTranspose2d)):
                m.weight.copy_(torch.from_numpy(pdnn_normal_tensor(rng, tuple(m.weight.shape), 0.0, 0.02)))
            elif isinstance(m, torch.nn.BatchNorm2d):
                m.weight.copy_(torch.from_numpy(pdnn_normal_tensor(rng, tuple(m.weight.shape), 1.0, 0.02)))
                m.bias.zero_()


def dcgan_compare_init(torch, g, d, path):
    ck = read_pdnn_checkpoint(path)
    worst = 0.0
    for prefix, model in (("G", g), ("D", d)):
        for name, p in model.named_parameters():
            key = f"{prefix}.param:{name}"
            if key not in ck:
                sys.exit(f"torch_reference: {path}: no tensor {key}")
            worst = max(worst, float(np.max(np.abs(ck[key] - p.detach().cpu().numpy()))))
    print(f"initial weights: max |torch - pdnn| over G and D = {worst:.3e} ({path})")
    return worst


def dcgan_images(torch, x28, idx, dev):
    """Training images idx as pdnn's ResizedImages makes them: (n,3,64,64) in [-1, 1]."""
    x = x28[idx]
    x = torch.nn.functional.interpolate(x, size=(64, 64), mode="bilinear", align_corners=False)
    return (x * 2.0 - 1.0).repeat(1, 3, 1, 1)


def grey_bytes(x):
    """DcganTask's sample bytes: the mean of the channels, round(255 (v + 1) / 2), clamped."""
    g = x.float().mean(dim=1).cpu().numpy()
    return np.clip(np.rint(255.0 * (g + 1.0) / 2.0), 0, 255).astype(np.uint8)


def write_idx_images(path, images):
    """images: (n, rows, cols) uint8 -> an IDX file (gzip when the name ends in .gz), atomically."""
    n, rows, cols = images.shape
    data = struct.pack(">IIII", 0x803, n, rows, cols) + images.tobytes()
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = path + ".tmp.%d" % os.getpid()
    with open(tmp, "wb") as f:
        f.write(gzip.compress(data, 6) if path.endswith(".gz") else data)
    os.replace(tmp, path)


def save_grid(path, x, cols=8, pad=2):
    """write_image_grid_png's layout: tiles of 64 with 2 black pixels around each."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    a = np.clip(np.rint(255.0 * (x.float().cpu().numpy() + 1.0) / 2.0), 0, 255).astype(np.uint8)
    n, c, h, w = a.shape
    xs = min(cols, n)
    ys = (n + xs - 1) // xs
    grid = np.zeros((ys * (h + pad) + pad, xs * (w + pad) + pad, 3), dtype=np.uint8)
    for k in range(n):
        oy, ox = (k // xs) * (h + pad) + pad, (k % xs) * (w + pad) + pad
        grid[oy:oy + h, ox:ox + w] = a[k].transpose(1, 2, 0) if c == 3 else a[k, 0][..., None]
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp.%d.png" % os.getpid()
    plt.imsave(tmp, grid)
    os.replace(tmp, path)


def generate(torch, g, rng, n, batch, dev, nz=100):
    """n images from G in evaluation mode for noise drawn from rng, in batches (host tensor)."""
    g.eval()
    out = []
    with torch.no_grad():
        for b0 in range(0, n, batch):
            nb = min(batch, n - b0)
            z = torch.from_numpy(pdnn_normals(rng, nb * nz).reshape(nb, nz, 1, 1)).to(dev)
            out.append(g(z).cpu())
    g.train()
    return torch.cat(out)


def mode_dcgan(args):
    torch = torch_module()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()
    dev = torch.device(args.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        sys.exit("torch_reference: --device cuda, but torch sees no GPU")
    name, folder, (xtr, _), _ = load_dataset(args)
    n_img = len(xtr)
    per_epoch = args.images_per_epoch or n_img
    if per_epoch > n_img:
        sys.exit(f"torch_reference: --images-per-epoch {per_epoch}: {name} has {n_img} images")
    batch, nz = args.batch, 100
    rng = pdnn_rng.Rng(args.seed)
    g, d = dcgan_models(torch)
    dcgan_init(torch, g, rng)
    dcgan_init(torch, d, rng)
    if args.init_checkpoint:
        if dcgan_compare_init(torch, g, d, args.init_checkpoint) > 1e-6:
            sys.exit("torch_reference: the regenerated initial weights differ from pdnn's")
    g.to(dev)
    d.to(dev)
    opt_g = torch.optim.Adam(g.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(d.parameters(), lr=2e-4, betas=(0.5, 0.999))
    bce = torch.nn.BCELoss()
    data_seed = pdnn_rng.at(args.seed, 0)
    x28 = torch.from_numpy(xtr).to(dev)
    gpu = gpu_name(torch, dev)
    print(f"torch dcgan: dataset {name} ({folder}: {n_img} images, upscaled to 64x64), batch "
          f"{batch}, {per_epoch} images per epoch, Adam lr 2e-4 beta1 0.5, {threads} threads, seed "
          f"{args.seed}, torch {torch.__version__}, device {dev}", flush=True)
    rev, host = git_rev(), socket.gethostname()
    out = args.out or os.path.join(ROOT, "results", "dcgan", f"torch_dcgan_{name}.csv")
    its_out = args.iterations_out or os.path.join(ROOT, "results", "dcgan",
                                                  f"torch_dcgan_{name}_iterations.csv")
    samples_dir = args.samples_dir or os.path.join(ROOT, "results", "dcgan", "samples", f"torch_{name}")
    ones = torch.ones(batch, device=dev)
    zeros = torch.zeros(batch, device=dev)
    steps, step_ms = 0, []
    for epoch in range(args.epochs):
        order = pdnn_rng.epoch_rng(data_seed, epoch).permutation(n_img)[:per_epoch]
        sums = np.zeros(4)
        its, n_it, seen = [], 0, 0
        t0 = time.perf_counter()
        for b0 in range(0, per_epoch, batch):
            ts = time.perf_counter()
            idx = torch.from_numpy(order[b0:b0 + batch]).to(dev)
            real = dcgan_images(torch, x28, idx, dev)
            nb = real.shape[0]
            d.zero_grad()
            out_real = d(real).view(-1)
            err_real = bce(out_real, ones[:nb])
            err_real.backward()
            noise = torch.from_numpy(pdnn_normals(rng, nb * nz).reshape(nb, nz, 1, 1)).to(dev)
            fake = g(noise)
            out_fake = d(fake.detach()).view(-1)
            err_fake = bce(out_fake, zeros[:nb])
            err_fake.backward()
            opt_d.step()
            g.zero_grad()
            out_g = d(fake).view(-1)
            err_g = bce(out_g, ones[:nb])
            err_g.backward()
            opt_g.step()
            if dev.type == "cuda":
                torch.cuda.synchronize()
            step_ms.append(1e3 * (time.perf_counter() - ts))
            vals = [float(err_real) + float(err_fake), float(err_g), float(out_real.mean()),
                    float(out_fake.mean())]
            if not all(math.isfinite(v) for v in vals):
                sys.exit(f"torch_reference: diverged at iteration {n_it + 1} of epoch {epoch + 1}: {vals}")
            sums += vals
            n_it += 1
            seen += nb
            steps += 1
            its.append(["torch", "dcgan", name, dev.type, batch, epoch + 1,
                        epoch * ((per_epoch + batch - 1) // batch) + n_it] +
                       [f"{v:.6f}" for v in vals] + [rev, utc_now()])
            if args.steps and steps >= args.steps:
                break
        secs = time.perf_counter() - t0
        if args.steps:
            if steps >= args.steps:
                break
            continue
        m = sums / n_it
        print(f"epoch {epoch + 1}/{args.epochs}  {name}  d_loss {m[0]:.4f} g_loss {m[1]:.4f} "
              f"d_x {m[2]:.4f} d_g_z {m[3]:.4f}  {secs:.1f} s  {secs / n_it:.3f} s/iter", flush=True)
        write_rows(its_out, ITERATION_COLUMNS, its)
        write_rows(out, DCGAN_COLUMNS, [[
            "torch", "dcgan", name, dev.type, gpu, threads, batch, epoch + 1,
            f"{m[0]:.6f}", f"{m[1]:.6f}", f"{m[2]:.6f}", f"{m[3]:.6f}", f"{secs / n_it:.6f}", "ok",
            f"{secs:.3f}", f"{seen / secs:.1f}", rev, host, utc_now()]])
        grid_rng = pdnn_rng.Rng(pdnn_rng.at(data_seed, 0))
        save_grid(os.path.join(samples_dir, f"epoch_{epoch + 1:03d}.png"),
                  generate(torch, g, grid_rng, 64, batch, dev))
    if args.steps:
        skip = 2 if len(step_ms) > 4 else 0
        t = sorted(step_ms[skip:])
        med = t[len(t) // 2] if len(t) % 2 else 0.5 * (t[len(t) // 2 - 1] + t[len(t) // 2])
        print(f"step_ms model=dcgan batch={batch} threads={threads} steps={len(t)} "
              f"median={med:.4f} min={t[0]:.4f} max={t[-1]:.4f}")
        return
    print(f"results in {out}; grids in {samples_dir}")
    if args.samples:
        path = args.samples_out or os.path.join(ROOT, "results", "dcgan", f"samples_{name}_torch.idx.gz")
        srng = pdnn_rng.Rng(pdnn_rng.at(data_seed, SAMPLE_NOISE_INDEX))
        chunks = []
        for b0 in range(0, args.samples, 1000):
            chunks.append(grey_bytes(generate(torch, g, srng, min(1000, args.samples - b0), batch, dev)))
        write_idx_images(path, np.concatenate(chunks))
        print(f"{args.samples} samples (G in evaluation mode, grey 64x64 IDX) written to {path}")


def add_dcgan_args(p):
    p.add_argument("--dataset", choices=["mnist", "fashion-mnist"], default="fashion-mnist")
    p.add_argument("--data", default="", help="IDX folder (default as build/bin/dcgan)")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--images-per-epoch", type=int, default=2944, help="0: all")
    p.add_argument("--threads", type=int, default=0, help="0: torch's default")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--out", default="", help="CSV (default results/dcgan/torch_dcgan_<dataset>.csv)")
    p.add_argument("--iterations-out", default="", help="per-iteration CSV")
    p.add_argument("--samples-dir", default="", help="folder of the per-epoch grids")
    p.add_argument("--samples", type=int, default=0, help="generated images to write at the end")
    p.add_argument("--samples-out", default="", help="IDX file of --samples")
    p.add_argument("--steps", type=int, default=0, help="stop after N iterations, print times")
    p.add_argument("--init-checkpoint", default="",
                   help="pdnn checkpoint of the initial weights (dcgan --save-init) to verify")


MODES = {"mnist": (mode_mnist, add_mnist_args, "W2/W3 on MNIST-layout IDX data"),
         "dcgan": (mode_dcgan, add_dcgan_args, "W5, the DCGAN, on MNIST-layout IDX data")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    for name, (_, add_args, helptext) in MODES.items():
        add_args(sub.add_parser(name, help=helptext))
    args = ap.parse_args()
    try:
        MODES[args.mode][0](args)
    except HeaderMismatch as e:
        sys.exit(f"torch_reference: {e}")


if __name__ == "__main__":
    main()
