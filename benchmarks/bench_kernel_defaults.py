#!/usr/bin/env python3
"""Benchmark: candidate defaults of the kernel learners beside a tuned SVC, in one run (issue 29).

    .venv/bin/python benchmarks/bench_kernel_defaults.py                       # every data set found
    .venv/bin/python benchmarks/bench_kernel_defaults.py --datasets six digits --json out.json
    .venv/bin/python benchmarks/bench_kernel_defaults.py --datasets letter --candidates defaults

Data sets (features min-max scaled to [0, 1] on the training rows; a set whose files are absent
is skipped with one line on stderr):

  six       make_classification(n_samples=4500, n_features=36, n_informative=20, n_classes=6,
            random_state=0): the first 3,600 rows train, the last 900 test
  digits    scikit-learn's 8x8 digits: the first 1,500 rows train, the rest (297) test
  digits-split
            the same digits, a seeded stratified split of 297 test rows (``--split-seed``): the fixed
            split's last rows are other writers', harder than a random split
  cancer    scikit-learn's breast cancer: a seeded 80/20 split (``--split-seed``)
  letter    UCI LETTER (``distlearn data fetch letter`` or ``$DISTLEARN_LETTER``): the first
            16,000 rows train, the last 4,000 test
  fashion-PAIR, fashion10
            Fashion-MNIST (``distlearn data fetch fashion-mnist`` or ``$DISTLEARN_FASHION_MNIST``):
            the pairs 0/6 (T-shirt vs shirt) and 2/4 (pullover vs coat), and all 10 classes; a seeded
            subsample of ``--fashion-train`` training rows (10,000) and ``--fashion-test`` test rows
            (2,000) of those classes (``--split-seed``)
  moons, circles, quantiles, wine, iris, four
            held out: problems not used to choose the defaults, a seeded stratified 70/30 split
            (``--split-seed``): make_moons(2000, noise=0.25), make_circles(2000, noise=0.15, factor=0.5),
            make_gaussian_quantiles(3000, 5 features, 3 classes), wine, iris, and a 4-class
            make_classification(4000, 20 features, 10 informative, 2 clusters per class, flip_y=0.02);
            hastie, blobs: make_hastie_10_2(3000) and make_blobs(3000, 8 features, 6 centres,
            cluster_std=3.0), added after GAMMA_WIDEN was chosen, to check it on problems it never saw

Rows per data set:

  svc-tuned      SVC(kernel="rbf") with C and gamma chosen by 3-fold CV on the training rows
                 (GridSearchCV over ``--svc-C`` x ``--svc-gamma``; gamma as a multiple of SVC's
                 "scale"), refit on all of them: its fit time is the refit's, the search's time is
                 reported apart; a grid of one point is that SVC, not searched
  NAME           our candidates (``--candidates``): every learner with ``budget="variable"``,
                 ``--epochs`` (1 and 3), ``--gamma`` ("auto" and "scale") and the conversions "last"
                 and "average" (distilled, and the full expansion with ``--candidates grid``);
                 "defaults" runs the estimators of ``--rules`` with ``budget="variable"`` and every
                 other parameter at its default (``--compress 0 auto``: a row without the post-fit
                 compression and one with it, fitted apart); "one-se" runs the defaults and beside them
                 the same estimator with the width a one-standard-error rule would take from the
                 defaults' own gamma race (:func:`one_se_gamma`: the widest kernel among the race's
                 last runners whose progressive errors are within one binomial standard error of the
                 fewest), fixed as a number; "winner" runs the defaults and the same estimator at
                 the width its race's winner would have kept before ``GAMMA_WIDEN`` (one power of two
                 narrower than the defaults' ``gamma_``: ``gamma_race_winner_``), fixed as a number

Columns: test error (%), the gap to the tuned SVC in points, fit seconds (wall and CPU), the fit's
CPU time over SVC's (``/SVC``: run with ``OPENBLAS_NUM_THREADS=1``, so both use one core), support
patterns (``n_support_.sum()``; SVC's ``n_support_.sum()``) and the epochs run (``n_iter_``); the JSON
rows also hold ours' ``n_updates_`` and ``online_errors_`` over all passes (with ``--default-epochs 1 2 3``
the differences of consecutive rows are each pass's updates and mistakes: what ``epochs="auto"`` reads).  Runs alternate ours and
SVC's fit per data set (SVC first); one timed run each (``--repeat`` for medians).  Nothing is
asserted: the targets (within 1 point of the tuned SVC, no more support patterns) are printed beside
the rows.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from distlearn import KernelMIRA, KernelPA, KernelPerceptron
from distlearn.data.public import fashion_mnist_dir, letter_file, load_fashion_mnist

ALL = ("six", "digits", "cancer", "letter", "fashion-0v6", "fashion-2v4", "fashion10")
#: Problems not used to choose the defaults (each a seeded, stratified 70/30 split; ``--split-seed``).
HELD_OUT = ("moons", "circles", "quantiles", "wine", "iris", "four", "hastie", "blobs")


def _minmax(Xtr: np.ndarray, Xte: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = Xtr.min(0), Xtr.max(0)
    span = np.where(hi > lo, hi - lo, 1.0)
    return (Xtr - lo) / span, (Xte - lo) / span


def load(name: str, args: argparse.Namespace) -> tuple[np.ndarray, ...] | None:
    if name == "six":
        from sklearn.datasets import make_classification

        X, y = make_classification(n_samples=4500, n_features=36, n_informative=20, n_classes=6, random_state=0)
        return (*_minmax(X[:3600], X[3600:]), y[:3600], y[3600:])
    if name == "digits":
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        return (*_minmax(X[:1500], X[1500:]), y[:1500], y[1500:])
    if name == "digits-split":
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split

        X, y = load_digits(return_X_y=True)
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=297, random_state=args.split_seed, stratify=y)
        return (*_minmax(Xtr, Xte), ytr, yte)
    if name == "cancer":
        from sklearn.datasets import load_breast_cancer
        from sklearn.model_selection import train_test_split

        X, y = load_breast_cancer(return_X_y=True)
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=args.split_seed)
        return (*_minmax(Xtr, Xte), ytr, yte)
    if name == "letter":
        path = letter_file(None)
        if path is None or not path.exists():
            print("# letter: no data (`distlearn data fetch letter` or $DISTLEARN_LETTER); skipped", file=sys.stderr)
            return None
        from sklearn.datasets import load_svmlight_file

        X, y = load_svmlight_file(str(path))
        X = np.asarray(X.todense())
        return (*_minmax(X[:16000], X[16000:]), y[:16000], y[16000:])
    if name.startswith("fashion"):
        d = fashion_mnist_dir(None)
        if d is None:
            print(f"# {name}: no Fashion-MNIST (`distlearn data fetch fashion-mnist` or $DISTLEARN_FASHION_MNIST); "
                  "skipped", file=sys.stderr)
            return None
        Xtr, ytr, Xte, yte = load_fashion_mnist(d)
        if name != "fashion10":
            a, b = (int(v) for v in name.split("-")[1].split("v"))
            ktr, kte = np.isin(ytr, (a, b)), np.isin(yte, (a, b))
            Xtr, ytr, Xte, yte = Xtr[ktr], ytr[ktr], Xte[kte], yte[kte]
        rs = np.random.default_rng(args.split_seed)
        itr = np.sort(rs.permutation(len(ytr))[: args.fashion_train])
        ite = np.sort(rs.permutation(len(yte))[: args.fashion_test])
        Xtr, Xte = np.asarray(Xtr[itr], dtype=np.float64), np.asarray(Xte[ite], dtype=np.float64)
        return (*_minmax(Xtr, Xte), np.asarray(ytr)[itr], np.asarray(yte)[ite])
    if name in HELD_OUT:
        from sklearn import datasets as D
        from sklearn.model_selection import train_test_split

        X, y = {"moons": lambda: D.make_moons(2000, noise=0.25, random_state=1),
                "circles": lambda: D.make_circles(2000, noise=0.15, factor=0.5, random_state=1),
                "quantiles": lambda: D.make_gaussian_quantiles(n_samples=3000, n_features=5, n_classes=3,
                                                               random_state=1),
                "wine": lambda: D.load_wine(return_X_y=True), "iris": lambda: D.load_iris(return_X_y=True),
                "four": lambda: D.make_classification(4000, 20, n_informative=10, n_classes=4, n_clusters_per_class=2,
                                                      flip_y=0.02, random_state=7),
                "hastie": lambda: D.make_hastie_10_2(3000, random_state=1),
                "blobs": lambda: D.make_blobs(3000, n_features=8, centers=6, cluster_std=3.0, random_state=1)}[name]()
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=args.split_seed, stratify=y)
        return (*_minmax(Xtr, Xte), ytr, yte)
    raise SystemExit(f"unknown data set {name!r}: one of {', '.join(ALL + HELD_OUT + ('digits-split',))}")


def _compress_value(text: str) -> Any:
    return text if text == "auto" else float(text)


def _epochs_value(text: str) -> Any:
    return text if text == "auto" else int(text)


def candidates(which: str, gammas: list[str], epochs: list[int], only: list[str],
               compress: tuple[str, ...] = ("auto",), default_epochs: tuple[str, ...] = ()) -> list[tuple[str, Any]]:
    """(name, estimator factory) of our candidates."""
    if which == "defaults":
        return [(f"{cls.__name__}(budget='variable'{'' if c == 'auto' else f', compress={c}'}"
                 f"{'' if e is None else f', epochs={e}'})",
                 lambda cls=cls, c=c, e=e: cls(budget="variable", compress=_compress_value(c), random_state=0,
                                               **({} if e is None else {"epochs": _epochs_value(e)})))
                for name, cls in (("perceptron", KernelPerceptron), ("mira", KernelMIRA), ("pa", KernelPA))
                if name in only for e in (default_epochs or (None,)) for c in compress]
    out: list[tuple[str, Any]] = []
    rules = {"perceptron": (KernelPerceptron, {}), "mira": (KernelMIRA, {}), "pa": (KernelPA, {})}
    if which == "grid":
        rules.update({"pa-C10": (KernelPA, {"C": 10.0}), "mira-b0.1": (KernelMIRA, {"beta": 0.1}),
                      "mira-b0.5": (KernelMIRA, {"beta": 0.5})})
    convs = (("last", True), ("average", True)) + ((("average", False),) if which == "grid" else ())
    for rname, (cls, kw) in rules.items():
        if rname.split("-")[0] not in only:
            continue
        for g in gammas:
            for ep in epochs:
                for conv, dist in convs:
                    tag = f"{rname}-{g}-e{ep}-{conv}{'' if dist or conv == 'last' else '-full'}"
                    out.append((tag, lambda cls=cls, kw=kw, ep=ep, conv=conv, dist=dist, g=g:
                                cls(budget="variable", gamma=g, epochs=ep, conversion=conv, distill=dist,
                                    random_state=0, **kw)))
    return out


def one_se_gamma(est: Any) -> float:
    """The width a one-standard-error rule (Breiman et al. 1984) picks from a fitted estimator's gamma race:
    among the runners that ran the race's full length, the smallest ``gamma`` (the widest kernel, the fewest
    patterns) whose progressive mistakes are at most the fewest ``e`` plus ``sqrt(e (1 - e / n))``, ``n``
    the rows they ran.  The estimator's own ``gamma_`` without a race."""
    errs, rows = np.asarray(est.gamma_online_errors_), np.asarray(est.gamma_race_rows_)
    if len(errs) < 2 or rows.max() <= 0:
        return float(est.gamma_)
    from distlearn.estimators.kernel import race_winner  # the estimators' own last cut since it was adopted

    last = np.flatnonzero(rows == rows.max())
    return float(est.gammas_[last[race_winner(errs[last].tolist(), int(rows.max()))]])


def beside_defaults(rules: list[str], Xtr: np.ndarray, ytr: np.ndarray,
                    width: Callable[[Any], tuple[float, str]]) -> list[tuple[str, Any]]:
    """Each rule's defaults, and the same with the width ``width(probe)`` gives (``(gamma, row suffix)``) from an
    untimed fit of the defaults, fixed as a number."""
    out: list[tuple[str, Any]] = []
    for name, cls in (("perceptron", KernelPerceptron), ("mira", KernelMIRA), ("pa", KernelPA)):
        if name not in rules:
            continue
        probe = cls(budget="variable", random_state=0).fit(Xtr, ytr)
        g, suffix = width(probe)
        out.append((f"{cls.__name__}(budget='variable')", lambda cls=cls: cls(budget="variable", random_state=0)))
        out.append((f"{cls.__name__}(budget='variable'), {suffix}",
                    lambda cls=cls, g=g: cls(budget="variable", gamma=g, random_state=0)))
    return out


def one_se_width(probe: Any) -> tuple[float, str]:
    """"one-se": the one-standard-error width of the defaults' race (:func:`one_se_gamma`)."""
    g = one_se_gamma(probe)
    return g, f"one-SE gamma = {g / probe.gammas_[1]:g} x scale"


def winner_width(probe: Any) -> tuple[float, str]:
    """"winner": the race's winner itself (``gamma_race_winner_``: the default before ``GAMMA_WIDEN``, which keeps
    one power of two wider when the race had the whole first pass)."""
    return float(probe.gamma_race_winner_), "at the race winner"


def svc_tuned(Xtr: np.ndarray, ytr: np.ndarray, args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.svm import SVC

    scale = 1.0 / (Xtr.shape[1] * Xtr.var())
    grid = {"C": list(args.svc_C), "gamma": [g * scale for g in args.svc_gamma]}
    if len(grid["C"]) * len(grid["gamma"]) == 1:  # one point: nothing to search
        C, g = grid["C"][0], grid["gamma"][0]
        return (lambda: SVC(kernel="rbf", C=C, gamma=g)), {"C": C, "gamma_x_scale": args.svc_gamma[0], "search_s": 0}
    t0 = time.perf_counter()
    gs = GridSearchCV(SVC(kernel="rbf"), grid, cv=StratifiedKFold(3, shuffle=True, random_state=0), n_jobs=1)
    gs.fit(Xtr, ytr)
    search = time.perf_counter() - t0
    C, g = gs.best_params_["C"], gs.best_params_["gamma"]
    return (lambda: SVC(kernel="rbf", C=C, gamma=g)), {"C": C, "gamma_x_scale": round(g / scale, 3),
                                                       "search_s": round(search, 2)}


def run(factory: Any, Xtr, ytr, Xte, yte) -> dict[str, Any]:
    est = factory()
    t0, c0 = time.perf_counter(), time.process_time()
    est.fit(Xtr, ytr)
    fit, cpu = time.perf_counter() - t0, time.process_time() - c0
    err = float(np.mean(est.predict(Xte) != yte))
    n_sv = int(np.sum(est.n_support_))
    ours = hasattr(est, "gamma_")  # a distlearn kernel learner (its updates and mistakes over all passes)
    return {"err": 100.0 * err, "fit_s": fit, "fit_cpu_s": cpu, "n_sv": n_sv,
            "epochs_run": int(est.n_iter_) if ours else None, "n_updates": int(est.n_updates_) if ours else None,
            "online_errors": int(est.online_errors_) if ours else None}


def summarize(rows: list[dict[str, Any]], names: list[str]) -> None:
    """Per data set of several splits, per row: the mean error, the mean gap to the tuned SVC of the same split
    with its paired standard error (``sd(gaps) / sqrt(splits)``), the splits within 1 point of SVC, and the mean
    patterns beside SVC's."""
    for name in names:
        mine = [r for r in rows if r["dataset"] == name]
        seeds = sorted({r["split_seed"] for r in mine})
        if len(seeds) < 2:
            continue
        svc = {r["split_seed"]: r for r in mine if r["row"] == "svc-tuned"}
        print(f"# {name}: {len(seeds)} splits ({seeds[0]}-{seeds[-1]}), means")
        print(f"  {'row':56s} {'err %':>7s} {'gap':>6s} {'+-SE':>5s} {'<=1pt':>6s} {'SVs':>7s} {'SVC SVs':>8s}")
        for tag in dict.fromkeys(r["row"] for r in mine):
            rr = [r for r in mine if r["row"] == tag]
            gaps = np.array([r["err"] - svc[r["split_seed"]]["err"] for r in rr])
            se = float(np.std(gaps, ddof=1) / np.sqrt(len(gaps))) if len(gaps) > 1 else float("nan")
            n_svc = np.mean([svc[r["split_seed"]]["n_sv"] for r in rr])
            print(f"  {tag:56s} {np.mean([r['err'] for r in rr]):7.2f} {gaps.mean():+6.2f} {se:5.2f} "
                  f"{int(np.sum(gaps <= 1.0 + 1e-9)):>3d}/{len(gaps):<2d} {np.mean([r['n_sv'] for r in rr]):7.1f} "
                  f"{n_svc:8.1f}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", nargs="+", default=list(ALL), metavar="NAME",
                    help=f"of {', '.join(ALL)}, digits-split; held out (not used to choose the defaults): {', '.join(HELD_OUT)}")
    ap.add_argument("--split-seed", type=int, default=0,
                    help="the train/test split of breast cancer and the held-out sets, and the Fashion-MNIST subsample (the "
                         "others have one split)")
    ap.add_argument("--splits", type=int, default=1, metavar="N",
                    help="with N > 1, the seeded sets (breast cancer, Fashion-MNIST and the held-out ones) run on N splits, "
                         "--split-seed .. + N - 1, SVC tuned on each; a summary row per candidate gives the mean "
                         "error, the mean gap to SVC with its paired standard error, the splits within 1 point, "
                         "and the mean patterns (a test set of 114 rows resolves about one point: one split "
                         "cannot tell a 1-point gap from chance)")
    ap.add_argument("--candidates", choices=("defaults", "main", "grid", "one-se", "winner"), default="main",
                    help="defaults: the estimators' defaults only; main: rules x --gamma x --epochs x last/distilled "
                         "average; grid: also the full average, beta and C variants; one-se: the defaults and the "
                         "one-standard-error width of their gamma race; winner: the defaults and the same at their race's "
                         "winner (the default before GAMMA_WIDEN)")
    ap.add_argument("--gamma", nargs="+", default=["auto", "scale"], help="our candidates' gamma values")
    ap.add_argument("--rules", nargs="+", default=["perceptron", "mira", "pa"], help="our candidates' rules")
    ap.add_argument("--epochs", type=int, nargs="+", default=[1, 3], help="our candidates' epochs")
    ap.add_argument("--default-epochs", nargs="+", default=[], metavar="E",
                    help="with --candidates defaults: one row per epochs value (an integer or auto; default: the "
                         "estimator's own)")
    ap.add_argument("--compress", nargs="+", default=["auto"],
                    help="the defaults' compress values, one row each (e.g. 0 auto: before and after the "
                         "compression; default: auto)")
    ap.add_argument("--svc-C", type=float, nargs="+", default=[1.0, 10.0, 100.0])
    ap.add_argument("--svc-gamma", type=float, nargs="+", default=[1.0, 4.0],
                    help="multiples of SVC's gamma='scale' (default 1 and 4)")
    ap.add_argument("--fashion-train", type=int, default=10000)
    ap.add_argument("--fashion-test", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=1, help="timed runs per row (median)")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args(argv)
    with open("/proc/loadavg") as fh:
        print(f"# load at start: {fh.read().split()[:3]}")
    rows = []
    seeded = ("cancer", "digits-split", "fashion10") + HELD_OUT + tuple(n for n in args.datasets if n.startswith("fashion-"))
    jobs = [(name, seed) for name in args.datasets
            for seed in (range(args.split_seed, args.split_seed + max(1, args.splits)) if name in seeded
                         else (args.split_seed,))]
    for name, seed in jobs:
        data = load(name, argparse.Namespace(**{**vars(args), "split_seed": seed}))
        if data is None:
            continue
        Xtr, Xte, ytr, yte = data
        print(f"# {name}{f' split {seed}' if name in seeded else ''}: {Xtr.shape[0]} train / {Xte.shape[0]} "
              f"test, {Xtr.shape[1]} features, {len(np.unique(ytr))} classes", flush=True)
        svc_factory, svc_info = svc_tuned(Xtr, ytr, args)
        cands = beside_defaults(args.rules, Xtr, ytr, one_se_width) if args.candidates == "one-se" else \
            beside_defaults(args.rules, Xtr, ytr, winner_width) if args.candidates == "winner" else \
            candidates(args.candidates, args.gamma, args.epochs, args.rules, tuple(args.compress),
                       tuple(args.default_epochs))
        res: dict[str, list[dict[str, Any]]] = {}
        for _ in range(args.repeat):  # A B A B: SVC's refit, then each candidate, per repeat
            res.setdefault("svc-tuned", []).append(run(svc_factory, Xtr, ytr, Xte, yte))
            for tag, f in cands:
                res.setdefault(tag, []).append(run(f, Xtr, ytr, Xte, yte))
        keys = ("err", "fit_s", "fit_cpu_s", "n_sv")
        svc = {k: statistics.median(r[k] for r in res["svc-tuned"]) for k in keys}
        print(f"  {'row':56s} {'err %':>7s} {'gap':>6s} {'fit s':>7s} {'CPU s':>7s} {'/SVC':>5s} {'SVs':>6s} "
              f"{'ep':>3s}   SVC {svc_info}")
        for tag, rr in res.items():
            med = {k: statistics.median(r[k] for r in rr) for k in keys}
            gap = med["err"] - svc["err"]
            ratio = med["fit_cpu_s"] / max(svc["fit_cpu_s"], 1e-9)  # CPU: SVC and our BLAS use one thread
            ep = rr[0]["epochs_run"]
            ok = "" if tag == "svc-tuned" else ("  ok" if gap <= 1.0 + 1e-9 and med["n_sv"] <= svc["n_sv"] else "  MISS")
            print(f"  {tag:56s} {med['err']:7.2f} {gap:+6.2f} {med['fit_s']:7.2f} {med['fit_cpu_s']:7.2f} "
                  f"{ratio:5.2f} {med['n_sv']:6.0f} {'' if ep is None else ep:>3}{ok}", flush=True)
            rows.append({"dataset": name, "split_seed": seed, "row": tag, **med, "gap": gap, "cpu_over_svc": ratio,
                         "epochs_run": ep,
                         "n_updates": rr[0]["n_updates"], "online_errors": rr[0]["online_errors"],
                         **({"svc": svc_info} if tag == "svc-tuned" else {})})
    if args.splits > 1:
        summarize(rows, args.datasets)
    with open("/proc/loadavg") as fh:
        print(f"# load at end: {fh.read().split()[:3]}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
