#!/usr/bin/env python3
"""Benchmark: the kernel budget engines alone (single learner and kernel OBPM), old against new in one run.

    .venv/bin/python benchmarks/bench_budget_engine.py                      # this tree only
    git archive REV distlearn | tar -x -C /tmp/old && mv /tmp/old/distlearn /tmp/old/distlearn_old
    .venv/bin/python benchmarks/bench_budget_engine.py --old /tmp/old       # REV against this tree

Data: scikit-learn's digits (1,500 rows, unit norm), homogeneous polynomial kernel of degree 9
(``--kernel rbf``: RBF with gamma 2), kernel MIRA (beta = 0.01, native multiclass), ``--epochs``
passes (default 3, each a seeded permutation), the driver's chunks.  Settings: no budget,
DistillCache (``variable``), a fixed cache of 100 removing by margin and at random, and the
kernel OBPM of 8 members (tau = 0.3) without a budget and with DistillCache.

Each setting runs ``--repeat`` times (after one untimed compile), the two trees alternating
run by run; the median and the least CPU seconds of the process (``time.process_time``: on a
machine shared with other jobs, the time it waits for a core is not counted) are printed with
new/old of each.  With ``--old`` the final states
are compared too: ``identical`` says every coefficient is the same bits.  Nothing is asserted.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time

import numpy as np

SETTINGS = [
    ("mira", None, "margin"),
    ("mira-variable", "variable", "margin"),
    ("mira-fixed-100", 100, "margin"),
    ("mira-fixed-100-random", 100, "random"),
    ("obpm-8", None, "margin"),
    ("obpm-8-variable", "variable", "margin"),
]


def tree(pkg: str):
    learners = importlib.import_module(pkg + ".learners")
    kern = importlib.import_module(pkg + ".learners.kernel")
    ens = importlib.import_module(pkg + ".ensembles.kernel")
    return learners, kern, ens


def run(mods, name: str, budget, removal: str, X: np.ndarray, y: np.ndarray, order: np.ndarray,
        kernel: str) -> tuple[float, np.ndarray]:
    learners, kern, ens = mods
    rule = learners.make_rule("mira", beta=0.01, native=True)
    k = kern.make_kernel("poly", degree=9, gamma=1.0) if kernel == "poly" else kern.make_kernel("rbf", gamma=2.0)
    t0 = time.process_time()
    if name.startswith("obpm"):
        st = ens.init_kernel_ensemble(X.shape[1], 8, 10, native=True)
        ens.learn_kernel_ensemble_chunk(rule, k, st, X, y, np.arange(X.shape[0]), seed=0, tau=0.3, beta=0.01,
                                        budget=budget, removal=removal, order=order)
        coef = st.bayes_point()[1]
    else:
        st = kern.init_budget_state(X.shape[1], 10, native=True)
        kern.learn_budget_chunk(rule, k, st, X, y, order=order, beta=0.01, budget=budget, removal=removal, seed=0)
        coef = st.support()[1]
    return time.process_time() - t0, coef


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", help="a directory holding the old tree as the package distlearn_old")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--kernel", choices=("poly", "rbf"), default="poly")
    ap.add_argument("--only", nargs="*", help="settings to run (default: all)")
    args = ap.parse_args(argv)
    from sklearn.datasets import load_digits
    from sklearn.preprocessing import normalize

    X, y = load_digits(return_X_y=True)
    X, y = normalize(X.astype(np.float64))[:1500], y[:1500].astype(np.int64)
    rs = np.random.default_rng(0)
    order = np.concatenate([rs.permutation(1500) for _ in range(args.epochs)])
    trees = {"new": tree("distlearn")}
    if args.old:
        sys.path.insert(0, args.old)
        trees["old"] = tree("distlearn_old")
    kname = "poly degree 9" if args.kernel == "poly" else "rbf gamma 2"
    print(f"# digits 1500 x 64, {kname}, KernelMIRA native, {args.epochs} epochs; {args.repeat} runs, "
          "trees alternating; CPU seconds")
    print(f"{'setting':24s}" + "".join(f"{t + ' med':>10s}{t + ' min':>10s}" for t in trees)
          + ("   new/old med  new/old min  identical" if args.old else ""))
    for name, budget, removal in SETTINGS:
        if args.only and name not in args.only:
            continue
        times: dict[str, list[float]] = {t: [] for t in trees}
        coef = {}
        for t, mods in trees.items():
            coef[t] = run(mods, name, budget, removal, X, y, order[:64], args.kernel)[1]  # compile
        for _ in range(args.repeat):
            for t, mods in trees.items():
                sec, coef[t] = run(mods, name, budget, removal, X, y, order, args.kernel)
                times[t].append(sec)
        med = {t: statistics.median(v) for t, v in times.items()}
        low = {t: min(v) for t, v in times.items()}
        line = f"{name:24s}" + "".join(f"{med[t]:10.3f}{low[t]:10.3f}" for t in trees)
        if args.old:
            same = coef["new"].shape == coef["old"].shape and coef["new"].tobytes() == coef["old"].tobytes()
            line += f"   {med['new'] / med['old']:11.3f}  {low['new'] / low['old']:11.3f}  {same}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
