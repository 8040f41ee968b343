"""``celegans-obpm``: OBPM on splice sites (Harrington et al. 2003, sec. 4.3, Table 2), as Dask tasks.

Protocol (the paper's, with the choices it leaves open written down):

* **Data**: a training and a test file of DNA sequences (FASTA or ``label<TAB>sequence``, the
  format of Sonnenburg's splice-site data), mapped to the sparse weighted-degree features
  (``degree`` 3 by default: 11,700 columns for 141-base windows; the paper's C. elegans data had
  6,125 dimensions) and stored once each.  Without files, ``distlearn generate splice-files``
  writes a C. elegans-sized stand-in (100,000 train, 10,000 test, a planted acceptor signal).
* **Runs**: the perceptron; ALMA with the paper's ``B = 3.33, C = 0.70`` (``alpha = 0.3``, so
  ``B = 1 / alpha``); OBPM for every ``tau`` in (0.05, 0.2) and ``N`` in (100, 200) over perceptron
  members.  Each is trained for every epoch count in ``epochs`` (1, 2, 3 and 20); epoch ``e``'s
  order depends only on ``(seed, e)``, so the fit with 3 epochs continues the fit with 2 exactly,
  and "test error after e epochs" is that fit's test error.
* **Permutations**: ``permutations`` seeds per run (the training order and OBPM's draws).
* **Peer**: scikit-learn's ``LinearSVC`` on the same features, ``C`` chosen on the last 10 % of
  the training rows from ``svm_C``, then refit on all of them.
* **Tasks**: every (run, epochs, permutation) and every SVM fit is one task on the executor (this
  process, a LocalCluster, or a cluster), opening the stores by path on its worker; results are
  written to ``OUT/cells/`` as they finish and a rerun skips them.  The longest start first (the
  SVM fits, then the cells by a rough cost, :func:`_cost`), and the SVM refit (``svm.test``) is a
  task fed by the validation fits' results, so it runs as soon as they are done instead of after
  every cell: the same cells and numbers, a shorter tail on a cluster.

Output: ``OUT/results.json``, a table (test error % per run and epoch count, mean +- std over
permutations), and ``OUT/table2.png`` (test error against epochs) when matplotlib is installed.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from .. import rng
from ..data import open_dataset
from ..distributed import executor_for
from ..estimators import ALMA, OBPM, Perceptron
from ..stream import open_store, read_block, store_token
from ._cells import Cells, Earlier, figure, pyplot, refuse_other_run, save_figure, write_json

__all__ = ["run", "pipeline", "format_table", "fit_cell", "svm_cell"]

EPOCHS = (1, 2, 3, 20)
TAUS = (0.05, 0.2)
SIZES = (100, 200)
ALMA_PARAMS = {"alpha": 0.3, "B": 3.33, "C": 0.70}
SVM_C = (0.01, 0.1, 1.0, 10.0)
_VERSION = 1
SVM_FINAL = "svm.test"  # the cell of the LinearSVC refit with the chosen C


def runs(taus: tuple[float, ...] = TAUS, sizes: tuple[int, ...] = SIZES) -> dict[str, dict[str, Any]]:
    """The runs of the protocol: name -> (kind, parameters)."""
    out: dict[str, dict[str, Any]] = {"perceptron": {"kind": "perceptron"},
                                      "alma": {"kind": "alma", **ALMA_PARAMS}}
    for tau, n in itertools.product(taus, sizes):
        out[f"obpm-tau{tau:g}-N{n}"] = {"kind": "obpm", "tau": tau, "n_estimators": n, "conversion": "last"}
    return out


def _estimator(spec: dict[str, Any], epochs: int, seed: int) -> Any:
    kw = {k: v for k, v in spec.items() if k != "kind"}
    cls = {"perceptron": Perceptron, "alma": ALMA, "obpm": OBPM}[spec["kind"]]
    return cls(epochs=epochs, shuffle=True, random_state=seed, **kw)


def test_error(est: Any, test: str, token: str) -> tuple[float, int]:
    """Streamed test 0-1 error of a fitted estimator over a store."""
    ds = open_store(test, token)
    wrong = n = 0
    for b in range(ds.n_blocks):
        blk = read_block(ds, b)
        wrong += int(np.sum(est.predict(blk.X) != np.asarray(blk.y)))
        n += blk.X.shape[0]
    return wrong / max(n, 1), n


def fit_cell(name: str, spec: dict[str, Any], epochs: int, perm: int, seed: int, train: str, train_token: str,
             test: str, test_token: str) -> dict[str, Any]:
    """One run x epoch count x permutation: fit on the training store, score on the test store."""
    open_store(train, train_token)  # refuses a store that changed since the plan
    run_seed = int(rng.hash64(seed, rng.stream_id("celegans-obpm/permutation"), perm))
    est = _estimator(spec, epochs, run_seed)
    t0 = time.perf_counter()
    est.fit(train)
    fit_seconds = time.perf_counter() - t0
    err, n_test = test_error(est, test, test_token)
    return {"run": name, "epochs": epochs, "permutation": perm, "test_error": err, "n_test": n_test,
            "n_updates": int(np.sum(getattr(est, "n_updates_", 0))), "fit_seconds": fit_seconds}


def svm_cell(C: float, validate: bool, train: str, train_token: str, test: str, test_token: str) -> dict[str, Any]:
    """LinearSVC with this ``C``: on the first 90 % of the training rows scored on the last 10 %
    (``validate``), or on all of them scored on the test store."""
    from sklearn.svm import LinearSVC

    ds = open_store(train, train_token)
    X, y = ds.to_scipy()
    cut = int(round(0.9 * len(y))) if validate else len(y)
    t0 = time.perf_counter()
    svm = LinearSVC(C=C, dual=False, max_iter=5000).fit(X[:cut], y[:cut])
    fit_seconds = time.perf_counter() - t0
    if validate:
        err, n = float(np.mean(svm.predict(X[cut:]) != y[cut:])), len(y) - cut
    else:
        err, n = test_error(svm, test, test_token)
    return {"C": C, "validate": validate, "error": err, "n": n, "fit_seconds": fit_seconds}


def svm_final(svm_C: tuple[float, ...], train: str, train_token: str, test: str, test_token: str,
              *validations: dict[str, Any]) -> dict[str, Any]:
    """The ``C`` of least validation error (ties: the smaller ``C``; ``validations`` are the
    :func:`svm_cell` results of ``svm_C`` in order), refit on all the training rows, scored on the test store."""
    error = {C: v["error"] for C, v in zip(svm_C, validations)}
    return svm_cell(min(svm_C, key=lambda C: (error[C], C)), False, train, train_token, test, test_token)


def _cost(spec: dict[str, Any], epochs: int) -> float:
    """A fit cell's rough relative cost (only its order matters: the longest cells start first)."""
    if spec["kind"] == "obpm":
        return epochs * (1 + spec["n_estimators"] * (0.1 + spec["tau"]))
    return float(epochs)


def run(train: str | os.PathLike[str], test: str | os.PathLike[str], out: str | os.PathLike[str], *,
        epochs: tuple[int, ...] = EPOCHS, permutations: int = 3, taus: tuple[float, ...] = TAUS,
        sizes: tuple[int, ...] = SIZES, svm_C: tuple[float, ...] | None = SVM_C, seed: int = 0,
        scheduler: Any = None, n_jobs: int = 1, n_workers: int | None = None, overwrite: bool = False,
        progress: Any = None, figures: bool = True, source: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run the protocol on a training and a test store of the same feature map; see the module notes.
    ``source``: what the stores were made from (kept in ``OUT/meta.json``, part of the run's key)."""
    if not isinstance(permutations, int) or permutations < 1:
        raise ValueError(f"permutations must be a positive int; got {permutations!r}")
    epochs = tuple(sorted({int(e) for e in epochs}))
    if not epochs or epochs[0] < 1:
        raise ValueError(f"epochs must be positive ints; got {epochs!r}")
    tr, te = open_dataset(train), open_dataset(test)
    if tr.n_features != te.n_features:
        raise ValueError(f"{train} has {tr.n_features} features but {test} has {te.n_features}: "
                         "convert both with the same feature map")
    train_p, test_p = str(Path(train).resolve()), str(Path(test).resolve())
    tt, et = store_token(tr), store_token(te)
    plan = runs(taus, sizes)
    key = {"version": _VERSION, "train": train_p, "train_token": tt, "test": test_p, "test_token": et, "seed": seed,
           "runs": plan, **(source or {})}
    book = Cells(out, key, overwrite=overwrite)
    names = [(f"{r}.e{e}.p{p}", (r, e, p)) for r in plan for e in epochs for p in range(permutations)]
    cells = {n: c for n, _ in names if (c := book.get(n)) is not None}
    fits = [(n, fit_cell, (r, plan[r], e, p, seed, train_p, tt, test_p, et)) for n, (r, e, p) in names
            if n not in cells]
    fits.sort(key=lambda job: -_cost(job[2][1], job[2][2]))  # the longest first (stable: ties in plan order)
    svm_names = [f"svm.C{C:g}.validate" for C in (svm_C or ())]
    svm = {n: c for n in [*svm_names, SVM_FINAL] if (c := book.get(n)) is not None}
    todo = [(n, svm_cell, (C, True, train_p, tt, test_p, et)) for n, C in zip(svm_names, svm_C or ())
            if n not in svm]
    if svm_C and SVM_FINAL not in svm:  # starts when the validations are done, not after every cell
        todo.append((SVM_FINAL, svm_final, (tuple(svm_C), train_p, tt, test_p, et,
                                            *[svm.get(n, Earlier(n)) for n in svm_names])))
    todo += fits  # the SVM fits first: they are the longest tasks
    total = len(names) + len(svm_names) + (1 if svm_C else 0)
    t0 = time.perf_counter()
    n_run = len(todo)

    def told(name: str, res: dict[str, Any]) -> None:
        (svm if name.startswith("svm.") else cells)[name] = res
        if progress is not None:
            progress(len(cells) + len(svm), total, name, res)

    with executor_for(scheduler, n_jobs=n_jobs, n_workers=n_workers) as ex:
        book.run(ex, todo, told)
    results = aggregate(cells, plan, epochs, permutations)
    if svm_C:
        final = svm[SVM_FINAL]
        results["svm"] = {"C": final["C"], "test_error": final["error"],
                          "validation": {str(c): svm[f"svm.C{c:g}.validate"]["error"] for c in svm_C},
                          "fit_seconds": final["fit_seconds"]}
    results.update({"meta": key, "cells_run": n_run, "cells_resumed": total - n_run,
                    "seconds": time.perf_counter() - t0, "n_train": tr.n_samples, "n_test": te.n_samples,
                    "n_features": tr.n_features})
    write_json(Path(out) / "results.json", results)
    if figures:
        results["figures"] = plot(results, out)
    return results


def aggregate(cells: dict[str, dict[str, Any]], plan: dict[str, Any], epochs: tuple[int, ...],
              permutations: int) -> dict[str, Any]:
    out: dict[str, Any] = {"epochs": list(epochs), "runs": {}}
    for r in plan:
        entry: dict[str, Any] = {"params": plan[r]}
        for key in ("test_error", "fit_seconds", "n_updates"):
            a = np.array([[cells[f"{r}.e{e}.p{p}"][key] for p in range(permutations)] for e in epochs], float)
            entry[key] = {"mean": a.mean(axis=1).tolist(),
                          "std": (a.std(axis=1, ddof=1) if permutations > 1 else 0 * a[:, 0]).tolist(),
                          "per_permutation": a.tolist()}
        out["runs"][r] = entry
    return out


def format_table(results: dict[str, Any]) -> str:
    ep = results["epochs"]
    lines = [f"{'run':<22}" + "".join(f"{f'{e} epoch' + ('s' if e > 1 else ''):>16}" for e in ep)]
    for r, e in results["runs"].items():
        cols = [f"{100 * m:6.2f} +- {100 * s:4.2f}" for m, s in zip(e["test_error"]["mean"], e["test_error"]["std"])]
        lines.append(f"{r:<22}" + "".join(f"{c:>16}" for c in cols))
    if "svm" in results:
        s = results["svm"]
        lines.append(f"{'LinearSVC (C=' + format(s['C'], 'g') + ')':<22}{100 * s['test_error']:>14.2f}  "
                     f"(C chosen on 10 % of the training rows; fit {s['fit_seconds']:.1f} s)")
    return "\n".join(lines)


def plot(results: dict[str, Any], out: str | os.PathLike[str]) -> list[str]:
    if pyplot() is None:
        return []
    fig, axes = figure(size=(7.2, 4.4))
    ax = axes[0, 0]
    ep = np.array(results["epochs"])
    for r, e in results["runs"].items():
        mu, sd = 100 * np.array(e["test_error"]["mean"]), 100 * np.array(e["test_error"]["std"])
        ax.errorbar(ep, mu, yerr=sd, marker="o", ms=3, capsize=2, label=r)
    if "svm" in results:
        ax.axhline(100 * results["svm"]["test_error"], color="k", ls=":", label="LinearSVC")
    ax.set_xscale("log")
    ax.set_xticks(ep, [str(e) for e in ep])
    ax.set_xlabel("epochs")
    ax.set_ylabel("test error (%)")
    ax.set_title("Splice sites (Table 2): test error after e epochs", fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    path = str(Path(out) / "table2.png")
    save_figure(fig, path)
    return [path]


def pipeline(out: str | os.PathLike[str], *, train: str | None = None, test: str | None = None,
             train_store: str | None = None, test_store: str | None = None, n_train: int | None = None,
             degree: int | None = None, seed: int = 0, scheduler: Any = None, n_workers: int | None = None,
             log: Any = None, quick: bool = False, repeats: int | None = None, **options: Any) -> dict[str, Any]:
    """Files to table in one call (``distlearn experiment celegans-obpm``), each step skipped when done.

    Data: two stores, or two sequence files (converted with the WD map of ``degree`` into
    ``OUT/train.zarr`` and ``OUT/test.zarr``), or nothing: ``n_train`` + ``n_train // 10``
    splice-site-like sequences are generated into ``OUT/corpus`` first (100,000; ``degree`` 3).
    ``quick``: the small version (2,000 training sequences, degree 2, epochs 1 and 2, one
    permutation, tau 0.05, 20 learners), a smoke test, not the result; what is given explicitly
    wins over it; ``repeats``: the number of permutations.  A rerun into ``out`` with other
    options is refused before any work (unless ``overwrite``).
    """
    from ..data._dna import convert_sequences, write_splice_corpus

    if n_train is None:
        n_train = 2000 if quick else 100_000
    if degree is None:
        degree = 2 if quick else 3
    if quick:
        for k, v in (("epochs", (1, 2)), ("permutations", 1), ("taus", (0.05,)), ("sizes", (20,))):
            options.setdefault(k, v)
    if repeats:
        options["permutations"] = repeats
    if (train_store is None) != (test_store is None) or (train is None) != (test is None):
        raise ValueError("give both a training and a test set (--train/--test or --train-store/--test-store)")
    if train_store is not None:
        source: dict[str, Any] = {"source": "stores"}
    elif train is not None:
        source = {"source": "files", "files": [str(Path(f).resolve()) for f in (train, test)], "degree": degree}
    else:
        source = {"source": "generated", "n_train": n_train, "degree": degree, "corpus_seed": seed}
    out = Path(out)
    early = {"seed": seed, "runs": runs(options.get("taus", TAUS), options.get("sizes", SIZES)), **source}
    if train_store is not None:
        early.update(train=str(Path(train_store).resolve()), test=str(Path(test_store).resolve()))
    refuse_other_run(out, early, overwrite=options.get("overwrite", False))
    say = log or (lambda msg: None)
    out.mkdir(parents=True, exist_ok=True)
    steps: dict[str, float] = {}
    if train_store is None:
        if train is None:
            corpus = out / "corpus"
            corpus.mkdir(exist_ok=True)
            marker = corpus / "complete.json"
            want = {"n_train": n_train, "seed": seed}
            if not (marker.exists() and json.loads(marker.read_text()) == want):
                say(f"generating {n_train:,} + {n_train // 10:,} sequences into {corpus} ...")
                t = time.perf_counter()
                write_splice_corpus(corpus / "train.tsv", n_train, random_state=seed)
                write_splice_corpus(corpus / "test.tsv", max(1, n_train // 10), random_state=seed + 1)
                steps["generate_seconds"] = time.perf_counter() - t
                write_json(marker, want)
            train, test = str(corpus / "train.tsv"), str(corpus / "test.tsv")
        train_store, test_store = str(out / "train.zarr"), str(out / "test.zarr")
        made = out / "stores.source.json"  # what the two stores were converted from
        same = made.exists() and json.loads(made.read_text()) == source
        for src, dst in ((train, train_store), (test, test_store)):
            if same and Path(dst).exists():
                say(f"store {dst} exists: conversion skipped")
                continue
            say(f"converting {src} (WD degree {degree}) into {dst} ...")
            t = time.perf_counter()
            convert_sequences(src, dst, features="wd", degree=degree, overwrite=True)
            steps[f"convert_{Path(dst).stem}_seconds"] = time.perf_counter() - t
        write_json(made, source)
    with executor_for(scheduler, n_workers=n_workers) as ex:  # one cluster for all the cells
        if ex.kind == "dask":
            say(f"Dask cluster: {ex.describe()}")
        say("running the cells ...")
        res = run(train_store, test_store, out, seed=seed, scheduler=ex.scheduler, source=source, **options)
    res["steps"] = steps
    write_json(out / "results.json", {k: v for k, v in res.items() if k != "figures"})
    return res
