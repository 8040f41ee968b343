"""``rcv1-cutoff``: cutoff averaging on the ten RCV1 problems (Dekel 2008, sec. 4, Figs. 2-3), as Dask tasks.

Protocol (the paper's, with the choices it leaves open written down):

* **Problems**: the ten pairs among CCAT, ECAT, GCAT, MCAT and OTHER, over the documents with a
  single top-level label (multi-category documents are left out), each a view ``STORE#A-vs-B``
  of one store (+1 = A, -1 = B).  A pair with no documents on one side is reported and skipped.
* **Splits**: split ``s`` puts a row in the test set when ``uniform(seed, "rcv1-cutoff/test", s,
  row) < test_fraction`` (20 %), so the split is a pure function of the row, streamed, never
  materialised.  The training rows are visited in the stream's seeded random order for
  ``(seed, s)`` (a permutation of the store's blocks and of the rows within each block).
* **Sizes**: ``n_sizes`` log-spaced training-set sizes from 10 to just under the problem's training
  set.  ONE online pass per learner gives every size: training pauses at each size, the
  hypotheses so far are kept, and one streamed pass over the test rows scores them all.
* **Learners x conversions**: the perceptron with last, average and cutoff averaging (0-1 loss,
  ``Cutoff(mode="groups")``), scored by test 0-1 error (Fig. 2); the finite-horizon margin
  perceptron (horizon = the training-set size, R = the largest row norm of the store with the
  bias) with last, average and cutoff (hinge loss), scored by test hinge loss (Fig. 3).  Every
  learner has a bias feature.
* **Tasks**: one task per (problem, split) on :func:`distlearn.distributed.executor_for`'s
  executor (this process, a LocalCluster, or a cluster).  A task opens the view by path on its
  worker; nothing but its result (a few KiB) crosses the scheduler.  Each result is written to
  ``OUT/cells/`` as it completes (atomically), and a rerun skips the cells already there, so an
  interrupted run resumes.  Results do not depend on the worker count or on retries.

Output: ``OUT/results.json`` (every number, per split), a table, and ``OUT/fig2.png`` /
``OUT/fig3.png`` when matplotlib is installed.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from .. import rng
from ..conversions import Cutoff
from ..data import open_dataset
from ..data._rcv1 import LABEL_NAMES
from ..distributed import executor_for
from ..estimators import MarginPerceptron, Perceptron
from ..stream import cached_block, epoch_chunks, open_store, read_block, store_token
from ._cells import Cells, figure, pyplot, refuse_other_run, save_figure, write_json

__all__ = ["CATEGORIES", "PROBLEMS", "run", "run_cell", "format_table", "plot"]

CATEGORIES = ("CCAT", "ECAT", "GCAT", "MCAT", "OTHER")
PROBLEMS = tuple(f"{a}-vs-{b}" for a, b in itertools.combinations(CATEGORIES, 2))
CONVERSIONS = ("last", "average", "cutoff")
LEARNERS = ("perceptron", "margin")
_VERSION = 1
#: A cell gives its learners the training rows between two sizes in pieces of at most this many rows
#: (fewer ``partial_fit`` calls; every call's fixed cost is a copy of the learner's state).
_BATCH_ROWS = 65_536


def _estimators(horizon: int, radius: float, seed: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for conv in CONVERSIONS:
        c: Any = Cutoff(mode="groups") if conv == "cutoff" else conv
        out[f"perceptron/{conv}"] = Perceptron(conversion=c, random_state=seed)
        c = Cutoff(loss="hinge", mode="groups") if conv == "cutoff" else conv
        out[f"margin/{conv}"] = MarginPerceptron(horizon=horizon, radius=radius, conversion=c, random_state=seed)
    return out


def test_rows(seed: int, split: int, n: int, test_fraction: float) -> np.ndarray:
    """The test-set mask of split ``split`` over a problem's ``n`` rows."""
    return rng.uniform(seed, rng.stream_id("rcv1-cutoff/test"), split, np.arange(n, dtype=np.int64)) < test_fraction


def run_cell(view: str, token: str, split: int, seed: int, test_fraction: float, sizes: list[int],
             radius: float) -> dict[str, Any]:
    """One (problem, split): one online pass of each learner x conversion, paused at every size."""
    t0, c0 = time.perf_counter(), time.process_time()
    ds = open_store(view, token)
    test = test_rows(seed, split, ds.n_samples, test_fraction)
    n_train = int((~test).sum())
    sizes = [s for s in sizes if s <= n_train]
    classes = np.array([-1, 1])
    ests = _estimators(n_train, radius, seed)
    names = list(ests)
    hyps: list[np.ndarray] = []  # one (n_features + 1) row per (size, estimator)
    k_cut: dict[str, list[int]] = {"perceptron": [], "margin": []}
    updates: dict[str, list[int]] = {"perceptron": [], "margin": []}
    seen, nxt = 0, 0
    pieces: list[tuple[Any, np.ndarray]] = []  # training rows not yet given to the learners
    buffered = 0

    def learn() -> None:  # one partial_fit per learner for the rows buffered (same bits as row by row)
        nonlocal buffered
        Xp = pieces[0][0] if len(pieces) == 1 else sp.vstack([p[0] for p in pieces], format="csr")
        yp = np.concatenate([p[1] for p in pieces])
        for e in ests.values():
            e.partial_fit(Xp, yp, classes=classes)
        pieces.clear()
        buffered = 0

    order_seed = int(rng.hash64(seed, rng.stream_id("rcv1-cutoff/order"), split))
    for ch in epoch_chunks(ds, seed=order_seed, epoch=0, shuffle=True, classes=classes, dtype=np.float64):
        idx = np.arange(ch.X.shape[0]) if ch.order is None else ch.order
        idx = idx[~test[ch.first_row + idx]]
        at = 0
        while at < len(idx) and nxt < len(sizes):
            take = idx[at:at + sizes[nxt] - seen]
            pieces.append((ch.X[take], classes[ch.y[take]]))
            buffered += len(take)
            seen += len(take)
            at += len(take)
            if seen == sizes[nxt]:
                learn()
                for name in names:
                    e = ests[name]
                    hyps.append(np.append(np.ravel(e.coef_), np.ravel(e.intercept_)))
                for lr in LEARNERS:
                    k_cut[lr].append(int(ests[f"{lr}/cutoff"].summary_.k_))
                    updates[lr].append(int(ests[f"{lr}/last"].n_updates_))
                nxt += 1
            elif buffered >= _BATCH_ROWS:
                learn()
        if nxt == len(sizes):
            break
    W = np.ascontiguousarray(np.vstack(hyps).T)  # (n_features + 1, n_sizes * n_estimators), C order for the products
    err = np.zeros(W.shape[1])
    hinge = np.zeros(W.shape[1])
    n_test = 0
    for b in range(ds.n_blocks):  # the blocks the training pass read come from the block cache when it holds them
        Xb, yb, first = cached_block(ds, b, np.float64)
        rows = np.flatnonzero(test[first:first + Xb.shape[0]])
        if not len(rows):
            continue
        X = Xb[rows]
        f = np.asarray(X @ W[:-1]) + W[-1]
        yv = np.asarray(yb)[rows].astype(np.float64)[:, None]
        err += ((f >= 0) != (yv > 0)).sum(axis=0)
        hinge += np.maximum(0.0, 1.0 - yv * f).sum(axis=0)
        n_test += len(rows)
    err /= max(n_test, 1)
    hinge /= max(n_test, 1)
    k = len(names)
    out: dict[str, Any] = {"problem": view.rpartition("#")[2], "split": split, "sizes": sizes,
                           "n_train": n_train, "n_test": n_test, "radius": radius}
    for j, name in enumerate(names):
        lr = name.split("/")[0]
        out[name] = (err if lr == "perceptron" else hinge)[j::k].tolist()
        if lr == "margin":
            out[f"{name}/error"] = err[j::k].tolist()
    for lr in LEARNERS:
        out[f"{lr}/cutoff_k"] = k_cut[lr]
        out[f"{lr}/updates"] = updates[lr]
    out["seconds"] = time.perf_counter() - t0
    out["cpu_seconds"] = time.process_time() - c0  # this process's CPU (on a shared machine: the cell's own cost)
    return out


def max_row_norm(path: str, token: str, lo: int = 0, hi: int | None = None) -> float:
    """The largest Euclidean row norm of a store's blocks ``lo`` to ``hi`` (all by default; one streamed pass)."""
    ds = open_store(path, token)
    best = 0.0
    for b in range(lo, ds.n_blocks if hi is None else hi):
        X = read_block(ds, b).X
        if hasattr(X, "multiply"):
            sq = np.asarray(X.multiply(X).sum(axis=1)).ravel()
        else:
            sq = np.einsum("ij,ij->i", X, X)
        if len(sq):
            best = max(best, float(sq.max()))
    return math.sqrt(best)


def check_problems(problems: list[str] | None) -> list[str]:
    """The problems to run (all ten by default); an unknown one is a ValueError naming it."""
    problems = list(problems or PROBLEMS)
    for p in problems:
        a, _, b = p.partition("-vs-")
        if a not in CATEGORIES or b not in CATEGORIES or a == b:
            raise ValueError(f"problem {p!r}: expected A-vs-B with A, B two of {', '.join(CATEGORIES)}")
    return problems


def _early_key(seed: int, splits: int, n_sizes: int, test_fraction: float) -> dict[str, Any]:
    """The part of a run's key known before the store is made (checked before any work)."""
    return {"seed": seed, "splits": splits, "n_sizes": n_sizes, "test_fraction": test_fraction}


def run(store: str | os.PathLike[str], out: str | os.PathLike[str], *, problems: list[str] | None = None,
        splits: int = 10, n_sizes: int = 12, test_fraction: float = 0.2, seed: int = 0, scheduler: Any = None,
        n_jobs: int = 1, n_workers: int | None = None, overwrite: bool = False, progress: Any = None,
        figures: bool = True, source: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run the protocol over an RCV1 store (``distlearn convert ... --qrels``); see the module notes.

    ``progress``: a callable ``(done, total, cell)`` told of every finished cell; ``source``: what
    the store was made from (kept in ``OUT/meta.json``, part of the run's key).  Returns the
    results (also in ``OUT/results.json``).
    """
    if not isinstance(splits, int) or splits < 1:
        raise ValueError(f"splits must be a positive int; got {splits!r}")
    if not isinstance(n_sizes, int) or n_sizes < 2:
        raise ValueError(f"n_sizes must be an int >= 2; got {n_sizes!r}")
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1); got {test_fraction!r}")
    problems = check_problems(problems)
    ds = open_dataset(store)
    if ds.meta.get("label_names") != {str(k): v for k, v in LABEL_NAMES.items()}:
        raise ValueError(f"{store}: not an RCV1 store (convert the LYRL2004 files with --qrels first)")
    out = Path(out)
    path = str(Path(store).resolve())
    token = store_token(ds)
    key = {"version": _VERSION, "store": path, "store_token": token, **_early_key(seed, splits, n_sizes, test_fraction),
           **(source or {})}
    book = Cells(out, key, overwrite=overwrite, extendable=("splits",))
    counts = dict(zip((int(c) for c in ds.meta["classes"]), ds.meta["class_counts"]))
    code = {v: int(k) for k, v in ds.meta["label_names"].items()}
    plan: list[tuple[str, int, list[int]]] = []
    skipped: dict[str, str] = {}
    for p in problems:
        a, _, b = p.partition("-vs-")
        na, nb = counts.get(code[a], 0), counts.get(code[b], 0)
        if na == 0 or nb == 0:
            skipped[p] = f"no {a if na == 0 else b} documents"
            continue
        top = int((na + nb) * (1 - test_fraction) * 0.98)
        if top < 20:
            skipped[p] = f"only {na + nb} documents"
            continue
        sizes = sorted({int(round(s)) for s in np.geomspace(10, top, n_sizes)})
        for s in range(splits):
            plan.append((p, s, sizes))
    cells: dict[tuple[str, int], dict[str, Any]] = {}
    todo = []
    for p, s, sizes in plan:
        old = book.get(f"{p}.split{s}")
        if old is not None:
            cells[(p, s)] = old
        else:
            todo.append((p, s, sizes))
    t0 = time.perf_counter()
    with executor_for(scheduler, n_jobs=n_jobs, n_workers=n_workers) as ex:
        radius = book.meta.get("radius")
        if radius is None:
            n_blocks = ds.n_blocks  # one task per run of blocks (the max of maxima is the max, exactly)
            cuts = np.linspace(0, n_blocks, min(n_blocks, 8) + 1).astype(int).tolist()
            parts = [ex.submit(f"rcv1-cutoff-radius-{i}", max_row_norm, path, token, lo, hi)
                     for i, (lo, hi) in enumerate(zip(cuts[:-1], cuts[1:]))]
            radius = math.sqrt(max((ex.result(h) for h in parts), default=0.0) ** 2 + 1.0)
            book.remember(radius=radius)
        tokens = {p: store_token(open_dataset(f"{path}#{p}")) for p in {p for p, _, _ in todo}}  # one open per view
        tasks = [(f"{p}.split{s}", run_cell, (f"{path}#{p}", tokens[p], s, seed, test_fraction, sizes, radius))
                 for p, s, sizes in todo]

        def told(name: str, res: dict[str, Any]) -> None:
            cells[(res["problem"], res["split"])] = res
            if progress is not None:
                progress(len(cells), len(plan), res)

        book.run(ex, tasks, told)
    results = aggregate(cells, problems, skipped)
    results.update({"meta": {**key, "radius": radius}, "cells_run": len(todo), "cells_resumed": len(plan) - len(todo),
                    "seconds": time.perf_counter() - t0})
    write_json(out / "results.json", results)
    if figures:
        results["figures"] = plot(results, out)
    return results


def aggregate(cells: dict[tuple[str, int], dict[str, Any]], problems: list[str], skipped: dict[str, str]
              ) -> dict[str, Any]:
    """Mean and sample std over splits, per problem, size and learner/conversion."""
    out: dict[str, Any] = {"problems": {}, "skipped": skipped}
    for p in problems:
        rows = [c for (q, _), c in sorted(cells.items()) if q == p]
        if not rows:
            continue
        n = min(len(r["sizes"]) for r in rows)
        entry: dict[str, Any] = {"sizes": rows[0]["sizes"][:n], "splits": len(rows),
                                 "n_train": [r["n_train"] for r in rows], "n_test": [r["n_test"] for r in rows]}
        for lr in LEARNERS:
            for conv in CONVERSIONS + ("cutoff_k", "updates"):
                a = np.array([r[f"{lr}/{conv}"][:n] for r in rows], dtype=np.float64)
                entry[f"{lr}/{conv}"] = {"mean": a.mean(axis=0).tolist(),
                                         "std": (a.std(axis=0, ddof=1) if len(a) > 1 else 0 * a[0]).tolist()}
        entry["per_split"] = rows
        out["problems"][p] = entry
    return out


def format_table(results: dict[str, Any]) -> str:
    """The largest size of every problem: the perceptron's 0-1 error and the margin perceptron's hinge loss."""
    head = (f"{'problem':<15} {'train':>7}  {'perceptron 0-1 error (%)':^26}  {'margin perceptron hinge':^26}  k(cut)\n"
            f"{'':<15} {'':>7}  {'last':>8} {'average':>8} {'cutoff':>8}  {'last':>8} {'average':>8} {'cutoff':>8}")
    lines = [head]
    for p, e in results["problems"].items():
        def m(key: str, scale: float = 1.0) -> str:
            return f"{scale * e[key]['mean'][-1]:8.3f}"
        lines.append(f"{p:<15} {e['sizes'][-1]:>7}  {m('perceptron/last', 100)} {m('perceptron/average', 100)} "
                     f"{m('perceptron/cutoff', 100)}  {m('margin/last')} {m('margin/average')} {m('margin/cutoff')}  "
                     f"{e['perceptron/cutoff_k']['mean'][-1]:.0f}/{e['margin/cutoff_k']['mean'][-1]:.0f}")
    for p, why in results.get("skipped", {}).items():
        lines.append(f"{p:<15} skipped: {why}")
    return "\n".join(lines)


def plot(results: dict[str, Any], out: str | os.PathLike[str]) -> list[str]:
    """Figs. 2 and 3 (one panel per problem, mean +- std over splits); nothing without matplotlib."""
    if pyplot() is None:
        return []
    paths = []
    probs = list(results["problems"])
    if not probs:
        return []
    for fig_no, lr, ylabel in ((2, "perceptron", "test 0-1 error"), (3, "margin", "test hinge loss")):
        cols = min(5, len(probs))
        rws = -(-len(probs) // cols)
        fig, axes = figure(rws, cols, size=(3.4 * cols, 3.0 * rws + 1.0))
        for ax, p in zip(axes.ravel(), probs):
            e = results["problems"][p]
            x = np.array(e["sizes"])
            for conv, style in zip(CONVERSIONS, ("-", "--", "-")):
                mu = np.array(e[f"{lr}/{conv}"]["mean"])
                sd = np.array(e[f"{lr}/{conv}"]["std"])
                ax.plot(x, mu, style, label=conv, lw=1.4 if conv == "cutoff" else 1.0)
                ax.fill_between(x, mu - sd, mu + sd, alpha=0.15)
            ax.set_xscale("log")
            ax.set_title(p.replace("-vs-", " vs. "), fontsize=9)
            ax.set_xlabel("training-set size", fontsize=8)
            ax.set_ylabel(ylabel, fontsize=8)
            ax.tick_params(labelsize=7)
        for ax in axes.ravel()[len(probs):]:
            ax.axis("off")
        h, lab = axes[0, 0].get_legend_handles_labels()
        fig.legend(h, lab, loc="outside lower center", ncols=len(lab), fontsize=8)
        learner = "perceptron" if lr == "perceptron" else "finite-horizon margin perceptron"
        fig.suptitle(f"Fig. {fig_no}: {learner}\n{ylabel} against the training-set size (mean ± std over splits)",
                     fontsize=10)
        path = str(Path(out) / f"fig{fig_no}.png")
        save_figure(fig, path)
        paths.append(path)
    return paths


def pipeline(out: str | os.PathLike[str], *, store: str | os.PathLike[str] | None = None,
             tokens: list[str] | None = None, qrels: str | None = None, hierarchy: str | None = None,
             n_docs: int | None = None, seed: int = 0, scheduler: Any = None, n_workers: int | None = None,
             log: Any = None, quick: bool = False, repeats: int | None = None, **options: Any) -> dict[str, Any]:
    """Files to figures in one call (``distlearn experiment rcv1-cutoff``), each step skipped when done.

    Data: ``store`` (converted already), or the LYRL2004 ``tokens`` files with their ``qrels``
    (converted into ``OUT/rcv1.zarr``), or neither: an RCV1-v2-sized corpus of ``n_docs``
    documents is generated into ``OUT/corpus`` (:func:`distlearn.data._rcv1.write_rcv1_corpus`)
    and converted (804,414 by default).  ``scheduler``: as everywhere (None: this process; "local": a
    LocalCluster of ``n_workers``; an address or a scheduler file): the conversion and the cells
    share the cluster.  ``quick``: the small version (4,000 documents, 2 splits, 5 sizes,
    CCAT-vs-GCAT), a smoke test, not the result; what is given explicitly wins over it; ``repeats``:
    the number of splits.  A rerun into ``out`` with other options is refused before any work
    (unless ``overwrite``).
    """
    from .._outputs import remove
    from ..data._rcv1 import convert_rcv1, write_rcv1_corpus

    if n_docs is None:
        n_docs = 4000 if quick else 804_414
    if quick:
        options.setdefault("splits", 2)
        options.setdefault("n_sizes", 5)
        options["problems"] = options.get("problems") or ["CCAT-vs-GCAT"]
    if repeats:
        options["splits"] = repeats
    check_problems(options.get("problems"))
    if tokens is not None and qrels is None:
        raise ValueError("token files need their topic file: --qrels rcv1-v2.topics.qrels")
    if store is not None:
        source: dict[str, Any] = {"source": "store"}
    elif tokens is not None:
        source = {"source": "tokens", "tokens": sorted(str(Path(t).resolve()) for t in tokens)}
    else:
        source = {"source": "generated", "n_docs": n_docs, "corpus_seed": seed}
    out = Path(out)
    refuse_other_run(out, {**_early_key(seed, options.get("splits", 10), options.get("n_sizes", 12),
                                        options.get("test_fraction", 0.2)), **source,
                           **({"store": str(Path(store).resolve())} if store is not None else {})},
                     overwrite=options.get("overwrite", False), extendable=("splits",))
    say = log or (lambda msg: None)
    out.mkdir(parents=True, exist_ok=True)
    steps: dict[str, float] = {}
    with executor_for(scheduler, n_workers=n_workers) as ex:  # the conversion and the cells share it
        if ex.kind == "dask":
            say(f"Dask cluster: {ex.describe()}")
        if store is None:
            store = out / "rcv1.zarr"
            made = out / "rcv1.zarr.source.json"  # what the store was converted from
            if store.exists() and made.exists() and json.loads(made.read_text()) == source:
                say(f"store {store} exists: conversion skipped")
            else:
                if store.exists():  # from other files (an --overwrite run): ours, converted again
                    remove(store, "store")
                if tokens is None:
                    corpus = out / "corpus"
                    marker = corpus / "complete.json"
                    old = json.loads(marker.read_text()) if marker.exists() else {}
                    if old.get("n_docs") == n_docs and old.get("seed", 0) == seed:
                        info = json.loads(marker.read_text())
                        say(f"corpus {corpus} exists: generation skipped")
                    else:
                        say(f"generating {n_docs:,} documents into {corpus} ...")
                        t = time.perf_counter()
                        info = write_rcv1_corpus(corpus, n_docs, random_state=seed, executor=ex)
                        steps["generate_seconds"] = time.perf_counter() - t
                        write_json(marker, {**info, "seed": seed})
                    tokens, qrels, hierarchy = info["tokens"], info["qrels"], info["hierarchy"]
                say(f"converting {len(tokens)} token files into {store} ...")
                t = time.perf_counter()
                convert_rcv1(tokens, store, qrels=qrels, hierarchy=hierarchy, executor=ex)
                steps["convert_seconds"] = time.perf_counter() - t
                write_json(made, source)
        say("running the cells ...")
        res = run(store, out, seed=seed, scheduler=ex.scheduler, source=source, **options)
    res["steps"] = steps
    write_json(out / "results.json", {k: v for k, v in res.items() if k != "figures"})
    return res
