#!/usr/bin/env python3
"""Benchmark: what the block check costs against a plain perceptron epoch.

    .venv/bin/python benchmarks/bench_validation.py                              # 200k x 47k, 5 repeats
    .venv/bin/python benchmarks/bench_validation.py --n-samples 800000 --data-dir /tmp/bench-learners
    .venv/bin/python benchmarks/bench_validation.py --n-samples 20000 --repeat 1  # smoke test

Every block a learner reads passes ``Dataset.read_rows``, which (1) looks for every chunk the
block needs (a few ``stat`` calls), (2) decodes them, each chunk's crc32c checksum verified by zarr,
(3) compares the store's write stamp with the one taken when it was opened (one ``stat``) and
(4) runs the compiled block check (``store.block_fault``: pointers against ``block_index``,
indices in range and sorted, values and labels finite).  On the RCV1-like CSR corpus of
``bench_learners.py`` (47,236 features, ~75 nnz/row, float32, blocks of 16,384 rows) this times

  epoch on / off   ``Perceptron(epochs=1).fit(store)`` (shuffled: every block read, decoded,
                   checked and learned from), with the check (4) on and off
                   (``store._CHECK_BLOCKS``, a flag for this benchmark only), interleaved;
  check alone      (4) on every block's raw arrays, summed over the epoch;
  crc32c alone     google_crc32c over every chunk file's bytes (what (2) adds to the decode);
  read digests on/off   every block read (``read_block``) with the chunk digests checked (every chunk
                   a read touches read whole, its digest compared; no per-chunk lookup) and without
                   (``ds._digests = None``: the path of stores written before digests, every chunk
                   looked for first), interleaved; also on a dense store (``--dense-rows``, random
                   float32 of 784 columns: incompressible, the worst case for the hashing's share).

Reported: medians of ``--repeat`` runs and their ratios to the epoch.  Goal: the check under 3 %
of a plain epoch.  Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _store(n_samples: int, data_dir: str):
    from bench_learners import rcv1_store
    from distlearn.data.synthetic import make_rcv1_like

    ds, _ = rcv1_store(n_samples, data_dir)
    if not (ds.meta.get("integrity") or {}).get("digests"):  # written before chunk digests: time today's format
        print(f"# {ds.path} predates chunk digests; writing it again", flush=True)
        ds = make_rcv1_like(ds.path, n_samples, random_state=0, dtype="float32", overwrite=True)
    return ds


def _epoch(path: str, check: bool) -> float:
    from distlearn.data import store
    from distlearn.estimators import Perceptron

    store._CHECK_BLOCKS = check
    try:
        t0 = time.perf_counter()
        Perceptron(epochs=1, random_state=0).fit(path)
        return time.perf_counter() - t0
    finally:
        store._CHECK_BLOCKS = True


def _check_alone(ds) -> float:
    """Seconds of block_fault over every block's raw arrays (read once, before the clock)."""
    from distlearn.data import store

    blocks = []
    for b in range(ds.n_blocks):
        lo, hi = int(ds.block_index[b, 0]), int(ds.block_index[b + 1, 0])
        (indptr, indices, data), y = ds._read(lo, hi)
        blocks.append(((indptr, indices, data, ds.n_features), y, int(indptr[0])))
    t0 = time.perf_counter()
    for X, y, base in blocks:
        assert store.block_fault(X, y, indptr_base=base) is None
    return time.perf_counter() - t0


def _read_all(ds, digests: bool) -> float:
    """Seconds to read every block of ``ds``, its chunk digests checked or not (then: looked for first)."""
    saved = ds._digests
    if not digests:
        ds._digests = None
    try:
        t0 = time.perf_counter()
        for b in range(ds.n_blocks):
            ds.read_block(b)
        return time.perf_counter() - t0
    finally:
        ds._digests = saved


def _dense_store(n_rows: int, data_dir: str):
    import numpy as np

    from distlearn.data import create_dataset, open_dataset

    path = Path(data_dir) / f"dense-{n_rows}.zarr"
    try:
        ds = open_dataset(path)
        if ds.meta.get("integrity", {}).get("digests"):
            return ds
    except (OSError, ValueError):
        pass
    rng = np.random.default_rng(0)
    return create_dataset(path, rng.random((n_rows, 784), dtype=np.float32), rng.integers(0, 10, n_rows),
                          overwrite=True)


def _crc_alone(path: Path) -> tuple[float, int]:
    import google_crc32c

    files = [f for f in path.rglob("c/*") if f.is_file()] + [f for f in path.rglob("c/*/*") if f.is_file()]
    raw = [f.read_bytes() for f in files]
    t0 = time.perf_counter()
    for r in raw:
        google_crc32c.value(r)
    return time.perf_counter() - t0, sum(len(r) for r in raw)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n-samples", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--data-dir", default="/tmp/bench-validation")
    ap.add_argument("--json", default=None)
    ap.add_argument("--dense-rows", type=int, default=60_000, help="rows of the dense store (0: none)")
    ap.add_argument("--read-only", action="store_true", help="only the reads with digests on and off")
    args = ap.parse_args(argv)

    ds = _store(args.n_samples, args.data_dir)
    path = str(ds.path)
    print(f"# {ds}: nnz {ds.nnz:,}, codec {ds.codec}, integrity {ds.meta.get('integrity')}")
    stores = [ds] + ([_dense_store(args.dense_rows, args.data_dir)] if args.dense_rows else [])
    reads: dict[str, dict[str, list[float]]] = {}
    for s in stores:
        _read_all(s, True), _read_all(s, False)  # fill the page cache
        r = reads[str(s.path)] = {"on": [], "off": []}
        for _ in range(args.repeat):
            r["on"].append(_read_all(s, True))
            r["off"].append(_read_all(s, False))
        on, off = statistics.median(r["on"]), statistics.median(r["off"])
        print(f"read {s.layout:5s} {s.n_samples:,} rows: digests on {on:.3f} s, off {off:.3f} s, on / off {on / off:.4f}"
              f"   (on: {', '.join(f'{t:.3f}' for t in r['on'])}; off: {', '.join(f'{t:.3f}' for t in r['off'])})")
    if args.read_only:
        if args.json:
            Path(args.json).write_text(json.dumps({"reads": reads}, indent=2))
        return 0
    _epoch(path, True), _epoch(path, False), _check_alone(ds)  # compile, fill the page cache
    on, off, alone, crc = [], [], [], []
    for _ in range(args.repeat):
        on.append(_epoch(path, True))
        off.append(_epoch(path, False))
        alone.append(_check_alone(ds))
        crc.append(_crc_alone(Path(path))[0])
    med = {k: statistics.median(v) for k, v in (("on", on), ("off", off), ("check", alone), ("crc", crc))}
    nbytes = _crc_alone(Path(path))[1]
    print(f"epoch, check on      {med['on']:.3f} s   (runs {', '.join(f'{t:.3f}' for t in on)})")
    print(f"epoch, check off     {med['off']:.3f} s   (runs {', '.join(f'{t:.3f}' for t in off)})")
    print(f"on / off             {med['on'] / med['off']:.4f}")
    print(f"check alone          {med['check'] * 1e3:.1f} ms = {100 * med['check'] / med['off']:.2f} % of the epoch")
    print(f"crc32c alone         {med['crc'] * 1e3:.1f} ms over {nbytes / 2**20:.0f} MiB = "
          f"{100 * med['crc'] / med['off']:.2f} % of the epoch")
    if args.json:
        Path(args.json).write_text(json.dumps({"store": path, "n_samples": ds.n_samples, "nnz": ds.nnz,
                                               "runs": {"on": on, "off": off, "check": alone, "crc": crc},
                                               "reads": reads,
                                               "medians": med}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
