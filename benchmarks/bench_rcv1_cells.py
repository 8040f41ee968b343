"""rcv1-cutoff cells before/after in one process, alternating (issue 30): CPU seconds per cell.

Runs ``experiments/rcv1_cutoff.py: run_cell`` of this checkout and of an older one (``--before``,
a directory holding that checkout's ``distlearn/``, e.g. ``git archive COMMIT distlearn | tar -x
-C /tmp/before``; its ``rcv1_cutoff.py`` is loaded beside this one, the rest of the package is this
checkout's) on the same cells, alternating which goes first, and asserts that both give the same
numbers.  Each problem's view is read into the block cache first (a Dask worker's steady state:
its first cell of a problem decodes the view, the others find it there), so the times are the
cells' own work.  CPU seconds (``time.process_time``: this process, prefetch threads included), so
a shared machine's load inflates them less than wall times.

    .venv/bin/python benchmarks/bench_rcv1_cells.py --store OUT/rcv1-cutoff/rcv1.zarr --before /tmp/before

The store is ``distlearn experiment rcv1-cutoff``'s (``OUT/rcv1-cutoff/rcv1.zarr``); ``--radius`` is
the run's (``meta.json``), read from there when the store sits in an experiment directory.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from distlearn.data import open_dataset
from distlearn.experiments import rcv1_cutoff as now
from distlearn.stream import cached_block, clear_block_cache, store_token


def _before(root: str):
    path = Path(root) / "distlearn" / "experiments" / "rcv1_cutoff.py"
    spec = importlib.util.spec_from_file_location("distlearn.experiments._rcv1_cutoff_before", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--store", required=True)
    p.add_argument("--before", required=True, help="a directory holding the older checkout's distlearn/")
    p.add_argument("--splits", default="0,1")
    p.add_argument("--problems", default=",".join(now.PROBLEMS))
    p.add_argument("--radius", type=float, default=None)
    args = p.parse_args(argv)
    os.environ.setdefault("DISTLEARN_BLOCK_CACHE_BYTES", "25%")
    radius = args.radius
    if radius is None:
        meta = Path(args.store).resolve().parent / "meta.json"
        radius = json.loads(meta.read_text())["radius"] if meta.exists() else 1.0
    old = _before(args.before)
    sides = {"before": old, "after": now}
    splits = [int(s) for s in args.splits.split(",")]
    warm = f"{args.store}#{args.problems.split(',')[0]}"
    now.run_cell(warm, store_token(open_dataset(warm)), 0, 0, 0.2, [10, 20], radius)  # compile, import
    total = {k: 0.0 for k in sides}
    print(f"load {open('/proc/loadavg').read().split()[0]}; radius {radius}")
    print("| problem | split | before CPU s | after CPU s | same numbers |\n|---|---:|---:|---:|---|")
    for prob in args.problems.split(","):
        view = f"{args.store}#{prob}"
        ds = open_dataset(view)
        tok = store_token(ds)
        clear_block_cache()
        for b in range(ds.n_blocks):
            cached_block(ds, b, np.float64)
        sizes = sorted({int(round(s)) for s in np.geomspace(10, int(ds.n_samples * 0.8 * 0.98), 12)})
        for s in splits:
            got, cpu = {}, {}
            for name in (("before", "after") if s % 2 == 0 else ("after", "before")):
                c = time.process_time()
                res = sides[name].run_cell(view, tok, s, 0, 0.2, sizes, radius)
                cpu[name] = time.process_time() - c
                got[name] = {k: v for k, v in res.items() if k not in ("seconds", "cpu_seconds")}
                total[name] += cpu[name]
            same = got["before"] == got["after"]
            print(f"| {prob} | {s} | {cpu['before']:.2f} | {cpu['after']:.2f} | {'yes' if same else '**NO**'} |",
                  flush=True)
    print(f"\nsum: before {total['before']:.1f} CPU s, after {total['after']:.1f} CPU s, "
          f"before/after {total['before'] / max(total['after'], 1e-9):.2f}x; "
          f"load {open('/proc/loadavg').read().split()[0]}")


if __name__ == "__main__":
    main()
