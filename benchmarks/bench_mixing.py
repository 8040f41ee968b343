#!/usr/bin/env python3
"""Benchmark: data-parallel iterative parameter mixing against the single learner.

    .venv/bin/python benchmarks/bench_mixing.py --data-dir /tmp/bench-mixing          # 200,000 rows, 3 repeats
    .venv/bin/python benchmarks/bench_mixing.py --n-samples 40000 --repeat 1           # smoke test
    .venv/bin/python benchmarks/bench_mixing.py --epochs 3 --shards 8 --json out.json

An RCV1-like CSR store (``distlearn.data.synthetic.make_rcv1_like``, float32,
``--block-rows`` rows per block) is created in ``--data-dir`` when missing.
Every row trains the perceptron on the whole store (store streaming, shuffled
blocks and rows, ``--epochs`` epochs) and is timed end to end from ``fit``
(cluster start-up excluded: the clusters are started once, before the runs);
an untimed warm-up run comes first, repeats are interleaved, medians reported
with the ratio to the single learner.  Rows:

  single        distlearn.Perceptron(epochs=E).fit(store), in-process
  ipm-inproc    ParameterMixing(n_shards=S, epochs=E), scheduler=None (the same
                plan and reduction grouping, run sequentially here)
  ipm-1worker   the same on a LocalCluster of 1 worker process (1 thread)
  ipm-2workers  the same on a LocalCluster of 2 worker processes (1 thread each)

Also reported: the last epoch's progressive error rate (summed over the
shards; for the single learner taken from ``ParameterMixing(n_shards=1)``,
the same run bit for bit, which the ``==`` column checks), and whether the
Dask runs are bit-identical to the in-process one.
Each ``fit`` names its Dask keys with a fresh run id, so a repeat never gets a
cached result from an earlier one.  Never asserts.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from pathlib import Path

import numpy as np

from distlearn import Perceptron
from distlearn.data import open_dataset
from distlearn.data.synthetic import make_rcv1_like
from distlearn import ParameterMixing

ROWS = ["single", "ipm-inproc", "ipm-1worker", "ipm-2workers"]


def load_store(data_dir: str, n_samples: int, block_rows: int):
    path = Path(data_dir) / f"ipm-rcv1like-{n_samples}-b{block_rows}.zarr"
    try:
        ds = open_dataset(path)
        print(f"# reusing {path}")
    except (FileNotFoundError, ValueError):
        print(f"# generating {path} ({n_samples:,} rows) ...", flush=True)
        t0 = time.perf_counter()
        ds = make_rcv1_like(path, n_samples, block_rows=block_rows, random_state=0, dtype="float32",
                            overwrite=True)
        print(f"# generated in {time.perf_counter() - t0:.1f} s", flush=True)
    return ds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--n-samples", type=int, default=200_000, help="rows of the RCV1-like store (default 200,000)")
    p.add_argument("--block-rows", type=int, default=8192, help="rows per store block (default 8192)")
    p.add_argument("--data-dir", default="bench-output", help="where the store is cached")
    p.add_argument("--shards", type=int, default=8, help="n_shards of the mixing runs (default 8)")
    p.add_argument("--epochs", type=int, default=1, help="epochs of every run (default 1)")
    p.add_argument("--repeat", type=int, default=3, help="timed runs per row (default 3); medians reported")
    p.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated subset of {','.join(ROWS)}")
    p.add_argument("--malloc-trim", choices=["dask", "unset"], default="dask",
                   help="workers' MALLOC_TRIM_THRESHOLD_: dask's default (65536) or unset (glibc's dynamic "
                        "threshold); the low threshold makes every block read fault its pages in again")
    p.add_argument("--json", default=None, help="also write every timing here")
    args = p.parse_args(argv)
    rows = args.rows.split(",")
    ds = load_store(args.data_dir, args.n_samples, args.block_rows)
    path = str(ds.path)
    print(f"# {ds.n_samples:,} x {ds.n_features:,} CSR, nnz {ds.nnz:,}, {ds.n_blocks} blocks; "
          f"perceptron, {args.epochs} epoch(s), {args.shards} shards; workers' malloc trim: {args.malloc_trim}")

    from distributed import Client, LocalCluster

    import dask

    logging.getLogger("distributed").setLevel(logging.ERROR)
    if args.malloc_trim == "unset":
        env = dict(dask.config.get("distributed.nanny.pre-spawn-environ"))
        env.pop("MALLOC_TRIM_THRESHOLD_", None)
        dask.config.set({"distributed.nanny.pre-spawn-environ": env})

    clusters = {}
    for name, n in (("ipm-1worker", 1), ("ipm-2workers", 2)):
        if name in rows:
            cl = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                              dashboard_address=":0", silence_logs=logging.ERROR)
            clusters[name] = (cl, Client(cl))

    def run(name: str):
        if name == "single":
            return Perceptron(epochs=args.epochs, random_state=0).fit(path)
        sched = clusters[name][1] if name in clusters else None
        return ParameterMixing(n_shards=args.shards, epochs=args.epochs, random_state=0, scheduler=sched).fit(path)

    times: dict[str, list[float]] = {r: [] for r in rows}
    models: dict[str, object] = {}
    try:
        for r in rows:  # warm-up: numba caches, worker imports, store handles
            models[r] = run(r)
        for _ in range(args.repeat):
            for r in rows:
                t0 = time.perf_counter()
                models[r] = run(r)
                times[r].append(time.perf_counter() - t0)
    finally:
        for cl, c in clusters.values():
            c.close()
            cl.close()

    base = statistics.median(times["single"]) if "single" in times else None
    ref = models.get("ipm-inproc")
    one = None
    if "single" in models:
        # The single learner's per-epoch errors: ParameterMixing(n_shards=1) is the same
        # run bit for bit (the "==" column checks it), and keeps them per epoch.
        one = ParameterMixing(n_shards=1, epochs=args.epochs, random_state=0).fit(path)
    print(f"{'row':<14}{'median s':>10}{'x single':>10}{'rows/s':>12}{'last-epoch err':>16}{'==':>7}")
    out = []
    for r in rows:
        med = statistics.median(times[r])
        m = models[r]
        other = one if r == "single" else ref
        errs = (one if r == "single" else m).online_errors_
        last = float(errs[-1]) / ds.n_samples
        same = "" if other is None else str(np.array_equal(m.coef_, other.coef_)
                                            and np.array_equal(m.intercept_, other.intercept_))
        ratio = f"{med / base:.2f}" if base else ""
        print(f"{r:<14}{med:>10.3f}{ratio:>10}{ds.n_samples * args.epochs / med:>12,.0f}{last:>16.4f}{same:>7}")
        out.append({"row": r, "times": times[r], "median_s": med, "last_epoch_error": last, "same": same})
    print("# err: progressive error rate of the last epoch (summed over shards); ==: same weights as "
          "ParameterMixing(n_shards=1) for single, as ipm-inproc for the Dask rows")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "results": out}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
