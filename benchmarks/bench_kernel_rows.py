#!/usr/bin/env python3
"""Benchmark: the kernel budget engine's kernel rows, before/after and against SVC, alternating runs.

    .venv/bin/python benchmarks/bench_kernel_rows.py --before /path/to/old/checkout
    .venv/bin/python benchmarks/bench_kernel_rows.py --rows letter-variable,svc --repeat 5
    .venv/bin/python benchmarks/bench_kernel_rows.py --rows fashion-500,fashion-variable --fashion-rows 10000

Every measurement is one fresh child process (``--child ROW``) that loads the data, compiles on a
few rows (untimed) and times one fit in CPU seconds of the process (every fit here runs on one
thread: the engine, libsvm, and OpenBLAS pinned to one thread; on a shared machine CPU seconds move
far less with the load than wall seconds, which are kept in the JSON); the rows and the two code versions (this checkout, and
``--before DIR``, an older checkout put first on ``PYTHONPATH``) alternate: A B A B ..., so load
from other jobs falls on both alike.  Medians, and the after/before and row/SVC ratios, are
printed with the issue's targets beside them; nothing is asserted.

Rows:

  svc               sklearn SVC(C=10, gamma="scale") fit on LETTER (version-independent: run once per round,
                    as is letter-floor)
  letter-variable   KernelMIRA(kernel="rbf", budget="variable") with its defaults, LETTER (target: <= SVC's fit)
  letter-mira       KernelMIRA(kernel="rbf", epochs=1), otherwise its defaults, no budget: one kernel epoch
  obpm-100          KernelOBPM(n_estimators=100, tau=0.3, base=KernelMIRA(kernel="rbf"), epochs=1,
                    conversion="last"): one epoch of 100 members (target: <= 5x letter-mira)
  fashion-500       KernelMIRA(kernel="poly", degree=9, gamma=1, budget=500) on ``--fashion-rows`` unit-norm
                    Fashion-MNIST rows (d = 784)
  fashion-variable  the same with budget="variable"
  letter-floor      the floor of letter-variable: its "fit" is the CPU seconds of the engine's blocked kernel
                    rows alone (ROW_BLOCK rounds at a time) for the fit's 48,000 rounds against its final
                    cache, scaled to the cache sizes the fit had round by round; ``rows_and_sums_s`` adds
                    the score sums (four rounds per read of the coefficients, ``_gathered_sums``).  Every round of the fit
                    pays at least these; the updates, removals and the gamma race come on top.
  letter-race       the ``gamma="auto"`` race of letter-variable alone (:func:`~distlearn.estimators.kernel.race_gamma`:
                    7 widths on 1024 rows, 4 on the next 1024, 2 on the next 2048), its candidates sharing
                    their kernel rows' dot products (d = 16); the race's result (``gamma_``, every candidate's
                    progressive mistakes) must be the same in both versions: checked, printed
  fashion-race      the same race on ``--fashion-rows`` unit-norm Fashion-MNIST rows, 10 classes (d = 784)
  digits-race       the same race on scikit-learn's digits, min-max scaled (1,797 rows, d = 64: it ends with
                    the data, 7 candidates -> 4 after 1,024 rows)
                    (``--share-features N`` runs the race rows with GAMMA_SHARE_FEATURES = N: 1 shares on
                    LETTER too, 10**9 never shares; how the threshold was measured)
  fashion-auto      the whole fit of KernelMIRA(kernel="rbf", budget="variable") with its defaults there

LETTER comes from ``$DISTLEARN_LETTER`` or the fetched copy (``distlearn data fetch letter``),
the first 16,000 rows train and the last 4,000 test, min-max scaled on the training rows;
Fashion-MNIST from ``$DISTLEARN_FASHION_MNIST`` or the fetched copy.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROWS = ("svc", "letter-variable", "letter-mira", "obpm-100", "fashion-500", "fashion-variable", "letter-floor",
        "letter-race", "fashion-race", "fashion-auto", "digits-race")
SHARE_ENV = "BENCH_GAMMA_SHARE_FEATURES"  # --share-features, passed to the children
HERE = Path(__file__).resolve().parent.parent


def _letter():
    import numpy as np
    from sklearn.datasets import load_svmlight_file

    from distlearn.data.public import letter_file

    path = letter_file()
    if path is None or not path.exists():
        raise SystemExit("no LETTER data: set $DISTLEARN_LETTER or run `distlearn data fetch letter`")
    X, y = load_svmlight_file(str(path))
    X = np.asarray(X.todense())
    lo, hi = X[:16000].min(0), X[:16000].max(0)
    X = (X - lo) / np.where(hi > lo, hi - lo, 1.0)
    return X[:16000], y[:16000], X[16000:], y[16000:]


def _fashion(n):
    from sklearn.preprocessing import normalize

    from distlearn.data.public import fashion_mnist_dir, load_fashion_mnist

    d = fashion_mnist_dir()
    if d is None or not Path(d).exists():
        raise SystemExit("no Fashion-MNIST data: set $DISTLEARN_FASHION_MNIST or run `distlearn data fetch fashion-mnist`")
    Xtr, ytr, Xte, yte = load_fashion_mnist(d)
    return normalize(Xtr[:n]), ytr[:n], normalize(Xte), yte


def floor(Xtr, ytr, Xte, yte) -> dict:
    """The ``letter-floor`` row (module docstring)."""
    import numpy as np
    from numba import njit

    from distlearn import KernelMIRA
    from distlearn.learners._budget import ROW_BLOCK, SLOT_BLOCK, _gathered_sums, _next_block

    clf = KernelMIRA(kernel="rbf", budget="variable", random_state=0).fit(Xtr, ytr)
    S, A = np.ascontiguousarray(clf.support_vectors_), np.ascontiguousarray(clf.dual_coef_.T)
    sq, n = np.einsum("ij,ij->i", S, S), len(S)

    @njit
    def rounds(X, order, S, sq, kern, A, sums):
        Xt, sqt, G = np.zeros((S.shape[1], ROW_BLOCK)), np.zeros(ROW_BLOCK), np.zeros((ROW_BLOCK, S.shape[0]))
        acc, live = np.zeros((SLOT_BLOCK, ROW_BLOCK)), np.zeros(S.shape[0], np.int64)
        alive, M, t = np.ones(S.shape[0], np.bool_), np.zeros((ROW_BLOCK, A.shape[1])), 0.0
        ident, offs = np.arange(S.shape[0]), np.arange(ROW_BLOCK) * S.shape[0]
        for ii in range(0, order.shape[0] - ROW_BLOCK + 1, ROW_BLOCK):
            _next_block(kern, X, order, ii, S, sq, alive, S.shape[0], Xt, sqt, G, acc, live)
            if sums:
                for b in range(0, ROW_BLOCK, 4):  # four rounds per read of the coefficients, as the engine
                    _gathered_sums(A, ident, alive, S.shape[0], G.reshape(G.size), offs, b, b + 4,
                                   M.reshape(M.size))
            t += G[0, 0] + M[0, 0]
        return t

    sizes = clf.cache_size_.astype(np.int64)
    order = np.concatenate([np.random.default_rng(e).permutation(len(Xtr)) for e in range(clf.n_iter_)])
    kern = clf._kernel_obj.record()
    rounds(Xtr, order[:64], S, sq, kern, A, True)  # compile, untimed
    out = {}
    for name, sums in (("fit_s", False), ("rows_and_sums_s", True)):
        c = time.process_time()
        rounds(Xtr, order, S, sq, kern, A, sums)
        out[name] = (time.process_time() - c) * sizes.sum() / (len(order) * n)
    return {**out, "wall_s": float("nan"), "test_error": float(np.mean(clf.predict(Xte) != yte)), "support": n}


def race(row: str, fashion_rows: int) -> dict:
    """A ``*-race`` row (module docstring): CPU seconds of the race alone, and its result."""
    import numpy as np

    from distlearn import KernelMIRA
    from distlearn.estimators.kernel import race_gamma

    from distlearn.estimators import kernel

    if os.environ.get(SHARE_ENV):  # an older checkout has no such constant: setting it changes nothing there
        kernel.GAMMA_SHARE_FEATURES = int(os.environ[SHARE_ENV])
    if row.startswith("digits"):
        from sklearn.datasets import load_digits
        from sklearn.preprocessing import minmax_scale

        X, y = load_digits(return_X_y=True)
        X = minmax_scale(X.astype(np.float64))
    else:
        X, y = (_fashion(fashion_rows) if row.startswith("fashion") else _letter())[:2]
    classes = np.unique(y)
    yi = np.searchsorted(classes, y).astype(np.int64)

    def work(n):
        return race_gamma(KernelMIRA(kernel="rbf", budget="variable", random_state=0), X[:n], yi[:n], classes, seed=0)

    work(600)  # compile (numba's cache), untimed
    t, c = time.perf_counter(), time.process_time()
    r = work(len(y))
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    return {"fit_s": cpu, "wall_s": wall, "test_error": float("nan"), "support": int(r._state.meta[1]),
            "race": [float(r.gamma_), r.gamma_online_errors_.tolist(), r.gamma_race_rows_.tolist()]}


def child(row: str, fashion_rows: int) -> dict:
    import numpy as np

    from distlearn import KernelMIRA, KernelOBPM

    if row.endswith("race"):
        return race(row, fashion_rows)
    if row == "fashion-auto":
        Xtr, ytr, Xte, yte = _fashion(fashion_rows)

        def make():
            return KernelMIRA(kernel="rbf", budget="variable", random_state=0)
    elif row.startswith("fashion"):
        Xtr, ytr, Xte, yte = _fashion(fashion_rows)
        budget = 500 if row == "fashion-500" else "variable"

        def make():
            return KernelMIRA(kernel="poly", degree=9, gamma=1.0, budget=budget, random_state=0)
    else:
        Xtr, ytr, Xte, yte = _letter()
        if row == "letter-floor":
            return floor(Xtr, ytr, Xte, yte)
        if row == "svc":
            from sklearn.svm import SVC

            def make():
                return SVC(C=10.0, gamma="scale")
        elif row == "obpm-100":
            def make():
                return KernelOBPM(n_estimators=100, tau=0.3, base=KernelMIRA(kernel="rbf"), epochs=1,
                                  conversion="last", random_state=0)
        else:
            budget = "variable" if row == "letter-variable" else None
            # letter-mira is ONE kernel epoch (the OBPM row's unit) whatever the default epochs
            kw = {} if row == "letter-variable" else {"epochs": 1}

            def make():
                return KernelMIRA(kernel="rbf", budget=budget, random_state=0, **kw)
    make().fit(Xtr[:300], ytr[:300])  # compile (numba's cache), untimed
    t, c = time.perf_counter(), time.process_time()
    clf = make().fit(Xtr, ytr)
    fit_s, cpu_s = time.perf_counter() - t, time.process_time() - c
    support = int(np.sum(clf.n_support_))
    return {"fit_s": cpu_s, "wall_s": fit_s, "test_error": float(np.mean(clf.predict(Xte) != yte)), "support": support}


def run(row: str, version: str, path: Path, fashion_rows: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(path), OPENBLAS_NUM_THREADS="1")
    out = subprocess.run([sys.executable, __file__, "--child", row, "--fashion-rows", str(fashion_rows)],
                         env=env, capture_output=True, text=True, timeout=3600, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{row} ({version}) failed: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--rows", default="svc,letter-variable,letter-mira,fashion-500,fashion-variable",
                   help=f"comma-separated subset of {','.join(ROWS)}")
    p.add_argument("--before", type=Path, default=None, help="an older checkout to time against (alternating)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--fashion-rows", type=int, default=10000)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--share-features", type=int, default=None,
                   help="the race rows with GAMMA_SHARE_FEATURES set to this (default: the checkout's own)")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.fashion_rows)))
        return 0
    if args.share_features is not None:
        os.environ[SHARE_ENV] = str(args.share_features)
    rows = [r for r in args.rows.split(",") if r]
    bad = [r for r in rows if r not in ROWS]
    if bad:
        p.error(f"--rows: unknown {bad}; choose from {','.join(ROWS)}")
    versions = [("after", HERE)] + ([("before", args.before.resolve())] if args.before else [])
    res: dict = {}
    for rep in range(args.repeat):
        for row in rows:
            for version, path in (versions[:1] if row in ("svc", "letter-floor") else versions):
                r = run(row, version, path, args.fashion_rows)
                res.setdefault(row, {}).setdefault(version, []).append(r)
                print(f"# round {rep}: {row:<17} {version:<6} fit {r['fit_s']:7.2f} cpu s ({r['wall_s']:.2f} wall)  error "
                      f"{100 * r['test_error']:5.2f} %  support {r['support']}  (load {os.getloadavg()[0]:.1f})",
                      flush=True)
    med = {row: {v: statistics.median(x["fit_s"] for x in runs) for v, runs in by.items()} for row, by in res.items()}
    print(f"\n{'row':<18}{'after s':>9}{'before s':>10}{'after/before':>14}{'error %':>9}{'support':>9}")
    for row, by in med.items():
        a, b = by["after"], by.get("before")
        last = res[row]["after"][-1]
        print(f"{row:<18}{a:>9.2f}{(b if b else float('nan')):>10.2f}{(a / b if b else float('nan')):>14.2f}"
              f"{100 * last['test_error']:>9.2f}{last['support']:>9d}")
    for row in (r for r in med if r.endswith("race")):
        same = len({json.dumps(x["race"]) for runs in res[row].values() for x in runs}) == 1
        print(f"{row}: gamma_ {res[row]['after'][-1]['race'][0]:.4g}, the same race in every run: {same}")
    if "letter-floor" in med and "svc" in med:
        sums = statistics.median(x["rows_and_sums_s"] for x in res["letter-floor"]["after"])
        print(f"floor: the fit's kernel rows alone {med['letter-floor']['after']:.2f} s "
              f"({med['letter-floor']['after'] / med['svc']['after']:.2f}x SVC), with the score sums {sums:.2f} s "
              f"({sums / med['svc']['after']:.2f}x SVC)")
    for v in [v for v, _ in versions]:
        if "svc" in med and "letter-variable" in med:
            r = med["letter-variable"][v] / med["svc"]["after"]
            print(f"target ({v}): LETTER variable-cache fit <= SVC fit: {r:.2f}x ({'PASS' if r <= 1 else 'FALL SHORT'})")
        if "obpm-100" in med and "letter-mira" in med:
            r = med["obpm-100"][v] / med["letter-mira"][v]
            print(f"target ({v}): kernel OBPM-100 <= 5x one kernel epoch: {r:.1f}x ({'PASS' if r <= 5 else 'FALL SHORT'})")
    print(f"load at the end: {open('/proc/loadavg').read().strip()}")
    if args.json:
        args.json.write_text(json.dumps({"runs": res, "medians": med}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
