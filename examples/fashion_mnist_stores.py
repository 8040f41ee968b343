"""Convert the Fashion-MNIST IDX files into zarr stores and build the OBPM drift stream from them.

    python examples/fashion_mnist_stores.py [--data-dir DIR] [--out DIR] [--plot drift.png]

Data: the four gzipped Fashion-MNIST IDX files (train + t10k images and
labels) of Zalando's release, https://github.com/zalandoresearch/fashion-mnist,
or Debian's package ``dataset-fashion-mnist`` (installed in
/usr/share/datasets/fashion-mnist, used when ``--data-dir`` and
``$DISTLEARN_FASHION_MNIST`` are not given).

The labels file of each images file is found by name.  The drifting-concept
stream (Harrington et al. 2003, sec. 4.2) makes one label at a time the
positive class, moving from l1 to l2 to l3 over 1000 examples; with --plot it
draws which label is positive over time.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from distlearn.data.readers import convert
from distlearn.data.synthetic import make_drifting_stream

from distlearn.data.public import FASHION_HELP, fashion_mnist_dir, no_fashion_message
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=None, help=FASHION_HELP)
    ap.add_argument("--out", default=None)
    ap.add_argument("--plot", default=None, help="write a PNG of the drifting positive label")
    args = ap.parse_args()
    args.data_dir = fashion_mnist_dir(args.data_dir)
    if args.data_dir is None:
        ap.error(no_fashion_message("--data-dir"))
    out = Path(args.out or tempfile.mkdtemp(prefix="distlearn-fmnist-"))

    stores = {}
    for split in ("train", "t10k"):
        src = args.data_dir / f"{split}-images-idx3-ubyte.gz"
        stores[split] = convert(src, out / f"fashion-{split}.zarr", overwrite=True)
        ds = stores[split]
        print(f"{split}: {ds.n_samples} x {ds.n_features}, classes {ds.classes.tolist()}, {ds.n_blocks} blocks")

    X, labels = stores["t10k"].to_numpy()
    drift = make_drifting_stream(X / 255.0, labels, n_samples=1000, positive_labels=(0, 5, 9), random_state=1)
    first, last = drift.positive_label[:100], drift.positive_label[-100:]
    print(f"drift: positive label in the first 100 examples {np.bincount(first, minlength=10).tolist()}")
    print(f"       positive label in the last 100 examples  {np.bincount(last, minlength=10).tolist()}")
    print(f"       fraction of positive examples {np.mean(drift.y == 1):.3f}")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 2.5))
        ax.scatter(np.arange(1, 1001), drift.positive_label, s=2)
        ax.set_xlabel("example t")
        ax.set_ylabel("positive label")
        ax.set_title("Drifting concept (OBPM sec. 4.2) on Fashion-MNIST")
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
