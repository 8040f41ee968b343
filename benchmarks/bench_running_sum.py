#!/usr/bin/env python3
"""Benchmark: what OBPM's running sum (conversion="average") costs, and its floor (issue 30).

    .venv/bin/python benchmarks/bench_running_sum.py --data-dir /tmp/bench-learners            # 300,000 rows
    .venv/bin/python benchmarks/bench_running_sum.py --data-dir /tmp/bench-learners --train-rows 50000 --repeat 1

The RCV1-like corpus of ``bench_learners.py`` (its cached store), N = 100, tau = 0.3, one shuffled
epoch, perceptron, ``fit_intercept=False``.  CPU seconds of this process (the machine is shared),
medians, repeats interleaved.  Rows:

  last             the OBPM pass without a running sum
  average          the OBPM pass with the ensemble's running sum (``accP + accq W``): for every
                   updated member and nonzero, one float64 read-modify-write of P at a place no
                   other access brought into cache
  terms, rows at random
                   the same number of running-sum terms P[f, c] -= x_f q (the average's updates,
                   ~75 a row) applied column by column into a member-major P (one column, 378 KB,
                   stays in L2), each term's row read again from the CSR in a random order: what a
                   deferred running sum (hold (column, row, q) records, apply them per column) costs
  terms, rows in order
                   the same, the rows read in stored order (a stream): the scatter into an
                   L2-resident P alone -- a floor for any scheme that must apply every term

The issue's goal, average <= 1.3x last, leaves the running sum 0.3 x (last) seconds.  Never asserts.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit

sys.path.insert(0, str(Path(__file__).resolve().parent))

from distlearn.ensembles import _kernels as EK  # noqa: E402
from distlearn.ensembles import init_ensemble, learn_ensemble_chunk  # noqa: E402
from distlearn.learners import make_rule  # noqa: E402
from distlearn.learners._kernels import _prefetch  # noqa: E402


@njit(cache=False)
def _apply_terms(indptr, indices, data, P, D1, rows, qi, starts):
    """Column c's records rows[starts[c]:starts[c + 1]] applied in order: P[c, f] -= x_f q."""
    for c in range(starts.shape[0] - 1):
        base = c * D1
        s, e = starts[c], starts[c + 1]
        for a in range(s, e):
            if a + 8 < e:
                _prefetch(indptr, rows[a + 8])
            if a + 4 < e:
                ra = rows[a + 4]
                for jj in range(indptr[ra], indptr[ra + 1], 8):
                    _prefetch(indices, jj)
                    _prefetch(data, jj)
            r = rows[a]
            q = qi[a]
            for jj in range(indptr[r], indptr[r + 1]):
                P[base + indices[jj]] -= data[jj] * q


def main(argv: list[str] | None = None) -> int:
    from bench_learners import load_rcv1

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--n-samples", type=int, default=800_000, help="rows of the cached corpus store (default 800,000)")
    p.add_argument("--data-dir", default="bench-output", help="where the corpus store is cached")
    p.add_argument("--train-rows", type=int, default=300_000, help="training rows used (default 300,000, the issue's)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--dtypes", default="float64,float32")
    args = p.parse_args(argv)
    data = load_rcv1(argparse.Namespace(n_samples=args.n_samples, data_dir=args.data_dir))
    rule = make_rule("perceptron")
    N, tau = 100, 0.3
    for dt in args.dtypes.split(","):
        X = data.X_train[dt][: args.train_rows]
        y = (np.asarray(data.y_train)[: args.train_rows] == 1).astype(np.int64)
        n, d = X.shape
        perm = np.random.default_rng(1).permutation(n)
        tids = np.arange(n, dtype=np.int64)
        small = slice(0, min(n, 2000))  # warm-up (compilation)
        for mode in (EK.ACC_NONE, EK.ACC_ENSEMBLE):
            learn_ensemble_chunk(rule, init_ensemble(d, 4, 1, dtype=dt, running_sum=mode != EK.ACC_NONE), X[small],
                                 y[small], tids[small], seed=0, tau=tau, acc_mode=mode)
        cpu: dict[str, list[float]] = {k: [] for k in ("last", "average", "terms, rows at random",
                                                       "terms, rows in order")}
        terms = 0
        for rep in range(args.repeat):
            for mode, name in ((EK.ACC_NONE, "last"), (EK.ACC_ENSEMBLE, "average")):
                ens = init_ensemble(d, N, 1, dtype=dt, running_sum=mode != EK.ACC_NONE)
                c0 = time.process_time()
                _, upd = learn_ensemble_chunk(rule, ens, X, y, tids, seed=0, tau=tau, order=perm, acc_mode=mode)
                cpu[name].append(time.process_time() - c0)
            g = np.random.default_rng(rep)
            k = int(upd.sum())  # the records: one per updated member and row
            cols = np.sort(g.integers(0, N, k))
            starts = np.searchsorted(cols, np.arange(N + 1))
            qi = g.random(k)
            rows = g.integers(0, n, k)
            terms = int(np.diff(X.indptr)[rows].sum())
            if rep == 0:  # compile
                _apply_terms(X.indptr, X.indices, X.data, np.zeros(N * (d + 1)), d + 1, rows[:1], qi[:1],
                             np.r_[0, np.ones(N, np.int64)])
            for name, r in (("terms, rows at random", rows), ("terms, rows in order", np.sort(rows))):
                P = np.zeros(N * (d + 1))
                c0 = time.process_time()
                _apply_terms(X.indptr, X.indices, X.data, P, d + 1, r, qi, starts)
                cpu[name].append(time.process_time() - c0)
            print(f"# {dt} run {rep + 1}: " + ", ".join(f"{m} {v[-1]:.3f} s" for m, v in cpu.items()), flush=True)
        last = statistics.median(cpu["last"])
        print(f"\n{dt}: {n:,} rows x {d:,} features, N={N}, tau={tau}, {k:,} member updates, {terms:,} "
              f"running-sum terms; CPU s, medians of {args.repeat}\n")
        print("| row | CPU s | / last | per term |")
        print("|---|---:|---:|---:|")
        for m, v in cpu.items():
            med = statistics.median(v)
            extra = med - last if m == "average" else med
            per = "-" if m == "last" else f"{extra / terms * 1e9:.2f} ns"
            print(f"| {m} | {med:.3f} | {med / last:.2f}x | {per} |")
        print(f"\nbudget of the running sum at 1.3x last: {0.3 * last:.3f} s = {0.3 * last / terms * 1e9:.2f} ns a term")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
