"""Harrington et al. (2003), Table 2: OBPM vs Perceptron, ALMA and a linear SVM in the batch setting.

    distlearn experiment obpm-batch --out DIR --letter FILE --fashion-dir D [--quick] [--workers 2]
    python examples/obpm_batch.py                          # all tasks, epochs 1 2 3 (about 5.5 min on 2 cores)
    python examples/obpm_batch.py --quick --json out.json  # LETTER, 3 letter pairs, T-shirt/Shirt; epochs 1 3
    python examples/obpm_batch.py --datasets fashion-pair --epochs 1 2 3 --seeds 0 1 2 3 4
    python examples/obpm_batch.py --cache /tmp/obpm_cache  # reuse the LinearSVC fits of an earlier run

The paper (Harrington et al. 2003, sec. 4.3, Table 2) trains each online
learner for 1, 2 and 3 epochs over a fixed training set and reports the
test error of the LAST hypothesis, next to a soft-margin linear SVM.  Its
claims: OBPM beats the single perceptron, OBPM and ALMA are comparable, and
OBPM comes close to the SVM (Adult 15.17 vs 15.05, Web 1.31 vs 1.25, C. Elegans after
20 epochs 1.59 vs 1.58).  The target checked here (from the issue): OBPM's
test error within 0.5 percentage points of LinearSVC's.

Tasks (``--datasets``):

  letter        LETTER (``--letter-data``), 26 classes, one-vs-rest.
                Standard split: first 16,000 rows train, last 4,000 test.
  letter-pairs  binary LETTER pairs (rows of the two letters only, same
                split).  The pairs are chosen, not hand-picked: the
                ``--n-pairs`` (3) letter pairs with the most symmetric
                confusions of the tuned 26-class LinearSVC on the
                VALIDATION split (never the test set); ``--pairs H-K ...``
                overrides.
  fashion       Fashion-MNIST (``--fashion-data``), 10 classes, one-vs-rest,
                60k train / 10k test.
  fashion-pair  Fashion-MNIST T-shirt/top (0) vs Shirt (6), the hardest pair
                (12k train / 2k test).

Data.  LETTER (``--letter-data FILE`` or ``$DISTLEARN_LETTER``): the 20,000
examples of the UCI Letter Recognition data set
(https://archive.ics.uci.edu/dataset/59/letter+recognition) in UCI's order
as one svmlight/LIBSVM file, labels 1..26 (A..Z), 16 features.  From UCI's
letter-recognition.data (integer attributes 0..15, zeros omitted):

    awk -F, '{printf "%d", index("ABCDEFGHIJKLMNOPQRSTUVWXYZ", $1); for (i = 2; i <= 17; i++) if ($i != 0) printf " %d:%s", i - 1, $i; print ""}' letter-recognition.data > letter.svm

(The LIBSVM data sets page, multiclass "letter", has the same examples
scaled to [-1, 1] as letter.scale + letter.scale.t; their rows need not
be in UCI's order, so the first 16,000 need not be UCI's training split.)
Fashion-MNIST (``--fashion-data DIR`` or ``$DISTLEARN_FASHION_MNIST``): the
four gzipped IDX files (train + t10k images and labels) of Zalando's
release, https://github.com/zalandoresearch/fashion-mnist, or Debian's
package ``dataset-fashion-mnist`` (installed in
/usr/share/datasets/fashion-mnist, used by default when it exists).

Features.  LETTER's 16 integer attributes (0..15) are standardised by the
training mean and std (``--letter-scale standard``, the default) or divided
by their training maximum (``max``, features in [0, 1]).  Both were run (see
the measured results); standardising was made the default after that comparison: it gives
OBPM a lower validation error on LETTER, C-G and H-N (and lower test errors
for every online learner).  Fashion-MNIST pixels are divided by 255
(``--fashion-scale pixel``, row norms about 2..23); ``unit`` also scales rows
to unit length (the paper assumes normalised instances; not measured here).
Every learner adds a constant bias feature.

Protocol.  A validation split, a seeded 10% of the training set
(``--val-frac``, seed 12345), is held out for tuning only:

  LinearSVC  C from a small per-task grid (squared hinge, L2, one-vs-rest,
             tol 1e-3, max_iter 2000, random_state 0; primal solver for
             LETTER, dual for Fashion-MNIST), lowest validation error, ties
             to the smaller C;
             then refit on ALL the training data.
  OBPM       N = 100 perceptrons (``--n-estimators``), tau from
             {0.1, 0.2, 0.3, 0.4} (the paper's "small range"), tuned with one
             epoch, conversion "last", seed 0; the chosen tau is used for every
             epoch count, conversion and seed.
  ALMA       alpha = 0.9, (B, C) from {0.625, 1.11, 3.33, 20} x {0.70, 1.41}
             (the paper's values plus Gentile's B = 1/alpha), one epoch, seed 0.
  Perceptron no parameters (eta = 1).

Then every learner is refit on all the training data with ``epochs = E``
for each E in ``--epochs`` (a separate ``fit`` per E, ``shuffle=True``, a
fresh seeded permutation per epoch) and each seed in ``--seeds``, and scored
on the test set.  OBPM is run with conversion "last" (the paper's
hypothesis, the average of the members' final weights) and "average" (OUR
addition, not in the paper: the average of the ensemble hypotheses over all
rounds).  The 10-class Fashion-MNIST task uses only the first
``--fashion-seeds`` (1) seeds: one OBPM fit costs about 5-15 s per
epoch there (2 shared cores).

Output: a Table 2-like table (rows algorithm x epochs, columns tasks, test
error in percent, mean +- sample std over seeds), the chosen parameters,
LinearSVC's error, and per task the gap OBPM - LinearSVC at each epoch
count with a verdict (within 0.5 points or not), plus OBPM - Perceptron.
``--json`` writes every raw number; ``--cache DIR`` stores the LinearSVC
tuning and fits (the slowest deterministic part) and reuses them.

Measured (default run: seeds 0..4, the 10-class Fashion task seed 0 only,
epochs 1 2 3; LETTER standardised; means over seeds; * = our addition):

  test error %        letter  ltr C-G  ltr H-N  ltr H-O  fash 0-6  fash 10
  LinearSVC            30.33     9.80     7.89    19.31     15.35    15.81
    (C)                  (1)   (0.01)    (0.1)   (0.01)   (0.001)   (0.01)
  Perceptron  E1       52.73    13.86    15.27    34.14     24.74    21.07
              E2       51.09    12.03    11.48    28.76     21.43    20.26
              E3       50.98    12.81    11.10    25.03     24.31    23.05
  ALMA        E1       51.50    14.18    18.42    29.03     23.41    23.50
              E2       50.07    14.12    12.11    25.52     23.27    34.30
              E3       48.20    12.94    12.43    25.59     27.22    25.53
    (B, C)        (3.33,.70) (3.33,.70) (3.33,.70) (20,.70) (1.11,.70) (.625,.70)
  OBPM last   E1       36.82    11.90    10.41    23.93     16.94    18.21
              E2       35.62     8.63     9.34    21.45     19.08    19.50
              E3       35.08    10.98     8.52    21.86     16.88    18.13
  OBPM avg*   E1       36.55    13.01    11.55    21.03     16.61    17.09
              E2       35.00    10.13     9.15    20.21     15.48    16.57
              E3       34.28     9.61     9.02    19.72     15.27    16.21
    tau (N=100)          0.1      0.3      0.1      0.1       0.3      0.4
  OBPM - SVC  E3       +4.76    +1.18    +0.63    +2.55     +1.53    +2.32
  avg* - SVC  E3       +3.96    -0.20    +1.14    +0.41     -0.08    +0.40

  Std over the 5 seeds at E3: OBPM last 0.6, 0.7, 0.4, 2.9, 1.8; OBPM
  average 0.1, 0.2, 0.3, 0.8, 0.1; Perceptron 3.7, 3.4, 2.2, 2.8, 10.2.

  - The issue's target (OBPM within 0.5 points of LinearSVC) is NOT met by
    the paper's last hypothesis on any task at 3 epochs; the closest is H-N
    (+0.63, two test rows of 317); C-G meets it only at 2 epochs (-1.18).
    The averaged conversion (ours) meets it on C-G (-0.20), H-O (+0.41),
    the Fashion pair (-0.08) and Fashion 10-class (+0.40, one seed); it
    misses on LETTER 26-class (+3.96) and H-N (+1.14).
  - OBPM beats the single perceptron at every epoch count on every task (by
    0.8 to 15.9 points), as in the paper, and has a much smaller seed spread.
  - 26-class LETTER one-vs-rest is weakly linear: every online learner is
    4-22 points behind LinearSVC (30.3%).
  - ALMA with (B, C) tuned on one epoch is no better than the perceptron on
    the Fashion tasks and does not improve with epochs there (the paper
    found OBPM ~ ALMA; here OBPM is clearly better).
  - With ``--letter-scale max`` every LETTER number of the online learners
    is worse (OBPM last at E3: 39.77, 22.68, 9.34, 27.72; gaps to LinearSVC,
    which is unchanged on LETTER (30.33) and gets 8.17/6.62/20.00 on the
    pairs: +9.4, +14.5, +2.7, +7.7), the validation split picks tau = 0.1 on
    C-G and H-O, and OBPM then LOSES to the perceptron on C-G (all epochs:
    24.31/19.22/22.68 vs 24.18/17.06/12.29) and on H-O at one epoch (44.14
    vs 38.21).
  - Sanity check: OBPM(tau=1) reproduces the perceptron's weights exactly
    (every member sees every example in the same order); predictions differ
    only on exact ties (max scaling, C-G, 3 epochs, seed 4: one test row
    whose score is 2.8e-16 for OBPM and -1.1e-14 for the perceptron).

  LinearSVC's C is at the top of its grid on the 10-class Fashion task
  (validation 15.73/15.10/14.52 for C = 0.001/0.003/0.01); a larger C might
  lower its error a little further, widening OBPM's gap.

  Run time (2 shared cores, one process): default run about 5.5 min without
  --cache (LinearSVC on the 10-class Fashion task about 2 min, OBPM there
  about 1.5 min), 3.3 min with the LinearSVC fits cached; --quick 40-90 s.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from ..data.public import (FASHION_HELP, LETTER_ENV, fashion_mnist_dir, letter_file, no_fashion_message,
                           no_letter_message)
from ..estimators import ALMA, OBPM, Perceptron
from ._cells import figure, render_text, save_figure

#: LETTER: the 20,000 UCI Letter Recognition examples in one svmlight file (see "Data." above).
LETTER_HELP = ("the 20,000 UCI Letter Recognition examples in UCI's order as one svmlight/LIBSVM file, labels "
               f"1..26 (UCI's letter-recognition.data converted as shown below; default: ${LETTER_ENV}, "
               "else the copy `distlearn data fetch letter` writes)")
TASKS = ("letter", "letter-pairs", "fashion", "fashion-pair")
TAUS = (0.1, 0.2, 0.3, 0.4)
ALMA_GRID = [(B, C) for B in (0.625, 1.11, 3.33, 20.0) for C in (0.70, 1.41)]
TARGET = 0.5  # percentage points
FASHION_NAMES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
                 "Bag", "Ankle boot"]


# --------------------------------------------------------------------------- data
def _idx(path: Path) -> np.ndarray:
    """A gzipped IDX file (big-endian header: magic, then one uint32 per dimension)."""
    with gzip.open(path) as f:
        b = f.read()
    nd = b[3]
    dims = [int.from_bytes(b[4 + 4 * i: 8 + 4 * i], "big") for i in range(nd)]
    return np.frombuffer(b, np.uint8, offset=4 + 4 * nd).reshape(dims)


def load_letter(path: Path, scale: str):
    from sklearn.datasets import load_svmlight_file

    X, y = load_svmlight_file(str(path), n_features=16)
    X = X.toarray()
    y = y.astype(int)
    n_tr = 16000 if len(y) == 20000 else int(0.8 * len(y))  # UCI's split; 80 % of a smaller file
    Xtr, ytr, Xte, yte = X[:n_tr], y[:n_tr], X[n_tr:], y[n_tr:]
    if scale == "max":
        m = np.abs(Xtr).max(0)
        m[m == 0] = 1.0
        Xtr, Xte = Xtr / m, Xte / m
    elif scale == "standard":
        mu, sd = Xtr.mean(0), Xtr.std(0)
        sd[sd == 0] = 1.0
        Xtr, Xte = (Xtr - mu) / sd, (Xte - mu) / sd
    return Xtr, ytr, Xte, yte


def load_fashion(d: Path, scale: str):
    Xtr = _idx(d / "train-images-idx3-ubyte.gz")
    Xtr = Xtr.reshape(Xtr.shape[0], -1) / 255.0
    ytr = _idx(d / "train-labels-idx1-ubyte.gz").astype(int)
    Xte = _idx(d / "t10k-images-idx3-ubyte.gz")
    Xte = Xte.reshape(Xte.shape[0], -1) / 255.0
    yte = _idx(d / "t10k-labels-idx1-ubyte.gz").astype(int)
    if scale == "unit":
        Xtr = Xtr / np.linalg.norm(Xtr, axis=1, keepdims=True)
        Xte = Xte / np.linalg.norm(Xte, axis=1, keepdims=True)
    return Xtr, ytr, Xte, yte


def letter_name(k: int) -> str:
    return chr(ord("A") + int(k) - 1)


def val_split(n: int, frac: float):
    perm = np.random.default_rng(12345).permutation(n)
    nv = int(round(frac * n))
    return perm[nv:], perm[:nv]


# --------------------------------------------------------------------------- learners
def err(model, X, y) -> float:
    return float(np.mean(model.predict(X) != y) * 100.0)


def svc(C: float, dual: bool):
    from sklearn.svm import LinearSVC

    return LinearSVC(C=C, dual=dual, tol=1e-3, max_iter=2000, random_state=0)


def fit_svc(Xtr, ytr, Xte, yte, grid, dual, frac, cache: Path | None, key: str):
    """Tune C on the validation split, refit on all training data.  Returns a dict."""
    blob = None
    if cache is not None:
        h = hashlib.sha1(json.dumps(["v2-rs0", key, list(grid), dual, frac, Xtr.shape, float(Xtr.sum()), int(ytr.sum()),
                                     float(Xte.sum())]).encode()).hexdigest()[:16]
        blob = cache / f"svc-{h}.json"
        if blob.exists():
            out = json.loads(blob.read_text())
            out["cached"] = True
            return out
    t0 = time.time()
    tr, va = val_split(len(ytr), frac)
    val = {}
    preds = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning at max_iter: recorded via the errors anyway
        for C in grid:
            m = svc(C, dual).fit(Xtr[tr], ytr[tr])
            p = m.predict(Xtr[va])
            preds[C] = p
            val[C] = float(np.mean(p != ytr[va]) * 100.0)
        best = min(grid, key=lambda c: (val[c], c))
        m = svc(best, dual).fit(Xtr, ytr)
    out = {"C": best, "val_err": val[best], "val_grid": {str(c): v for c, v in val.items()},
           "test_err": err(m, Xte, yte), "seconds": time.time() - t0, "cached": False,
           "val_pred": preds[best].tolist(), "val_true": ytr[va].tolist()}
    if blob is not None:
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_text(json.dumps(out))
    return out


def run_online(Xtr, ytr, Xte, yte, epochs, seeds, frac, n_estimators, n_jobs, log, taus=TAUS):
    """Tune OBPM's tau (from ``taus``) and ALMA's (B, C) on the validation split with the first
    seed, then fit every (learner, E, seed)."""
    def obpm(tau, E, s, conv):
        return OBPM(n_estimators=n_estimators, tau=tau, base="perceptron", epochs=E, shuffle=True,
                    conversion=conv, random_state=s, n_jobs=n_jobs)

    tr, va = val_split(len(ytr), frac)
    t0 = time.time()
    s0 = seeds[0]
    tau_val = {t: err(obpm(t, 1, s0, "last").fit(Xtr[tr], ytr[tr]), Xtr[va], ytr[va]) for t in taus}
    tau = min(taus, key=lambda t: (tau_val[t], t))
    alma_val = {(B, C): err(ALMA(alpha=0.9, B=B, C=C, epochs=1, random_state=s0).fit(Xtr[tr], ytr[tr]),
                            Xtr[va], ytr[va]) for B, C in ALMA_GRID}
    B, C = min(ALMA_GRID, key=lambda bc: (alma_val[bc], bc))
    log(f"    tuned tau = {tau} (val {tau_val[tau]:.2f}%), ALMA B = {B}, C = {C} (val {alma_val[(B, C)]:.2f}%)"
        f"  [{time.time() - t0:.0f} s]")
    makers = {
        "Perceptron": lambda E, s: Perceptron(epochs=E, random_state=s),
        "ALMA": lambda E, s: ALMA(alpha=0.9, B=B, C=C, epochs=E, random_state=s),
        "OBPM": lambda E, s: obpm(tau, E, s, "last"),
        "OBPM-avg": lambda E, s: obpm(tau, E, s, "average"),
    }
    res = {}
    for name, make in makers.items():
        t1 = time.time()
        res[name] = {str(E): [err(make(E, s).fit(Xtr, ytr), Xte, yte) for s in seeds] for E in epochs}
        log(f"    {name:<10} " + "  ".join(f"E{E} {np.mean(v):6.2f}" for E, v in res[name].items())
            + f"  [{time.time() - t1:.0f} s]")
    return {"tau": tau, "tau_val": {str(t): v for t, v in tau_val.items()},
            "alma_B": B, "alma_C": C, "alma_val": {f"{b},{c}": v for (b, c), v in alma_val.items()},
            "errors": res, "seconds": time.time() - t0}


# --------------------------------------------------------------------------- table
def ms(v) -> str:
    v = np.asarray(v, float)
    if len(v) > 1:
        return f"{v.mean():.2f}±{v.std(ddof=1):.2f}"
    return f"{v.mean():.2f}"


def print_table(doc: dict) -> None:
    tasks = doc["tasks"]
    names = list(tasks)
    epochs = doc["config"]["epochs"]
    w = max(14, *(len(n) + 1 for n in names))
    head = f"{'ALGORITHM':<11}{'EPOCHS':>6}  " + "".join(f"{n:>{w}}" for n in names)
    print("\nTest error in percent (mean ± sample std over seeds; one number when one seed)")
    print(head)
    print("-" * len(head))

    def param_row(label, fmt):
        print(f"{label:<17}  " + "".join(f"{fmt(tasks[n]):>{w}}" for n in names))

    for alg, label, fmt in [
        ("Perceptron", "Perceptron", None),
        ("ALMA", "ALMA(B,C)", lambda t: f"({t['alma_B']:g},{t['alma_C']:.2f})"),
        ("OBPM", "OBPM(tau,N) last", lambda t: f"({t['tau']:g},{doc['config']['n_estimators']})"),
        ("OBPM-avg", "OBPM average*", lambda t: f"({t['tau']:g},{doc['config']['n_estimators']})"),
    ]:
        if fmt:
            param_row(label, fmt)
        else:
            print(label)
        for E in epochs:
            print(f"{'':<11}{E:>6}  " + "".join(f"{ms(tasks[n]['errors'][alg][str(E)]):>{w}}" for n in names))
    param_row("LinearSVC (C)", lambda t: f"({t['svc']['C']:g})")
    print(f"{'':<17}  " + "".join(f"{tasks[n]['svc']['test_err']:>{w}.2f}" for n in names))
    print("* conversion='average' is our addition, not in the paper.")

    print(f"\nOBPM (last) - LinearSVC, percentage points (target: <= {TARGET}); and OBPM - Perceptron")
    for n in names:
        t = tasks[n]
        parts = []
        for E in epochs:
            g = t["gap_svc"][str(E)]
            parts.append(f"E{E} {g:+.2f}")
        ga = t["gap_svc_avg"][str(epochs[-1])]
        gp = [t["gap_perceptron"][str(E)] for E in epochs]
        verdict = "WITHIN 0.5" if t["within"] else "NOT within 0.5"
        print(f"  {n:<16} {'  '.join(parts)}   [avg conv E{epochs[-1]} {ga:+.2f}]   "
              f"vs Perceptron {' '.join(f'{x:+.2f}' for x in gp)}   -> E{epochs[-1]}: {verdict}")
    n_ok = sum(tasks[n]["within"] for n in names)
    print(f"\nVerdict: OBPM (last, {epochs[-1]} epochs) within {TARGET} points of LinearSVC on {n_ok} of "
          f"{len(names)} tasks; beats the Perceptron at every epoch count on "
          f"{sum(all(v < 0 for v in tasks[n]['gap_perceptron'].values()) for n in names)} of {len(names)}.")


# --------------------------------------------------------------------------- main
# -- the named experiment (distlearn.experiments.named) ------------------------------------
TITLE = "Online Bayes Point Machines (Harrington et al. 2003), Table 2 style: batch setting"
VERSION = 1
PAPER = {"table2": {"Adult": {"obpm": 15.17, "svm": 15.05}, "Web": {"obpm": 1.31, "svm": 1.25},
                    "C. elegans (20 epochs)": {"obpm": 1.59, "svm": 1.58}},
         "claims": "OBPM beats the single perceptron, OBPM and ALMA are comparable, OBPM comes close to the SVM"}
OPTIONS = {"n_pairs": 3, "pairs": None, "n_estimators": 100, "n_jobs": 1, "val_frac": 0.1, "letter_scale": "standard",
           "fashion_scale": "pixel", "cache": None, "fashion_seeds": 1}


def task_cell(dataset: str, opts: dict, epochs: list[int], seeds: list[int]) -> dict:
    """One data set of the protocol (its SVM and every online fit)."""
    ns = argparse.Namespace(**opts)
    ns.letter_data = Path(opts["letter_data"]) if opts.get("letter_data") else None
    ns.fashion_data = Path(opts["fashion_data"]) if opts.get("fashion_data") else None
    return run_tasks(ns, [dataset], epochs, seeds, lambda msg: None)


def plan(part: str, *, quick: bool, repeats: int | None, data: dict,
         params: dict | None = None) -> tuple[dict, list]:
    """One cell per task; ``params``: ``seed`` (the seeds are seed .. seed + R - 1), OBPM's
    ``n_estimators`` (one value), the ``tau`` values tuned on the validation split, ``epochs``."""
    p = params or {}
    datasets = ["letter-pairs", "fashion-pair"] if quick else list(TASKS)
    opts = dict(OPTIONS)
    if p.get("n_estimators") is not None:
        opts["n_estimators"] = int(p["n_estimators"])
    opts["taus"] = list(p.get("tau") or TAUS)
    letter = letter_file(data.get("letter"))
    if letter is None or not letter.is_file():
        raise FileNotFoundError(no_letter_message("--letter"))
    fashion = fashion_mnist_dir(data.get("fashion"))
    if fashion is None or not fashion.is_dir():
        raise FileNotFoundError(no_fashion_message("--fashion-dir"))
    opts.update(letter_data=str(letter.resolve()), fashion_data=str(fashion.resolve()))
    epochs = sorted(set(p.get("epochs") or ([1, 3] if quick else [1, 2, 3])))
    seed = int(p.get("seed") or 0)
    seeds = list(range(seed, seed + (repeats or (2 if quick else 5))))
    key = {**opts, "datasets": datasets, "epochs": epochs, "seeds": seeds, "quick": quick}
    return key, [(d, task_cell, (d, opts, epochs, seeds)) for d in datasets]


def report(part: str, key: dict, cells: dict) -> dict:
    tasks: dict = {}
    for d in key["datasets"]:
        tasks.update(cells[d])
    return {"tasks": tasks, "config": {"taus": key.get("taus", list(TAUS)), "alma_grid": ALMA_GRID,
                                       "target_points": TARGET},
            "paper": PAPER}


def render(part: str, doc: dict) -> str:
    return render_text(print_table, doc) + "\n\nThe paper's Table 2 (OBPM vs SVM, test error %): " + "; ".join(
        f"{k} {v['obpm']} vs {v['svm']}" for k, v in PAPER["table2"].items()) + ". Its claims: " + PAPER["claims"]


def plot(part: str, doc: dict, path: Path) -> None:
    names = list(doc["tasks"])
    learners = ("Perceptron", "ALMA", "OBPM", "OBPM-avg")
    E = str(doc["config"]["epochs"][-1])
    f, axes = figure(size=(max(6.4, 1.6 * len(names)), 4.4))
    ax = axes[0, 0]
    xs = np.arange(len(names))
    w = 0.8 / (len(learners) + 1)
    for i, lname in enumerate(learners):
        ax.bar(xs + i * w, [np.mean(doc["tasks"][n]["errors"][lname][E]) for n in names], w, label=f"{lname}, {E} ep.")
    ax.bar(xs + len(learners) * w, [doc["tasks"][n]["svc"]["test_err"] for n in names], w, label="LinearSVC")
    ax.set_xticks(xs + 0.4 - w / 2, names, rotation=20)
    ax.set_xlabel("task")
    ax.set_ylabel("test error (%)")
    ax.set_title(f"Batch setting: test error after {E} epoch{'s' if E != '1' else ''} (mean over seeds)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    save_figure(f, path)


def run_tasks(a: argparse.Namespace, datasets: list[str], epochs: list[int], seeds: list[int], log) -> dict:
    """Every (data set) task of the protocol: LinearSVC tuned on a validation split, then the online learners."""
    tasks: dict[str, dict] = {}
    unit = 100.0 if a.fashion_scale == "unit" else 1.0

    def do_task(name, Xtr, ytr, Xte, yte, grid, dual, task_seeds, extra=None):
        log(f"== {name}: {Xtr.shape[0]} train, {Xte.shape[0]} test, {Xtr.shape[1]} features, "
            f"{len(np.unique(ytr))} classes, seeds {task_seeds}")
        t0 = time.time()
        s = fit_svc(Xtr, ytr, Xte, yte, grid, dual, a.val_frac, a.cache, name)
        log(f"    LinearSVC C = {s['C']:g} (val {s['val_err']:.2f}%), test {s['test_err']:.2f}%"
            f"{' (cached)' if s['cached'] else ''}  [{time.time() - t0:.0f} s]")
        r = run_online(Xtr, ytr, Xte, yte, epochs, task_seeds, a.val_frac, a.n_estimators, a.n_jobs, log,
                       tuple(getattr(a, "taus", None) or TAUS))
        r["svc"] = {k: v for k, v in s.items() if k not in ("val_pred", "val_true")}
        r["seeds"] = task_seeds
        r["n_train"], r["n_test"] = int(len(ytr)), int(len(yte))
        r["gap_svc"] = {str(E): float(np.mean(r["errors"]["OBPM"][str(E)]) - s["test_err"]) for E in epochs}
        r["gap_svc_avg"] = {str(E): float(np.mean(r["errors"]["OBPM-avg"][str(E)]) - s["test_err"])
                            for E in epochs}
        r["gap_perceptron"] = {str(E): float(np.mean(r["errors"]["OBPM"][str(E)])
                                             - np.mean(r["errors"]["Perceptron"][str(E)])) for E in epochs}
        r["within"] = bool(r["gap_svc"][str(epochs[-1])] <= TARGET)
        r["seconds_total"] = time.time() - t0
        if extra:
            r.update(extra)
        tasks[name] = r
        return s

    if "letter" in datasets or "letter-pairs" in datasets:
        Xtr, ytr, Xte, yte = load_letter(a.letter_data, a.letter_scale)
        grid = (0.1, 1.0, 10.0)
        if "letter" in datasets:
            s = do_task("letter", Xtr, ytr, Xte, yte, grid, False, seeds)
        if "letter-pairs" in datasets:
            if a.pairs:
                pairs = [tuple(ord(c) - ord("A") + 1 for c in p.upper().split("-")) for p in a.pairs]
                how = "given by --pairs"
            else:
                if "letter" not in datasets:
                    s = fit_svc(Xtr, ytr, Xte, yte, grid, False, a.val_frac, a.cache, "letter")
                cm = np.zeros((27, 27), int)
                np.add.at(cm, (np.array(s["val_true"]), np.array(s["val_pred"])), 1)
                sym = cm + cm.T
                cand = sorted(((sym[i, j], i, j) for i in range(1, 27) for j in range(i + 1, 27)), reverse=True)
                pairs = [(i, j) for _, i, j in cand[:a.n_pairs]]
                how = (f"the {a.n_pairs} pairs with the most symmetric confusions of the 26-class LinearSVC "
                       f"(C = {s['C']:g}) on the validation split: "
                       + ", ".join(f"{letter_name(i)}-{letter_name(j)} ({sym[i, j]})" for i, j in pairs))
            log(f"letter pairs: {how}")
            for i, j in pairs:
                mtr, mte = np.isin(ytr, (i, j)), np.isin(yte, (i, j))
                do_task(f"letter {letter_name(i)}-{letter_name(j)}", Xtr[mtr], ytr[mtr], Xte[mte], yte[mte],
                        (0.01, 0.1, 1.0, 10.0), False, seeds, {"pair_choice": how})
    if "fashion-pair" in datasets or "fashion" in datasets:
        Xtr, ytr, Xte, yte = load_fashion(a.fashion_data, a.fashion_scale)
        if "fashion-pair" in datasets:
            mtr, mte = np.isin(ytr, (0, 6)), np.isin(yte, (0, 6))
            do_task("fashion 0-6", Xtr[mtr], ytr[mtr], Xte[mte], yte[mte],
                    tuple(c * unit for c in (0.001, 0.003, 0.01, 0.03)), True, seeds)
        if "fashion" in datasets:
            do_task("fashion 10-class", Xtr, ytr, Xte, yte, tuple(c * unit for c in (0.001, 0.003, 0.01)), True,
                    seeds[:max(1, a.fashion_seeds)])

    return tasks


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description="Table 2 of Harrington et al. 2003 (Online Bayes Point Machines) on LETTER and "
                    "Fashion-MNIST: OBPM vs Perceptron, ALMA and LinearSVC, 1-3 epochs, test error in %.",
        epilog=__doc__.split("Measured (")[0].split("\n\n", 2)[-1] + "The measured results are in the module docstring.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", nargs="+", choices=TASKS, default=None,
                    help="tasks to run (default: all four; --quick: letter letter-pairs fashion-pair)")
    ap.add_argument("--epochs", nargs="+", type=int, default=None,
                    help="epoch counts, one fit each (default 1 2 3; --quick 1 3)")
    ap.add_argument("--seeds", nargs="+", type=int, default=None,
                    help="seeds of the online learners' shuffles and OBPM draws (default 0 1 2 3 4)")
    ap.add_argument("--fashion-seeds", type=int, default=1,
                    help="use only the first K seeds for the 10-class Fashion-MNIST task (slow; default 1)")
    ap.add_argument("--quick", action="store_true",
                    help="letter, letter-pairs, fashion-pair; epochs 1 3 (about 1 min)")
    ap.add_argument("--n-pairs", type=int, default=3, help="letter pairs chosen by LinearSVC confusion (default 3)")
    ap.add_argument("--pairs", nargs="+", default=None, help="letter pairs to use instead, e.g. H-K O-Q")
    ap.add_argument("--n-estimators", type=int, default=100, help="OBPM's N (default 100)")
    ap.add_argument("--n-jobs", type=int, default=1, help="OBPM threads (results do not depend on it)")
    ap.add_argument("--val-frac", type=float, default=0.1, help="validation fraction of the training set")
    ap.add_argument("--letter-scale", choices=("max", "standard"), default="standard",
                    help="LETTER features: standardise by train mean/std (default) or divide by the train max")
    ap.add_argument("--fashion-scale", choices=("pixel", "unit"), default="pixel",
                    help="Fashion-MNIST: pixels / 255 (default), or also unit-length rows")
    ap.add_argument("--letter-data", type=Path, default=None, help=LETTER_HELP)
    ap.add_argument("--fashion-data", type=Path, default=None, help=FASHION_HELP)
    ap.add_argument("--cache", type=Path, default=None, help="directory caching the LinearSVC results")
    ap.add_argument("--json", type=Path, default=None, help="write all raw numbers here")
    a = ap.parse_args(argv)

    datasets = a.datasets or (["letter", "letter-pairs", "fashion-pair"] if a.quick else list(TASKS))
    epochs = a.epochs or ([1, 3] if a.quick else [1, 2, 3])
    seeds = a.seeds or [0, 1, 2, 3, 4]
    if {"letter", "letter-pairs"} & set(datasets):
        a.letter_data = letter_file(a.letter_data)
        if a.letter_data is None:
            ap.error(no_letter_message("--letter-data"))
        if not a.letter_data.is_file():
            ap.error(f"--letter-data: {a.letter_data} does not exist")
    if {"fashion", "fashion-pair"} & set(datasets):
        a.fashion_data = fashion_mnist_dir(a.fashion_data)
        if a.fashion_data is None:
            ap.error(no_fashion_message("--fashion-data"))
        missing = [f"{s}-{k}-idx{d}-ubyte.gz" for s in ("train", "t10k") for k, d in (("images", 3), ("labels", 1))
                   if not (a.fashion_data / f"{s}-{k}-idx{d}-ubyte.gz").is_file()]
        if missing:
            ap.error(f"--fashion-data: {a.fashion_data} lacks {', '.join(missing)}")

    def log(msg):
        print(msg, flush=True)

    t_all = time.time()
    tasks = run_tasks(a, datasets, epochs, seeds, log)
    secs = time.time() - t_all
    doc = {"config": {"datasets": datasets, "epochs": epochs, "seeds": seeds, "fashion_seeds": a.fashion_seeds,
                      "quick": a.quick, "n_estimators": a.n_estimators, "val_frac": a.val_frac,
                      "letter_scale": a.letter_scale, "fashion_scale": a.fashion_scale, "taus": list(TAUS),
                      "alma_grid": ALMA_GRID, "target_points": TARGET},
           "tasks": tasks, "seconds": secs,
           "env": {"python": platform.python_version(), "numpy": np.__version__}}
    print_table(doc)
    print(f"\nTotal {secs:.0f} s")
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(doc, indent=1))
        print(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
