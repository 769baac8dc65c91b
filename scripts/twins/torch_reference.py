#!/usr/bin/python3
"""PyTorch twins of pdnn's experiments: the same nets, initial weights, data order, dropout
masks and optimizer as pdnn for a given seed, so the two can be compared run for run.

Run with Debian's python3 (torch 1.13 from python3-torch: scripts/tools/install_deps.sh torch).
One mode per experiment; each takes the flags of the pdnn app it mirrors:

  torch_reference.py mnist [--model small|keras] [--dataset ...] [--data DIR] [--epochs N]
                           [--batch B] [--optimizer NAME] [--lr X] [--threads T] [--seed S]
                           [--out CSV] [--steps N] [--init-checkpoint F] [--compare-checkpoint F]
  torch_reference.py caltech [--data DIR] [--classes a,b,...] [--size S] [--batch B]
                           [--images-per-epoch N] [--epochs N] [--lr X] [--augment on|off]
                           [--split-seed S] [--threads T] [--seed S] [--device cpu|cuda]
                           [--precision fp32|tf32|bf16] [--out CSV] [--steps N]
                           [--init-checkpoint F] [--compare-checkpoint F]
  torch_reference.py dcgan [--dataset fashion-mnist|mnist|caltech] [--data DIR] [--epochs N]
                           [--batch B] [--images-per-epoch N] [--threads T] [--seed S]
                           [--device cpu|cuda] [--tf32] [--out CSV] [--iterations-out CSV]
                           [--samples-dir DIR] [--samples N] [--samples-epochs E,E,...]
                           [--samples-out F] [--steps N] [--init-checkpoint F]
                           [--nz N --ngf N --ndf N]
  torch_reference.py segment [--data DIR] [--classes K] [--size S] [--base B] [--depth D]
                           [--batchnorm on|off] [--batch N] [--epochs N] [--device cpu|cuda]
                           [--precision fp32|tf32|bf16] [--steps N [--mode eager|graph]] ...
                           (torch_segment.py: the flags and what is reproduced)

How pdnn's choices are reproduced (scripts/pylib/pdnn_rng.py holds the random stream):
  * initial weights: Sequential::reset_parameters draws, layer by layer, weight then bias,
    each element lo + (hi - lo) * float(u) in row-major order, with bound 1/sqrt(fan_in);
  * data order: epoch e is Rng(at(at(seed, 0), e + 1)).permutation(N) (epoch_order_rng);
  * dropout: each training forward reserves numel values of the run's stream; element i is kept
    iff to_unit(at(seed, base + i + 1)) >= p and then scaled by 1/(1 - p);
  * the last batch of an epoch keeps the N % B remaining images; loss = mean cross-entropy.
caltech (W4) also reproduces lib/data/image_folder.h and augment.h, so both frameworks train on
the same photos with the same recipe (batches are not bit-identical: the photos are decoded by
OpenCV in pdnn and by OpenCV or PIL here, and resampled in another rounding order):
  * the folder: DIR/<class>/ files at any depth in path order, JPEG/PNG/BMP by their first
    bytes, truncated JPEGs skipped; each photo resized (area when shrinking, else bilinear)
    to a square cache of ceil(size * 8/7) pixels;
  * the split: per class, Rng(at(split_seed, FNV-1a(class name))).permutation(n), the first
    round(n/2) to training; both splits normalised by the training split's channel mean/std;
  * an epoch: the first images_per_epoch of epoch_order_rng(at(seed, 0), e).permutation(N);
  * augmentation of training image i in epoch e: the eight draws of
    Rng(at(at(at(seed, 0) ^ 0xA5A5F00DC0FFEE01, e + 1), i + 1)) (flip, crop scale, log-ratio,
    x, y, angle, brightness, contrast) turned into pdnn's affine map from output pixels to
    the cache, sampled bilinearly with edges clamped (grid_sample, border padding), then
    brightness, contrast about the mean grey, normalisation; the test split without it.
  On a GPU, --precision fp32 (the default) turns TF32 off as pdnn's fp32 (before the flag the
  twin ran PyTorch's default, cuDNN convolutions in TF32); bf16 is what a PyTorch user runs on
  an H100 (issue 32): torch.autocast("cuda", bfloat16) around forward and loss (training and
  test), the model and its inputs in channels_last, fp32 weights and AdaGrad state, cuDNN's TF32
  on for what autocast leaves in fp32 (torch_gpu_bench.set_precision). The header says the
  precision, and a GPU row's gpu column ends in "| <precision>". The CPU runs fp32 only.
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
the scored samples' noise from Rng(at(at(seed, 0), 2^62)) (the same for every --samples-epochs
file); samples written as pdnn writes them (64x64 IDX, round(255 (v + 1) / 2): grey, the mean of
the three channels, for IDX data; colour planes for photos). On a GPU the convolutions run in
fp32 as pdnn's do (TF32 off, PyTorch's default for cuDNN is on; --tf32 turns it on), with
cuDNN's autotuner. The photos' CSV rows end with skipped_files, as pdnn's do.
"""
import argparse
import concurrent.futures
import contextlib
import gzip
import io
import math
import os
import resource
import socket
import struct
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import pdnn_rng  # noqa: E402
import torch_gpu_bench  # noqa: E402
from results_csv import HeaderMismatch, git_rev, utc_now, write_rows  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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
        sys.exit("torch_reference: no torch for %s: run scripts/tools/install_deps.sh torch "
                 "(Debian's python3-torch) and use /usr/bin/python3" % sys.executable)
    return torch


def torch_setup(args):
    """torch, its thread count (--threads, 0: torch's default) and the --device, checked."""
    torch = torch_module()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        sys.exit("torch_reference: --device cuda, but torch sees no GPU")
    return torch, torch.get_num_threads(), dev


def set_gpu_precision(torch, dev, precision):
    """--precision: on a GPU, fp32 (TF32 off, pdnn's default), tf32, or bf16 (autocast: what
    an H100 user runs), by torch_gpu_bench.set_precision's switches (cuDNN's autotuner on); on
    the CPU fp32 alone, as pdnn's (bf16 is torch.autocast("cuda"), which needs a GPU)."""
    if dev.type == "cuda":
        torch_gpu_bench.set_precision(torch, precision)
    elif precision != "fp32":
        sys.exit(f"torch_reference: --precision {precision}: the CPU runs fp32, as pdnn's "
                 f"(tf32 and bf16 are for --device cuda: bf16 is torch.autocast(\"cuda\"), "
                 f"which needs a GPU)")


def autocast(torch, bf16):
    """bf16 autocast on the GPU, else nothing (torch 1.13's autocast asks for a GPU even when
    disabled)."""
    return torch.autocast("cuda", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()


def precision_text(dev, precision):
    """The precision as the run header and a GPU row's gpu column say it ("" on the CPU)."""
    if dev.type != "cuda":
        return ""
    return {"fp32": "fp32, TF32 off", "tf32": "tf32",
            "bf16": "bf16, autocast bfloat16 + channels_last"}[precision]


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


def compare_with_checkpoint(torch, model, path, what, names=None, init=None):
    """max |torch - pdnn| over the parameters; names: (pdnn name, tensor) pairs (default
    pdnn_param_names of a Sequential). init: {name: the initial weights both started from}: then
    also, per parameter, how far pdnn's update (its weights less init) is from torch's, relative
    to torch's, and the share of elements whose update has the other sign. Weights are fp32, so
    an update below a weight's last bit is lost: with a large SGD step (--optimizer sgd --lr
    1e8, one batch) the updates are the gradients."""
    ck = read_pdnn_checkpoint(path)
    worst = num = den = 0.0
    for name, p in names if names is not None else pdnn_param_names(torch, model):
        if name not in ck:
            sys.exit(f"torch_reference: {path}: no tensor {name}")
        a = p.detach().cpu().numpy()
        if ck[name].shape != a.shape:
            sys.exit(f"torch_reference: {path}: {name} is {ck[name].shape}, torch has {a.shape}")
        worst = max(worst, float(np.max(np.abs(ck[name] - a))))
        if init is not None:
            dp = ck[name].astype(np.float64) - init[name]
            dt = a.astype(np.float64) - init[name]
            d, n = float(np.linalg.norm(dp - dt)), float(np.linalg.norm(dt))
            num, den = num + d * d, den + n * n
            print(f"  {name:32s} update |pdnn - torch| / |torch| {d / n if n > 0 else 0.0:.3e}"
                  f"  other sign {100.0 * float(np.mean(np.sign(dp) != np.sign(dt))):5.2f}%"
                  f"  |torch's update| {n:.3e}")
    print(f"{what}: max |torch - pdnn| over all parameters = {worst:.3e} ({path})")
    if init is not None and den > 0:
        print(f"{what}: the updates' |pdnn - torch| / |torch| over all parameters = "
              f"{(num / den) ** 0.5:.3e}")
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
    torch, threads, dev = torch_setup(args)
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
    out = args.out or os.path.join(ROOT, "runs", "mnist", f"{args.model}_{name}.csv")
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
    finish_run(torch, args, model, args.model, batch, threads, step_ms, out)


def finish_run(torch, args, model, model_name, batch, threads, step_ms, out):
    """The end of a run: the step_ms line of a --steps run (the first 2 steps left out when
    there are more than 4, as pdnn's run loop does), and the final-weights comparison."""
    if args.steps:
        skip = 2 if len(step_ms) > 4 else 0
        t = sorted(step_ms[skip:])
        med = t[len(t) // 2] if len(t) % 2 else 0.5 * (t[len(t) // 2 - 1] + t[len(t) // 2])
        print(f"step_ms model={model_name} batch={batch} threads={threads} steps={len(t)} "
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
    p.add_argument("--out", default="", help="CSV (default runs/mnist/<model>_<dataset>.csv)")
    p.add_argument("--steps", type=int, default=0, help="stop after N steps, print step times")
    p.add_argument("--init-checkpoint", default="",
                   help="pdnn checkpoint of the initial weights (mnist --save-init) to verify")
    p.add_argument("--compare-checkpoint", default="",
                   help="pdnn checkpoint to compare the final weights with")


# ---- caltech (W4) ---------------------------------------------------------------------------

PAPER_CLASSES = ["airplanes", "Motorbikes", "Faces_easy", "watch", "Leopards", "bonsai"]
AUGMENT_SALT = 0xA5A5F00DC0FFEE01  # lib/data/augment.cpp
# AugmentOptions' defaults (lib/data/augment.h), as the float32 values pdnn holds.
AUG = dict(scale_min=np.float32(0.5), scale_max=np.float32(1.0), ratio_min=np.float32(3.0 / 4.0),
           ratio_max=np.float32(4.0 / 3.0), rotate_deg=np.float32(10.0),
           brightness=np.float32(0.2), contrast=np.float32(0.2))
# AugmentOptions::flip_and_crop(): the image/mask pairs' (no rotation, no jitter).
FLIP_AND_CROP = dict(AUG, rotate_deg=np.float32(0.0), brightness=np.float32(0.0),
                     contrast=np.float32(0.0))


def sniff(b):
    if b[:3] == b"\xff\xd8\xff":
        return "jpeg"
    if b[:8] == b"\x89PNG\r\n\x1a\n":
        return "png"
    if b[:2] == b"BM":
        return "bmp"
    return None


def jpeg_check(b):
    """("", w, h) for a complete JPEG, else (problem, 0, 0): lib/data/image_folder.cpp's walk
    over the marker segments up to the end-of-image marker."""
    n, pos, w, h = len(b), 2, 0, 0
    while pos < n:
        if b[pos] != 0xFF:
            pos += 1
            continue
        while pos < n and b[pos] == 0xFF:
            pos += 1
        if pos >= n:
            break
        m = b[pos]
        pos += 1
        if m == 0xD9:
            return "", w, h
        if m == 0x01 or m == 0xD8 or 0xD0 <= m <= 0xD7:
            continue
        if pos + 2 > n:
            break
        length = b[pos] << 8 | b[pos + 1]
        if length < 2:
            return "corrupt JPEG (bad segment length)", 0, 0
        if pos + length > n:
            break
        if 0xC0 <= m <= 0xCF and m not in (0xC4, 0xC8, 0xCC) and length >= 7 and w == 0:
            h, w = b[pos + 3] << 8 | b[pos + 4], b[pos + 5] << 8 | b[pos + 6]
        pos += length
        if m == 0xDA:
            while pos + 1 < n:
                if b[pos] == 0xFF and b[pos + 1] != 0x00 and not 0xD0 <= b[pos + 1] <= 0xD7:
                    break
                pos += 2 if b[pos] == 0xFF else 1
            if pos + 1 >= n:
                break
    return "truncated JPEG (no end-of-image marker)", 0, 0


def fnv1a(name):
    h = 0xCBF29CE484222325
    for ch in name.encode():
        h = ((h ^ ch) * 0x100000001B3) & pdnn_rng.MASK
    return h


class PhotoDecoder:
    """Photo bytes -> side x side x 3 RGB uint8, as lib/data/image_folder.cpp does: OpenCV when
    cv2 is importable (the same library as pdnn), else PIL (BOX filter for area shrinking)."""

    def __init__(self):
        try:
            import cv2
            self.cv2, self.name = cv2, "OpenCV " + cv2.__version__
            cv2.setNumThreads(1)
            return
        except ImportError:
            self.cv2 = None
        try:
            import PIL.Image
            self.pil, self.name = PIL.Image, "PIL " + PIL.__version__
        except ImportError:
            sys.exit("torch_reference: caltech needs cv2 (python3-opencv) or PIL (python3-pil) "
                     "to read the photos")

    def decode(self, b, side, center_crop=False):
        """(pixels, "") or (None, why it is skipped). center_crop: the largest centred square
        first (ImageFolderOptions::center_crop, the dcgan app's photos)."""
        if not b:
            return None, "empty file"
        fmt = sniff(b)
        if fmt is None:
            return None, "not a JPEG, PNG or BMP file"
        factor = 1
        if fmt == "jpeg":
            problem, w, h = jpeg_check(b)
            if problem:
                return None, problem
            shorter = min(w, h) if w and h else 0
            factor = 8 if shorter >= 8 * side else 4 if shorter >= 4 * side else \
                2 if shorter >= 2 * side else 1
        try:
            rgb = self._decode_cv2(b, fmt, factor) if self.cv2 else self._decode_pil(b, fmt, factor)
        except Exception as e:  # noqa: BLE001 (any decoder error means: skip the file)
            return None, f"cannot decode ({e})"
        if rgb is None or rgb.size == 0:
            return None, "cannot decode (corrupt or unsupported)"
        if center_crop and rgb.shape[0] != rgb.shape[1]:
            h, w = rgb.shape[:2]
            c = min(h, w)
            rgb = rgb[(h - c) // 2:(h - c) // 2 + c, (w - c) // 2:(w - c) // 2 + c]
        shrink = rgb.shape[0] * rgb.shape[1] > side * side
        if rgb.shape[:2] == (side, side):
            return np.ascontiguousarray(rgb), ""
        if self.cv2:
            cv2 = self.cv2
            out = cv2.resize(rgb, (side, side),
                             interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)
        else:
            img = self.pil.fromarray(rgb)
            out = np.asarray(img.resize((side, side), self.pil.BOX if shrink else self.pil.BILINEAR))
        return np.ascontiguousarray(out), ""

    def _decode_cv2(self, b, fmt, factor):
        cv2 = self.cv2
        buf = np.frombuffer(b, dtype=np.uint8)
        if fmt == "jpeg":
            flags = {1: cv2.IMREAD_COLOR, 2: cv2.IMREAD_REDUCED_COLOR_2,
                     4: cv2.IMREAD_REDUCED_COLOR_4, 8: cv2.IMREAD_REDUCED_COLOR_8}[factor]
            img = cv2.imdecode(buf, flags | cv2.IMREAD_IGNORE_ORIENTATION)
        else:
            img = cv2.imdecode(buf, cv2.IMREAD_UNCHANGED)
        if img is None:
            return None
        if img.dtype == np.uint16:
            img = np.rint(img / 257.0).astype(np.uint8)
        if img.ndim == 2:
            return cv2.cvtColor(img, cv2.COLOR_GRAY2RGB)
        if img.shape[2] == 2:
            return cv2.cvtColor(np.ascontiguousarray(img[:, :, 0]), cv2.COLOR_GRAY2RGB)
        if img.shape[2] == 4:
            return cv2.cvtColor(img, cv2.COLOR_BGRA2RGB)
        return cv2.cvtColor(img, cv2.COLOR_BGR2RGB)

    def _decode_pil(self, b, fmt, factor):
        img = self.pil.open(io.BytesIO(b))
        if fmt == "jpeg" and factor > 1:
            img.draft("RGB", (img.size[0] // factor, img.size[1] // factor))
        if img.mode in ("I;16", "I;16B", "I;16L", "I"):
            a = np.rint(np.asarray(img, dtype=np.float64) / 257.0).clip(0, 255).astype(np.uint8)
            return np.stack([a] * 3, axis=-1)
        if img.mode == "LA":
            img = img.getchannel(0)
        return np.asarray(img.convert("RGB"))


def folder_classes(folder):
    return sorted(e.name for e in os.scandir(folder) if e.is_dir() and not e.name.startswith("."))


def load_photos(args):
    """The split cache as image_folder.cpp builds it: dict with classes, cache (N,s,s,3), labels,
    train/test index arrays, norm (mean, std), dataset name, decoder."""
    folder = args.data or os.path.join(ROOT, "datasets", "caltech101-6")
    if not os.path.isdir(folder):
        sys.exit(f"torch_reference: image folder {folder}: no such directory")
    found = folder_classes(folder)
    # As apps/caltech101: without --classes the paper's six when the folder has them all, else
    # every class folder there, sorted (torchvision's ImageFolder convention).
    if args.classes:
        classes = args.classes.split(",")
    elif all(c in found for c in PAPER_CLASSES):
        classes = PAPER_CLASSES
    else:
        classes = found
    if len(classes) < 2:
        sys.exit(f"torch_reference: image folder {folder}: {len(classes)} class(es): a "
                 "classifier needs two or more")
    for c in classes:
        if c not in found:
            sys.exit(f"torch_reference: image folder {folder}: no folder for class '{c}'")
    files, labels = [], []
    for k, c in enumerate(classes):
        names = []
        for root, _, fs in os.walk(os.path.join(folder, c)):
            for f in fs:
                p = os.path.join(root, f)
                if os.path.isfile(p):
                    names.append(os.path.relpath(p, folder))
        names.sort(key=lambda s: s.encode())
        if not names:
            sys.exit(f"torch_reference: image folder {folder}: class '{c}' is empty")
        files += names
        labels += [k] * len(names)
    side = (args.size * 8 + 6) // 7
    dec = PhotoDecoder()

    def work(rel):
        with open(os.path.join(folder, rel), "rb") as f:
            return dec.decode(f.read(), side)

    t0 = time.perf_counter()
    workers = args.threads if args.threads > 0 else (os.cpu_count() or 1)
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as ex:
        decoded = list(ex.map(work, files))
    kept = [i for i, (px, _) in enumerate(decoded) if px is not None]
    skipped = [(files[i], why) for i, (px, why) in enumerate(decoded) if px is None]
    cache = np.stack([decoded[i][0] for i in kept])
    kept_labels = np.array([labels[i] for i in kept], dtype=np.int64)
    train, test, counts = [], [], []
    begin = 0
    for k, c in enumerate(classes):
        n = int((kept_labels == k).sum())
        if n < 2:
            sys.exit(f"torch_reference: image folder {folder}: class '{c}' has {n} readable "
                     "image(s); a train/test split needs 2")
        n_train = max(1, min(int(math.floor(n * 0.5 + 0.5)), n - 1))
        perm = pdnn_rng.Rng(pdnn_rng.at(args.split_seed, fnv1a(c))).permutation(n)
        train += sorted((begin + perm[:n_train]).tolist())
        test += sorted((begin + perm[n_train:]).tolist())
        counts.append(f"{c} {n_train}/{n - n_train}")
        begin += n
    train, test = np.array(train, dtype=np.int64), np.array(test, dtype=np.int64)
    norm_mean, norm_std = channel_norm(cache, train)
    name = os.path.basename(os.path.normpath(folder))
    if len(classes) != len(found):
        name += f"-{len(classes)}cls"
    if args.size != 224:
        name += f"-{args.size}px"
    print(f"image folder {folder}: {len(kept):,} images in {len(classes)} classes decoded to "
          f"{side}x{side} in {time.perf_counter() - t0:.2f} s ({dec.name}, {workers} threads); "
          f"train/test {', '.join(counts)} = {len(train):,}/{len(test):,}; RGB mean "
          f"{' '.join(f'{v:.3f}' for v in norm_mean)}, std {' '.join(f'{v:.3f}' for v in norm_std)}"
          + (f"; skipped {len(skipped)}: {skipped[:3]}" if skipped else ""), flush=True)
    return dict(classes=classes, cache=cache, labels=kept_labels, train=train, test=test,
                mean=norm_mean, std=norm_std, name=name, folder=folder, side=side)


def channel_norm(cache, which):
    """rgb_channel_statistics (lib/data/image_folder.cpp): the per-channel mean and std (/255, as
    float32; std 1 for a flat channel) of the cached photos `which` ((N, side, side, 3) uint8)."""
    px = cache[which].reshape(-1, 3).astype(np.int64)
    count = px.shape[0]
    s1, s2 = px.sum(0).astype(np.float64), (px * px).sum(0).astype(np.float64)
    mean = s1 / count
    var = s2 / count - mean * mean
    return ((mean / 255.0).astype(np.float32),
            np.where(var > 1e-6, np.sqrt(np.maximum(var, 0)) / 255.0, 1.0).astype(np.float32))


def augment_key(seed, epoch, index):
    return pdnn_rng.at(pdnn_rng.at(seed ^ AUGMENT_SALT, epoch + 1), index + 1)


def affine_params(keys, augment, side, out, o=None):
    """Per image: x00, y00, dxu, dxv, dyu, dyv, brightness, contrast of lib/data/augment.cpp's
    map from output pixel (u, v) to the cache's pixel coordinates (x00 + dxu u + dxv v, ...).
    keys None: the identity draw (evaluation). o: the AugmentOptions (default AUG, W4's)."""
    n = len(keys)
    p = np.zeros((n, 8), dtype=np.float64)
    o = o or AUG
    for i in range(n):
        crop_x = crop_y = 0.0
        crop_w = crop_h = float(side)
        flip, angle, bright, contrast = False, 0.0, 1.0, 1.0
        if augment and keys[i] is not None:
            u = pdnn_rng.Rng(keys[i]).uniform_many(8)
            flip = u[0] < 0.5
            scale = float(o["scale_min"]) + float(o["scale_max"] - o["scale_min"]) * u[1]
            lo = float(np.log(o["ratio_min"])), float(np.log(o["ratio_max"]))
            ratio = math.exp(lo[0] + (lo[1] - lo[0]) * u[2])
            w = min(float(side), side * math.sqrt(scale * ratio))
            h = min(float(side), side * math.sqrt(scale / ratio))
            crop_w, crop_h = float(np.float32(w)), float(np.float32(h))
            crop_x, crop_y = float(np.float32((side - w) * u[3])), float(np.float32((side - h) * u[4]))
            angle = float(np.float32(float(o["rotate_deg"]) * (2 * u[5] - 1)))
            bright = float(np.float32(1 + float(o["brightness"]) * (2 * u[6] - 1)))
            contrast = float(np.float32(1 + float(o["contrast"]) * (2 * u[7] - 1)))
        sx, sy = crop_w / out, crop_h / out
        c, s = (1.0, 0.0) if angle == 0 else (math.cos(math.radians(angle)), math.sin(math.radians(angle)))
        fx = -sx if flip else sx
        dxu, dxv, dyu, dyv = c * fx, -s * sy, s * fx, c * sy
        ou = ov = 0.5 - out / 2.0
        cx, cy = crop_x + crop_w / 2.0 - 0.5, crop_y + crop_h / 2.0 - 0.5
        p[i] = (cx + dxu * ou + dxv * ov, cy + dyu * ou + dyv * ov, dxu, dxv, dyu, dyv, bright,
                contrast)
    return p


def render(torch, src, params, side, out, mean, std):
    """src (B, side, side, 3) uint8 on the device, params from affine_params -> (B, 3, out, out)
    float32: bilinear sampling with clamped edges, brightness, contrast, normalisation."""
    dev = src.device
    prm = torch.from_numpy(params).to(dev)
    uv = torch.arange(out, dtype=torch.float64, device=dev)
    u, v = uv.view(1, 1, out), uv.view(1, out, 1)
    col = lambda j: prm[:, j].view(-1, 1, 1)  # noqa: E731
    x = col(0) + col(2) * u + col(3) * v
    y = col(1) + col(4) * u + col(5) * v
    # grid_sample (align_corners=False) reads pixel i at (2 i + 1) / side - 1.
    grid = torch.stack(((2 * x + 1) / side - 1, (2 * y + 1) / side - 1), dim=-1).float()
    img = src.permute(0, 3, 1, 2).float()
    img = torch.nn.functional.grid_sample(img, grid, mode="bilinear", padding_mode="border",
                                          align_corners=False)
    img = (img * (col(6).float().view(-1, 1, 1, 1) / 255.0)).clamp_(0, 1)
    grey = (0.299 * img[:, 0] + 0.587 * img[:, 1] + 0.114 * img[:, 2]).mean(dim=(1, 2))
    grey = grey.view(-1, 1, 1, 1)
    contrast = col(7).float().view(-1, 1, 1, 1)
    img = torch.where(contrast != 1, ((img - grey) * contrast + grey).clamp(0, 1), img)
    m = torch.from_numpy(mean).to(dev).view(1, 3, 1, 1)
    s = torch.from_numpy(std).to(dev).view(1, 3, 1, 1)
    return ((img - m) / s).contiguous()


def caltech_model(torch, side, classes, rng):
    nn = torch.nn
    drop = pdnn_dropout_class(torch)
    layers, c = [], 3
    for k in (32, 64, 128):
        layers += [nn.Conv2d(c, k, 3, padding=1), nn.ReLU(), nn.Conv2d(k, k, 3, padding=1),
                   nn.ReLU(), nn.MaxPool2d(2)]
        c = k
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(128 * (side // 8) ** 2, 1024),
                         nn.ReLU(), drop(0.5, rng), nn.Linear(1024, 1024), nn.ReLU(),
                         drop(0.5, rng), nn.Linear(1024, classes))


def peak_mb(torch, dev):
    """(peak resident MB, peak device MB: 0 on the CPU), the results' peak_rss_mb and
    peak_device_mb."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3
    return rss, torch.cuda.max_memory_allocated(dev) / 1e6 if dev.type == "cuda" else 0.0


def caltech_columns(classes):
    return (RESULT_COLUMNS[:12] + [f"test_acc_{column_safe(c)}" for c in classes] +
            ["peak_rss_mb", "peak_device_mb", "loader_hidden_s", "loader_exposed_s"] +
            RESULT_COLUMNS[12:] + ["skipped_files"])


def column_safe(name):
    return "".join(ch if ch.isascii() and (ch.isalnum() or ch in "-_.") else "_" for ch in name)


def mode_caltech(args):
    torch, threads, dev = torch_setup(args)
    set_gpu_precision(torch, dev, args.precision)
    if args.size % 8:
        sys.exit(f"torch_reference: --size {args.size}: must be a multiple of 8")
    if args.steps:
        # A timing run: the values do not change the time of a step, so neither the photos
        # (random pixels of the same shape, the split's size) nor pdnn's initial weights
        # (torch's own) are made, which saves ~20 s per run.
        n, classes = 1301, args.classes.split(",") if args.classes else PAPER_CLASSES
        side = (args.size * 8 + 6) // 7
        gen = np.random.default_rng(args.seed)
        d = dict(classes=classes, cache=gen.integers(0, 256, (n, side, side, 3), dtype=np.uint8),
                 labels=gen.integers(0, len(classes), n), train=np.arange(n),
                 test=np.arange(0), mean=np.full(3, 0.5, np.float32),
                 std=np.full(3, 0.25, np.float32), name="random", folder="(timing: random pixels)",
                 side=side)
    else:
        d = load_photos(args)
    n_train = len(d["train"])
    per_epoch = args.images_per_epoch or n_train
    if per_epoch > n_train:
        sys.exit(f"torch_reference: --images-per-epoch {per_epoch}: the training split has "
                 f"{n_train} images")
    augment = args.augment == "on"
    rng = pdnn_rng.Rng(args.seed)
    model = caltech_model(torch, args.size, len(d["classes"]), rng)
    if not args.steps:
        pdnn_init(torch, model, rng)
    # bf16 as a PyTorch user runs it: autocast around forward and loss, the model and its
    # inputs in channels_last; the weights and AdaGrad's sums stay fp32.
    bf16 = args.precision == "bf16"
    fmt = torch.channels_last if bf16 else torch.contiguous_format
    model.to(dev, memory_format=fmt)
    if args.init_checkpoint:
        worst = compare_with_checkpoint(torch, model, args.init_checkpoint, "initial weights")
        if worst != 0.0:
            sys.exit("torch_reference: the regenerated initial weights differ from pdnn's")
    args.model = "caltech9"  # make_optimizer's rule: adadelta with PyTorch's rho 0.9
    opt_name, opt = make_optimizer(torch, args, model.parameters())
    loss_fn = torch.nn.CrossEntropyLoss()
    data_seed = pdnn_rng.at(args.seed, 0)
    cache = torch.from_numpy(d["cache"]).to(dev)
    labels = torch.from_numpy(d["labels"]).to(dev)
    side, out_px, batch = d["side"], args.size, args.batch
    # A GPU row's gpu column ends in "| <precision>" (pdnn's rows have no precision column:
    # accuracy_summary.py reads it from the file name and checks it against this).
    gpu = gpu_name(torch, dev) + (f" | {precision_text(dev, args.precision)}" if dev.type == "cuda"
                                  else "")
    print(f"torch caltech101: model caltech9, dataset {d['name']} ({d['folder']}: {n_train:,} "
          f"train / {len(d['test']):,} test, {len(d['classes'])} classes, {out_px}x{out_px}), "
          f"batch {batch}, {per_epoch} images/epoch, {opt_name} lr {opt.defaults['lr']:g}, "
          f"augmentation "
          f"{args.augment}, {threads} threads, seed {args.seed}, torch {torch.__version__}, "
          f"device {dev}" + (f" ({precision_text(dev, args.precision)})" if gpu else ""),
          flush=True)
    out = args.out or os.path.join(ROOT, "runs", "caltech101", f"caltech9_{d['name']}.csv")
    rev, host = git_rev(), socket.gethostname()
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)

    def batch_of(split, idx, keys):
        rows = torch.from_numpy(d[split][idx]).to(dev)
        prm = affine_params(keys if keys is not None else [None] * len(idx),
                            keys is not None and augment, side, out_px)
        x = render(torch, cache[rows], prm, side, out_px, d["mean"], d["std"])
        return x.contiguous(memory_format=fmt), labels[rows]

    def forward_loss(x, y):
        with autocast(torch, bf16):
            logits = model(x)
            return logits, loss_fn(logits, y)

    steps, step_ms = 0, []
    for epoch in range(args.epochs if not args.steps else 1 << 30):
        order = pdnn_rng.epoch_rng(data_seed, epoch).permutation(n_train)[:per_epoch]
        model.train()
        loss_sum, correct, seen, prep_s = 0.0, 0, 0, 0.0
        t0 = time.perf_counter()
        for b0 in range(0, per_epoch, batch):
            tp = time.perf_counter()
            idx = order[b0:b0 + batch]
            x, y = batch_of("train", idx, [augment_key(data_seed, epoch, int(i)) for i in idx])
            sync()
            ts = time.perf_counter()
            prep_s += ts - tp
            opt.zero_grad()
            logits, loss = forward_loss(x, y)
            loss.backward()
            opt.step()
            sync()
            step_ms.append(1e3 * (time.perf_counter() - ts))
            loss_sum += float(loss) * len(idx)
            correct += int((logits.argmax(1) == y).sum())
            seen += len(idx)
            steps += 1
            if args.steps and steps >= args.steps:
                break
        secs = time.perf_counter() - t0
        if args.steps:
            if steps >= args.steps:
                break
            continue
        model.eval()
        k = len(d["classes"])
        conf = np.zeros((k, k), dtype=np.int64)
        test_loss = 0.0
        with torch.no_grad():
            for b0 in range(0, len(d["test"]), batch):
                idx = np.arange(b0, min(b0 + batch, len(d["test"])))
                x, y = batch_of("test", idx, None)
                logits, loss = forward_loss(x, y)
                test_loss += float(loss) * len(idx)
                np.add.at(conf, (y.cpu().numpy(), logits.argmax(1).cpu().numpy()), 1)
        model.train()
        n_test = len(d["test"])
        test_acc = float(np.trace(conf)) / n_test
        per_class = [conf[i, i] / max(1, conf[i].sum()) for i in range(k)]
        train_loss, train_acc = loss_sum / seen, correct / seen
        rss, dev_mb = peak_mb(torch, dev)
        print(f"epoch {epoch + 1}/{args.epochs}  {d['name']}  train loss {train_loss:.4f} acc "
              f"{train_acc:.4f}  test loss {test_loss / n_test:.4f} acc {test_acc:.4f}  "
              f"{secs:.1f} s  {seen / secs:.0f} img/s", flush=True)
        write_rows(out, caltech_columns(d["classes"]), [
            ["torch", "caltech9", d["name"], dev.type, gpu, threads, batch,
             epoch + 1, f"{train_loss:.6f}", f"{train_acc:.6f}", f"{test_loss / n_test:.6f}",
             f"{test_acc:.6f}"] + [f"{a:.6f}" for a in per_class] +
            [f"{rss:.6f}", f"{dev_mb:.6f}", "0.000000", f"{prep_s:.6f}", f"{secs:.3f}",
             f"{seen / secs:.1f}", rev, host, utc_now(), ""]])
    finish_run(torch, args, model, "caltech9", batch, threads, step_ms, out)


def add_caltech_args(p):
    p.add_argument("--data", default="", help="image folder (default datasets/caltech101-6)")
    p.add_argument("--classes", default="",
                   help="comma list (default: the paper's six when the folder has them, else its "
                        "class folders, sorted)")
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--images-per-epoch", type=int, default=1280)
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--optimizer", choices=["adam", "adadelta", "adagrad", "sgd"],
                   default="adagrad")
    p.add_argument("--lr", type=float, default=-1.0, help="default: the optimizer's (adagrad 0.01)")
    p.add_argument("--augment", choices=["on", "off"], default="on")
    p.add_argument("--split-seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="0: torch's default")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--precision", choices=["fp32", "tf32", "bf16"], default="fp32",
                   help="on a GPU: fp32 (TF32 off, pdnn's default), tf32, bf16 (autocast "
                        "bfloat16 around forward and loss, channels_last, fp32 weights and "
                        "optimizer state); the CPU: fp32")
    p.add_argument("--out", default="",
                   help="CSV (default runs/caltech101/caltech9_<dataset>.csv)")
    p.add_argument("--steps", type=int, default=0,
                   help="stop after N steps, print step times (random pixels, torch's own "
                        "initial weights: the values do not change the time)")
    p.add_argument("--init-checkpoint", default="",
                   help="pdnn checkpoint of the initial weights (caltech101 --save-init)")
    p.add_argument("--compare-checkpoint", default="",
                   help="pdnn checkpoint to compare the final weights with")



# ---- dcgan (W5) -----------------------------------------------------------------------------

DCGAN_COLUMNS = ["app", "model", "dataset", "device", "gpu", "threads", "batch", "epoch",
                 "train_d_loss", "train_g_loss", "train_d_x", "train_d_g_z", "train_s_per_iter",
                 "status", "seconds", "images_per_s", "git_rev", "host", "timestamp",
                 "skipped_files"]
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
    """G and D of PyTorch's DCGAN tutorial (the widths: W5's 100, 64, 64)."""
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
    """dcgan_init (lib/workloads/dcgan/dcgan_models.cpp): the tutorial's weights_init from pdnn's stream."""
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


def colour_bytes(x):
    """to_bytes (lib/data/image_grid.cpp): every channel, round(255 (v + 1) / 2) in float32,
    halves away from zero, clamped: (n, c, h, w) uint8."""
    a = np.float32(255.0) * (x.float().cpu().numpy() + np.float32(1.0)) / np.float32(2.0)
    return np.clip(np.floor(a + np.float32(0.5)), 0, 255).astype(np.uint8)


def write_idx_images(path, images):
    """images: (n, rows, cols) or (n, channels, rows, cols) uint8 -> an IDX file (magic 0x803 or
    0x804; gzip when the name ends in .gz), atomically."""
    if images.ndim == 4:
        n, c, rows, cols = images.shape
        head = struct.pack(">IIIII", 0x804, n, c, rows, cols)
    else:
        n, rows, cols = images.shape
        head = struct.pack(">IIII", 0x803, n, rows, cols)
    data = head + np.ascontiguousarray(images).tobytes()
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


def dcgan_photos(args):
    """The dcgan app's photos (--dataset caltech, or --data a folder of photos): every readable
    image of every class folder (sorted by name; a folder without class folders is one class),
    files in path order, centre-cropped to 64x64, as (N,3,64,64) float32 in [-1,1]
    ((v/255 - 0.5)/0.5, the app's normalisation)."""
    folder = args.data or os.path.join(ROOT, "datasets", "caltech101-6")
    if not os.path.isdir(folder):
        sys.exit(f"torch_reference: --data {folder}: no such folder")
    classes = folder_classes(folder)
    root = folder if classes else os.path.dirname(os.path.normpath(folder)) or "."
    if not classes:
        classes = [os.path.basename(os.path.normpath(folder))]
    files = []
    for c in classes:
        names = [os.path.relpath(os.path.join(r, f), root)
                 for r, _, fs in os.walk(os.path.join(root, c)) for f in fs]
        files += sorted(names, key=lambda n: n.encode())
    dec = PhotoDecoder()

    def work(rel):
        with open(os.path.join(root, rel), "rb") as f:
            return dec.decode(f.read(), 64, center_crop=True)

    workers = args.threads if args.threads > 0 else (os.cpu_count() or 1)
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as ex:
        decoded = list(ex.map(work, files))
    px = [p for p, _ in decoded if p is not None]
    skipped = [(f, why) for f, (p, why) in zip(files, decoded) if p is None]
    if not px:
        sys.exit(f"torch_reference: --data {folder}: no readable photos")
    # skipped_summary (lib/data/image_folder.h): the same line in the CSV's last column.
    summary = f"skipped {len(skipped)} of {len(files):,} files" + "".join(
        f"{': ' if i == 0 else ', '}{f} ({why})" for i, (f, why) in enumerate(skipped[:5])) + (
        ", ..." if len(skipped) > 5 else "")
    if skipped:
        print(f"image folder {folder}: {summary}", flush=True)
    x = np.stack(px).astype(np.float32).transpose(0, 3, 1, 2) / np.float32(255.0)
    name = "caltech101-6" if not args.data else os.path.basename(os.path.normpath(folder))
    return name, folder, np.ascontiguousarray((x - np.float32(0.5)) / np.float32(0.5)), summary


def mode_dcgan(args):
    torch, threads, dev = torch_setup(args)
    photos = args.dataset == "caltech" or (args.data and not os.path.exists(
        os.path.join(args.data, "train-images-idx3-ubyte")) and not os.path.exists(
        os.path.join(args.data, "train-images-idx3-ubyte.gz")))
    skipped = ""
    if photos:
        name, folder, xtr, skipped = dcgan_photos(args)
    else:
        name, folder, (xtr, _), _ = load_dataset(args)
    epochs_listed = sorted({int(e) for e in args.samples_epochs.split(",") if e.strip()})
    if epochs_listed and not args.samples:
        sys.exit("torch_reference: --samples-epochs needs --samples N")
    if any(e < 1 or e > args.epochs for e in epochs_listed):
        sys.exit(f"torch_reference: --samples-epochs {args.samples_epochs}: epochs 1..{args.epochs}")
    if len(epochs_listed) > 1 and "{epoch}" not in args.samples_out:
        sys.exit("torch_reference: samples after several epochs need {epoch} in --samples-out")
    n_img = len(xtr)
    per_epoch = args.images_per_epoch or n_img
    if per_epoch > n_img:
        # As the dcgan app: a set smaller than an epoch's worth trains on what it has.
        print(f"note: --images-per-epoch {per_epoch}: {name} has {n_img} images: {n_img} per "
              "epoch", flush=True)
        per_epoch = n_img
    batch, nz = args.batch, args.nz
    # The dcgan app's model column: "dcgan" at W5's widths, else the widths named.
    model_name = ("dcgan" if (nz, args.ngf, args.ndf) == (100, 64, 64)
                  else f"dcgan-z{nz}-g{args.ngf}-d{args.ndf}")
    rng = pdnn_rng.Rng(args.seed)
    g, d = dcgan_models(torch, nz, args.ngf, args.ndf)
    dcgan_init(torch, g, rng)
    dcgan_init(torch, d, rng)
    if args.init_checkpoint:
        if dcgan_compare_init(torch, g, d, args.init_checkpoint) > 1e-6:
            sys.exit("torch_reference: the regenerated initial weights differ from pdnn's")
    g.to(dev)
    d.to(dev)
    if dev.type == "cuda":
        # pdnn's fp32 (its --tf32 is off by default); PyTorch's own default runs cuDNN's
        # convolutions in TF32.
        torch.backends.cuda.matmul.allow_tf32 = args.tf32
        torch.backends.cudnn.allow_tf32 = args.tf32
        torch.backends.cudnn.benchmark = True
    opt_g = torch.optim.Adam(g.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(d.parameters(), lr=2e-4, betas=(0.5, 0.999))
    bce = torch.nn.BCELoss()
    data_seed = pdnn_rng.at(args.seed, 0)
    x28 = torch.from_numpy(xtr).to(dev)
    gpu = gpu_name(torch, dev)
    kind = "photos, centre-cropped, 64x64 RGB" if photos else "upscaled to 64x64"
    precision = "" if dev.type != "cuda" else ", TF32" if args.tf32 else ", fp32"
    print(f"torch dcgan: dataset {name} ({folder}: {n_img} images, {kind}), batch "
          f"{batch}, {per_epoch} images per epoch, Adam lr 2e-4 beta1 0.5, {threads} threads, seed "
          f"{args.seed}, torch {torch.__version__}, device {dev}{precision}", flush=True)
    rev, host = git_rev(), socket.gethostname()
    out = args.out or os.path.join(ROOT, "runs", "dcgan", f"torch_dcgan_{name}.csv")
    its_out = args.iterations_out or os.path.join(ROOT, "runs", "dcgan",
                                                  f"torch_dcgan_{name}_iterations.csv")
    samples_dir = args.samples_dir or os.path.join(ROOT, "runs", "dcgan", "samples", f"torch_{name}")
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
            real = x28[idx] if photos else dcgan_images(torch, x28, idx, dev)
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
            # One read-back (a sync on the GPU) for the four values.
            vals = torch.stack([err_real + err_fake, err_g, out_real.mean(),
                                out_fake.mean()]).detach().cpu().tolist()
            step_ms.append(1e3 * (time.perf_counter() - ts))
            if not all(math.isfinite(v) for v in vals):
                sys.exit(f"torch_reference: diverged at iteration {n_it + 1} of epoch {epoch + 1}: {vals}")
            sums += vals
            n_it += 1
            seen += nb
            steps += 1
            its.append(["torch", model_name, name, dev.type, batch, epoch + 1,
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
            "torch", model_name, name, dev.type, gpu, threads, batch, epoch + 1,
            f"{m[0]:.6f}", f"{m[1]:.6f}", f"{m[2]:.6f}", f"{m[3]:.6f}", f"{secs / n_it:.6f}", "ok",
            f"{secs:.3f}", f"{seen / secs:.1f}", rev, host, utc_now(), skipped]])
        grid_rng = pdnn_rng.Rng(pdnn_rng.at(data_seed, 0))
        save_grid(os.path.join(samples_dir, f"epoch_{epoch + 1:03d}.png"),
                  generate(torch, g, grid_rng, 64, batch, dev, nz))
        if epoch + 1 in epochs_listed:
            write_samples(torch, g, args, data_seed, name, photos, batch, dev, nz,
                          args.samples_out.replace("{epoch}", f"{epoch + 1:03d}"))
    if args.steps:
        skip = 2 if len(step_ms) > 4 else 0
        t = sorted(step_ms[skip:])
        med = t[len(t) // 2] if len(t) % 2 else 0.5 * (t[len(t) // 2 - 1] + t[len(t) // 2])
        print(f"step_ms model={model_name} batch={batch} threads={threads} steps={len(t)} "
              f"median={med:.4f} min={t[0]:.4f} max={t[-1]:.4f}")
        return
    print(f"results in {out}; grids in {samples_dir}")
    if args.samples and not epochs_listed:
        write_samples(torch, g, args, data_seed, name, photos, batch, dev, nz, args.samples_out)


def write_samples(torch, g, args, data_seed, name, photos, batch, dev, nz, path):
    """--samples images from G in evaluation mode for the scored samples' noise (the same for
    every file of a run): colour planes for photos, else grey."""
    path = path or os.path.join(ROOT, "runs", "dcgan", f"samples_{name}_torch.idx.gz")
    srng = pdnn_rng.Rng(pdnn_rng.at(data_seed, SAMPLE_NOISE_INDEX))
    to_bytes = colour_bytes if photos else grey_bytes
    chunks = []
    for b0 in range(0, args.samples, 1000):
        chunks.append(to_bytes(generate(torch, g, srng, min(1000, args.samples - b0), batch, dev, nz)))
    write_idx_images(path, np.concatenate(chunks))
    print(f"{args.samples} samples (G in evaluation mode, {'colour' if photos else 'grey'} "
          f"64x64 IDX) written to {path}", flush=True)


def add_dcgan_args(p):
    p.add_argument("--dataset", choices=["mnist", "fashion-mnist", "caltech"],
                   default="fashion-mnist")
    p.add_argument("--data", default="",
                   help="IDX folder or folder of photos (default as build/bin/dcgan)")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--images-per-epoch", type=int, default=2944, help="0: all")
    p.add_argument("--threads", type=int, default=0, help="0: torch's default")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--out", default="", help="CSV (default runs/dcgan/torch_dcgan_<dataset>.csv)")
    p.add_argument("--iterations-out", default="", help="per-iteration CSV")
    p.add_argument("--samples-dir", default="", help="folder of the per-epoch grids")
    p.add_argument("--samples", type=int, default=0, help="generated images to write at the end")
    p.add_argument("--samples-epochs", default="",
                   help="comma list: write the --samples after each of these epochs instead")
    p.add_argument("--samples-out", default="",
                   help="IDX file of --samples ({epoch}: the epoch, three digits)")
    p.add_argument("--tf32", action="store_true",
                   help="GPU: TF32 convolutions and matmuls (default fp32, as pdnn)")
    p.add_argument("--nz", type=int, default=100, help="noise values per sample (W5: 100)")
    p.add_argument("--ngf", type=int, default=64, help="generator width (W5: 64)")
    p.add_argument("--ndf", type=int, default=64, help="discriminator width (W5: 64)")
    p.add_argument("--steps", type=int, default=0, help="stop after N iterations, print times")
    p.add_argument("--init-checkpoint", default="",
                   help="pdnn checkpoint of the initial weights (dcgan --save-init) to verify")


def segment_module():
    """torch_segment.py, the segment mode (a module of its own: this file is long enough)."""
    import torch_segment
    return torch_segment


MODES = {"mnist": (mode_mnist, add_mnist_args, "W2/W3 on MNIST-layout IDX data"),
         "caltech": (mode_caltech, add_caltech_args, "W4 on an image folder (Caltech101)"),
         "dcgan": (mode_dcgan, add_dcgan_args, "W5, the DCGAN, on IDX data or photos"),
         "segment": (lambda args: segment_module().mode_segment(args),
                     lambda p: segment_module().add_segment_args(p),
                     "the U-Net of build/bin/segment on an image/mask pair folder (ccp-200)")}


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
