"""Fixed budgets on LETTER: removal by margin, oldest, random against merging (BSGD), SVC alongside.

    .venv/bin/python benchmarks/bench_budget_merge.py --letter letter.svm [--budgets 100,500] [--json out.json]
    .venv/bin/python benchmarks/bench_budget_merge.py --removals merge --seeds 5 --no-svc   # mean +- std
    .venv/bin/python benchmarks/bench_budget_merge.py --removals merge --seeds 5 --no-svc --averages   # the averages
    .venv/bin/python benchmarks/bench_budget_merge.py --removals merge --no-svc --time-average 5   # their fit time

LETTER (20,000 x 16, 26 classes), the standard split (first 16,000 rows train, last 4,000 test),
features min-max scaled to [0, 1] on the training rows.  ONE pass (``epochs=1``, shuffled with
``random_state=0``; ``--seeds N``: the permutations 0 .. N-1, mean and std; ``--epochs``) of KernelMIRA,
KernelPerceptron and KernelPA (native multiclass, RBF; ``--param name=value`` sets a learner
parameter, e.g. ``beta=1`` or ``C=0.5``) with ``budget=B`` and each ``removal``; test error and fit
time of the last hypothesis (``--param conversion=auto``: the estimators' default, which for merging
is the average distilled into the budget).  ``sklearn.svm.SVC(C=10)`` in the same run.  gamma: ``--gamma`` or, by default, chosen per
budget on the training rows only: a grid, KernelMIRA(budget=B, removal="merge") fit on the first
12,000 training rows and scored on the other 4,000 (a small budget wants a wider kernel: on
LETTER the grid picks 4 at B = 100 and 8 at B = 500).  ``--averages``: each fit also scores, from the
same run, its averaged hypotheses -- ``full`` (the average of the online hypotheses over every
pattern ever cached), ``projected`` (that average projected onto the final cache's B patterns:
``conversion="average"`` with ``distill=True``), ``carried`` (the average accumulated in the cache's
own slots, merged by the merges' projections: ``BudgetState.budget_average``) -- beside ``last``.
``--time-average N``: fit time of ``conversion="last"`` against ``"average"`` (projected), N
alternating pairs per row, medians.  Targets (issue 29, BSGD's Table 3): B = 500 below 10.3 % error, B = 100 below 25 %.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from distlearn.conversions.kernel import distil_expansion
from distlearn.data.public import letter_file
from distlearn.estimators.kernel import KernelMIRA, KernelPA, KernelPerceptron

LEARNERS = {"KernelMIRA": KernelMIRA, "KernelPerceptron": KernelPerceptron, "KernelPA": KernelPA}
REMOVALS = ("margin", "oldest", "random", "merge")
GRID = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)


def load_letter(path: Path) -> tuple[np.ndarray, ...]:
    from sklearn.datasets import load_svmlight_file

    X, y = load_svmlight_file(str(path), n_features=16)
    X = np.asarray(X.todense())
    lo, hi = X[:16000].min(0), X[:16000].max(0)
    X = np.clip((X - lo) / np.where(hi > lo, hi - lo, 1.0), 0.0, 1.0)
    return X[:16000], y[:16000], X[16000:], y[16000:]


def fit_score(cls, params, Xtr, ytr, Xte, yte) -> tuple[float, float, int]:
    est = cls(**params)
    t = time.perf_counter()
    est.fit(Xtr, ytr)
    fit = time.perf_counter() - t
    return float(np.mean(est.predict(Xte) != yte)), fit, int(est.support_vectors_.shape[0])


def averages(est, Xte, yte) -> dict[str, tuple[float, int]]:
    """Test error and pattern count of a fitted ``conversion="average", distill=False`` estimator's
    hypotheses: the last, the full average, it projected onto the final cache, the carried average."""
    from distlearn.learners.kernel import kernel_decision

    st, kern = est._state, est._kernel_obj

    def err(S, A):
        return float(np.mean(est.classes_[np.argmax(kernel_decision(kern, S, A, Xte), axis=1)] != yte)), len(S)

    S, A, _ = st.support()
    Sf, Af = est.support_vectors_, est.dual_coef_.T
    Sc, Ac, _ = st.budget_average()
    return {"last": err(S, A), "full": err(Sf, Af), "projected": err(S, distil_expansion(kern, Sf, Af, S)),
            "carried": err(Sc, Ac)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--letter", type=Path, default=None, help="LETTER as one svmlight file (default $DISTLEARN_LETTER)")
    p.add_argument("--budgets", default="100,500", help="comma-separated fixed budgets")
    p.add_argument("--learners", default=",".join(LEARNERS), help="comma-separated subset of " + ",".join(LEARNERS))
    p.add_argument("--removals", default=",".join(REMOVALS), help="comma-separated subset of " + ",".join(REMOVALS))
    p.add_argument("--gamma", type=float, default=None, help="RBF width (default: the grid on the training rows)")
    p.add_argument("--seeds", type=int, default=1, help="permutations 0..N-1 per row (mean and std; default 1)")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="a learner parameter for every row (float values), e.g. beta=1 or C=0.5; repeatable")
    p.add_argument("--epochs", type=int, default=1, help="passes over the training rows (default 1: the targets' one pass)")
    p.add_argument("--averages", action="store_true",
                   help="per fit, also score the averaged hypotheses (full, projected, carried) beside the last")
    p.add_argument("--time-average", type=int, default=0, metavar="N",
                   help="time conversion='last' against 'average' (projected): N alternating pairs per row")
    p.add_argument("--no-svc", action="store_true", help="skip sklearn's SVC")
    p.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    args = p.parse_args(argv)
    path = letter_file(args.letter)
    if path is None or not path.exists():
        print("bench_budget_merge: no LETTER file (pass --letter FILE or set $DISTLEARN_LETTER)", file=sys.stderr)
        return 2
    Xtr, ytr, Xte, yte = load_letter(path)
    rows: list[dict] = []
    extra = {}
    for kv in args.param:
        k, _, v = kv.partition("=")
        extra[k] = v if k in ("variant", "conversion") else float(v)

    def choose_gamma(B: int) -> float:
        if args.gamma is not None:
            return args.gamma
        errs = {}
        for g in GRID:
            e, _, _ = fit_score(KernelMIRA, dict(gamma=g, budget=B, removal="merge", random_state=0, epochs=args.epochs),
                                Xtr[:12000], ytr[:12000], Xtr[12000:], ytr[12000:])
            errs[g] = e
            print(f"# B={B} gamma grid (train 12k / validation 4k of the training rows): gamma={g:g} "
                  f"validation error {100 * e:.2f} %", flush=True)
        return min(errs, key=errs.get)

    extra["epochs"] = args.epochs
    if not args.averages:  # the removal table compares the last hypotheses (--param conversion=auto: the default)
        extra.setdefault("conversion", "last")
    print(f"# learner parameters {extra}, {args.seeds} permutation(s); load {Path('/proc/loadavg').read_text().split()[:3]}")
    if args.averages or args.time_average:
        for B in (int(b) for b in args.budgets.split(",")):
            gamma = choose_gamma(B)
            for name in args.learners.split(","):
                params = dict(gamma=gamma, budget=B, removal="merge", **extra)
                if args.time_average:
                    times: dict[str, list[float]] = {"last": [], "average": []}
                    for seed in range(args.time_average):
                        for conv in ("last", "average") if seed % 2 == 0 else ("average", "last"):
                            times[conv].append(fit_score(LEARNERS[name], dict(params, conversion=conv, random_state=seed),
                                                         Xtr, ytr, Xte, yte)[1])
                    tl, ta = float(np.median(times["last"])), float(np.median(times["average"]))
                    rows.append(dict(learner=name, budget=B, gamma=gamma, fit_last_s=tl, fit_average_s=ta))
                    print(f"| {name} | {B} | fit last {tl:.3f} s | average {ta:.3f} s | ratio {ta / tl:.2f} |", flush=True)
                    continue
                res: dict[str, list] = {}
                for seed in range(args.seeds):
                    est = LEARNERS[name](conversion="average", distill=False, random_state=seed, **params).fit(Xtr, ytr)
                    for k, v in averages(est, Xte, yte).items():
                        res.setdefault(k, []).append(v)
                for k, v in res.items():
                    errs = np.array([e for e, _ in v])
                    rows.append(dict(learner=name, budget=B, hypothesis=k, error=float(errs.mean()),
                                     error_std=float(errs.std()), errors=errs.tolist(), support=int(np.mean([n for _, n in v])),
                                     gamma=gamma, params=extra))
                    print(f"| {name} | {B} | {k} | {gamma:g} | {100 * errs.mean():.2f} | {100 * errs.std():.2f} | "
                          f"{np.mean([n for _, n in v]):.0f} |", flush=True)
        if args.json is not None:
            args.json.write_text(json.dumps(rows, indent=1))
        return 0
    print("| learner | B | removal | gamma | test error % | std | fit s | support |")
    print("|---|---|---|---|---|---|---|---|")
    gamma = args.gamma
    for B in (int(b) for b in args.budgets.split(",")):
        gamma = choose_gamma(B)
        for name in args.learners.split(","):
            for removal in args.removals.split(","):
                res = [fit_score(LEARNERS[name], dict(gamma=gamma, budget=B, removal=removal, random_state=seed,
                                                      **extra), Xtr, ytr, Xte, yte) for seed in range(args.seeds)]
                errs = np.array([r[0] for r in res])
                e, sd, fit, ns = float(errs.mean()), float(errs.std()), float(np.median([r[1] for r in res])), res[0][2]
                rows.append(dict(learner=name, budget=B, removal=removal, error=e, error_std=sd, errors=errs.tolist(),
                                 fit_s=fit, support=ns, gamma=gamma, params=extra))
                print(f"| {name} | {B} | {removal} | {gamma:g} | {100 * e:.2f} | {100 * sd:.2f} | {fit:.2f} | {ns} |",
                      flush=True)
    if not args.no_svc:
        from sklearn.svm import SVC

        t = time.perf_counter()
        svc = SVC(C=10.0, gamma=gamma).fit(Xtr, ytr)
        fit = time.perf_counter() - t
        e = float(np.mean(svc.predict(Xte) != yte))
        rows.append(dict(learner="SVC(C=10)", budget=None, removal=None, error=e, fit_s=fit,
                         support=int(svc.support_vectors_.shape[0]), gamma=gamma))
        print(f"| SVC(C=10) | - | - | {100 * e:.2f} | {fit:.2f} | {svc.support_vectors_.shape[0]} |", flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
