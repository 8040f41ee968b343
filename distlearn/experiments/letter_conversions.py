"""Dekel & Singer (2005), Table 1 on LETTER: a Gaussian-kernel multiclass PA and its conversions.

    distlearn experiment letter-conversions --out DIR --letter FILE [--quick] [--workers 2]
    python examples/letter_conversions.py                      # k = 5 and 10, the kernel PA
    python examples/letter_conversions.py --quick              # k = 5, last/average/suffix/tree
    python examples/letter_conversions.py --k 5 --learners kpa,pa-native,perceptron \\
        --conversions last,average,suffix,tree --json out.json

The paper's protocol (sec. 4): split the 20,000 LETTER examples (a seeded
permutation) into k parts; for each part, train ONE online pass on that part
(20000/k examples) and test on the other k-1 parts.  The table gives the
percent test error averaged over the folds +- its standard deviation
(sample std, ddof=1; 0 for a single fold), one row per (k, scaling,
learner), one column per online-to-batch conversion, and the paper's row
(Gaussian-kernel multiclass PA; its average-sfx and voting-sfx columns are
our suffix and vote-suffix).

Data (``--data FILE`` or ``$DISTLEARN_LETTER``): the 20,000 examples of the
UCI Letter Recognition data set
(https://archive.ics.uci.edu/dataset/59/letter+recognition) as one
svmlight/LIBSVM file, labels 1..26 (A..Z), 16 features.  From UCI's
letter-recognition.data (integer attributes 0..15, zeros omitted):

    awk -F, '{printf "%d", index("ABCDEFGHIJKLMNOPQRSTUVWXYZ", $1); for (i = 2; i <= 17; i++) if ($i != 0) printf " %d:%s", i - 1, $i; print ""}' letter-recognition.data > letter.svm

The LIBSVM data sets page (multiclass, "letter") has the same examples
scaled to [-1, 1], letter.scale (15,000) and letter.scale.t (5,000);
``cat letter.scale letter.scale.t > letter.svm`` also works, but its
features are not the integers 0..15 that the ``--scale`` notes below
assume, and its row order (hence the folds) may differ from UCI's.

Every conversion of a (fold, learner) cell is a separate ``fit`` with the
same seed, so all conversions see the same sequence of online hypotheses
h_0 .. h_m (the learner is deterministic given the seed and the data order).

Learners (``--learners``; default ``kpa``):

  kpa         KernelPA(variant="PA", multiclass="native", kernel="rbf",
              gamma="scale"): the paper's learner, the single-prototype
              multiclass PA with a Gaussian kernel ("default kernel
              parameters": scikit-learn's default width, 1 / (16 var(X)) of the
              training part); no budget.  C = 3 in the paper is the
              conversions' constant, which is distlearn's default.
  pa-native   PassiveAggressive(variant="PA-I", C=1, multiclass="native"):
              the same learner without the kernel (a linear stand-in).
  pa-ovr      the same PA-I, one-vs-rest.
  perceptron  Perceptron, one-vs-rest.

With the kernel PA the paper's numbers are reached (5-fold, fold means):
see the README's table.  The linear learners are 15+ points worse on every
conversion (LETTER is far from linearly separable), and the notes on
``--scale`` below are about them.

Conversions (``--conversions``): any name in ``distlearn.conversions.NAMES``
(``last``, ``average``, ``suffix``, ``tree``, ...; suffix and tree use the
paper's C = 3 and the 0-1 loss), plus ``vote-suffix`` =
``distlearn.conversions.Vote(suffix=True)`` when that class exists.  The
default is last, average, suffix, tree, and interval, vote and vote-suffix
when the installed distlearn has them (checked at run time).  The vote
conversions dominate the run time: their prediction evaluates every online
hypothesis on every test row (about 20 s per 5-fold fold).

Features (``--scale``, comma-separated; default ``max,standard``, one set of
rows each): the 16 LETTER attributes are integers 0..15.  ``max`` divides
each feature by its maximum absolute value on the TRAINING part (so features
lie in about [0, 1]); ``standard`` centres and scales each feature by the
mean and std of the training part only; ``none`` leaves them as they are.
The learners add a constant bias feature equal to 1.  The scaling matters
for the data-driven conversions: with ``max`` the linear learners learn
slowly (early online hypotheses are bad) and suffix/tree beat the plain
average, as in the paper; with ``standard`` they learn faster, the error of
every conversion is lower, and the plain average beats suffix and tree.

For every row the script checks the paper's orderings on the fold means:
last >= average >= suffix and tree <= average (also vote-suffix <= vote
when both ran), and prints how many single folds satisfy each.
"""

from __future__ import annotations

import argparse
import inspect
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

from .. import conversions as dconv
from .. import estimators as distlearn
from .._version import __version__
from ..data.public import LETTER_ENV, letter_file, no_letter_message
from ..rng import block_generator
from ._cells import figure, loaded, ours_vs_paper, render_text, save_figure

#: LETTER: the 20,000 UCI Letter Recognition examples in one svmlight file (see "Data" above).
LETTER_HELP = ("the 20,000 UCI Letter Recognition examples as one svmlight/LIBSVM file, 1-based indices, "
               "labels 1..26 (UCI's letter-recognition.data converted as shown below, or LIBSVM's letter.scale "
               f"and letter.scale.t concatenated; default: ${LETTER_ENV}, else the copy "
               "`distlearn data fetch letter` writes)")
BASE_CONVERSIONS = ["last", "average", "suffix", "tree"]
OPTIONAL_CONVERSIONS = ["interval", "vote", "vote-suffix"]
LEARNERS = ("kpa", "pa-native", "pa-ovr", "perceptron")
SCALINGS = ("max", "standard", "none")

# Dekel & Singer 2005, Table 1, LETTER (Gaussian-kernel multiclass PA): mean, std.
PAPER_TABLE1 = {
    5: {"last": (29.9, 1.8), "average": (21.2, 0.5), "suffix": (20.5, 0.6), "vote": (23.4, 0.8),
        "vote-suffix": (21.5, 0.8)},
    10: {"last": (37.3, 2.1), "average": (26.9, 0.7), "suffix": (26.5, 0.6), "vote": (30.2, 1.0),
         "vote-suffix": (27.9, 0.6)},
}


# -- conversions ---------------------------------------------------------------------
def conversion_spec(name: str):
    """What to pass as ``conversion=`` for ``name``, or None if this distlearn lacks it."""
    if name in dconv.NAMES:
        return name
    if name == "vote-suffix":
        vote = getattr(dconv, "Vote", None)
        if vote is None:
            return None
        try:
            if "suffix" not in inspect.signature(vote).parameters:
                return None
            return vote(suffix=True)
        except (TypeError, ValueError):
            return None
    return None


def available_conversions() -> list[str]:
    return BASE_CONVERSIONS + [c for c in OPTIONAL_CONVERSIONS if conversion_spec(c) is not None]


# -- learners ------------------------------------------------------------------------
def make_learner(name: str, seed: int, epochs: int, conversion):
    if name == "kpa":
        return distlearn.KernelPA(variant="PA", multiclass="native", kernel="rbf", gamma="scale", epochs=epochs,
                                  random_state=seed, conversion=conversion)
    if name == "pa-native":
        return distlearn.PassiveAggressive(variant="PA-I", C=1.0, multiclass="native", epochs=epochs,
                                           random_state=seed, conversion=conversion)
    if name == "pa-ovr":
        return distlearn.PassiveAggressive(variant="PA-I", C=1.0, multiclass="ovr", epochs=epochs,
                                           random_state=seed, conversion=conversion)
    if name == "perceptron":
        return distlearn.Perceptron(epochs=epochs, random_state=seed, conversion=conversion)
    raise ValueError(f"unknown learner {name!r}; choose from {', '.join(LEARNERS)}")


# -- data ----------------------------------------------------------------------------
def load_letter(path: Path) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_svmlight_file

    X, y = load_svmlight_file(str(path), n_features=16, zero_based=False, dtype=np.float64)
    return np.asarray(X.todense()), y.astype(np.int64)


def scale(Xtr: np.ndarray, Xte: np.ndarray, how: str) -> tuple[np.ndarray, np.ndarray]:
    """Scale both parts with statistics of the training part only."""
    if how == "none":
        return Xtr, Xte
    if how == "max":
        m = np.abs(Xtr).max(axis=0)
        m[m == 0] = 1.0
        return Xtr / m, Xte / m
    if how == "standard":
        mu, sd = Xtr.mean(axis=0), Xtr.std(axis=0)
        sd[sd == 0] = 1.0
        return (Xtr - mu) / sd, (Xte - mu) / sd
    raise ValueError(f"unknown scaling {how!r}")


def folds(n: int, k: int, seed: int) -> list[np.ndarray]:
    perm = block_generator(seed, "letter-folds", k).permutation(n)
    return np.array_split(perm, k)


# -- the experiment ------------------------------------------------------------------
def run(X, y, ks, scalings, learners, conversions, *, seed, epochs, max_folds, log=print):
    """results[k][scaling][learner] = per-fold errors (percent) of every conversion, and more."""
    results: dict = {}
    for k in ks:
        parts = folds(len(y), k, seed)  # the same split for every scaling and learner
        n_eval = k if max_folds is None else min(k, max_folds)
        results[k] = {}
        for how in scalings:
            results[k][how] = {}
            for lname in learners:
                t0 = time.perf_counter()
                errs = {c: [] for c in conversions}
                online = []
                for f in range(n_eval):
                    cell = fold(X, y, parts, f, seed, epochs, conversions, how, lname)
                    for c in conversions:
                        errs[c].append(cell["errors"][c])
                    online.append(cell["online_error"])
                secs = time.perf_counter() - t0
                results[k][how][lname] = {"errors": errs, "online_error": online, "seconds": secs,
                                          "train_size": [int(len(parts[f])) for f in range(n_eval)],
                                          "test_size": [int(len(y) - len(parts[f])) for f in range(n_eval)]}
                log(f"  {k}-fold {how:<8} {lname:<10}: {n_eval} folds x {len(conversions)} conversions "
                    f"in {secs:.1f} s")
    return results


def fold(X, y, parts, f, seed, epochs, conversions, how, learner) -> dict:
    """Train on part ``f`` (seed ``seed + f``), test on the others: every conversion's percent error,
    the learner's own online error during its pass, the sizes and the seconds."""
    t0 = time.perf_counter()
    tr = parts[f]
    te = np.concatenate([parts[j] for j in range(len(parts)) if j != f])
    Xtr, Xte = scale(X[tr], X[te], how)
    errs, online = {}, None
    for c in conversions:
        clf = make_learner(learner, seed + f, epochs, conversion_spec(c)).fit(Xtr, y[tr])
        errs[c] = 100.0 * float(np.mean(clf.predict(Xte) != y[te]))
        if online is None:
            online = 100.0 * clf.online_errors_ / clf.t_
    return {"errors": errs, "online_error": online, "train_size": int(len(tr)), "test_size": int(len(te)),
            "seconds": time.perf_counter() - t0}


def mean_std(v: list[float]) -> tuple[float, float]:
    a = np.asarray(v, dtype=np.float64)
    return float(a.mean()), float(a.std(ddof=1)) if len(a) > 1 else 0.0


ORDERINGS = [  # (label, lhs, relation, rhs): lhs relation rhs is what the paper reports
    ("last >= average", "last", ">=", "average"),
    ("average >= suffix", "average", ">=", "suffix"),
    ("tree <= average", "tree", "<=", "average"),
    ("vote-suffix <= vote", "vote-suffix", "<=", "vote"),
]


def check_orderings(errs: dict[str, list[float]]) -> list[dict]:
    out = []
    for label, a, rel, b in ORDERINGS:
        if a not in errs or b not in errs:
            continue
        ea, eb = np.asarray(errs[a]), np.asarray(errs[b])
        ok_f = ea >= eb if rel == ">=" else ea <= eb
        ma, mb = float(ea.mean()), float(eb.mean())
        out.append({"ordering": label, "holds": bool(ma >= mb if rel == ">=" else ma <= mb),
                    "lhs_mean": ma, "rhs_mean": mb, "diff": ma - mb,
                    "folds_holding": int(ok_f.sum()), "folds": int(len(ea))})
    return out


def _rows(results):
    for k, by_scale in results.items():
        for how, by_learner in by_scale.items():
            for lname, r in by_learner.items():
                yield k, how, lname, r


def table(results, conversions) -> str:
    w = 14
    head = f"{'data set':<16}{'scale':<10}{'learner':<12}" + "".join(f"{c:>{w}}" for c in conversions) \
        + f"{'online':>{w}}"
    lines = [head, "-" * len(head)]
    for k in results:
        for _, how, lname, r in _rows({k: results[k]}):
            cells = "".join("{:>{w}}".format("%.1f ± %.1f" % mean_std(r["errors"][c]), w=w) for c in conversions)
            cells += "{:>{w}}".format("%.1f ± %.1f" % mean_std(r["online_error"]), w=w)
            lines.append(f"{'LETTER %d-fold' % k:<16}{how:<10}{lname:<12}{cells}")
        if k in PAPER_TABLE1:
            ref = PAPER_TABLE1[k]
            cells = "".join("{:>{w}}".format("%.1f ± %.1f" % ref[c] if c in ref else "-", w=w) for c in conversions)
            lines.append(f"{'LETTER %d-fold' % k:<16}{'-':<10}{'paper (RBF)':<12}{cells}{'-':>{w}}")
    return "\n".join(lines)


# -- the named experiment (distlearn.experiments.named) ------------------------------------
TITLE = "Dekel & Singer (2005), Table 1 on LETTER: conversions of the Gaussian-kernel multiclass PA"
VERSION = 1


def _letter(path: str) -> tuple[np.ndarray, np.ndarray]:
    return loaded(("letter", path), lambda: load_letter(Path(path)))


def fold_cell(path: str, k: int, f: int, seed: int, epochs: int, conversions: list[str], how: str,
              learner: str) -> dict:
    """Fold ``f`` of the ``k``-part split: train on part f, test on the others, every conversion."""
    X, y = _letter(path)
    return fold(X, y, folds(len(y), k, seed), f, seed, epochs, conversions, how, learner)


def plan(part: str, *, quick: bool, repeats: int | None, data: dict,
         params: dict | None = None) -> tuple[dict, list]:
    """One cell per (k, fold); ``params``: ``seed`` of the fold split (fold f's learner: seed + f)."""
    seed = int((params or {}).get("seed") or 0)
    path = letter_file(data.get("letter"))
    if path is None:
        raise FileNotFoundError(no_letter_message("--letter"))
    if not path.is_file():
        raise FileNotFoundError(f"--letter: {path} does not exist")
    path = path.resolve()
    ks = [5] if quick else [5, 10]
    if repeats is not None and repeats > max(ks):
        raise ValueError(f"letter-conversions runs at most {max(ks)} folds per split (k = {', '.join(map(str, ks))}"
                         f"{' with --quick' if quick else ''}): --repeats {repeats} is more")
    n_folds = {k: min(k, repeats or (2 if quick else k)) for k in ks}
    convs = BASE_CONVERSIONS if quick else available_conversions()
    key = {"letter": str(path), "k": ks, "folds": {str(k): n for k, n in n_folds.items()}, "conversions": convs,
           "scale": "max", "learner": "kpa", "epochs": 1, "seed": seed}
    todo = [(f"k{k}.fold{f}", fold_cell, (str(path), k, f, seed, 1, convs, "max", "kpa"))
            for k in ks for f in range(n_folds[k])]
    return key, todo


def report(part: str, key: dict, cells: dict) -> dict:
    results: dict = {}
    checks: dict = {}
    for k in key["k"]:
        fs = [cells[f"k{k}.fold{f}"] for f in range(key["folds"][str(k)])]
        r = {"errors": {c: [x["errors"][c] for x in fs] for c in key["conversions"]},
             "online_error": [x["online_error"] for x in fs], "seconds": sum(x["seconds"] for x in fs),
             "train_size": [x["train_size"] for x in fs], "test_size": [x["test_size"] for x in fs]}
        results[str(k)] = {key["scale"]: {key["learner"]: r}}
        checks[f"{k}/{key['scale']}/{key['learner']}"] = check_orderings(r["errors"])
    return {"results": results, "orderings": checks,
            "paper_table1_letter": {str(k): {c: {"mean": v[0], "std": v[1]} for c, v in ref.items()}
                                    for k, ref in PAPER_TABLE1.items()}}


def _report_text(doc: dict) -> None:
    convs = doc["config"]["conversions"]
    results = {int(k): v for k, v in doc["results"].items()}
    print("percent test error, mean ± std over folds (online: the learner's own mistakes during its pass)")
    print(table(results, convs))
    print("\nthe paper's orderings on the fold means (difference lhs - rhs; folds where it holds)")
    for name, cs in doc["orderings"].items():
        print(f"  LETTER {name}: " + "; ".join(f"{c['ordering']}: {'yes' if c['holds'] else 'NO'} "
                                               f"({c['diff']:+.2f}, {c['folds_holding']}/{c['folds']})" for c in cs))


def render(part: str, doc: dict) -> str:
    return render_text(_report_text, doc)


def plot(part: str, doc: dict, path: Path) -> None:
    convs = doc["config"]["conversions"]
    ks = list(doc["results"])
    f, axes = figure(1, len(ks), size=(6.4 * len(ks), 4.4))
    for ax, k in zip(axes[0], ks):
        r = doc["results"][k][doc["config"]["scale"]][doc["config"]["learner"]]
        ms = [mean_std(r["errors"][c]) for c in convs]
        ref = PAPER_TABLE1.get(int(k), {})
        ours_vs_paper(ax, convs, [m for m, _ in ms], [sd for _, sd in ms],
                      [ref[c][0] if c in ref else 0 for c in convs], [ref[c][1] if c in ref else 0 for c in convs],
                      title=f"LETTER, {k}-fold (train on 1/{k})", xlabel="conversion", rotation=30)
    save_figure(f, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="Dekel & Singer 2005 Table 1 on LETTER with the Gaussian-kernel multiclass PA: train one online pass "
                    "on one of k parts, test on the other k-1, for every part; percent test error per "
                    "online-to-batch conversion (mean ± std over folds).",
        epilog=__doc__.split("\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=None, help=LETTER_HELP)
    ap.add_argument("--k", default="5,10",
                    help="comma-separated numbers of parts; each fold trains on 1/k of the data (default: %(default)s)")
    ap.add_argument("--learners", default="kpa",
                    help=f"comma-separated, from {', '.join(LEARNERS)} (default: kpa, the paper's learner)")
    ap.add_argument("--conversions", default=None,
                    help="comma-separated conversion names (default: last,average,suffix,tree plus interval, "
                         "vote, vote-suffix when this distlearn has them; available now: "
                         f"{','.join(available_conversions())})")
    ap.add_argument("--epochs", type=int, default=1, help="passes over the training part (default: 1, the "
                    "online-to-batch setting)")
    ap.add_argument("--scale", default="max",
                    help="comma-separated feature scalings from training-part statistics, from max, standard, "
                         "none; one set of rows each (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=0,
                    help="seed of the fold split; fold f's learners use seed + f (default: %(default)s)")
    ap.add_argument("--max-folds", type=int, default=None,
                    help="evaluate only the first N folds of each k (default: all k)")
    ap.add_argument("--quick", action="store_true",
                    help="reduced run for the test (about a minute): k=5, learner kpa, conversions "
                         "last,average,suffix,tree (an explicit --k, --learners or --conversions overrides; "
                         "--max-folds N evaluates fewer folds)")
    ap.add_argument("--json", type=Path, default=None, help="write raw per-fold numbers and the checks here")
    args = ap.parse_args(argv)

    if args.quick:
        given = set(a.split("=")[0] for a in (argv if argv is not None else sys.argv[1:]))
        if "--k" not in given:
            args.k = "5"
        if "--learners" not in given:
            args.learners = "kpa"
        if args.conversions is None:
            args.conversions = ",".join(BASE_CONVERSIONS)
    ks = [int(s) for s in args.k.split(",") if s]
    if any(k < 2 for k in ks):
        ap.error("--k: every k must be >= 2")
    scalings = [s for s in args.scale.split(",") if s]
    for how in scalings:
        if how not in SCALINGS:
            ap.error(f"--scale: unknown scaling {how!r}; choose from {', '.join(SCALINGS)}")
    learners = [s for s in args.learners.split(",") if s]
    for lname in learners:
        if lname not in LEARNERS:
            ap.error(f"--learners: unknown learner {lname!r}; choose from {', '.join(LEARNERS)}")
    conversions = available_conversions() if args.conversions is None else [s for s in args.conversions.split(",") if s]
    for c in conversions:
        if conversion_spec(c) is None:
            ap.error(f"--conversions: {c!r} is not available in this distlearn "
                     f"(available: {', '.join(available_conversions())})")
    if args.max_folds is not None and args.max_folds < 1:
        ap.error("--max-folds must be >= 1")
    if args.epochs < 1:
        ap.error("--epochs must be >= 1")
    args.data = letter_file(args.data)
    if args.data is None:
        ap.error(no_letter_message("--data"))
    if not args.data.exists():
        ap.error(f"--data: {args.data} does not exist")

    X, y = load_letter(args.data)
    print(f"LETTER: {X.shape[0]} x {X.shape[1]}, {len(np.unique(y))} classes; scale={','.join(scalings)}, "
          f"epochs={args.epochs}, seed={args.seed}; conversions: {', '.join(conversions)}")
    t0 = time.perf_counter()
    results = run(X, y, ks, scalings, learners, conversions, seed=args.seed, epochs=args.epochs,
                  max_folds=args.max_folds)
    total = time.perf_counter() - t0

    print()
    print("percent test error, mean ± std over folds (online: the learner's own mistakes during its pass)")
    print(table(results, conversions))
    print()
    checks = {}
    print("the paper's orderings on the fold means (difference lhs - rhs; folds where it holds)")
    for k, how, lname, r in _rows(results):
        cs = check_orderings(r["errors"])
        checks[f"{k}/{how}/{lname}"] = cs
        txt = "; ".join(f"{c['ordering']}: {'yes' if c['holds'] else 'NO'} ({c['diff']:+.2f}, "
                        f"{c['folds_holding']}/{c['folds']})" for c in cs)
        print(f"  LETTER {k:>2}-fold {how:<8} {lname:<10}  {txt}")
    print(f"\ntotal {total:.1f} s")

    if args.json is not None:
        out = {
            "config": {"data": str(args.data), "k": ks, "scale": scalings, "learners": learners,
                       "conversions": conversions, "epochs": args.epochs, "seed": args.seed,
                       "max_folds": args.max_folds, "quick": args.quick, "std": "sample (ddof=1)",
                       "distlearn": __version__, "python": platform.python_version()},
            # results[k][scale][learner]: per-fold percent errors, fold order as in the split.
            "results": {str(k): {how: {lname: {**r, "summary": {c: dict(zip(("mean", "std"), mean_std(v)))
                                                               for c, v in r["errors"].items()}}
                                       for lname, r in by_learner.items()}
                                 for how, by_learner in results[k].items()} for k in ks},
            "orderings": checks,
            "paper_table1_letter": {str(k): {c: {"mean": v[0], "std": v[1]} for c, v in ref.items()}
                                    for k, ref in PAPER_TABLE1.items()},
            "seconds": total,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
