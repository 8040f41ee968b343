#!/usr/bin/env python3
"""Benchmark: the machine's ceiling for learner-parallel OBPM on two cores.

    .venv/bin/python benchmarks/bench_ceiling.py --data-dir /tmp/bench-learners      # 800,000 rows, 3 rounds
    .venv/bin/python benchmarks/bench_ceiling.py --n-samples 50000 --repeat 1        # smoke test

One process runs the OBPM kernel (``learn_ensemble_chunk``, N members, tau = 0.3, float64, one
shuffled epoch of the RCV1-like corpus of ``bench_learners.py``, arrays in memory) over all N
members; then two processes, started together and released by a barrier each round, run N/2
members each, the second with ``first_learner = N/2`` (together: the same ensemble).  No Dask, no
store, no transfer: the ratio (one process over the slower of the two) is what two cores give this
kernel on this machine, the ceiling for ``bench_distributed.py``'s 2-workers-vs-1 row.  Both
conversions' kernels: ``average`` (a running sum as large as the weights) and ``last``.
Never asserts.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _load(args: argparse.Namespace):
    from bench_learners import load_rcv1

    with contextlib.redirect_stdout(io.StringIO()):
        return load_rcv1(argparse.Namespace(n_samples=args.n_samples, data_dir=args.data_dir))


def _work(args, n_members, first, acc_mode, barrier, queue):  # pragma: no cover - child process
    from distlearn.ensembles import init_ensemble, learn_ensemble_chunk
    from distlearn.learners import make_rule

    data = _load(args)
    X = data.X_train["float64"]
    y = (np.asarray(data.y_train) == 1).astype(np.int64)
    n, d = X.shape
    perm = np.random.default_rng(1).permutation(n)
    tids = np.arange(n)
    rule = make_rule("perceptron")

    def epoch() -> float:
        ens = init_ensemble(d, n_members, 1, dtype="float64", running_sum=acc_mode != 0)
        t = time.perf_counter()
        learn_ensemble_chunk(rule, ens, X, y, tids, seed=0, tau=0.3, order=perm, acc_mode=acc_mode,
                             first_learner=first)
        return time.perf_counter() - t

    epoch()  # compile, page in
    for _ in range(args.repeat):
        barrier.wait()
        queue.put((first, epoch()))


def _rounds(args, procs: int, acc_mode: int) -> list[float]:
    ctx = mp.get_context("spawn")
    barrier, queue = ctx.Barrier(procs), ctx.Queue()
    share = args.n_estimators // procs
    ps = [ctx.Process(target=_work, args=(args, share, i * share, acc_mode, barrier, queue)) for i in range(procs)]
    for p in ps:
        p.start()
    got: dict[int, list[float]] = {}
    for _ in range(args.repeat * procs):
        first, t = queue.get()
        got.setdefault(first, []).append(t)
    for p in ps:
        p.join()
    return [max(ts) for ts in zip(*got.values())]  # per round, the slower process


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--n-samples", type=int, default=800_000, help="rows of the RCV1-like corpus (default 800,000)")
    p.add_argument("--data-dir", default="bench-output", help="where the corpus store is cached")
    p.add_argument("--repeat", type=int, default=3, help="timed rounds per configuration (default 3)")
    p.add_argument("--n-estimators", type=int, default=100)
    args = p.parse_args(argv)
    _load(args)  # generate the store once, before the children race for it
    print("| conversion | 1 process x N | 2 processes x N/2 (slower) | ceiling |\n|---|---|---|---|")
    for acc_mode, name in ((1, "average"), (0, "last")):
        one = statistics.median(_rounds(args, 1, acc_mode))
        two = statistics.median(_rounds(args, 2, acc_mode))
        print(f"| {name} | {one:.2f} s | {two:.2f} s | {one / two:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
