#!/usr/bin/env python3
"""Benchmark: ``gamma="auto"`` (the width raced over the first pass) against ``gamma="scale"`` and SVC, in one run.

    .venv/bin/python benchmarks/bench_gamma_auto.py                                  # digits, + LETTER if found
    .venv/bin/python benchmarks/bench_gamma_auto.py --datasets letter --repeat 3 --json out.json
    .venv/bin/python benchmarks/bench_gamma_auto.py --datasets fashion --fashion-rows 10000

Data sets (min-max scaled to [0, 1] on the training rows, RBF kernel, as the issue's table):

  letter         UCI LETTER (``--letter FILE``, else ``$DISTLEARN_LETTER`` or ``distlearn data fetch letter``'s
                 copy): the first 16,000 rows train, the last 4,000 test.
  digits         scikit-learn's 8x8 digits: 1,500 train / 297 test.
  digits-poly9   the examples' digits (``examples/budget_cache_sizes.py``): unit-norm rows, homogeneous
                 polynomial kernel of degree 9 (SVC and "scale" with gamma = 1, as the example).
  fashion        Fashion-MNIST (``--fashion-dir``): the first ``--fashion-rows`` train rows / 10,000 test,
                 min-max scaled (pixels / 255).

Rows per data set (``--learner``, default ``KernelMIRA(budget="variable")``, one epoch; ``--repeat`` timed runs
ALTERNATING auto, scale, fixed, svc, medians; one untimed warm-up of each learner first):

  auto    gamma="auto": the race; its gamma_, the candidates' progressive mistakes and rows
  scale   gamma="scale" (SVC's width)
  fixed   gamma=<auto's gamma_>: the single-width fit the race ends in (the same model, bit for bit:
          checked here); ``auto / fixed`` is the race's cost
  svc     sklearn SVC(C=10, gamma="scale") (digits-poly9: gamma=1)

Columns: fit seconds (median), test error, support patterns.  Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from distlearn import KernelMIRA, KernelPA, KernelPerceptron
from distlearn.data.public import FASHION_HELP, fashion_mnist_dir, letter_file, load_fashion_mnist, no_letter_message

LEARNERS = {
    "mira-variable": lambda **kw: KernelMIRA(budget="variable", **kw),
    "mira": lambda **kw: KernelMIRA(**kw),
    "pa": lambda **kw: KernelPA(**kw),
    "perceptron-variable": lambda **kw: KernelPerceptron(beta=0.1, budget="variable", **kw),
}


def _minmax(Xtr: np.ndarray, Xte: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = Xtr.min(0), Xtr.max(0)
    span = np.where(hi > lo, hi - lo, 1.0)
    return (Xtr - lo) / span, (Xte - lo) / span


def load(name: str, args: argparse.Namespace):
    """(Xtr, ytr, Xte, yte, kernel params for every row, SVC's params) or None when the data is missing."""
    rbf = {"kernel": "rbf"}
    if name in ("digits", "digits-poly9"):
        from sklearn.datasets import load_digits
        from sklearn.preprocessing import normalize

        X, y = load_digits(return_X_y=True)
        X = X.astype(np.float64)
        if name == "digits-poly9":
            X = normalize(X)
            kp = {"kernel": "poly", "degree": 9, "coef0": 0.0}
            return X[:1500], y[:1500], X[1500:], y[1500:], kp, {**kp, "gamma": 1.0}
        Xtr, Xte = _minmax(X[:1500], X[1500:])
        return Xtr, y[:1500], Xte, y[1500:], rbf, {**rbf, "gamma": "scale"}
    if name == "letter":
        path = letter_file(args.letter)
        if path is None or not Path(path).exists():
            print(f"# letter: skipped: {no_letter_message('--letter')}", file=sys.stderr)
            return None
        from sklearn.datasets import load_svmlight_file

        X, y = load_svmlight_file(str(path))
        X = np.asarray(X.todense(), dtype=np.float64)
        Xtr, Xte = _minmax(X[:16000], X[16000:])
        return Xtr, y[:16000], Xte, y[16000:], rbf, {**rbf, "gamma": "scale"}
    if name == "fashion":
        d = fashion_mnist_dir(args.fashion_dir)
        if d is None or not Path(d).exists():
            print("# fashion: no data (see --fashion-dir); skipped", file=sys.stderr)
            return None
        Xtr, ytr, Xte, yte = load_fashion_mnist(d)
        n = args.fashion_rows
        return Xtr[:n] / 255.0, ytr[:n], Xte / 255.0, yte, rbf, {**rbf, "gamma": "scale"}
    raise ValueError(f"unknown data set {name!r}")


def run(name: str, data, args: argparse.Namespace) -> dict:
    from sklearn.svm import SVC

    Xtr, ytr, Xte, yte, kp, svc_kp = data
    make = LEARNERS[args.learner]
    scale_gamma = 1.0 if kp["kernel"] == "poly" else "scale"
    auto = make(gamma="auto", random_state=args.seed, **kp).fit(Xtr, ytr)  # warm-up (compiles), and gamma_
    fits = {
        "auto": lambda: make(gamma="auto", random_state=args.seed, **kp).fit(Xtr, ytr),
        "scale": lambda: make(gamma=scale_gamma, random_state=args.seed, **kp).fit(Xtr, ytr),
        "fixed": lambda: make(gamma=auto.gamma_, random_state=args.seed, **kp).fit(Xtr, ytr),
        "svc": lambda: SVC(C=10.0, **svc_kp).fit(Xtr, ytr),
    }
    fits["scale"]()
    times: dict[str, list[float]] = {k: [] for k in fits}
    models: dict[str, object] = {}
    keys = list(fits)
    for r in range(args.repeat):
        for k in keys[r % len(keys):] + keys[:r % len(keys)]:  # rotate the order: A B C D, B C D A, ...
            t = time.perf_counter()
            models[k] = fits[k]()
            times[k].append(time.perf_counter() - t)
    a, f = models["auto"], models["fixed"]
    same = bool(np.array_equal(a.dual_coef_, f.dual_coef_) and np.array_equal(a.support_vectors_, f.support_vectors_))
    out = {"dataset": name, "shape": list(Xtr.shape), "n_test": int(len(yte)), "kernel": kp,
           "learner": args.learner, "loadavg": os.getloadavg()[0], "bit_identical_to_fixed": same,
           "gamma_": float(a.gamma_), "gammas_": a.gammas_.tolist(),
           "gamma_online_errors_": a.gamma_online_errors_.tolist(), "gamma_race_rows_": a.gamma_race_rows_.tolist(),
           "rows": {}}
    for k, m in models.items():
        n_sv = int(m.support_vectors_.shape[0])
        out["rows"][k] = {"fit_s": statistics.median(times[k]), "fit_all": times[k],
                          "test_error": float(1.0 - m.score(Xte, yte)), "n_support": n_sv,
                          "gamma": float(m._gamma) if k == "svc" else float(m.gamma_)}
    out["race_cost"] = out["rows"]["auto"]["fit_s"] / out["rows"]["fixed"]["fit_s"]
    out["auto_over_svc_fit"] = out["rows"]["auto"]["fit_s"] / out["rows"]["svc"]["fit_s"]
    return out


def show(res: dict) -> None:
    print(f"\n## {res['dataset']}: {res['shape'][0]} x {res['shape'][1]} train, {res['n_test']} test, {res['kernel']}, "
          f"{res['learner']} (load {res['loadavg']:.1f})")
    print(f"auto: gamma_ = {res['gamma_']:.4g} of {['%.4g' % g for g in res['gammas_']]}")
    print(f"      progressive mistakes {res['gamma_online_errors_']} over rows {res['gamma_race_rows_']}")
    print(f"{'row':8} {'gamma':>9} {'fit s':>8} {'test err':>9} {'n_SV':>7}")
    for k, r in res["rows"].items():
        print(f"{k:8} {r['gamma']:9.4g} {r['fit_s']:8.2f} {100 * r['test_error']:8.2f}% {r['n_support']:7d}")
    print(f"race cost (auto / fixed fit time): {res['race_cost']:.2f}x; auto / SVC fit time: "
          f"{res['auto_over_svc_fit']:.2f}x; auto bit-identical to fixed: {res['bit_identical_to_fixed']}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--datasets", default="digits,digits-poly9,letter",
                   help="comma-separated subset of letter,digits,digits-poly9,fashion")
    p.add_argument("--letter", type=Path, default=None, help="LETTER as one svmlight file (default $DISTLEARN_LETTER)")
    p.add_argument("--fashion-dir", type=Path, default=None, help=FASHION_HELP)
    p.add_argument("--fashion-rows", type=int, default=10000)
    p.add_argument("--learner", choices=sorted(LEARNERS), default="mira-variable")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    print(f"# {platform.processor() or platform.machine()}, numpy {np.__version__}, python {platform.python_version()}")
    results = []
    for name in args.datasets.split(","):
        data = load(name, args)
        if data is None:
            continue
        res = run(name, data, args)
        show(res)
        results.append(res)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
