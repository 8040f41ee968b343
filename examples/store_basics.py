"""Make a data set, store it, and stream it back block by block.

    python examples/store_basics.py [--out DIR]

Generates a small RCV1-like corpus straight into a zarr store, opens it, and
walks the blocks in storage order and in a seeded random block order -- the
access pattern of every learner in distlearn.
"""

from __future__ import annotations

import argparse
import tempfile

import numpy as np

from distlearn.data import open_dataset
from distlearn.data.synthetic import make_rcv1_like
from distlearn.rng import block_generator


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="directory for the store (default: a temporary one)")
    ap.add_argument("--n-samples", type=int, default=20_000)
    args = ap.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="distlearn-example-")

    ds = make_rcv1_like(f"{out}/corpus.zarr", args.n_samples, n_features=20_000, block_rows=4096, random_state=7,
                        overwrite=True)
    ds = open_dataset(ds.path, validate="full")
    print(ds)
    print(f"nnz per row: {ds.nnz / ds.n_samples:.1f}; classes {ds.classes.tolist()} with counts {ds.class_counts.tolist()}")

    # Storage order: each block is (X as CSR, y, index of its first row).
    seen = 0
    for X, y, first in ds.iter_blocks():
        assert first == seen
        seen += X.shape[0]
    # A seeded random order of blocks, as a permutation-based learner would read them.
    order = block_generator(0, "example-order", 0).permutation(ds.n_blocks)
    firsts = [b.first_row for b in ds.iter_blocks(order)]
    print(f"blocks in order {order.tolist()} start at rows {firsts}")

    X, y = ds.to_scipy()
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    print(f"rows are unit length: {bool(np.allclose(norms, 1, atol=1e-5))}; positive fraction {np.mean(y == 1):.3f}")


if __name__ == "__main__":
    main()
