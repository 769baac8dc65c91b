"""The segment mode of torch_reference.py (`torch_reference.py segment ...`): the PyTorch twin of
build/bin/segment, the U-Net of issue 34 on an image/mask pair folder (datasets/ccp-200).

  torch_reference.py segment [--data DIR] [--classes K] [--size S] [--base B] [--depth D]
                             [--batchnorm on|off] [--loss ce|dice|ce+dice] [--batch N]
                             [--images-per-epoch N] [--epochs N]
                             [--optimizer NAME] [--lr X] [--augment on|off] [--threads T]
                             [--seed S] [--device cpu|cuda] [--precision fp32|tf32|bf16]
                             [--out CSV] [--init-checkpoint F] [--compare-checkpoint F]
                             [--eval-checkpoint F]
                             [--steps N [--mode eager|graph] [--bench-csv CSV]]

What is pdnn's, for a given seed (the flags and defaults are the app's):
  * the network: lib/workloads/segmentation/unet.h, layer for layer in pdnn's node order (enc<l>,
    mid, up<l> + concatenation [up, skip], dec<l>, head), 3x3 convolutions with padding 1,
    BatchNorm after each (and no convolution bias) with --batchnorm on, 2x2 max pools, 2x2
    stride-2 transposed convolutions, a 1x1 head; the initial weights drawn from pdnn's stream
    in node order, weight then bias, U(+-1/sqrt(fan_in)) with fan_in = size(1) x kernel area
    (init::torch_default; BatchNorm: gamma 1, beta 0);
  * the loss: the mean per-pixel softmax cross-entropy, or with --loss dice / ce+dice the app's
    soft Dice loss (losses/dice_loss.h: 1 - the mean over the classes of (2 I + 1) / (P + G + 1),
    sums over the batch's pixels, in fp32) instead or added; the train loss reported is the
    loss trained on (the Dice part the mean over the batches, as the app's), the test loss the
    cross-entropy; Adam 1e-3 by default (--optimizer as the app's);
  * the data: the pair folder as lib/data/image_mask_pairs.h reads it (the <masks>/ folder of
    --classes K, train.txt then test.txt, photos decoded to the cache side ceil(size * 8/7) as
    the caltech mode decodes them, masks at the photo's own size, 0/255 masks read as 0/1 for two
    classes; both splits normalised by the training split's channel mean and std); epoch e's
    training images the first images_per_epoch of epoch_order_rng(at(seed, 0), e)'s permutation;
  * augmentation (AugmentOptions::flip_and_crop): image i's draws from augment_key(at(seed, 0),
    e, i), the image resampled bilinearly as the caltech mode does (grid_sample: not bit-
    identical to pdnn's float arithmetic) and its mask by the same map, nearest-neighbour in
    pdnn's double arithmetic (augment_mask: the same class ids); the test split in stored order
    without augmentation, batches of min(batch, test images);
  * the CSV row per epoch: pdnn's columns (train loss and pixel accuracy; test loss, pixel
    accuracy, IoU and Dice per class from the confusion counts, -1 for a class neither in the
    masks nor predicted, and the means over the others; peak memory), app "torch". No overlays.
--eval-checkpoint F, after the epochs (--epochs 0: none), scores a pdnn checkpoint of the same
network (segment --checkpoint or --save-weights) on the test split: its parameters (and
BatchNorm's running statistics) loaded, the evaluation of every epoch run once and printed as
"eval <F>: ..." (no CSV row): with pdnn's final weights, its numbers are pdnn's last row's up to
the forward's rounding, so a gap between the two frameworks' scores is in the training, not in
the metric.
--steps N times training steps instead (no data, no pdnn weights: random pixels and labels of
the run's shapes, torch's own initialisation; the values do not change the time), by
torch_gpu_bench.py's clock: blocks of 10 steps after 2 warm-up blocks, each ended by a
synchronisation, the batch copied into the step's fixed buffers before each step; on a GPU the
whole step (zero_grad, forward, loss, backward, optimizer) captured once as a CUDA graph and
replayed (--mode graph, the default there) or eager. --precision on a GPU: fp32 (TF32 off, as
pdnn's default), tf32 (on), bf16 (autocast bfloat16 around forward and loss, model and input
channels_last, what an H100 user runs). The step_ms line has the fields of pdnn's; --bench-csv
appends pdnn's --bench-csv row (kBenchColumns of lib/train/run_loop.cpp).
"""
import concurrent.futures
import math
import os
import socket
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "pylib"))
import pdnn_rng  # noqa: E402
import torch_gpu_bench  # noqa: E402
import torch_reference as ref  # noqa: E402
from results_csv import git_rev, utc_now, write_rows  # noqa: E402

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp")
BENCH_COLUMNS = ["app", "model", "dataset", "device", "gpu", "mode", "precision", "threads",
                 "batch", "steps", "median_ms", "min_ms", "max_ms", "blas_core", "git_rev", "host",
                 "timestamp"]


def fail(msg):
    sys.exit(f"torch_reference: {msg}")


# ---- the pair folder ------------------------------------------------------------------------

def text_lines(path):
    with open(path) as f:
        return [ln.rstrip() for ln in f if ln.strip()]


def choose_masks(folder, k):
    """The mask set of --classes k (apps/segment's choose_masks): a subfolder whose classes.txt
    has k lines, masks/ first."""
    sets = {}
    for e in sorted(os.scandir(folder), key=lambda e: e.name):
        if e.is_dir() and os.path.isfile(os.path.join(e.path, "classes.txt")):
            sets[e.name] = len(text_lines(os.path.join(e.path, "classes.txt")))
    found = [n for n, c in sets.items() if c == k]
    if not found:
        listed = ", ".join(f"{c} ({n}/)" for n, c in sets.items()) or "no mask set"
        fail(f"--classes {k}: {folder} has {listed}")
    return "masks" if "masks" in found else found[0]


def read_mask(path, classes):
    """A mask PNG as class ids (h, w) uint8, as image_mask_pairs.cpp reads it."""
    try:
        import cv2
        m = cv2.imread(path, cv2.IMREAD_UNCHANGED)
    except ImportError:
        import PIL.Image
        img = PIL.Image.open(path)
        if img.mode not in ("L", "1"):
            fail(f"{path}: mask mode {img.mode}: a single 8-bit channel of class ids expected")
        m = np.asarray(img).astype(np.uint8) * (255 if img.mode == "1" else 1)
    if m is None or m.ndim != 2 or m.dtype != np.uint8:
        fail(f"{path}: not an 8-bit single-channel PNG")
    if classes == 2 and (m == 255).any() and np.isin(m, (0, 255)).all():
        return (m == 255).astype(np.uint8)
    if int(m.max()) >= classes:
        fail(f"{path}: values up to {int(m.max())} outside the {classes} classes")
    return np.ascontiguousarray(m)


def load_pairs(args):
    """The folder as lib/data/image_mask_pairs.cpp decodes it: dict of classes, cache
    (N, side, side, 3) uint8 RGB, masks (list of (h, w) uint8), train and test indices, mean,
    std, name, folder, side."""
    folder = args.data or os.path.join(ref.ROOT, "datasets", "ccp-200")
    if not os.path.isdir(folder):
        fail(f"--data {folder}: no such folder")
    masks = choose_masks(folder, args.classes)
    classes = text_lines(os.path.join(folder, masks, "classes.txt"))
    name_file = os.path.join(folder, masks, "NAME")
    name = text_lines(name_file)[0] if os.path.isfile(name_file) else ""
    if not name:
        name = os.path.basename(os.path.normpath(os.path.abspath(folder)))
        name += "" if masks == "masks" else "-" + masks
    lists = [text_lines(os.path.join(folder, f)) if os.path.isfile(os.path.join(folder, f))
             else fail(f"{folder}: no {f}") for f in ("train.txt", "test.txt")]
    ids = lists[0] + lists[1]
    photos = {}
    for e in os.scandir(os.path.join(folder, "images")):
        stem, ext = os.path.splitext(e.name)
        if ext.lower() in IMAGE_EXTENSIONS:
            photos.setdefault(stem, []).append(e.name)
    for i in ids:
        if len(photos.get(i, [])) != 1:
            fail(f"{folder}: id {i}: {len(photos.get(i, []))} photos in images/ (one expected)")
    side = (args.size * 8 + 6) // 7
    dec = ref.PhotoDecoder()

    def work(i):
        with open(os.path.join(folder, "images", photos[i][0]), "rb") as f:
            px, why = dec.decode(f.read(), side)
        if px is None:
            fail(f"{folder}: images/{photos[i][0]}: {why}")
        return px, read_mask(os.path.join(folder, masks, i + ".png"), len(classes))

    t0 = time.perf_counter()
    workers = args.threads if args.threads > 0 else (os.cpu_count() or 1)
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as ex:
        pairs = list(ex.map(work, ids))
    cache = np.stack([p for p, _ in pairs])
    train = np.arange(len(lists[0]))
    test = np.arange(len(lists[0]), len(ids))
    mean, std = ref.channel_norm(cache, train)
    print(f"image/mask folder {folder} ({masks}): {name}: {len(ids)} pairs ({len(train)} train, "
          f"{len(test)} test), {len(classes)} classes, decoded to {side}x{side} in "
          f"{time.perf_counter() - t0:.2f} s ({dec.name}, {workers} threads); RGB mean "
          f"{' '.join(f'{v:.3f}' for v in mean)}, std {' '.join(f'{v:.3f}' for v in std)}",
          flush=True)
    return dict(classes=classes, cache=cache, masks=[m for _, m in pairs], train=train,
                test=test, mean=mean, std=std, name=name, folder=folder, side=side)


def sample_masks(params, masks, side, out):
    """augment_mask (lib/data/augment.cpp) per image: params[i] is the image's map from output
    pixel (u, v) to the cache (affine_params); masks[i] (h, w) covers the same picture, so
    output pixel (u, v) takes the mask pixel containing ((x + 0.5) w / side, (y + 0.5) h / side),
    edges clamped, in the same double arithmetic (pdnn builds without FMA contraction)."""
    uv = np.arange(out, dtype=np.float64)
    y_out = np.empty((len(masks), out, out), dtype=np.int64)
    for i, m in enumerate(masks):
        x00, y00, dxu, dxv, dyu, dyv = params[i, :6]
        mh, mw = m.shape
        x = (x00 + dxv * uv)[:, None] + dxu * uv[None, :]
        y = (y00 + dyv * uv)[:, None] + dyu * uv[None, :]
        xi = np.clip(np.floor((x + 0.5) * (mw / side)).astype(np.int64), 0, mw - 1)
        yi = np.clip(np.floor((y + 0.5) * (mh / side)).astype(np.int64), 0, mh - 1)
        y_out[i] = m[yi, xi]
    return y_out


# ---- the U-Net ------------------------------------------------------------------------------

def unet_class(torch):
    from torch.utils.checkpoint import checkpoint
    nn, F = torch.nn, torch.nn.functional

    class UNet(nn.Module):
        """make_unet (lib/workloads/segmentation/unet.cpp). `names`: pdnn's node names of the
        layers with parameters, in pdnn's node order."""

        def __init__(self, in_ch, classes, base, depth, batchnorm):
            super().__init__()
            self.depth, self.bn, self.names = depth, batchnorm, []
            self.checkpoint_blocks = False  # torch_memory_bench.py's checkpoint variants
            self.layers = nn.ModuleDict()
            c = in_ch
            for lv in range(1, depth + 1):
                self._double_conv(f"enc{lv}", c, base << (lv - 1))
                c = base << (lv - 1)
            self._double_conv("mid", c, base << depth)
            c = base << depth
            for lv in range(depth, 0, -1):
                w = base << (lv - 1)
                self._add(f"up{lv}", nn.ConvTranspose2d(c, w, 2, stride=2))
                self._double_conv(f"dec{lv}", 2 * w, w)
                c = w
            self._add("head", nn.Conv2d(c, classes, 1))

        def _add(self, name, m):
            self.layers[name.replace(".", "_")] = m
            self.names.append(name)

        def _double_conv(self, block, cin, cout):
            for i in (1, 2):
                self._add(f"{block}.conv{i}", nn.Conv2d(cin if i == 1 else cout, cout, 3,
                                                        padding=1, bias=not self.bn))
                if self.bn:
                    self._add(f"{block}.bn{i}", nn.BatchNorm2d(cout))

        def layer(self, name):
            return self.layers[name.replace(".", "_")]

        def _block(self, block, x):
            for i in (1, 2):
                x = self.layer(f"{block}.conv{i}")(x)
                if self.bn:
                    x = self.layer(f"{block}.bn{i}")(x)
                x = F.relu(x, inplace=True)
            return x

        def _level(self, block, x):
            """A level's two-conv block; with checkpoint_blocks, under torch.utils.checkpoint
            (non-reentrant): only the block's input is kept, the block runs again in backward."""
            if self.checkpoint_blocks:
                return checkpoint(self._block, block, x, use_reentrant=False)
            return self._block(block, x)

        def forward(self, x):
            skips = []
            for lv in range(1, self.depth + 1):
                x = self._level(f"enc{lv}", x)
                skips.append(x)
                x = F.max_pool2d(x, 2)
            x = self._level("mid", x)
            for lv in range(self.depth, 0, -1):
                x = torch.cat([self.layer(f"up{lv}")(x), skips[lv - 1]], dim=1)
                x = self._level(f"dec{lv}", x)
            return self.layer("head")(x)

    return UNet


def unet_init(torch, model, rng):
    """Model::reset_parameters: init::torch_default per convolution in node order."""
    convs = (torch.nn.Conv2d, torch.nn.ConvTranspose2d)
    with torch.no_grad():
        for name in model.names:
            m = model.layer(name)
            if isinstance(m, convs):
                bound = np.float32(1.0 / math.sqrt(int(np.prod(m.weight.shape[1:]))))
                for p in (m.weight, m.bias):
                    if p is not None:
                        p.copy_(torch.from_numpy(rng.uniform_float(tuple(p.shape), -bound, bound)))


def load_checkpoint_weights(torch, model, path):
    """A pdnn checkpoint's parameters and running statistics into the model (names as
    unet_param_names, "buffer:<node>.running_mean" and "running_var")."""
    ck = ref.read_pdnn_checkpoint(path)
    pairs = unet_param_names(model)
    for name in model.names:
        for kind, b in model.layer(name).named_buffers(recurse=False):
            if kind in ("running_mean", "running_var"):
                pairs.append((f"buffer:{name}.{kind}", b))
    extra = sorted(set(n for n in ck if n.startswith(("param:", "buffer:"))) -
                   set(n for n, _ in pairs))
    if extra:
        fail(f"--eval-checkpoint {path}: {extra[0]} is not in the network (another network?)")
    with torch.no_grad():
        for name, t in pairs:
            if name not in ck:
                fail(f"--eval-checkpoint {path}: no tensor {name} (another network?)")
            if ck[name].shape != tuple(t.shape):
                fail(f"--eval-checkpoint {path}: {name} is {ck[name].shape}, the network's "
                     f"{tuple(t.shape)}")
            t.copy_(torch.from_numpy(ck[name].copy()))


def unet_param_names(model):
    """(pdnn checkpoint name, parameter) pairs: "param:<node>.weight", "param:<node>.bias"."""
    out = []
    for name in model.names:
        for kind, p in model.layer(name).named_parameters(recurse=False):
            out.append((f"param:{name}.{kind}", p))
    return out


def model_name(args):
    return f"unet_b{args.base}_d{args.depth}" + ("_bn" if args.batchnorm == "on" else "")


def segment_columns(classes):
    safe = [ref.column_safe(c) for c in classes]
    return (ref.RESULT_COLUMNS[:8] + ["train_loss", "train_pixel_acc", "test_loss",
                                      "test_pixel_acc"] +
            [f"test_iou_{c}" for c in safe] + [f"test_dice_{c}" for c in safe] +
            ["test_mean_iou", "test_mean_dice", "peak_rss_mb", "peak_device_mb"] +
            ref.RESULT_COLUMNS[12:])


def confusion(torch, logits, y, k):
    """ops::segmentation_confusion: counts (k * k,) int64 of (truth, argmax class) pairs, row
    truth * k + predicted, over the pixels of logits (N, k, H, W) and labels y (N, H, W)."""
    return torch.bincount((y * k + logits.argmax(1)).flatten(), minlength=k * k)


def scores(conf):
    """segmentation_scores (segmentation_metrics.cpp): IoU and Dice per class (nan for a class
    neither in the truth nor predicted) and their means over the others."""
    iou, dice = [], []
    for c in range(conf.shape[0]):
        tp = int(conf[c, c])
        fn, fp = int(conf[c].sum()) - tp, int(conf[:, c].sum()) - tp
        none = tp + fp + fn == 0
        iou.append(math.nan if none else tp / (tp + fp + fn))
        dice.append(math.nan if none else 2 * tp / (2 * tp + fp + fn))
    scored = [(a, b) for a, b in zip(iou, dice) if not math.isnan(a)]
    mean = (lambda v: sum(v) / len(v) if v else math.nan)
    return iou, dice, mean([a for a, _ in scored]), mean([b for _, b in scored])


def cell(v):
    return f"{-1.0 if math.isnan(v) else v:.6f}"


# ---- the modes ------------------------------------------------------------------------------

def setup(args):
    torch, threads, dev = ref.torch_setup(args)
    if args.size % (1 << args.depth) or args.size < (1 << args.depth):
        fail(f"--size {args.size}: must be a multiple of {1 << args.depth} (2^depth: the U-Net "
             f"pools {args.depth} times)")
    ref.set_gpu_precision(torch, dev, args.precision)
    if dev.type == "cuda":
        if args.cudnn == "deterministic":
            # cudnn.benchmark picks each shape's fastest algorithm, FFT and Winograd included,
            # whose rounding differs from a direct convolution's: the accuracy runs can ask
            # for cuDNN's deterministic algorithms instead (issue 34: is the twin's slower
            # escape from the loss plateau its algorithms?).
            torch.backends.cudnn.benchmark = False
            torch.backends.cudnn.deterministic = True
    elif args.cudnn != "benchmark":
        fail(f"--cudnn {args.cudnn}: the CPU has no cuDNN")
    return torch, threads, dev


def mode_segment(args):
    if args.steps:
        return segment_steps(args)
    torch, threads, dev = setup(args)
    d = load_pairs(args)
    n_train, n_test = len(d["train"]), len(d["test"])
    per_epoch = args.images_per_epoch or n_train
    if args.epochs < 0:
        fail(f"--epochs {args.epochs}: 0 or more")
    if per_epoch > n_train:
        fail(f"--images-per-epoch {per_epoch}: the training split of {d['folder']} has {n_train}")
    batch = min(args.batch, per_epoch)  # fit_batch
    eval_batch = min(batch, max(n_test, 1))
    augment = args.augment == "on"
    rng = pdnn_rng.Rng(args.seed)
    model = unet_class(torch)(3, len(d["classes"]), args.base, args.depth, args.batchnorm == "on")
    unet_init(torch, model, rng)
    names = unet_param_names(model)
    init = {n: t.detach().cpu().numpy().astype(np.float64) for n, t in names}
    if args.init_checkpoint:
        worst = ref.compare_with_checkpoint(torch, model, args.init_checkpoint, "initial weights",
                                            names)
        if worst != 0.0:
            fail("the regenerated initial weights differ from pdnn's")
    bf16 = dev.type == "cuda" and args.precision == "bf16"
    fmt = torch.channels_last if bf16 else torch.contiguous_format
    model.to(dev, memory_format=fmt)
    args.model = "unet"  # make_optimizer's rule: Adam 1e-3 by default, PyTorch's adadelta rho
    opt_name, opt = ref.make_optimizer(torch, args, model.parameters())
    loss_fn = torch.nn.CrossEntropyLoss()
    data_seed = pdnn_rng.at(args.seed, 0)
    cache = torch.from_numpy(d["cache"]).to(dev)
    side, size, k = d["side"], args.size, len(d["classes"])
    mname, dataset = model_name(args), f"{d['name']}-{size}px"
    print(f"torch segment: model {mname}, dataset {dataset} ({d['folder']}), {size}x{size}, batch "
          f"{batch}, {per_epoch} images/epoch, loss {args.loss}, {opt_name} lr {opt.defaults['lr']:g}, augmentation "
          f"{args.augment}, {threads} threads, seed {args.seed}, torch {torch.__version__}, device "
          f"{dev}" + (f" ({args.precision})" if dev.type == "cuda" else ""), flush=True)
    out = args.out or os.path.join(ref.ROOT, "runs", "segment", f"torch_{mname}_{dataset}.csv")
    rev, host, gpu = git_rev(), socket.gethostname(), ref.gpu_name(torch, dev)
    if dev.type == "cuda":  # "| <precision>", as torch_reference's GPU rows (accuracy_summary)
        gpu += f" | {ref.precision_text(dev, args.precision)}"

    def batch_of(split, idx, keys):
        rows = d[split][idx]
        prm = ref.affine_params(keys if keys is not None else [None] * len(idx),
                                keys is not None and augment, side, size, ref.FLIP_AND_CROP)
        x = ref.render(torch, cache[torch.from_numpy(rows).to(dev)], prm, side, size, d["mean"],
                       d["std"])
        y = sample_masks(prm, [d["masks"][r] for r in rows], side, size)
        return x.contiguous(memory_format=fmt), torch.from_numpy(y).to(dev)

    def forward_loss(x, y):
        with ref.autocast(torch, bf16):
            logits = model(x)
            return logits, loss_fn(logits, y)

    def dice_loss(logits, y):
        """The app's soft Dice loss (losses/dice_loss.h), in fp32 over the batch's pixels."""
        p = torch.softmax(logits.float(), 1)
        g = torch.nn.functional.one_hot(y, k).permute(0, 3, 1, 2).to(p.dtype)
        inter, pred, truth = (p * g).sum((0, 2, 3)), p.sum((0, 2, 3)), g.sum((0, 2, 3))
        return 1 - ((2 * inter + 1) / (pred + truth + 1)).mean()

    def evaluate():
        """(test loss, pixel accuracy, confusion counts (k, k)) of the model as it is."""
        model.eval()
        conf = torch.zeros(k * k, dtype=torch.int64, device=dev)
        test_loss, test_pixels = 0.0, 0
        with torch.no_grad():
            for b0 in range(0, n_test, eval_batch):
                x, y = batch_of("test", np.arange(b0, min(b0 + eval_batch, n_test)), None)
                logits, loss = forward_loss(x, y)
                test_loss += float(loss) * y.numel()
                test_pixels += y.numel()
                conf += confusion(torch, logits, y, k)
        conf = conf.view(k, k).cpu().numpy()
        return (test_loss / max(test_pixels, 1), float(np.trace(conf)) / max(test_pixels, 1),
                conf)

    for epoch in range(args.epochs):
        order = pdnn_rng.epoch_rng(data_seed, epoch).permutation(n_train)[:per_epoch]
        model.train()
        loss_sum, correct, pixels, dice_sum, batches = 0.0, 0, 0, 0.0, 0
        t0 = time.perf_counter()
        for b0 in range(0, per_epoch, batch):
            idx = order[b0:b0 + batch]
            x, y = batch_of("train", idx, [ref.augment_key(data_seed, epoch, int(i)) for i in idx])
            opt.zero_grad()
            logits, loss = forward_loss(x, y)
            trained = loss
            if args.loss != "ce":
                dl = dice_loss(logits, y)
                trained = dl if args.loss == "dice" else loss + dl
                dice_sum += float(dl)
                batches += 1
            trained.backward()
            opt.step()
            loss_sum += float(loss) * y.numel()
            correct += int((logits.argmax(1) == y).sum())
            pixels += y.numel()
        secs = time.perf_counter() - t0
        te_loss, te_acc, conf = evaluate()
        iou, dice, m_iou, m_dice = scores(conf)
        tr_ce, tr_acc = loss_sum / pixels, correct / pixels
        tr_dice = dice_sum / max(batches, 1)
        tr_loss = tr_ce if args.loss == "ce" else tr_dice if args.loss == "dice" else tr_ce + tr_dice
        rss, dev_mb = ref.peak_mb(torch, dev)
        print(f"epoch {epoch + 1}/{args.epochs}  {dataset}  train loss {tr_loss:.4f} pixel_acc "
              f"{tr_acc:.4f}  test loss {te_loss:.4f} pixel_acc {te_acc:.4f} mean_iou {m_iou:.4f} "
              f"mean_dice {m_dice:.4f}  {secs:.1f} s  {per_epoch / secs:.0f} img/s", flush=True)
        write_rows(out, segment_columns(d["classes"]), [
            ["torch", mname, dataset, dev.type, gpu, threads, batch, epoch + 1,
             f"{tr_loss:.6f}", f"{tr_acc:.6f}", f"{te_loss:.6f}", f"{te_acc:.6f}"] +
            [cell(v) for v in iou + dice + [m_iou, m_dice]] +
            [f"{rss:.6f}", f"{dev_mb:.6f}", f"{secs:.3f}", f"{per_epoch / secs:.1f}", rev, host,
             utc_now()]])
    if args.epochs > 0:
        print(f"results in {out}")
    if args.compare_checkpoint:
        ref.compare_with_checkpoint(torch, model, args.compare_checkpoint, "final weights", names,
                                    init)
    if args.eval_checkpoint:
        load_checkpoint_weights(torch, model, args.eval_checkpoint)
        te_loss, te_acc, conf = evaluate()
        iou, dice, m_iou, m_dice = scores(conf)
        safe = [ref.column_safe(c) for c in d["classes"]]
        print(f"eval {args.eval_checkpoint}: {dataset}  test loss {te_loss:.6f} pixel_acc "
              f"{te_acc:.6f} " + " ".join(f"iou_{c} {cell(v)}" for c, v in zip(safe, iou)) + " " +
              " ".join(f"dice_{c} {cell(v)}" for c, v in zip(safe, dice)) +
              f" mean_iou {cell(m_iou)} mean_dice {cell(m_dice)}", flush=True)


def segment_steps(args):
    """--steps: ms per training step (see the module's docstring)."""
    torch, threads, dev = setup(args)
    cuda = dev.type == "cuda"
    mode = args.step_mode or ("graph" if cuda else "eager")
    if mode == "graph" and not cuda:
        fail("--mode graph: a CUDA graph needs --device cuda")
    graph, bf16 = mode == "graph", cuda and args.precision == "bf16"
    fmt = torch.channels_last if bf16 else torch.contiguous_format
    torch.manual_seed(args.seed)
    model = unet_class(torch)(3, args.classes, args.base, args.depth, args.batchnorm == "on")
    model.to(dev, memory_format=fmt)
    name = args.optimizer or "adam"
    if graph and name not in ("adam", "sgd"):
        fail(f"--mode graph: --optimizer {name} has no capturable step here (adam or sgd)")
    if name == "adam":
        lr = args.lr if args.lr > 0 else 1e-3
        opt = torch.optim.Adam(model.parameters(), lr=lr, **({"capturable": True} if graph else {}))
    else:
        args.model = "unet"
        _, opt = ref.make_optimizer(torch, args, model.parameters())
    loss_fn = torch.nn.CrossEntropyLoss()
    b, s, pool = args.batch, args.size, 4
    gen = torch.Generator(device=dev).manual_seed(args.seed)
    xs = torch.randn((pool, b, 3, s, s), device=dev, generator=gen)
    ys = torch.randint(0, args.classes, (pool, b, s, s), device=dev, generator=gen)
    x = torch.empty((b, 3, s, s), device=dev).contiguous(memory_format=fmt)
    y = torch.empty((b, s, s), dtype=torch.long, device=dev)

    def step():
        opt.zero_grad(set_to_none=not graph)
        with ref.autocast(torch, bf16):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    def feed(i):
        x.copy_(xs[i % pool])
        y.copy_(ys[i % pool])

    t = torch_gpu_bench.run_timed(torch, step, feed, graph, args.steps,
                                  None if cuda else (lambda: None))
    med, mname = statistics.median(t), model_name(args)
    precision = args.precision if cuda else ""
    tail = f" device=cuda mode={mode} precision={precision}" if cuda else ""
    print(f"step_ms model={mname} batch={b} threads={threads} steps={len(t)} median={med:.4f} "
          f"min={min(t):.4f} max={max(t):.4f}{tail} (torch {torch.__version__}, blocks of 10 "
          "after 2 warm-up blocks, random data)", flush=True)
    if args.bench_csv:
        versions = f"torch {torch.__version__}" + (
            f" cuda {torch.version.cuda} cudnn {torch.backends.cudnn.version()}" if cuda else "")
        write_rows(args.bench_csv, BENCH_COLUMNS, [[
            "torch", mname, f"random-{s}px", dev.type, ref.gpu_name(torch, dev),
            mode if cuda else "", precision, threads, b, len(t), f"{med:.4f}", f"{min(t):.4f}",
            f"{max(t):.4f}", versions, git_rev(), socket.gethostname(), utc_now()]])


def add_segment_args(p):
    p.add_argument("--data", default="", help="image/mask pair folder (default datasets/ccp-200)")
    p.add_argument("--classes", type=int, default=2, help="the mask set with this many classes")
    p.add_argument("--size", type=int, default=256, help="input side (a multiple of 2^depth)")
    p.add_argument("--base", type=int, default=64, help="channels of the first level")
    p.add_argument("--depth", type=int, default=4, help="poolings (and up-samplings)")
    p.add_argument("--batchnorm", choices=["on", "off"], default="off")
    p.add_argument("--loss", choices=["ce", "dice", "ce+dice"], default="ce",
                   help="what training minimises, as the app's --loss (the accuracy mode)")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--images-per-epoch", type=int, default=0, help="0: the whole training split")
    p.add_argument("--epochs", type=int, default=20,
                   help="0: no training (with --eval-checkpoint: only its scores)")
    p.add_argument("--optimizer", choices=["adam", "adadelta", "adagrad", "sgd"], default="")
    p.add_argument("--lr", type=float, default=-1.0, help="default: the optimizer's (adam 1e-3)")
    p.add_argument("--augment", choices=["on", "off"], default="on")
    p.add_argument("--threads", type=int, default=0, help="0: torch's default")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--precision", choices=["fp32", "tf32", "bf16"], default="fp32",
                   help="on a GPU: fp32 (TF32 off, pdnn's default), tf32, bf16 (autocast)")
    p.add_argument("--cudnn", choices=["benchmark", "deterministic"], default="benchmark",
                   help="on a GPU: cuDNN's fastest algorithm per shape (benchmark, PyTorch's "
                        "usual setting) or its deterministic ones")
    p.add_argument("--out", default="",
                   help="CSV (default runs/segment/torch_<model>_<dataset>.csv)")
    p.add_argument("--steps", type=int, default=0,
                   help="time training steps instead: blocks of 10 after 2 warm-up blocks "
                        "(random data, torch's own initial weights)")
    p.add_argument("--mode", dest="step_mode", choices=["eager", "graph"], default="",
                   help="with --steps: the step as one CUDA graph (default on a GPU) or eager")
    p.add_argument("--bench-csv", default="", help="with --steps: append pdnn's step-time row")
    p.add_argument("--init-checkpoint", default="",
                   help="pdnn checkpoint of the initial weights (segment --save-init) to verify")
    p.add_argument("--eval-checkpoint", default="",
                   help="after the epochs, score this pdnn checkpoint (segment --checkpoint or "
                        "--save-weights) on the test split")
    p.add_argument("--compare-checkpoint", default="",
                   help="pdnn checkpoint to compare the final weights with (and each "
                        "parameter's update: pdnn's against torch's, from the same initial "
                        "weights)")
