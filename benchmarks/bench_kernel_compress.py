#!/usr/bin/env python3
"""Benchmark: the post-fit compression's time on LETTER's fitted expansion, this tree against an earlier
revision's ``compress_expansion`` in one alternating run (issue 29).

    DISTLEARN_LETTER=letter.svm .venv/bin/python benchmarks/bench_kernel_compress.py \\
        --sizes 2000 4000 8155 --before 323b7e9 --repeat 1 --json out.json

``KernelMIRA(budget="variable", compress=0)`` with its other defaults is fitted once on LETTER's first 16,000
rows (min-max scaled, as ``bench_kernel_defaults.py``); its expansion (8,155 patterns) is cut to each of
``--sizes`` patterns (the first ones) and compressed with ``norm="data"`` and ``--tol`` (0.2, the default's
tolerance) by this tree's function and, with ``--before REV``, by ``distlearn/conversions/kernel.py`` as of
git revision ``REV`` (read with ``git show``; 323b7e9: the greedy backward elimination), alternating
(before, after, before, ...).  Rows: size, which, patterns kept, residual, seconds, the load average when it
started.  Nothing is asserted.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import distlearn.conversions.kernel as CK
from distlearn import KernelMIRA

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_kernel_defaults import load  # noqa: E402


def _before(rev: str) -> Any:
    """``compress_expansion`` of ``distlearn/conversions/kernel.py`` at git revision ``rev``."""
    root = Path(__file__).resolve().parents[1]
    src = subprocess.run(["git", "show", f"{rev}:distlearn/conversions/kernel.py"], cwd=root, check=True,
                         capture_output=True, text=True, timeout=60).stdout
    spec = importlib.util.spec_from_loader("distlearn.conversions._kernel_before", loader=None)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "distlearn.conversions"
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    exec(compile(src, f"{rev}:distlearn/conversions/kernel.py", "exec"), mod.__dict__)
    return mod.compress_expansion


def _load() -> str:
    with open("/proc/loadavg") as fh:
        return fh.read().split()[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000, 4000, 8155], help="patterns compressed")
    ap.add_argument("--before", default=None, help="git revision whose compress_expansion runs alternately")
    ap.add_argument("--tol", type=float, default=0.2, help="the tolerance (default 0.2)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each (medians printed)")
    ap.add_argument("--json", default=None, help="write the rows here")
    args = ap.parse_args(argv)
    data = load("letter", args)
    if data is None:
        return 2
    Xtr, _, ytr, _ = data
    t = time.perf_counter()
    m = KernelMIRA(budget="variable", compress=0, random_state=0).fit(Xtr, ytr)
    print(f"# fit without compression: {time.perf_counter() - t:.2f} s, {m.n_support_.sum()} patterns, "
          f"load {_load()}", flush=True)
    S, A, kern = m.support_vectors_, m.dual_coef_.T, m._kernel_obj
    funcs = ([("before", _before(args.before))] if args.before else []) + [("after", CK.compress_expansion)]
    rows = []
    for n in args.sizes:
        times: dict[str, list[float]] = {}
        for _ in range(args.repeat):
            for name, f in funcs:
                load0 = _load()
                t = time.perf_counter()
                c = f(kern, S[:n], A[:n], args.tol, norm="data")
                dt = time.perf_counter() - t
                times.setdefault(name, []).append(dt)
                rows.append({"patterns": n, "which": name, "kept": len(c.keep), "residual": c.residual,
                             "seconds": dt, "load": float(load0)})
                print(f"{n:6d} {name:6s} kept {len(c.keep):5d} residual {c.residual:.4f} {dt:7.2f} s "
                      f"load {load0}", flush=True)
        if len(times) == 2:
            print(f"# {n}: median before / after = "
                  f"{statistics.median(times['before']) / statistics.median(times['after']):.2f}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
