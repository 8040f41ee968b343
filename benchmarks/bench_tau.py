#!/usr/bin/env python3
"""Benchmark: OBPM(tau="auto") against single-tau OBPMs, time and test error.

    .venv/bin/python benchmarks/bench_tau.py --data-dir /tmp/bench-learners              # 800,000 rows
    .venv/bin/python benchmarks/bench_tau.py --n-samples 100000 --repeat 1               # smaller

The RCV1-like CSR corpus of ``bench_learners.py`` (same cached store, 90 %
train / 10 % test), binary, float64, one shuffled epoch, estimator level
(``OBPM(...).fit(X, y)``), interleaved repeats after an untimed warm-up.
Rows:

  auto-N         tau="auto": N members for each of the 5 taus of TAU_GRID (5N in all)
  single-5N      tau=0.3 with 5N members: the same total, the issue's yardstick
  single-N       tau=0.3 with N members: the model a user would otherwise fit
  tau=T          one row per grid value T (N members): each group's model alone

Reported: median seconds, the ratio of auto-N to single-5N, the chosen tau,
every group's progressive (online) error and every model's test error.  The
digits set bundled with scikit-learn (10 classes, one-vs-rest) gets the same
rows.  Never asserts.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from distlearn import OBPM  # noqa: E402
from distlearn.estimators.bayes_point import TAU_GRID  # noqa: E402


#: one shuffled epoch, the paper's last hypothesis (not the estimator's defaults)
ONE = dict(epochs=1, conversion="last")


def _digits():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    r = np.random.default_rng(0).permutation(len(y))
    cut = int(0.75 * len(y))
    return X[r[:cut]], y[r[:cut]], X[r[cut:]], y[r[cut:]]


def run(name, Xtr, ytr, Xte, yte, N, repeat, seed=0):
    makers = {
        f"auto-{N}": lambda: OBPM(n_estimators=N, tau="auto", random_state=seed, **ONE),
        f"single-{5 * N}": lambda: OBPM(n_estimators=5 * N, tau=0.3, random_state=seed, **ONE),
        f"single-{N}": lambda: OBPM(n_estimators=N, tau=0.3, random_state=seed, **ONE),
    }
    n_warm = min(2000, Xtr.shape[0])
    for make in makers.values():
        make().fit(Xtr[:n_warm], ytr[:n_warm])
    times = {k: [] for k in makers}
    fitted = {}
    for _ in range(repeat):
        for k, make in makers.items():
            t0 = time.perf_counter()
            est = make().fit(Xtr, ytr)
            times[k].append(time.perf_counter() - t0)
            fitted[k] = est
    rows = []
    for k, est in fitted.items():
        rows.append({"data": name, "method": k, "median_s": statistics.median(times[k]), "runs_s": times[k],
                     "test_error": float(np.mean(est.predict(Xte) != yte)), "tau": est.tau_,
                     "online_error": est.online_errors_ / Xtr.shape[0]})
    auto = fitted[f"auto-{N}"]
    for g, t in enumerate(TAU_GRID):
        one = OBPM(n_estimators=N, tau=t, random_state=seed, **ONE).fit(Xtr, ytr)
        rows.append({"data": name, "method": f"tau={t:g}", "median_s": None, "tau": t,
                     "test_error": float(np.mean(one.predict(Xte) != yte)),
                     "online_error": float(auto.tau_online_errors_[g]) / Xtr.shape[0]})
    return rows


def main(argv=None) -> int:
    from bench_learners import load_rcv1

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--n-samples", type=int, default=800_000)
    p.add_argument("--data-dir", default="bench-output")
    p.add_argument("--n-estimators", type=int, default=20, help="members per tau (default 20: 100 in all)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    rows = []
    rows += run("digits", *_digits(), N=args.n_estimators, repeat=args.repeat)
    data = load_rcv1(argparse.Namespace(n_samples=args.n_samples, data_dir=args.data_dir))
    rows += run(f"rcv1-like {args.n_samples:,}", data.X_train["float64"], data.y_train, data.X_test["float64"],
                data.y_test, N=args.n_estimators, repeat=args.repeat)
    print("| data | method | median s | chosen tau | online error | test error |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        s = "" if r["median_s"] is None else f"{r['median_s']:.3f}"
        print(f"| {r['data']} | {r['method']} | {s} | {r['tau']:g} | {100 * r['online_error']:.2f} % | "
              f"{100 * r['test_error']:.2f} % |")
    for name in dict.fromkeys(r["data"] for r in rows):
        t = {r["method"]: r["median_s"] for r in rows if r["data"] == name and r["median_s"] is not None}
        N = args.n_estimators
        print(f"{name}: auto-{N} / single-{5 * N} = {t[f'auto-{N}'] / t[f'single-{5 * N}']:.2f}x, "
              f"auto-{N} / single-{N} = {t[f'auto-{N}'] / t[f'single-{N}']:.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
