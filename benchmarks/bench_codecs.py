#!/usr/bin/env python3
"""Benchmark: read+decode speed of a store's codecs against their size on disk.

    .venv/bin/python benchmarks/bench_codecs.py --data-dir /tmp/bench-learners          # 800k x 47k, 3 repeats
    .venv/bin/python benchmarks/bench_codecs.py --n-samples 50000 --repeat 1             # smoke test
    .venv/bin/python benchmarks/bench_codecs.py --codecs none,zstd-1,blosc-lz4 --json out.json

The RCV1-like CSR corpus of ``bench_learners.py`` (default 800,000 x 47,236,
float32, 49 blocks of 16,384 rows) is copied once per codec of
``distlearn.data.store.CODECS`` (block by block, same blocks and chunks; the
copies are cached next to the corpus).  For each copy one *epoch of reads* is
timed: every block in a seeded shuffled order, as ``fit`` visits them,

  read       ``stream.read_block`` (zarr read + decompression + CSR assembly)
  +float64   the same and ``stream.coerce(X, "float64")`` (what an OBPM in float64 gets)

Reported: MB on disk, median seconds of ``--repeat`` epochs (codecs
interleaved within each repetition, after one untimed pass that fills the
page cache), and the decoded MB/s.  Writing time is shown too (one run).
Nothing is asserted; the default of ``DatasetWriter(codec=)`` was chosen from
this table (benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _copy(src, dst: Path, codec: str) -> float:
    from distlearn.data.store import DatasetWriter

    t0 = time.perf_counter()
    with DatasetWriter(dst, layout=src.layout, n_features=src.n_features, dtype=src.dtype.name,
                       block_rows=int(src.meta["block_rows"]), source=str(src.path), codec=codec,
                       overwrite=True) as w:
        for blk in src.iter_blocks():
            w.append(blk.X, blk.y)
        w.close()
    return time.perf_counter() - t0


def _epoch(path: Path, order, dtype: str | None) -> float:
    from distlearn import stream
    from distlearn.data import open_dataset

    ds = open_dataset(path)
    t0 = time.perf_counter()
    for b in order:
        X = stream.read_block(ds, int(b)).X
        if dtype is not None:
            stream.coerce(X, dtype)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    from distlearn.data.store import CODECS

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--n-samples", type=int, default=800_000)
    p.add_argument("--data-dir", default="/tmp/bench-learners", help="where the corpus and its copies are cached")
    p.add_argument("--codecs", default=",".join(CODECS))
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--rewrite", action="store_true", help="rewrite the copies even if they exist")
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args(argv)

    from distlearn import stream
    from bench_learners import rcv1_store

    src, _ = rcv1_store(args.n_samples, args.data_dir)
    path = src.path
    raw = src.nnz * (src.dtype.itemsize + 4) + 8 * (src.n_samples + 1)
    print(f"# corpus {path}: {src.n_samples:,} x {src.n_features:,}, nnz {src.nnz:,}, {src.n_blocks} blocks, "
          f"codec {src.codec}, decoded CSR {raw / 1e6:.0f} MB; load {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores")
    codecs = args.codecs.split(",")
    copies, write_s = {}, {}
    for c in codecs:
        dst = Path(args.data_dir) / "codecs" / f"rcv1like-{args.n_samples}-{c}.zarr"
        copies[c] = dst
        if args.rewrite or not dst.exists():
            write_s[c] = _copy(src, dst, c)
            print(f"# wrote {dst.name} in {write_s[c]:.1f} s", flush=True)
    order = stream.block_order(0, 0, src.n_blocks, True)
    times: dict[tuple[str, str], list[float]] = {}
    for c in codecs:
        _epoch(copies[c], order, None)  # page cache
    for _ in range(args.repeat):
        for c in codecs:
            for what, dt in (("read", None), ("+float64", "float64")):
                times.setdefault((c, what), []).append(_epoch(copies[c], order, dt))
    rows = []
    print(f"\n## read+decode of one epoch ({src.n_blocks} blocks, shuffled), medians of {args.repeat}")
    print(f"{'codec':<11} {'MB on disk':>10} {'x raw':>6} {'read s':>7} {'MB/s':>6} {'+float64 s':>10} {'write s':>8}")
    for c in codecs:
        size = _du(copies[c])
        r = statistics.median(times[(c, "read")])
        f = statistics.median(times[(c, "+float64")])
        row = {"codec": c, "bytes": size, "ratio": size / raw, "read_s": r, "read_runs": times[(c, "read")],
               "float64_s": f, "float64_runs": times[(c, "+float64")], "write_s": write_s.get(c)}
        rows.append(row)
        ws = f"{write_s[c]:.1f}" if c in write_s else "-"
        print(f"{c:<11} {size / 1e6:>10.0f} {size / raw:>6.2f} {r:>7.2f} {raw / 1e6 / r:>6.0f} {f:>10.2f} {ws:>8}")
    print(f"# load after: {os.getloadavg()[0]:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    if os.environ.get("BENCH_CODECS_CLEAN"):
        shutil.rmtree(Path(args.data_dir) / "codecs", ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
