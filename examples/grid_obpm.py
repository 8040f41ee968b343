"""A tau x N grid for OBPM on the OBPM paper's artificial problem, one Dask task per run.

    python examples/grid_obpm.py                          # LocalCluster, 6 x 2 grid, 5 repeats
    python examples/grid_obpm.py --json /tmp/grid.json    # also write every row as JSON
    python examples/grid_obpm.py --scheduler tcp://10.0.0.5:8786 --repeats 30
    python examples/grid_obpm.py --scheduler none         # in this process, one run after another
    python examples/grid_obpm.py --store /tmp/obpm        # one fixed data set in zarr stores
    python examples/grid_obpm.py --quick                  # 3 x 2 grid, 2 repeats, 2 workers

The run-parallel mode (``distlearn.distributed.runs.run_grid``): every
(tau, N, repeat) is an independent, seeded task, so the table is the same on
any cluster, with any number of workers, and in this process -- only the
``fit_seconds`` column is a measurement.

Protocol (Harrington et al. 2003, sec. 4.1 and Figure 1): ``make_obpm_artificial``
with d = 100 features, margin 0.05, 1000 training and 1000 test points (label
noise ``--noise`` on the training labels).  By default every repeat draws a
fresh data set inside its task (a data factory called with the repeat's seed:
nothing is shipped) -- the paper's Monte Carlo runs.  With ``--store DIR`` one
data set is written to two zarr stores that every worker opens by path, and
the repeats differ only in the learners' seeds (OBPM's Bernoulli draws and
the shuffle).  OBPM: perceptron members, one epoch, no intercept (the targets
go through the origin); the columns are the test error and the progressive
(online) error as fractions, the training-set margin of the averaged
hypothesis (Figure 1b) and the members' total updates, each as mean ± std
over the repeats.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path

from distlearn import OBPM
from distlearn.data.synthetic import make_obpm_artificial, write_obpm_artificial
from distlearn.distributed.runs import run_grid

TAUS = (0.05, 0.1, 0.2, 0.3, 0.5, 1.0)
NS = (25, 100)
QUICK_TAUS = (0.1, 0.3, 1.0)
METRICS = ("test_error", "online_error", "train_margin", "n_updates", "fit_seconds")


def artificial(seed: int, *, split: str, n: int, n_features: int, noise: float):
    """One split of the artificial problem for a repeat (the splits have streams of their own,
    so generating only the one asked for gives the same rows as generating both)."""
    n_train, n_test = (n, 0) if split == "train" else (0, n)
    d = make_obpm_artificial(n_train, n_test, n_features=n_features, margin=0.05, label_noise=noise,
                             random_state=seed)
    return (d.X_train, d.y_train) if split == "train" else (d.X_test, d.y_test)


def _floats(text: str) -> list[float]:
    return [float(v) for v in text.split(",") if v.strip()]


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--taus", type=_floats, default=None, help=f"comma-separated tau values (default {TAUS})")
    ap.add_argument("--ns", type=_ints, default=None, help=f"comma-separated N values (default {NS})")
    ap.add_argument("--repeats", type=int, default=None, help="Monte Carlo repeats (default 5; 2 with --quick)")
    ap.add_argument("--noise", type=float, default=0.0, help="training label noise e (paper: 0, 0.01, 0.1)")
    ap.add_argument("--n-train", type=int, default=1000)
    ap.add_argument("--n-test", type=int, default=1000)
    ap.add_argument("--n-features", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0, help="random_state of the whole grid")
    ap.add_argument("--scheduler", default="local",
                    help="'local' (a LocalCluster), 'none' (this process), a scheduler address or a scheduler file")
    ap.add_argument("--workers", type=int, default=None, help="LocalCluster size (default: one per core; 2 with --quick)")
    ap.add_argument("--store", type=Path, default=None,
                    help="write one data set to DIR/train.zarr and DIR/test.zarr and grid over it")
    ap.add_argument("--json", type=Path, default=None, help="write the table (every run) as JSON here")
    ap.add_argument("--progress", action="store_true", help="a progress bar over finished runs (stderr)")
    ap.add_argument("--quick", action="store_true", help=f"taus {QUICK_TAUS}, 2 repeats, 2 workers (a smoke run)")
    args = ap.parse_args(argv)
    taus = args.taus or list(QUICK_TAUS if args.quick else TAUS)
    ns = args.ns or list(NS)
    repeats = args.repeats or (2 if args.quick else 5)
    workers = args.workers or (2 if args.quick else None)
    scheduler = None if args.scheduler.lower() in ("none", "in-process") else args.scheduler

    gen = {"n_features": args.n_features, "noise": args.noise}
    if args.store is not None:
        train, test = (args.store / "train.zarr", args.store / "test.zarr")
        write_obpm_artificial(train, test, n_train=args.n_train, n_test=args.n_test, n_features=args.n_features,
                              margin=0.05, label_noise=args.noise, random_state=args.seed,
                              block_rows=max(1, args.n_train // 8), overwrite=True)
        data = f"one data set in {args.store} (stores; repeats vary the learners' seeds)"
    else:
        train = functools.partial(artificial, split="train", n=args.n_train, **gen)
        test = functools.partial(artificial, split="test", n=args.n_test, **gen)
        data = "a fresh data set per repeat"

    est = OBPM(base="perceptron", epochs=1, conversion="last", fit_intercept=False)
    print(f"OBPM tau x N grid: {len(taus)} x {len(ns)} settings x {repeats} repeats = "
          f"{len(taus) * len(ns) * repeats} runs on {args.scheduler}; artificial problem d={args.n_features}, "
          f"margin 0.05, noise {args.noise:g}, {args.n_train} train / {args.n_test} test, {data}")
    t0 = time.time()
    table = run_grid(est, {"tau": taus, "n_estimators": ns}, train, test, repeats=repeats, scheduler=scheduler,
                     n_workers=workers, random_state=args.seed, metrics=METRICS, progress=args.progress)
    print()
    print(table.format())
    best = table.best("test_error")
    top = table.best("train_margin")
    print(f"\nlowest test error: tau={best['tau']:g}, N={best['n_estimators']} "
          f"({best['mean']:.4f} ± {best['std']:.4f})")
    print(f"largest training margin: tau={top['tau']:g}, N={top['n_estimators']} "
          f"({top['mean']:.4f} ± {top['std']:.4f})")
    print(f"{len(table)} runs in {time.time() - t0:.1f} s")
    if args.json:
        table.to_json(args.json)
        print(f"JSON written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
