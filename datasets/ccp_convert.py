#!/usr/bin/python3
"""Clothing Co-Parsing (CCP) -> an image/mask pair folder that pdnn reads (lib/data/image_mask_pairs.h).

Reads the files of the repository bearpaw/clothing-co-parsing (photos/NNNN.jpg,
annotations/pixel-level/NNNN.mat: a uint8 map `groundtruth` of 59 classes, 0 = background;
label_list.mat: the class names) from SRC and writes OUT:

  images/NNNN.jpg       the photo: the source file unchanged, or (--short-side N) resized with
                        Lanczos so that its shorter side is N pixels and saved as JPEG --quality
  masks/NNNN.png        person vs background: a 1-bit PNG, white where the map has any class
                        1..58 (clothing, skin, hair), black where it has 0; the loader reads
                        black/white as classes 0/1
  masks/classes.txt     background, person (one name a line: line k is class k)
  masks/NAME            the set's name: ccp-person-<pairs>
  masks59/NNNN.png      all 59 classes: an 8-bit greyscale PNG of class ids 0..58
  masks59/classes.txt   label_list.mat's names, class 0 ('null' there) written as background
  masks59/NAME          ccp-clothing59-<pairs>
  train.txt, test.txt   the split, one id a line: an id NNNN is a test image when
                        (NNNN - 1) % 4 == 3, else a training image
  RESIZED               only with --short-side: one line saying how the photos were resized

Resized masks are resampled nearest-neighbour from the label map (the binary mask is the
resized map's > 0), so they hold only classes of the source. A label map with no class but 0
(0536 at fe34fb7: a photo of a person whose annotation is missing) is left out and reported.

OUT must not exist; everything is written into OUT.partial-<pid> and renamed at the end.
Needs Debian's python3-scipy (.mat), python3-numpy and python3-pil (scripts/tools/install_deps.sh ccp).
"""
import argparse
import os
import shutil
import sys


def die(msg):
    sys.exit("ccp_convert: " + msg)


def parse_ids(text, available):
    """'all', or a comma list of ids and first-last[/step] ranges (0001-0996/5)."""
    if text == "all":
        return sorted(available)
    ids = []
    for part in text.split(","):
        step = 1
        if "/" in part:
            part, s = part.split("/", 1)
            step = int(s)
        if "-" in part:
            a, b = part.split("-", 1)
            ids += ["%04d" % i for i in range(int(a), int(b) + 1, step)]
        else:
            ids.append("%04d" % int(part))
    missing = [i for i in ids if i not in available]
    if missing:
        die("ids without a pixel-level annotation in the source: " + ", ".join(missing[:10]))
    if len(set(ids)) != len(ids):
        die("--ids names an id twice")
    return ids


def size_range(sizes):
    """'550 x 801-873': the widths' and heights' ranges."""
    def span(v):
        return "%d" % v[0] if v[0] == v[-1] else "%d-%d" % (v[0], v[-1])
    return "%s x %s" % (span(sorted(w for w, _ in sizes)), span(sorted(h for _, h in sizes)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", required=True,
                    help="folder with photos/, annotations/pixel-level/, label_list.mat")
    ap.add_argument("--out", required=True, help="the pair folder to write (must not exist)")
    ap.add_argument("--ids", default="all", help="'all' (default) or e.g. 0001-0996/5,1001")
    ap.add_argument("--count", type=int, default=0,
                    help="keep the first COUNT usable ids of --ids (0: all of them)")
    ap.add_argument("--short-side", type=int, default=0,
                    help="resize photos to this shorter side (0: copy them unchanged)")
    ap.add_argument("--quality", type=int, default=85, help="JPEG quality of resized photos")
    args = ap.parse_args()

    try:
        import numpy as np
        import scipy.io
        from PIL import Image
    except ImportError as e:
        die("%s: install Debian's python3-scipy, python3-numpy and python3-pil "
            "(scripts/tools/install_deps.sh ccp)" % e)

    src, out = args.src.rstrip("/"), args.out.rstrip("/")
    ann = os.path.join(src, "annotations", "pixel-level")
    if not os.path.isdir(ann):
        die("%s: no such folder (expected a copy of the repository's files)" % ann)
    if os.path.exists(out):
        die("%s exists: remove it or choose another --out" % out)
    if args.short_side < 0 or not 1 <= args.quality <= 100:
        die("--short-side must be >= 0 and --quality in 1..100")
    available = {f[:-4] for f in os.listdir(ann) if f.endswith(".mat")}
    ids = parse_ids(args.ids, available)

    names = scipy.io.loadmat(os.path.join(src, "label_list.mat"))["label_list"][0]
    names = [str(n[0]) if len(n) else "" for n in names]
    if len(names) != 59 or names[0] != "null":
        die("label_list.mat: %d names starting %r; expected 59 starting 'null'"
            % (len(names), names[:1]))
    names[0] = "background"

    tmp = "%s.partial-%d" % (out, os.getpid())
    shutil.rmtree(tmp, ignore_errors=True)
    for d in ("images", "masks", "masks59"):
        os.makedirs(os.path.join(tmp, d))
    try:
        kept, empty, sizes, src_sizes = [], [], set(), set()
        for i in ids:
            if args.count and len(kept) == args.count:
                break
            mat = os.path.join(ann, i + ".mat")
            try:
                g = scipy.io.loadmat(mat)["groundtruth"]
            except Exception as e:  # scipy raises several kinds for a damaged file
                die("%s: cannot read: %s" % (mat, e))
            if g.dtype != np.uint8 or g.ndim != 2 or g.max() > 58:
                die("%s: groundtruth is %s %s with maximum %d; expected uint8 (h, w) in 0..58"
                    % (mat, g.dtype, g.shape, g.max()))
            if not g.any():
                empty.append(i)
                continue
            photo = os.path.join(src, "photos", i + ".jpg")
            try:
                im = Image.open(photo)
                im.load()
            except OSError as e:  # missing, unreadable or not an image
                die("%s: cannot read: %s" % (photo, e))
            with im:
                if im.size != (g.shape[1], g.shape[0]):
                    die("%s is %dx%d but its label map %s is %dx%d"
                        % (photo, im.size[0], im.size[1], mat, g.shape[1], g.shape[0]))
                src_sizes.add(im.size)
                if args.short_side:
                    w, h = im.size
                    s = args.short_side / min(w, h)
                    size = (round(w * s), round(h * s))
                    im.convert("RGB").resize(size, Image.LANCZOS).save(
                        os.path.join(tmp, "images", i + ".jpg"), "JPEG", quality=args.quality,
                        optimize=True)
                    g = np.asarray(Image.fromarray(g).resize(size, Image.NEAREST))
                else:
                    shutil.copyfile(photo, os.path.join(tmp, "images", i + ".jpg"))
                sizes.add((g.shape[1], g.shape[0]))
            Image.fromarray(g > 0).convert("1").save(os.path.join(tmp, "masks", i + ".png"),
                                                     optimize=True)
            Image.fromarray(g).save(os.path.join(tmp, "masks59", i + ".png"), optimize=True)
            kept.append(i)
        if args.count and len(kept) < args.count:
            die("only %d usable ids in --ids, --count asks for %d" % (len(kept), args.count))
        if not kept:
            die("no pair to write")

        def lines(path, items):
            with open(os.path.join(tmp, path), "w") as f:
                f.writelines(x + "\n" for x in items)

        lines("masks/classes.txt", ["background", "person"])
        lines("masks/NAME", ["ccp-person-%d" % len(kept)])
        lines("masks59/classes.txt", names)
        lines("masks59/NAME", ["ccp-clothing59-%d" % len(kept)])
        test = [i for i in kept if (int(i) - 1) % 4 == 3]
        lines("train.txt", [i for i in kept if (int(i) - 1) % 4 != 3])
        lines("test.txt", test)
        if args.short_side:
            lines("RESIZED", ["photos resized from %s to %s (shorter side %d, Lanczos), JPEG "
                              "quality %d; masks nearest-neighbour"
                              % (size_range(src_sizes), size_range(sizes), args.short_side,
                                 args.quality)])
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    print("ccp_convert: %d pairs (%d train, %d test) in %s%s" %
          (len(kept), len(kept) - len(test), len(test), out,
           "; left out (label map all background): " + ", ".join(empty) if empty else ""))


if __name__ == "__main__":
    main()
