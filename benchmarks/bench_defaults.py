#!/usr/bin/env python3
"""Benchmark: which defaults of OBPM and PermutationBPM generalise, against a tuned LinearSVC.

    .venv/bin/python benchmarks/bench_defaults.py --letter letter.svm --fashion-dir DIR --json out.json
    .venv/bin/python benchmarks/bench_defaults.py --datasets cancer,digits        # the bundled sets only

Data sets: scikit-learn's bundled breast-cancer (standardised, seeded 75/25
split) and digits (pixels / 16, seeded 75/25 split); LETTER (UCI, first
16,000 rows train, standardised) in 26 classes and its 3 most confused pairs
(by the tuned 26-class LinearSVC on the validation split); Fashion-MNIST
(pixels / 255) in 10 classes and T-shirt/Shirt.  The loaders, the validation
split and the LinearSVC tuning (C on a seeded 10 % validation split, refit on
all the training rows) are those of ``distlearn experiment obpm-batch``.

Every candidate setting runs with 3 seeds (1 on Fashion-MNIST 10-class) and
nothing tuned on the test rows; the table gives mean test error and the gap to
LinearSVC in points.  The candidate whose largest gap over all data sets is
smallest is the one to make the default.  Never asserts.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from distlearn import OBPM, PermutationBPM
from distlearn.experiments.obpm_batch import err, fit_svc, load_fashion, load_letter

def OBPM100(**kw):
    """OBPM with the papers' N = 100 members per tau."""
    return OBPM(n_estimators=100, **kw)


CANDIDATES = {
    "OBPM tau=0.3 E=1 last (old default)": lambda s: OBPM100(tau=0.3, epochs=1, random_state=s),
    "OBPM tau=0.3 E=1 average": lambda s: OBPM100(tau=0.3, epochs=1, conversion="average", random_state=s),
    "OBPM tau=0.3 E=3 average": lambda s: OBPM100(tau=0.3, epochs=3, conversion="average", random_state=s),
    "OBPM tau=0.3 E=5 average": lambda s: OBPM100(tau=0.3, epochs=5, conversion="average", random_state=s),
    "OBPM tau=auto E=3 average": lambda s: OBPM100(tau="auto", epochs=3, conversion="average", random_state=s),
    "OBPM tau=0.3 E=5 last": lambda s: OBPM100(tau=0.3, epochs=5, random_state=s),
    "OBPM tau=0.3 E=10 average": lambda s: OBPM100(tau=0.3, epochs=10, conversion="average", random_state=s),
    "OBPM tau=0.5 E=5 average": lambda s: OBPM100(tau=0.5, epochs=5, conversion="average", random_state=s),
    "OBPM tau=0.5 E=10 average": lambda s: OBPM100(tau=0.5, epochs=10, conversion="average", random_state=s),
    "OBPM tau=0.1 E=10 average": lambda s: OBPM100(tau=0.1, epochs=10, conversion="average", random_state=s),
    "OBPM tau=0.2 E=10 average": lambda s: OBPM100(tau=0.2, epochs=10, conversion="average", random_state=s),
    "OBPM tau=0.1 E=20 average": lambda s: OBPM100(tau=0.1, epochs=20, conversion="average", random_state=s),
    "OBPM tau=auto E=10 average": lambda s: OBPM100(tau="auto", epochs=10, conversion="average", random_state=s),
    "OBPM() (default: 20 per tau, tau=auto, E=10, average)": lambda s: OBPM(random_state=s),
    "OBPM tau=0.3 E=10 average members": lambda s: OBPM100(tau=0.3, epochs=10, conversion="average",
                                                        conversion_scope="members", random_state=s),
    "PBPM-10 E=1 last (old default)": lambda s: PermutationBPM(epochs=1, random_state=s),
    "PBPM-10 E=1 average": lambda s: PermutationBPM(epochs=1, conversion="average", random_state=s),
    "PBPM-10 E=3 average": lambda s: PermutationBPM(epochs=3, conversion="average", random_state=s),
    "PBPM-10 E=5 average": lambda s: PermutationBPM(epochs=5, conversion="average", random_state=s),
}


def _split(X, y, seed=0, frac=0.75):
    r = np.random.default_rng(seed).permutation(len(y))
    c = int(frac * len(y))
    return X[r[:c]], y[r[:c]], X[r[c:]], y[r[c:]]


def datasets(names, letter, fashion_dir):
    from sklearn.datasets import load_breast_cancer, load_digits

    if "cancer" in names:
        Xtr, ytr, Xte, yte = _split(*load_breast_cancer(return_X_y=True))
        mu, sd = Xtr.mean(0), Xtr.std(0)
        yield "breast-cancer", (Xtr - mu) / sd, ytr, (Xte - mu) / sd, yte, (0.001, 0.01, 0.1, 1.0), False, 3
    if "digits" in names:
        X, y = load_digits(return_X_y=True)
        yield ("digits", *_split(X / 16.0, y), (0.001, 0.01, 0.1, 1.0), False, 3)
    if letter and ("letter" in names or "letter-pairs" in names):
        Xtr, ytr, Xte, yte = load_letter(Path(letter), "standard")
        grid = (0.1, 1.0, 10.0)
        s = fit_svc(Xtr, ytr, Xte, yte, grid, False, 0.1, CACHE, "letter")
        if "letter" in names:
            yield "letter 26-class", Xtr, ytr, Xte, yte, grid, False, 3
        if "letter-pairs" in names:
            cm = np.zeros((27, 27), int)
            np.add.at(cm, (np.array(s["val_true"]), np.array(s["val_pred"])), 1)
            sym = cm + cm.T
            cand = sorted(((sym[i, j], i, j) for i in range(1, 27) for j in range(i + 1, 27)), reverse=True)
            for _, i, j in cand[:3]:
                mtr, mte = np.isin(ytr, (i, j)), np.isin(yte, (i, j))
                yield (f"letter {chr(64 + i)}-{chr(64 + j)}", Xtr[mtr], ytr[mtr], Xte[mte], yte[mte],
                       (0.01, 0.1, 1.0, 10.0), False, 3)
    if fashion_dir and ("fashion" in names or "fashion-pair" in names):
        Xtr, ytr, Xte, yte = load_fashion(Path(fashion_dir), "pixel")
        if "fashion-pair" in names:
            mtr, mte = np.isin(ytr, (0, 6)), np.isin(yte, (0, 6))
            yield ("fashion 0-6", Xtr[mtr], ytr[mtr], Xte[mte], yte[mte], (0.001, 0.003, 0.01, 0.03), True, 3)
        if "fashion" in names:
            yield "fashion 10-class", Xtr, ytr, Xte, yte, (0.001, 0.003, 0.01), True, 1


CACHE = None


def main(argv=None) -> int:
    global CACHE
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--datasets", default="cancer,digits,letter,letter-pairs,fashion-pair,fashion")
    ap.add_argument("--letter", default=None, help="LETTER as one svmlight file (see obpm-batch)")
    ap.add_argument("--fashion-dir", default=None, help="the four gzipped Fashion-MNIST IDX files")
    ap.add_argument("--candidates", default=None, help="comma-separated substrings selecting candidates")
    ap.add_argument("--cache", default="bench-output/svc-cache", help="LinearSVC fits are cached here")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    CACHE = Path(a.cache)
    cands = {k: v for k, v in CANDIDATES.items()
             if a.candidates is None or any(s in k for s in a.candidates.split(","))}
    rows = []
    for name, Xtr, ytr, Xte, yte, grid, dual, n_seeds in datasets(a.datasets.split(","), a.letter, a.fashion_dir):
        t0 = time.time()
        s = fit_svc(Xtr, ytr, Xte, yte, grid, dual, 0.1, CACHE, name)
        print(f"== {name}: {Xtr.shape}, LinearSVC C={s['C']:g} test {s['test_err']:.2f} % "
              f"[{time.time() - t0:.0f} s]", flush=True)
        for cname, make in cands.items():
            t1 = time.time()
            errs = [err(make(seed).fit(Xtr, ytr), Xte, yte) for seed in range(n_seeds)]
            row = {"data": name, "candidate": cname, "test_err": float(np.mean(errs)), "errs": errs,
                   "svc": s["test_err"], "svc_C": s["C"], "gap": float(np.mean(errs)) - s["test_err"],
                   "seconds": time.time() - t1}
            rows.append(row)
            print(f"   {cname:<40} {row['test_err']:6.2f} %  gap {row['gap']:+5.2f}  [{row['seconds']:.0f} s]",
                  flush=True)
        if a.json:
            Path(a.json).write_text(json.dumps(rows, indent=1))
    names = list(dict.fromkeys(r["data"] for r in rows))
    print("\n| candidate | " + " | ".join(names) + " | worst gap |")
    print("|---|" + "---|" * (len(names) + 1))
    svc = {r["data"]: r["svc"] for r in rows}
    print("| tuned LinearSVC | " + " | ".join(f"{svc[n]:.2f}" for n in names) + " | |")
    for cname in cands:
        rs = {r["data"]: r for r in rows if r["candidate"] == cname}
        worst = max(r["gap"] for r in rs.values())
        print(f"| {cname} | " + " | ".join(f"{rs[n]['test_err']:.2f} ({rs[n]['gap']:+.2f})" for n in names)
              + f" | {worst:+.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
