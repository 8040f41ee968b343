"""Cutoff averaging (Dekel 2008, Figs. 2-3) on Fashion-MNIST binary pairs.

    distlearn experiment cutoff-curves --out DIR [--fashion-dir D] [--quick] [--repeats SPLITS] [--workers 2]
    python examples/cutoff_fashion.py --workers 2 --json /tmp/cutoff_fashion.json --plot /tmp/cutoff_fashion.png
    python examples/cutoff_fashion.py --quick --json out.json          # 2 pairs, 3 splits, 6 sizes
    python examples/cutoff_fashion.py --pairs 0-6 7-9 --splits 5 --sizes 10 100 1000 10000

The paper (Dekel 2008, sec. 4) runs the classic perceptron and the
finite-horizon margin perceptron for ONE online pass over growing prefixes of
RCV1 training sets and compares online-to-batch conversions on a held-out
test set: Fig. 2, the perceptron's test 0-1 error (last hypothesis vs cutoff
averaging; plain averaging "only slightly worse" than cutoff); Fig. 3, the
margin perceptron's test hinge loss (last, average, cutoff).  Its findings:
for the perceptron any averaging beats the unstable last hypothesis and
cutoff ~ average < last; for the margin perceptron the last hypothesis is
best, averaging is clearly worse, and cutoff catches up with the last
hypothesis after ~1000 rounds (cutoff ~ last < average).

Data: the four gzipped Fashion-MNIST IDX files (train + t10k images and
labels) of Zalando's release, https://github.com/zalandoresearch/fashion-mnist,
or Debian's package ``dataset-fashion-mnist`` (installed in
/usr/share/datasets/fashion-mnist, used when ``--data-dir`` and
``$DISTLEARN_FASHION_MNIST`` are not given).

Protocol here.  For each binary pair of Fashion-MNIST classes, the rows of
the two classes in train + t10k (7000 + 7000 = 14000) are pooled.  Split s
(``--splits``) draws a seeded permutation of the pool: the first
``--test-size`` rows are the test set, the rest the training pool.  Training
sets are nested prefixes of the pool (as in the paper's incremental
training), sizes on a log scale from 10 to the whole pool (``--sizes``).  The
pool order is fixed so that its first two rows are of different classes
(the earliest row of the other class is swapped into position 2), so every
prefix has both classes.  Each (size, conversion) is a separate ``fit`` with
``epochs=1, shuffle=True, random_state=<split seed>``: all conversions of one
cell see the same online hypothesis sequence.

  perceptron  distlearn.Perceptron, conversion "last", "average", "cutoff"
              (Cutoff(), the 0-1 loss, C = 1); test 0-1 error.
  margin      distlearn.MarginPerceptron (horizon m = size, R = max row norm
              with the bias, both measured by fit), conversion "last",
              "average", Cutoff(loss="hinge") (C = R + 1); test hinge loss
              mean(max(0, 1 - y f(x))), y = +1 for classes_[1] (the pair's
              larger label), -1 for the other.

Features (``--scale``): ``pixel`` (default) divides the 0..255 pixels by 255
and leaves row lengths alone (||x|| is about 2-23), the closest analogue of
the paper's unnormalised log-count RCV1 vectors.  ``unit`` also scales every
row to unit length; the margin perceptron then has R = sqrt(2) (bias
included), ||w|| <= 1 gives |w.x| <= sqrt(2), so its hinge loss is positive
on nearly every round, it updates on nearly every round, every hypothesis
survives one round and cutoff averaging can only pick k = 0 (= average).
Both learners add a constant bias feature of 1.

Output: a table (mean +- sample std over splits, per pair and size; k is the
mean cutoff chosen by the Theorem 2 bound), the same averaged over the
larger sizes (>= ``--large-min``), and a verdict on the paper's two claims
at those sizes.  "Gap recovered" measures how much of the last-vs-average gap
cutoff closes: for the perceptron (last - cutoff) / (last - average), for
the margin perceptron (average - cutoff) / (average - last); 1 means cutoff
matches the better single conversion, 0 the worse.  ``--json`` writes every
raw number (per split, size and conversion, plus the chosen k, the number
of updates and R); ``--plot`` draws Figs. 2-3 (matplotlib, the ``plot``
extra).  ``--workers N`` runs (pair, split) cells on N workers of a local Dask
cluster (the one executor); results do not depend on N.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from .. import estimators
from .._version import __version__
from ..conversions import Cutoff
from ..data.public import FASHION_HELP, fashion_mnist_dir, no_fashion_message
from ..distributed.executor import executor_for
from ._cells import figure, loaded, render_text, save_figure
from .obpm_drift import load_fashion
CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]
DEFAULT_PAIRS = ["0-6", "2-4", "2-6", "4-6", "7-9"]
QUICK_PAIRS = ["0-6", "2-4"]
CONVERSIONS = ("last", "average", "cutoff")
LEARNERS = ("perceptron", "margin")
METRIC = {"perceptron": "test 0-1 error", "margin": "test hinge loss"}


# -- data --------------------------------------------------------------------------
def scale_rows(X: np.ndarray, scale: str) -> np.ndarray:
    """uint8 pixels -> float64 in [0, 1]; ``unit`` also scales each row to length 1."""
    Z = X.astype(np.float64) / 255.0
    if scale == "unit":
        Z /= np.maximum(np.linalg.norm(Z, axis=1, keepdims=True), 1e-12)
    return Z


def parse_pair(s: str) -> tuple[int, int]:
    try:
        a, b = (int(t) for t in s.replace(":", "-").replace("v", "-").split("-"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"a pair is two class labels like 0-6, got {s!r}") from None
    if not (0 <= a <= 9 and 0 <= b <= 9) or a == b:
        raise argparse.ArgumentTypeError(f"a pair is two different labels in 0..9, got {s!r}")
    return (min(a, b), max(a, b))


def pair_name(p: tuple[int, int]) -> str:
    return f"{p[0]}-{p[1]}"


def pair_title(p: tuple[int, int]) -> str:
    return f"{CLASSES[p[0]]} vs {CLASSES[p[1]]}"


def split_order(y: np.ndarray, seed: int, pair: tuple[int, int], split: int, test_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(test rows, training pool in order) of one split; the pool's first two rows differ in class."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, pair[0], pair[1], split]))
    perm = rng.permutation(len(y))
    test, pool = perm[:test_size], perm[test_size:].copy()
    other = np.flatnonzero(y[pool] != y[pool[0]])
    if len(other) == 0:
        raise ValueError("the training pool holds one class only")
    j = int(other[0])
    pool[1], pool[j] = pool[j], pool[1]
    return test, pool


def fit_seed(seed: int, split: int) -> int:
    return 1000 * seed + split


# -- one (pair, split) cell ----------------------------------------------------------
_POOLS: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
_SCALED: dict[tuple[tuple[int, int], str], np.ndarray] = {}


def _init_worker(pools: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]) -> None:
    _POOLS.clear()
    _POOLS.update(pools)
    _SCALED.clear()


def _features(pair: tuple[int, int], scale: str) -> np.ndarray:
    key = (pair, scale)
    if key not in _SCALED:
        _SCALED.clear()  # keep one pair's float64 rows (88 MB) per process
        _SCALED[key] = scale_rows(_POOLS[pair][0], scale)
    return _SCALED[key]


def _estimator(learner: str, conv: str, random_state: int):
    if learner == "perceptron":
        return estimators.Perceptron(epochs=1, shuffle=True, conversion=conv, random_state=random_state)
    c = Cutoff(loss="hinge") if conv == "cutoff" else conv
    return estimators.MarginPerceptron(epochs=1, shuffle=True, conversion=c, random_state=random_state)


def run_cell(pair: tuple[int, int], split: int, sizes: list[int], seed: int, test_size: int, scale: str) -> dict:
    """Every learner x conversion x size of one split of one pair."""
    t0 = time.perf_counter()
    X = _features(pair, scale)
    y = _POOLS[pair][1]
    test, pool = split_order(y, seed, pair, split, test_size)
    Xte, yte = X[test], y[test]
    rs = fit_seed(seed, split)
    out: dict = {"pair": pair, "split": split, "random_state": rs}
    for learner in LEARNERS:
        for conv in CONVERSIONS:
            out[f"{learner}/{conv}"] = []
        out[f"{learner}/cutoff_k"] = []
        out[f"{learner}/updates"] = []
    out["margin/radius"] = []
    for n in sizes:
        idx = pool[:n]
        Xtr, ytr = X[idx], y[idx]
        for learner in LEARNERS:
            for conv in CONVERSIONS:
                clf = _estimator(learner, conv, rs).fit(Xtr, ytr)
                if learner == "perceptron":
                    val = float(np.mean(clf.predict(Xte) != yte))
                else:
                    ypm = np.where(yte == clf.classes_[1], 1.0, -1.0)
                    val = float(np.mean(np.maximum(0.0, 1.0 - ypm * clf.decision_function(Xte))))
                out[f"{learner}/{conv}"].append(val)
                if conv == "cutoff":
                    out[f"{learner}/cutoff_k"].append(int(clf.summary_.k_))
                if conv == "last":
                    out[f"{learner}/updates"].append(int(clf.n_updates_))
                    if learner == "margin":
                        out["margin/radius"].append(float(clf.radius_))
    out["seconds"] = time.perf_counter() - t0
    return out


# -- summaries -------------------------------------------------------------------------
def mean_std(a: np.ndarray, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(a, dtype=np.float64)
    sd = a.std(axis=axis, ddof=1) if a.shape[axis] > 1 else np.zeros(np.delete(a.shape, axis))
    return a.mean(axis=axis), sd


def gap_recovered(learner: str, last: float, avg: float, cut: float) -> float:
    """Share of the last-vs-average gap that cutoff closes (1: as good as the better one)."""
    if learner == "perceptron":
        num, den = last - cut, last - avg
    else:
        num, den = avg - cut, avg - last
    return float(num / den) if den != 0 else float("nan")


def build_results(cells: list[dict], pairs: list[tuple[int, int]], sizes: list[int], large_min: int) -> dict:
    res: dict = {}
    large = [i for i, n in enumerate(sizes) if n >= large_min]
    for p in pairs:
        cs = sorted((c for c in cells if tuple(c["pair"]) == p), key=lambda c: c["split"])
        r: dict = {"title": pair_title(p), "classes": list(p), "splits": [c["split"] for c in cs],
                   "random_state": [c["random_state"] for c in cs], "raw": {}, "mean": {}, "std": {}}
        for key in cs[0]:
            if "/" in key:
                arr = np.array([c[key] for c in cs], dtype=np.float64)  # (splits, sizes)
                r["raw"][key] = arr.tolist()
                m, s = mean_std(arr)
                r["mean"][key], r["std"][key] = m.tolist(), s.tolist()
        r["large"] = {}
        for learner in LEARNERS:
            vals = {conv: float(np.mean(np.array(r["raw"][f"{learner}/{conv}"])[:, large])) for conv in CONVERSIONS}
            vals["cutoff_k"] = float(np.mean(np.array(r["raw"][f"{learner}/cutoff_k"])[:, large]))
            vals["gap_recovered"] = gap_recovered(learner, vals["last"], vals["average"], vals["cutoff"])
            r["large"][learner] = vals
        res[pair_name(p)] = r
    return res


def overall_large(results: dict) -> dict:
    """Means over pairs, splits and the larger sizes (every pair weighs the same)."""
    out: dict = {}
    for learner in LEARNERS:
        vals = {conv: float(np.mean([r["large"][learner][conv] for r in results.values()]))
                for conv in (*CONVERSIONS, "cutoff_k")}
        vals["gap_recovered"] = gap_recovered(learner, vals["last"], vals["average"], vals["cutoff"])
        out[learner] = vals
    return out


def verdict(ov: dict, tol: float) -> dict:
    """The paper's two claims at the larger sizes, judged from the overall means."""
    p, m = ov["perceptron"], ov["margin"]
    return {
        "perceptron_average_lt_last": p["average"] < p["last"],
        "perceptron_cutoff_lt_last": p["cutoff"] < p["last"],
        "perceptron_cutoff_approx_average": abs(p["cutoff"] - p["average"]) <= tol * abs(p["last"] - p["average"]),
        "margin_last_lt_average": m["last"] < m["average"],
        "margin_cutoff_lt_average": m["cutoff"] < m["average"],
        "margin_cutoff_approx_last": abs(m["cutoff"] - m["last"]) <= tol * abs(m["average"] - m["last"]),
        "approx_means": f"|cutoff - reference| <= {tol} x |last - average|",
    }


# -- output ------------------------------------------------------------------------------
def fmt(m: float, s: float) -> str:
    return f"{m:.4f}±{s:.4f}"


def print_table(results: dict, sizes: list[int], n_splits: int) -> None:
    w = 15
    head = (f"{'size':>6} | " + " ".join(f"{'P ' + c:>{w}}" for c in CONVERSIONS) + f" {'P k':>6} | "
            + " ".join(f"{'M ' + c:>{w}}" for c in CONVERSIONS) + f" {'M k':>6}")
    print(f"\nP = Perceptron, test 0-1 error; M = MarginPerceptron, test hinge loss; mean±std over "
          f"{n_splits} splits; k = mean cutoff chosen")
    for name, r in results.items():
        print(f"\n{name}  {r['title']}")
        print(head)
        print("-" * len(head))
        for i, n in enumerate(sizes):
            cols = []
            for learner in LEARNERS:
                cells = [fmt(r["mean"][f"{learner}/{c}"][i], r["std"][f"{learner}/{c}"][i]) for c in CONVERSIONS]
                cols.append(" ".join(f"{c:>{w}}" for c in cells) + f" {r['mean'][f'{learner}/cutoff_k'][i]:6.2f}")
            print(f"{n:>6} | " + " | ".join(cols))


def print_large(results: dict, ov: dict, large_sizes: list[int]) -> None:
    print(f"\nAt the larger sizes {large_sizes} (mean over splits and these sizes):")
    print(f"{'pair':>6} | {'P last':>7} {'P avg':>7} {'P cut':>7} {'P k':>5} {'gap':>6} | "
          f"{'M last':>7} {'M avg':>7} {'M cut':>7} {'M k':>5} {'gap':>6}")
    rows = [(name, r["large"]) for name, r in results.items()] + [("all", ov)]
    for name, lg in rows:
        cols = []
        for learner in LEARNERS:
            v = lg[learner]
            cols.append(f"{v['last']:7.4f} {v['average']:7.4f} {v['cutoff']:7.4f} {v['cutoff_k']:5.2f} "
                        f"{v['gap_recovered']:6.2f}")
        print(f"{name:>6} | " + " | ".join(cols))
    print("gap = share of the last-vs-average gap closed by cutoff (P: (last-cut)/(last-avg); "
          "M: (avg-cut)/(avg-last))")


def print_verdict(ov: dict, v: dict, tol: float) -> None:
    p, m = ov["perceptron"], ov["margin"]
    yn = lambda b: "yes" if b else "NO"  # noqa: E731
    print("\nVerdict (larger sizes, averaged over pairs and splits; "
          f"'~' means |cutoff - reference| <= {tol} x |last - average|):")
    print(f"  Perceptron (0-1):      last {p['last']:.4f}, average {p['average']:.4f}, cutoff {p['cutoff']:.4f} "
          f"(mean k {p['cutoff_k']:.2f})")
    print(f"    average < last: {yn(v['perceptron_average_lt_last'])}; cutoff < last: "
          f"{yn(v['perceptron_cutoff_lt_last'])}; cutoff ~ average: {yn(v['perceptron_cutoff_approx_average'])} "
          f"(gap recovered {p['gap_recovered']:.2f})")
    ok_p = v["perceptron_average_lt_last"] and v["perceptron_cutoff_lt_last"] and v["perceptron_cutoff_approx_average"]
    print(f"    => paper's Fig. 2 claim (cutoff ~ average < last) {'REPRODUCED' if ok_p else 'NOT reproduced'}")
    print(f"  MarginPerceptron (hinge): last {m['last']:.4f}, average {m['average']:.4f}, cutoff {m['cutoff']:.4f} "
          f"(mean k {m['cutoff_k']:.2f})")
    print(f"    last < average: {yn(v['margin_last_lt_average'])}; cutoff < average: "
          f"{yn(v['margin_cutoff_lt_average'])}; cutoff ~ last: {yn(v['margin_cutoff_approx_last'])} "
          f"(gap recovered {m['gap_recovered']:.2f})")
    ok_m = v["margin_last_lt_average"] and v["margin_cutoff_lt_average"] and v["margin_cutoff_approx_last"]
    print(f"    => paper's Fig. 3 claim (cutoff ~ last < average) {'REPRODUCED' if ok_m else 'NOT reproduced'}")
    if not ok_m and m["cutoff_k"] < 0.5:
        print("       (the Theorem 2 bound chose k = 0 nearly always, i.e. cutoff = plain averaging of h_0..h_{m-1})")


def plot_curves(results: dict, sizes: list[int], path: str, n_splits: int) -> None:
    names = list(results)
    fig, axes = figure(2, len(names), size=(3.4 * len(names), 6.4), sharex=True)
    style = {"last": ("tab:red", "-"), "average": ("tab:blue", "--"), "cutoff": ("tab:green", "-")}
    for j, name in enumerate(names):
        r = results[name]
        for i, learner in enumerate(LEARNERS):
            ax = axes[i, j]
            for conv in CONVERSIONS:
                m = np.array(r["mean"][f"{learner}/{conv}"])
                s = np.array(r["std"][f"{learner}/{conv}"])
                color, ls = style[conv]
                ax.plot(sizes, m, ls, color=color, label=conv, lw=1.5)
                ax.fill_between(sizes, m - s, m + s, color=color, alpha=0.12, lw=0)
            ax.set_xscale("log")
            ax.grid(alpha=0.3, which="both", lw=0.4)
            if i == 0:
                ax.set_title(r["title"], fontsize=9)
            if i == 1:  # the x axis is shared down each column
                ax.set_xlabel("training-set size")
            ax.set_ylabel(("Perceptron\n" if learner == "perceptron" else "Margin perceptron\n") + METRIC[learner],
                          fontsize=9)
    h, lab = axes[0, 0].get_legend_handles_labels()
    fig.legend(h, lab, loc="outside lower center", ncols=len(lab), fontsize=8)
    fig.suptitle(f"Fashion-MNIST pairs, one online pass; mean ± std over {n_splits} splits "
                 "(cf. Dekel 2008, Figs. 2-3)", fontsize=10)
    save_figure(fig, path)


# -- main --------------------------------------------------------------------------------
# -- the named experiment (distlearn.experiments.named) ------------------------------------
TITLE = "Cutoff averaging (Dekel 2008), Figs. 2-3, on Fashion-MNIST pairs"
VERSION = 1


def _fashion(data_dir: str) -> tuple[np.ndarray, np.ndarray]:
    return loaded(("fashion", data_dir), lambda: load_fashion(Path(data_dir)))


def curve_cell(data_dir: str, pair: tuple[int, int], split: int, sizes: list[int], seed: int, test_size: int,
               scale: str) -> dict:
    """:func:`run_cell` on a worker: the pair's rows from the files (read once per process)."""
    pair = (int(pair[0]), int(pair[1]))
    if pair not in _POOLS:
        X, y = _fashion(data_dir)
        rows = np.flatnonzero((y == pair[0]) | (y == pair[1]))
        _POOLS[pair] = (X[rows], y[rows])
    return run_cell(pair, split, sizes, seed, test_size, scale)


def plan(part: str, *, quick: bool, repeats: int | None, data: dict,
         params: dict | None = None) -> tuple[dict, list]:
    """One cell per (pair, split); ``params``: ``seed``, the base seed of the splits and the fits."""
    seed = int((params or {}).get("seed") or 0)
    d = fashion_mnist_dir(data.get("fashion"))
    if d is None or not d.is_dir():
        raise FileNotFoundError(no_fashion_message("--fashion-dir"))
    d = d.resolve()
    pairs = [parse_pair(s) for s in (QUICK_PAIRS if quick else DEFAULT_PAIRS)]
    _, y = _fashion(str(d))
    min_rows = min(int(np.sum((y == a) | (y == b))) for a, b in pairs)
    test_size = min(1000 if quick else 4000, max(1, min_rows // 4))
    n_pool = min_rows - test_size
    if n_pool < 10:
        raise ValueError(f"{d}: too few rows per pair ({min_rows}) for the protocol")
    sizes = np.unique(np.rint(np.geomspace(10, n_pool, 6 if quick else 12)).astype(int)).tolist()
    splits = repeats or (3 if quick else 10)
    key = {"fashion": str(d), "pairs": [pair_name(p) for p in pairs], "splits": splits, "sizes": sizes,
           "test_size": test_size, "n_pool": n_pool, "scale": "pixel", "seed": seed, "large_min": 1000, "tol": 0.5}
    todo = [(f"{pair_name(p)}.split{s}", curve_cell, (str(d), p, s, sizes, seed, test_size, "pixel"))
            for p in pairs for s in range(splits)]
    return key, todo


def report(part: str, key: dict, cells: dict) -> dict:
    pairs = [parse_pair(s) for s in key["pairs"]]
    sizes = key["sizes"]
    large_sizes = [n for n in sizes if n >= key["large_min"]] or sizes[-1:]
    results = build_results(list(cells.values()), pairs, sizes, large_sizes[0])
    ov = overall_large(results)
    return {"paper": "Dekel 2008, From online to batch learning with cutoff-averaging, NIPS 2008, Figs. 2-3",
            "config": {"large_sizes": large_sizes, "metrics": METRIC}, "results": results, "overall_large": ov,
            "verdict": verdict(ov, key["tol"])}


def render(part: str, doc: dict) -> str:
    c = doc["config"]
    return "\n".join([render_text(print_table, doc["results"], c["sizes"], c["splits"]),
                      render_text(print_large, doc["results"], doc["overall_large"], c["large_sizes"]),
                      render_text(print_verdict, doc["overall_large"], doc["verdict"], c["tol"])])


def plot(part: str, doc: dict, path: Path) -> None:
    plot_curves(doc["results"], doc["config"]["sizes"], str(path), doc["config"]["splits"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip().splitlines()[0],
                                 epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, default=None, help=FASHION_HELP)
    ap.add_argument("--pairs", nargs="+", type=parse_pair, default=None, metavar="A-B",
                    help="class pairs as A-B labels, " + ", ".join(f"{i} {c}" for i, c in enumerate(CLASSES))
                    + f" (default: {' '.join(DEFAULT_PAIRS)}; --quick: {' '.join(QUICK_PAIRS)})")
    ap.add_argument("--splits", type=int, default=None, help="random train/test splits per pair (default 10; --quick 3)")
    ap.add_argument("--test-size", type=int, default=4000, help="test rows per split (default %(default)s)")
    ap.add_argument("--sizes", nargs="+", type=int, default=None,
                    help="training-set sizes (default: --n-sizes points log-spaced from 10 to the whole pool)")
    ap.add_argument("--n-sizes", type=int, default=None, help="number of default sizes (default 12; --quick 6)")
    ap.add_argument("--large-min", type=int, default=1000,
                    help="sizes >= this count as 'larger' for the summary and verdict (default %(default)s)")
    ap.add_argument("--tol", type=float, default=0.5,
                    help="'cutoff ~ reference' when |cutoff - reference| <= TOL x |last - average| "
                    "(default %(default)s: cutoff closes at least half the gap)")
    ap.add_argument("--scale", choices=("pixel", "unit"), default="pixel",
                    help="pixel: x/255 (default); unit: x/255 scaled to unit row length")
    ap.add_argument("--seed", type=int, default=0, help="base seed of the splits and the fits (default %(default)s)")
    ap.add_argument("--workers", type=int, default=1, help="workers of a local Dask cluster for the (pair, split) cells (default %(default)s: this process)")
    ap.add_argument("--quick", action="store_true", help="reduced run: 2 pairs, 3 splits, 6 sizes (for the test)")
    ap.add_argument("--json", default=None, help="write every raw number and the summaries to this JSON file")
    ap.add_argument("--plot", default=None, help="write Figs. 2-3 (test loss vs size, one column per pair) to this PNG")
    args = ap.parse_args(argv)

    pairs = args.pairs or [parse_pair(s) for s in (QUICK_PAIRS if args.quick else DEFAULT_PAIRS)]
    pairs = list(dict.fromkeys(pairs))
    n_splits = args.splits if args.splits is not None else (3 if args.quick else 10)
    n_sizes = args.n_sizes if args.n_sizes is not None else (6 if args.quick else 12)
    if n_splits < 1 or args.workers < 1 or n_sizes < 1:
        ap.error("--splits, --n-sizes and --workers must be positive")
    args.data_dir = fashion_mnist_dir(args.data_dir)
    if args.data_dir is None:
        ap.error(no_fashion_message("--data-dir"))
    files = [args.data_dir / f"{s}-{k}-idx{d}-ubyte.gz" for s in ("train", "t10k") for k, d in (("images", 3), ("labels", 1))]
    missing = [str(f) for f in files if not f.exists()]
    if missing:
        ap.error(f"missing Fashion-MNIST files: {', '.join(missing)}")

    t_start = time.perf_counter()
    X, y = load_fashion(args.data_dir)
    pools = {}
    for p in pairs:
        rows = np.flatnonzero((y == p[0]) | (y == p[1]))
        pools[p] = (X[rows], y[rows])
    del X
    n_rows = {p: len(v[1]) for p, v in pools.items()}
    n_pool = min(n_rows.values()) - args.test_size
    if n_pool < 2:
        ap.error(f"--test-size {args.test_size} leaves no training pool ({min(n_rows.values())} rows per pair)")
    if args.sizes:
        sizes = sorted(set(args.sizes))
        if sizes[0] < 2 or sizes[-1] > n_pool:
            ap.error(f"--sizes must lie in [2, {n_pool}] (the training pool)")
    else:
        sizes = np.unique(np.rint(np.geomspace(min(10, n_pool), n_pool, n_sizes)).astype(int)).tolist()
    large_sizes = [n for n in sizes if n >= args.large_min] or sizes[-1:]
    large_min = large_sizes[0]
    print(f"Fashion-MNIST from {args.data_dir}: pairs {', '.join(pair_name(p) + ' (' + pair_title(p) + ')' for p in pairs)}")
    print(f"rows per pair {sorted(set(n_rows.values()))}, test {args.test_size}, training pool {n_pool}; "
          f"{n_splits} splits; sizes {sizes}; scale {args.scale}; seed {args.seed}; workers {args.workers}")

    jobs = [(str(args.data_dir), p, s, sizes, args.seed, args.test_size, args.scale) for p in pairs
            for s in range(n_splits)]
    cells = []
    _init_worker(pools)  # this process's cells read the pools already loaded; a worker loads its own once
    # the one executor: in this process, or N workers of a LocalCluster whose every wait has a deadline
    with executor_for("in-process" if args.workers == 1 else f"local:{args.workers}") as ex:
        for job, cell in zip(jobs, ex.map_ordered(curve_cell, jobs)):
            cells.append(cell)
            print(f"  {pair_name(job[1])} split {job[2]}: {cell['seconds']:.1f} s", file=sys.stderr)

    results = build_results(cells, pairs, sizes, large_min)
    ov = overall_large(results)
    v = verdict(ov, args.tol)
    elapsed = time.perf_counter() - t_start
    print_table(results, sizes, n_splits)
    print_large(results, ov, large_sizes)
    print_verdict(ov, v, args.tol)
    print(f"\nruntime {elapsed:.1f} s ({sum(c['seconds'] for c in cells):.1f} s of fitting in {args.workers} process(es))")

    if args.json:
        doc = {
            "paper": "Dekel 2008, From online to batch learning with cutoff-averaging, NIPS 2008, Figs. 2-3",
            "config": {"data_dir": str(args.data_dir), "pairs": [pair_name(p) for p in pairs], "splits": n_splits,
                       "test_size": args.test_size, "n_pool": n_pool, "sizes": sizes, "large_sizes": large_sizes,
                       "scale": args.scale, "seed": args.seed, "tol": args.tol, "quick": args.quick,
                       "workers": args.workers, "distlearn": __version__,
                       "estimators": {"perceptron": "Perceptron(epochs=1, shuffle=True, conversion=c)",
                                      "margin": "MarginPerceptron(epochs=1, shuffle=True, conversion=c), "
                                                "cutoff = Cutoff(loss='hinge')"},
                       "metrics": METRIC},
            "layout": "results[pair].raw[learner/conversion][split][size]; learner/cutoff_k = chosen k; "
                      "learner/updates = n_updates_ of the last-hypothesis fit; margin/radius = R",
            "results": results,
            "overall_large": ov,
            "verdict": v,
            "runtime_seconds": elapsed,
        }
        Path(args.json).write_text(json.dumps(doc, indent=1))
        print(f"wrote {args.json}")
    if args.plot:
        plot_curves(results, sizes, args.plot, n_splits)
        print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
