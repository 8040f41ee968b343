#!/usr/bin/env python3
"""Benchmark: kernel online learners on a budget against scikit-learn's SVC, in one run.

    .venv/bin/python benchmarks/bench_kernels.py                         # digits, + LETTER if found
    .venv/bin/python benchmarks/bench_kernels.py --letter letter.svm --datasets letter --repeat 3
    .venv/bin/python benchmarks/bench_kernels.py --datasets fashion --fashion-dir DIR --json out.json

Data sets (each split, scaled and kerneled as the budget paper does):

  digits    scikit-learn's bundled 8x8 digits (a USPS stand-in): 1,500 train /
            297 test, rows scaled to unit norm, homogeneous polynomial kernel of
            degree 9 (gamma = 1, coef0 = 0).
  letter    UCI LETTER (``--letter FILE`` or ``$DISTLEARN_LETTER``; svmlight):
            the first 16,000 rows train, the last 4,000 test, min-max scaled to
            [0, 1] on the training rows, RBF kernel with SVC's gamma="scale".
  fashion   Fashion-MNIST (``--fashion-dir`` or ``$DISTLEARN_FASHION_MNIST``):
            60,000 train (``--fashion-rows`` caps it) / 10,000 test, rows scaled to
            unit norm, homogeneous polynomial kernel of degree 9.

Rows per data set (medians of ``--repeat`` timed runs, one untimed warm-up compile):

  svc                 SVC(kernel, C=10) fit; its predict of the test rows
  mira                KernelMIRA(beta=0.01), no budget, one epoch
  mira-variable       the same with DistillCache (budget="variable")
  mira-fixed-N        fixed caches of N patterns (``--sizes``; removal by margin)
  obpm-N, obpm-N-variable
                      the kernel OBPM over KernelMIRA (N = ``--obpm-estimators``, tau = 0.3),
                      no budget and DistillCache: N members sharing one pool and one kernel row
                      per example (``--obpm-estimators 0`` skips them)

and, on the engine level, the variable cache's epoch with blocked kernel rows
against one kernel row per round (``blocked=False``; the same model bit for bit),
and its time per round against the cache size (the epoch cut into 10 segments).

Columns: fit seconds, seconds per 1,000 rounds, mean cache size over the rounds,
final support patterns, test error, predict seconds for the test rows.  The
issue's goals are printed beside them; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from distlearn import KernelMIRA, KernelOBPM
from distlearn.data.public import FASHION_HELP, fashion_mnist_dir, letter_file, load_fashion_mnist
from distlearn.learners import make_rule
from distlearn.learners._budget import ROW_BLOCK
from distlearn.learners.kernel import init_budget_state, learn_budget_chunk, make_kernel


def load(name: str, args: argparse.Namespace) -> tuple[np.ndarray, ...] | None:
    from sklearn.preprocessing import normalize

    if name == "digits":
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        X = normalize(X.astype(np.float64))
        return X[:1500], y[:1500], X[1500:], y[1500:], {"kernel": "poly", "degree": 9, "gamma": 1.0}
    if name == "letter":
        path = letter_file(args.letter)
        if path is None or not path.exists():
            print("# letter: no data (pass --letter FILE or set $DISTLEARN_LETTER); skipped", file=sys.stderr)
            return None
        from sklearn.datasets import load_svmlight_file

        X, y = load_svmlight_file(str(path))
        X = np.asarray(X.todense())
        lo, hi = X[:16000].min(0), X[:16000].max(0)
        X = (X - lo) / np.where(hi > lo, hi - lo, 1.0)
        gamma = 1.0 / (X.shape[1] * X[:16000].var())
        return X[:16000], y[:16000], X[16000:], y[16000:], {"kernel": "rbf", "gamma": float(gamma)}
    if name == "fashion":
        d = fashion_mnist_dir(args.fashion_dir)
        if d is None or not Path(d).exists():
            print("# fashion: no data (see --fashion-dir); skipped", file=sys.stderr)
            return None
        Xtr, ytr, Xte, yte = load_fashion_mnist(d)
        Xtr, Xte = normalize(Xtr), normalize(Xte)  # unit-norm rows, as the budget paper scales its digits
        n = args.fashion_rows
        return Xtr[:n], ytr[:n], Xte, yte, {"kernel": "poly", "degree": 9, "gamma": 1.0}
    raise ValueError(name)


def timed(fn, repeat: int) -> tuple[float, list[float], object]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), times, out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--datasets", default="digits,letter", help="comma-separated subset of digits,letter,fashion")
    p.add_argument("--letter", type=Path, default=None, help="LETTER as one svmlight file (default $DISTLEARN_LETTER)")
    p.add_argument("--fashion-dir", type=Path, default=None, help=FASHION_HELP)
    p.add_argument("--fashion-rows", type=int, default=60000)
    p.add_argument("--sizes", default="", help="fixed cache sizes (default: 1/4, 1/2, 1x, 2x the variable cache)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--obpm-estimators", type=int, default=100, help="N of the kernel OBPM rows (0: skip them)")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    from sklearn.svm import SVC

    print(f"# {platform.processor() or platform.machine()}, numpy {np.__version__}, python {platform.python_version()}")
    results = []
    for name in args.datasets.split(","):
        data = load(name, args)
        if data is None:
            continue
        Xtr, ytr, Xte, yte, kp = data
        print(f"\n## {name}: {Xtr.shape[0]} x {Xtr.shape[1]} train, {len(yte)} test, kernel {kp}")
        rows = []

        def svc_fit():
            return SVC(C=10.0, coef0=0.0, **kp).fit(Xtr, ytr)

        fit_s, fit_all, svc = timed(svc_fit, args.repeat)
        pred_s, _, pred = timed(lambda: svc.predict(Xte), args.repeat)
        rows.append({"method": "svc", "fit_s": fit_s, "fit_runs": fit_all, "support": int(svc.n_support_.sum()),
                     "test_error": float(np.mean(pred != yte)), "predict_s": pred_s})

        def mira(budget):
            return KernelMIRA(beta=0.01, budget=budget, random_state=0, **kp).fit(Xtr, ytr)

        classes, yi = np.unique(ytr, return_inverse=True)
        native = len(classes) > 2
        rule = make_rule("mira", beta=0.01, native=native)
        kern = make_kernel(kp["kernel"], gamma=kp["gamma"], degree=kp.get("degree", 3))
        order = np.random.default_rng(0).permutation(len(ytr))

        def engine(blocked):
            st = init_budget_state(Xtr.shape[1], len(classes) if native else 1, native=native)
            learn_budget_chunk(rule, kern, st, Xtr, yi, order=order, beta=0.01, budget="variable", blocked=blocked)
            return st

        mira(None)  # compile
        var_fit = None
        for label, budget in [("mira", None), ("mira-variable", "variable")]:
            fit_s, fit_all, clf = timed(lambda: mira(budget), args.repeat)
            if budget == "variable":
                var_fit = clf
            rows.append(_row(label, fit_s, fit_all, clf, Xte, yte, args.repeat))
        sizes = ([int(s) for s in args.sizes.split(",") if s] if args.sizes else
                 sorted({max(10, int(var_fit.n_support_.sum() * f)) for f in (0.25, 0.5, 1.0, 2.0)}))
        for n in sizes:
            fit_s, fit_all, clf = timed(lambda: mira(n), args.repeat)
            rows.append(_row(f"mira-fixed-{n}", fit_s, fit_all, clf, Xte, yte, args.repeat))
        N = args.obpm_estimators
        for label, budget in ([(f"obpm-{N}", None), (f"obpm-{N}-variable", "variable")] if N else []):
            def obpm(budget=budget):
                base = KernelMIRA(beta=0.01, budget=budget, **kp)
                return KernelOBPM(n_estimators=N, tau=0.3, base=base, epochs=1, conversion="last", random_state=0).fit(Xtr, ytr)

            fit_s, fit_all, clf = timed(obpm, args.repeat)
            rows.append(_row(label, fit_s, fit_all, clf, Xte, yte, args.repeat))
        blk_s, blk_all, _ = timed(lambda: engine(True), args.repeat)
        row_s, row_all, _ = timed(lambda: engine(False), args.repeat)
        # time per round against cache size: the variable-cache epoch in 10 segments
        st = init_budget_state(Xtr.shape[1], len(classes) if native else 1, native=native)
        segments = []
        for part in np.array_split(order, 10):
            t0 = time.perf_counter()
            log = learn_budget_chunk(rule, kern, st, Xtr, yi, order=part, beta=0.01, budget="variable")
            segments.append((float(np.mean(log.cache_size)), (time.perf_counter() - t0) / len(part) * 1e6))
        print("per-round time vs cache size (variable cache, 10 segments of the epoch): "
              + ", ".join(f"{c:.0f} -> {us:.0f} us" for c, us in segments))
        n_train = len(ytr)
        print(f"{'method':<22}{'fit s':>8}{'s/1k rounds':>13}{'mean cache':>12}{'support':>9}{'test err %':>12}"
              f"{'predict s':>11}{'state MiB':>11}{'patterns MiB':>14}")
        for r in rows:
            per = r["fit_s"] / n_train * 1000
            print(f"{r['method']:<22}{r['fit_s']:>8.2f}{per:>13.4f}{r.get('mean_cache', float('nan')):>12.0f}"
                  f"{r['support']:>9d}{100 * r['test_error']:>12.2f}{r['predict_s']:>11.3f}"
                  f"{r.get('state_mib', float('nan')):>11.1f}{r.get('pattern_mib', float('nan')):>14.1f}")
        by = {r["method"]: r for r in rows}
        v, s = by["mira-variable"], by["svc"]
        print(f"goal: variable-cache epoch <= SVC fit: {v['fit_s']:.2f} s vs {s['fit_s']:.2f} s "
              f"({'PASS' if v['fit_s'] <= s['fit_s'] else 'FALL SHORT'})")
        print(f"goal: predict faster than SVC.predict: {v['predict_s']:.3f} s vs {s['predict_s']:.3f} s "
              f"({'PASS' if v['predict_s'] < s['predict_s'] else 'FALL SHORT'})")
        for label in (f"obpm-{N}", f"obpm-{N}-variable"):
            if label in by:
                single = by["mira" if label == f"obpm-{N}" else "mira-variable"]
                ratio = by[label]["fit_s"] / single["fit_s"]
                print(f"goal: kernel OBPM N={N} <= 5x one kernel-MIRA epoch: {label} {by[label]['fit_s']:.2f} s = "
                      f"{ratio:.1f}x {single['method']} ({'PASS' if ratio <= 5 else 'FALL SHORT'}); pool "
                      f"{by[label]['support']} patterns, test error {100 * by[label]['test_error']:.2f} %")
        print(f"engine, variable cache: blocked kernel rows {blk_s:.2f} s, one row per round {row_s:.2f} s: "
              f"{row_s / blk_s:.2f}x (blocks of {ROW_BLOCK} rounds; same model bit for bit)")
        gap = 100 * (v["test_error"] - s["test_error"])
        print(f"variable cache vs SVC: {gap:+.2f} points of test error, {v['support']} vs {s['support']} patterns")
        results.append({"dataset": name, "n_train": n_train, "rows": rows, "engine_blocked_s": blk_all,
                        "engine_per_row_s": row_all, "per_round_us_by_cache": segments})
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


def _row(label, fit_s, fit_all, clf, Xte, yte, repeat):
    pred_s, _, pred = timed(lambda: clf.predict(Xte), repeat)
    sizes = getattr(clf, "cache_size_", np.zeros(1))
    st = clf._state  # the cache's arrays as the fit left them (capacity included)
    state_mib = sum(a.nbytes for a in vars(st).values() if isinstance(a, np.ndarray)) / 2**20
    return {"method": label, "fit_s": fit_s, "fit_runs": fit_all, "support": int(clf.n_support_.sum()),
            "state_mib": state_mib, "pattern_mib": int(clf.n_support_.sum()) * clf.support_vectors_.shape[1] * 8 / 2**20,
            "mean_cache": float(np.mean(sizes)), "max_cache": int(np.max(sizes)),
            "test_error": float(np.mean(pred != yte)), "predict_s": pred_s, "online_errors": int(clf.online_errors_)}


if __name__ == "__main__":
    sys.exit(main())
